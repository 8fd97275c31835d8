/*
 * The emitter's SparkListener, on the JVM side of the driver.
 *
 * Spark calls a SparkListener for every task, stage, executor and block event:
 * about forty calls for one small action. A Python listener (a py4j proxy) pays a
 * socket round trip and the GIL for each of them, only to ignore almost all, and
 * that cost lands on the job (measured on 50 short actions: 1.10-1.12x the job's
 * time, against 1.03-1.04x with this class, as with no SparkListener). This class
 * answers every event in the JVM: it counts jobs, and calls back into Python only
 * once, when the application ends.
 *
 * Shipped as source with the Python package and compiled once per machine and
 * Spark version (producers/spark/jvm_classes.py); nothing binary is distributed.
 */
package lineagewire.spark;

import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.scheduler.JobSucceeded$;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;

public final class JobEventsListener extends SparkListener {
    private final AtomicLong jobsStarted = new AtomicLong();
    private final AtomicLong jobsSucceeded = new AtomicLong();
    private final AtomicLong jobsFailed = new AtomicLong();
    private volatile Runnable onApplicationEnd;

    /** The Python callback (a py4j proxy of java.lang.Runnable) run once at application end; null drops it. */
    public void setOnApplicationEnd(Runnable callback) {
        onApplicationEnd = callback;
    }

    public long jobsStarted() {
        return jobsStarted.get();
    }

    public long jobsSucceeded() {
        return jobsSucceeded.get();
    }

    /** Jobs that ended otherwise than succeeded: failed, or cancelled. */
    public long jobsFailed() {
        return jobsFailed.get();
    }

    @Override
    public void onJobStart(SparkListenerJobStart jobStart) {
        jobsStarted.incrementAndGet();
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd jobEnd) {
        if (jobEnd.jobResult() == JobSucceeded$.MODULE$) {
            jobsSucceeded.incrementAndGet();
        } else {
            jobsFailed.incrementAndGet();
        }
    }

    @Override
    public void onApplicationEnd(SparkListenerApplicationEnd applicationEnd) {
        Runnable callback = onApplicationEnd;
        if (callback != null) {
            callback.run();
        }
    }
}
