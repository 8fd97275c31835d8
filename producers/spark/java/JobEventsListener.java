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
 * Jobs started by RDD actions (no SQL execution: sc.textFile(...).saveAsTextFile(...)) are the one
 * other exception: when such a job starts, RddJobs reads what its RDDs read and write (the scheduler
 * forgets the job when it ends), and when it ends, Python gets that once, as JSON, with the job's
 * result. Jobs of SQL executions cost one property look-up here and nothing else.
 *
 * Spark Connect's events (SparkListenerConnect*: operations and sessions of thin
 * clients) are few, one handful per client operation; they go to Python as they
 * come, on the listener bus's thread, so a session's query listener is in place
 * before the bus delivers that session's first query (same queue, in order).
 *
 * Shipped as source with the Python package and compiled once per machine and
 * Spark version (producers/spark/jvm_classes.py); nothing binary is distributed.
 */
package lineagewire.spark;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.JobFailed;
import org.apache.spark.scheduler.JobSucceeded$;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerApplicationEnd;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;

public final class JobEventsListener extends SparkListener {
    private final AtomicLong jobsStarted = new AtomicLong();
    private final AtomicLong jobsSucceeded = new AtomicLong();
    private final AtomicLong jobsFailed = new AtomicLong();
    private volatile Runnable onApplicationEnd;
    private volatile Consumer<Object> onConnectEvent;
    private volatile BiConsumer<String, Object> onRddJob;
    private volatile SparkContext context;
    /** RDD-only jobs started and not ended yet: what their RDDs read and write, by job id. */
    private final Map<Integer, Map<String, Object>> rddJobs = new ConcurrentHashMap<>();
    /** A bound on rddJobs, should a context lose job-end events (Spark drops events when a queue is full). */
    private static final int MAX_OPEN_RDD_JOBS = 10_000;

    /** Spark Connect's listener events, by class name: read by reflection, so this compiles without Connect. */
    public static final String CONNECT_EVENT_PREFIX = "org.apache.spark.sql.connect.service.SparkListenerConnect";

    /** The Python callback (a py4j proxy of java.lang.Runnable) run once at application end; null drops it. */
    public void setOnApplicationEnd(Runnable callback) {
        onApplicationEnd = callback;
    }

    /** The Python callback (a py4j proxy of java.util.function.Consumer) given each Connect event; null drops them. */
    public void setOnConnectEvent(Consumer<Object> callback) {
        onConnectEvent = callback;
    }

    /**
     * The Python callback (a py4j proxy of java.util.function.BiConsumer) given each RDD-only job at its end: the
     * job as JSON (RddJobs) and, for a failed job, its exception (else null). {@code sparkContext} is the context
     * whose scheduler holds the jobs. A null callback drops them.
     */
    public void setOnRddJob(BiConsumer<String, Object> callback, SparkContext sparkContext) {
        context = sparkContext;
        onRddJob = callback;
        if (callback == null) {
            rddJobs.clear();
        }
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
        SparkContext sc = context;
        if (onRddJob == null || sc == null || RddJobs.isSql(jobStart.properties())
                || rddJobs.size() >= MAX_OPEN_RDD_JOBS) {
            return;
        }
        Map<String, Object> job = RddJobs.describe(sc, jobStart);
        if (job != null) {
            rddJobs.put(jobStart.jobId(), job);
        }
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd jobEnd) {
        if (jobEnd.jobResult() == JobSucceeded$.MODULE$) {
            jobsSucceeded.incrementAndGet();
        } else {
            jobsFailed.incrementAndGet();
        }
        Map<String, Object> job = rddJobs.remove(jobEnd.jobId());
        BiConsumer<String, Object> callback = onRddJob;
        if (job == null || callback == null) {
            return;
        }
        Object error = null;
        job.put("end_ms", jobEnd.time());
        if (jobEnd.jobResult() instanceof JobFailed) {
            error = ((JobFailed) jobEnd.jobResult()).exception();
            job.put("status", "FAILED");
        } else {
            job.put("status", jobEnd.jobResult() == JobSucceeded$.MODULE$ ? "SUCCEEDED" : "FAILED");
        }
        callback.accept(RddJobs.json(job), error);
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        Consumer<Object> callback = onConnectEvent;
        if (callback != null && event.getClass().getName().startsWith(CONNECT_EVENT_PREFIX)) {
            callback.accept(event);
        }
    }

    @Override
    public void onApplicationEnd(SparkListenerApplicationEnd applicationEnd) {
        rddJobs.clear();
        Runnable callback = onApplicationEnd;
        if (callback != null) {
            callback.run();
        }
    }
}
