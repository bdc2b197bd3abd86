// SparkCluster.java — the Spark standalone cluster of `comm: bigdl_spark` (issue 42), in the JVMs
// cpu_bigdl hosts: the master (in the process dlhost starts for the runtime's scheduler role),
// one worker in each rank's process (its executor is a JVM the worker starts, as Spark's
// standalone workers do), and the driver's SparkContext in rank 0's process, on which BigDL's
// DistriOptimizer runs. Every address and port of the master and the workers is the one dlhost
// picked (the runtime's cluster); Spark's per-application ports (the driver's RPC and block
// managers) are the kernel's (port 0) and the web UIs are off or on port 0.
// What DistriOptimizer reports per iteration is read from its own logger: its INFO line "Trained
// N records in T seconds. ... Loss is L." and the DEBUG summary of its Metrics after it, whose
// "computing time average" (forward + backward on the executors, averaged over the nodes) and
// the sum of "put gradient", "aggregrateGradientParition average executor", "send weights
// average" and "get weights average" (BigDL's AllReduceParameter over Spark's block managers:
// the gradients' reduce-scatter and the weights' all-gather) are Du et al.'s compute /
// communication split.
// Thread-safety: called from the plugin's JVM thread only (jvm.h); the log appender is
// synchronized.
package dlhost.bigdl;

import com.intel.analytics.bigdl.dllib.optim.DistriOptimizer$;
import com.intel.analytics.bigdl.dllib.utils.Engine$;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.logging.log4j.Level;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.deploy.master.Master$;
import org.apache.spark.deploy.worker.Worker$;
import org.apache.spark.rpc.RpcEnv;
import scala.Option$;

public final class SparkCluster {
  private SparkCluster() {}

  private static RpcEnv master, worker;
  private static SparkContext driver;
  private static IterationLog iterations;

  // The standalone master on host:port (web UI on a port of the kernel's); returns at once.
  public static synchronized void startMaster(String host, int port) {
    if (master != null) throw new IllegalStateException("this process already runs a master");
    master = (RpcEnv) Master$.MODULE$.startRpcEnvAndEndpoint(host, port, 0, new SparkConf())._1();
  }

  // Blocks until the master's RPC environment ends (dlhost ends the process after the case).
  public static void awaitMaster() {
    master.awaitTermination();
  }

  // A standalone worker on host:port offering `cores` cores and `memoryMb` to executors,
  // registered with `masterUrl`; executors run in `workDir`, and keep their blocks (the data
  // set's shuffle, BigDL's gradient partitions) there too. Returns at once.
  public static synchronized void startWorker(String host, int port, int cores, int memoryMb,
                                              String masterUrl, String workDir) {
    if (worker != null) throw new IllegalStateException("this process already runs a worker");
    worker = Worker$.MODULE$.startRpcEnvAndEndpoint(host, port, 0, cores, memoryMb,
        new String[] {masterUrl}, workDir, Option$.MODULE$.empty(),
        new SparkConf().set("spark.local.dir", workDir), Option$.MODULE$.empty());
  }

  // The driver: a SparkContext on `masterUrl`, listening on `host`, asking for `executors`
  // executors of `cores` cores each with BigDL's Spark settings; waits until every executor has
  // registered, at most `waitMs`; the driver's blocks in `localDir`. Then BigDL's Engine runs
  // distributed: `executors` nodes of `cores` cores (DistriOptimizer splits each node's
  // mini-batch over that many model replicas).
  public static synchronized void startDriver(String masterUrl, String host, int executors,
                                              int cores, String executorMemory,
                                              String executorClassPath, String executorJavaOptions,
                                              String localDir, long waitMs) throws Exception {
    if (driver != null) throw new IllegalStateException("this process already runs a driver");
    SparkConf conf = new SparkConf()
                         .setMaster(masterUrl)
                         .setAppName("dlhost bigdl_spark")
                         .set("spark.driver.host", host)
                         .set("spark.driver.bindAddress", host)
                         .set("spark.executor.cores", Integer.toString(cores))
                         .set("spark.cores.max", Integer.toString(executors * cores))
                         .set("spark.executor.memory", executorMemory)
                         .set("spark.executor.extraClassPath", executorClassPath)
                         .set("spark.executor.extraJavaOptions", executorJavaOptions)
                         .set("spark.ui.enabled", "false")
                         .set("spark.local.dir", localDir)
                         .set("spark.scheduler.maxRegisteredResourcesWaitingTime", waitMs + "ms");
    conf = Engine$.MODULE$.createSparkConf(conf);
    driver = new SparkContext(conf);
    final long deadline = System.currentTimeMillis() + waitMs;
    int got = 0;
    while ((got = driver.getExecutorMemoryStatus().size() - 1) < executors) {
      if (System.currentTimeMillis() > deadline)
        throw new java.util.concurrent.TimeoutException(got + " of " + executors
            + " Spark executors registered with the driver in " + waitMs + " ms");
      Thread.sleep(50);
    }
    // BigDL's Engine was started in local mode with the JVM (BigDLModel.init); now as its users
    // start it on Spark, after the SparkContext: it reads the executors and cores from it.
    System.setProperty("bigdl.localMode", "false");
    try {
      Engine$.MODULE$.init();
    } catch (RuntimeException e) {
      // It reads the settings from the SparkConf of the JVM's properties where the context's
      // are not found: the same numbers, set directly.
      System.err.println("cpu_bigdl: BigDL's Engine.init on Spark: " + e + "; nodes and cores set"
          + " directly");
      Engine$.MODULE$.setNodeAndCore(executors, cores);
    }
    if (Engine$.MODULE$.nodeNumber() != executors || Engine$.MODULE$.coreNumber() != cores)
      throw new IllegalStateException("BigDL's Engine found " + Engine$.MODULE$.nodeNumber()
          + " nodes of " + Engine$.MODULE$.coreNumber() + " cores, not " + executors + " of "
          + cores);
    if (iterations == null) iterations = IterationLog.attach();
  }

  public static SparkContext driver() {
    if (driver == null) throw new IllegalStateException("no SparkContext: not the driver");
    return driver;
  }

  // The job is over: the executors end (their workers stop them).
  public static synchronized void stopDriver() {
    if (driver != null) driver.stop();
    driver = null;
  }

  static IterationLog iterations() {
    return iterations;
  }

  // DistriOptimizer's per-iteration lines, caught on its own logger object (OptimizerLog).
  static final class IterationLog extends OptimizerLog {
    // A number as Scala prints a Double (the line's own full stops are not part of it).
    private static final String NUMBER =
        "(NaN|[-+]?Infinity|[-+]?[0-9]+(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)";
    private static final Pattern TRAINED = Pattern.compile("Trained " + NUMBER + " records in "
        + NUMBER + " seconds\\. Throughput is [^ ]+ records/second\\. Loss is " + NUMBER);
    private static Pattern metric(String name) {
      return Pattern.compile("(?m)^" + Pattern.quote(name) + " : " + NUMBER + " s$");
    }

    private static final Pattern COMPUTE = metric("computing time average");
    // BigDL's AllReduceParameter per iteration, as its Metrics name them (each averaged over the
    // executors): the gradients' reduce-scatter (each executor puts its gradient's N partitions
    // into its block manager, then fetches and sums its own partition of all N), and the weights'
    // all-gather (the updated partition sent, every partition fetched at the next iteration's
    // start). Its "aggregate gradient time" is set to 0 every iteration and never added to in
    // 2.4.0 (its summaries show 0.0): not used.
    private static final Pattern[] COMMUNICATION = {metric("put gradient"),
        metric("aggregrateGradientParition average executor"), metric("send weights average"),
        metric("get weights average")};
    private IterationLog() {
      // Per iteration: seconds of the iteration, loss, compute seconds, communication seconds.
      super("dlhost-bigdl-distri", 4);
    }

    static IterationLog attach() {
      // the Metrics summary is logged at DEBUG
      return attach(new IterationLog(), DistriOptimizer$.MODULE$.logger(), Level.DEBUG);
    }

    private static double number(Pattern p, String text) {
      Matcher m = p.matcher(text);
      return m.find() ? Double.parseDouble(m.group(1)) : Double.NaN;
    }

    @Override
    protected void read(String text) {
      Matcher m = TRAINED.matcher(text);
      double[] last = last();
      if (m.find()) {
        add(Double.parseDouble(m.group(2)), Double.parseDouble(m.group(3)), Double.NaN,
            Double.NaN);
      } else if (text.contains("Metrics Summary") && last != null) {
        last[2] = number(COMPUTE, text);
        last[3] = 0;
        for (Pattern p : COMMUNICATION) last[3] += number(p, text);
      } else if (text.contains("Loss is")) {
        unmatched(text);
      }
    }
  }
}
