import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * Hadoop's MiniYARNCluster (one ResourceManager, one NodeManager) for the cluster tests, as Spark's own
 * YarnClusterSuite starts it: {@code MiniYarn <conf folder> key=value...}. The keys are set on the cluster's
 * YarnConfiguration before it starts; once the ResourceManager has its port and the NodeManager has registered,
 * the live configuration is written to {@code <conf folder>/yarn-site.xml} (what HADOOP_CONF_DIR points at) and
 * one line {@code READY <rm address> <rm web address>} goes to stdout. The cluster stops when stdin closes, so it
 * never outlives the test session that started it.
 */
public final class MiniYarn {
  private MiniYarn() {}

  public static void main(String[] args) throws Exception {
    File confDir = new File(args[0]);
    YarnConfiguration conf = new YarnConfiguration();
    for (int i = 1; i < args.length; i++) {
      String[] kv = args[i].split("=", 2);
      conf.set(kv[0], kv[1]);
    }
    MiniYARNCluster cluster = new MiniYARNCluster("lineagewire", 1, 1, 1);
    cluster.init(conf);
    cluster.start();
    try {
      Configuration live = cluster.getConfig();
      // start() can return before the ResourceManager wrote its bound port back (YarnClusterSuite waits too).
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (live.get(YarnConfiguration.RM_ADDRESS).endsWith(":0")) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the ResourceManager got no port within 60s");
        }
        Thread.sleep(50);
      }
      if (!cluster.waitForNodeManagersToConnect(60_000)) {
        throw new IllegalStateException("the NodeManager did not register within 60s");
      }
      File tmp = new File(confDir, "yarn-site.xml.tmp");
      try (OutputStream out = new FileOutputStream(tmp)) {
        live.writeXml(out);
      }
      Files.move(tmp.toPath(), new File(confDir, "yarn-site.xml").toPath(), StandardCopyOption.ATOMIC_MOVE);
      System.out.println("READY " + live.get(YarnConfiguration.RM_ADDRESS) + " "
          + live.get(YarnConfiguration.RM_WEBAPP_ADDRESS));
      System.out.flush();
      while (System.in.read() != -1) {
        // the test session holds stdin open while it needs the cluster
      }
    } catch (Exception e) {
      cluster.stop();
      throw e;
    }
    // Every application has ended by now (each test waits for its own). A full stop would still wait about 20 s,
    // mostly for the NodeManager's log retention of those applications: stop for a few seconds, then exit.
    Thread stopper = new Thread(cluster::stop, "MiniYarn-stop");
    stopper.setDaemon(true);
    stopper.start();
    stopper.join(5_000);
    System.out.println(stopper.isAlive() ? "STOPPED (cut short after 5s)" : "STOPPED");
    System.out.flush();
    Runtime.getRuntime().halt(0);
  }
}
