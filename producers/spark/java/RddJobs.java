/*
 * What a Spark job started by an RDD action (no SQL query: sc.textFile(...).saveAsTextFile(...)) read and wrote.
 *
 * The QueryExecutionListener never hears of such jobs. As openlineage-spark's RddExecutionContext does, the job's
 * final RDD is found through the DAGScheduler's active job when the job starts (the only place Spark keeps it),
 * its dependencies are walked down to the RDDs that read (PlanJson.rddInputs, the walk df.rdd round trips use),
 * and a Hadoop write (saveAsTextFile, saveAsHadoopFile, saveAsNewAPIHadoopFile, saveAsSequenceFile,
 * saveAsObjectFile: all run through SparkHadoopWriter) gives its output folder from the write's Hadoop
 * configuration, which the result stage's function holds.
 *
 * Jobs that are not RDD actions are left out here, so that they cost no call into Python:
 * jobs of a SQL execution (the QueryExecutionListener reports the action), jobs Spark SQL or a table format runs
 * for itself outside an execution (schema inference of spark.read.json/csv/parquet), and the jobs PySpark's
 * converters run to look at a first record (SerDeUtil: sc.sequenceFile, sc.hadoopFile and the saveAs* of pairs;
 * PythonRDD.inferKeyValueTypes): the job the user's call is for is the action. Which it is, is read from the
 * job's call site (StageInfo.details: the driver's stack when the job was submitted).
 *
 * The DAGScheduler forgets a job when it ends, and listener events arrive a little later than they happen: a
 * job that ended before its start event was delivered is reported with the reason, not guessed at.
 *
 * describe() returns JSON (Jackson, which Spark ships), read by producers/spark/lineage/rdd_jobs.py.
 */
package lineagewire.spark;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.internal.io.HadoopMapRedWriteConfigUtil;
import org.apache.spark.internal.io.HadoopWriteConfigUtil;
import org.apache.spark.scheduler.ActiveJob;
import org.apache.spark.scheduler.ResultStage;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.Stage;
import org.apache.spark.scheduler.StageInfo;

import scala.Option;
import scala.collection.Iterator;

final class RddJobs {
    /** The job property a SQL execution sets on its jobs (SQLExecution.EXECUTION_ID_KEY). */
    static final String EXECUTION_ID = "spark.sql.execution.id";
    /** The Python-side call site PySpark sets for its RDD actions (collect, count, ...). */
    static final String CALL_SITE = "callSite.short";
    /** The outermost RDD operation the job was started in (RDDOperationScope.withScope). */
    static final String RDD_SCOPE = "spark.rdd.scope";
    /** Frames of a job's call site that mean Spark SQL, a table format or PySpark's converters started it. */
    private static final String[] OWN_JOB_FRAMES = {"org.apache.spark.sql.", "io.delta.", "org.apache.iceberg.",
            "org.apache.spark.api.python.SerDeUtil", "org.apache.spark.api.python.PythonRDD$.inferKeyValueTypes"};

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PlanJson WALK = new PlanJson();

    private RddJobs() {
    }

    /** Whether the job is one a SQL execution ran (its action is the QueryExecutionListener's). */
    static boolean isSql(Properties properties) {
        return properties != null && properties.getProperty(EXECUTION_ID) != null;
    }

    /**
     * The job's lineage as JSON, or null when the job is not an RDD action (see the top of this file). Never
     * throws: what cannot be read is named in "untraced".
     */
    static Map<String, Object> describe(SparkContext context, SparkListenerJobStart start) {
        try {
            return read(context, start);
        } catch (RuntimeException | LinkageError e) {
            Map<String, Object> job = new LinkedHashMap<>();
            job.put("job_id", start.jobId());
            job.put("start_ms", start.time());
            job.put("untraced", java.util.Collections.singletonList("the job could not be read: " + e));
            return job;
        }
    }

    private static Map<String, Object> read(SparkContext context, SparkListenerJobStart start) {
        Properties properties = start.properties();
        StageInfo last = lastStage(start);
        String details = last == null ? "" : String.valueOf(last.details());
        if (startedBySpark(details)) {
            return null;
        }
        Map<String, Object> job = new LinkedHashMap<>();
        List<String> untraced = new ArrayList<>();
        job.put("job_id", start.jobId());
        job.put("call_site", properties == null ? null : properties.getProperty(CALL_SITE));
        job.put("scope", properties == null ? null : properties.getProperty(RDD_SCOPE));
        job.put("stage", last == null ? null : last.name());
        job.put("start_ms", start.time());
        job.put("untraced", untraced);
        Stage stage = finalStage(context, start.jobId(), untraced);
        if (stage != null) {
            try {
                job.put("inputs", WALK.rddInputs(stage.rdd()));
            } catch (Exception | LinkageError e) {
                untraced.add("its RDD's dependencies could not be walked: " + e);
            }
            try {
                job.put("output", output(stage));
            } catch (Exception | LinkageError e) {
                untraced.add("its write's Hadoop configuration could not be read: " + e);
            }
        }
        return job;
    }

    static String json(Map<String, Object> job) {
        try {
            return JSON.writeValueAsString(job);
        } catch (Exception e) {
            return "{\"untraced\": [\"the job's lineage could not be written as JSON\"]}";
        }
    }

    /** Whether the job's call site (its stack, Spark's long form) shows it is not the user's RDD action. */
    private static boolean startedBySpark(String details) {
        for (String line : details.split("\n")) {
            for (String prefix : OWN_JOB_FRAMES) {
                if (line.startsWith(prefix)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The job's result stage's info (the stage with the highest id: Spark creates it after its parents). */
    private static StageInfo lastStage(SparkListenerJobStart start) {
        StageInfo last = null;
        Iterator<StageInfo> stages = start.stageInfos().iterator();
        while (stages.hasNext()) {
            StageInfo info = stages.next();
            if (last == null || info.stageId() > last.stageId()) {
                last = info;
            }
        }
        return last;
    }

    /** The job's final stage, from the DAGScheduler's active job (as openlineage-spark reads it), or null. */
    private static Stage finalStage(SparkContext context, int jobId, List<String> untraced) {
        try {
            Option<ActiveJob> job = context.dagScheduler().jobIdToActiveJob().get(jobId);
            if (job.isDefined()) {
                return job.get().finalStage();
            }
            untraced.add("the job ended before lineagewire could read its RDDs");
        } catch (RuntimeException | LinkageError e) {
            // e.g. the scheduler's map changed under the read (it is the scheduler thread's): say so, guess nothing
            untraced.add("its RDDs could not be read from the scheduler: " + e);
        }
        return null;
    }

    /**
     * The output of a Hadoop write (SparkHadoopWriter.write: every saveAs* of RDDs), from the write configuration
     * its task function holds (a captured value of the closure), or null when the job writes no Hadoop output.
     */
    private static Map<String, Object> output(Stage stage) throws ReflectiveOperationException, java.io.IOException {
        if (!(stage instanceof ResultStage)) {
            return null;
        }
        Object func = ((ResultStage) stage).func();
        for (Field field : func.getClass().getDeclaredFields()) {
            if (!HadoopWriteConfigUtil.class.isAssignableFrom(field.getType())
                    && !field.getType().isAssignableFrom(HadoopWriteConfigUtil.class)) {
                continue;
            }
            field.setAccessible(true);
            Object value = field.get(func);
            if (value instanceof HadoopWriteConfigUtil) {
                return hadoopOutput((HadoopWriteConfigUtil<?, ?>) value);
            }
        }
        return null;
    }

    private static Map<String, Object> hadoopOutput(HadoopWriteConfigUtil<?, ?> write) throws java.io.IOException {
        boolean mapred = write instanceof HadoopMapRedWriteConfigUtil;
        // createJobContext is how SparkHadoopWriter itself reaches the configuration (no private field read).
        Configuration conf = write.createJobContext("lineagewire", 0).getConfiguration();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("api", mapred ? "mapred" : "mapreduce");
        out.put("format", mapred ? conf.get("mapred.output.format.class") : conf.get("mapreduce.job.outputformat.class"));
        String dir = conf.get("mapreduce.output.fileoutputformat.outputdir", conf.get("mapred.output.dir"));
        if (dir != null) {
            Path path = new Path(dir);
            // saveAsNewAPIHadoopFile keeps the path as given: qualified as a DataFrame write qualifies it.
            out.put("path", path.getFileSystem(conf).makeQualified(path).toString());
        }
        return out;
    }
}
