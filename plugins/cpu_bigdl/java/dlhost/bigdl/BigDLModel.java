// BigDLModel.java — the JVM side of the cpu_bigdl backend: dlhost's graph rebuilt in BigDL DLlib
// 2.4 (a Sequential of BigDL's own layers, built one call per node by the plugin's lowering,
// model.cpp), dlhost's initial weights written into BigDL's parameter tensors, dlhost's inputs
// copied into BigDL tensors, and two ways to train:
//   - one step at a time (forward, backward, update with BigDL's SGD), for conform and for cases
//     with a comm;
//   - BigDL's own loop, as its users run it: ONE LocalOptimizer.optimize() over the warm-up and
//     timed steps, each step's time and loss read from what LocalOptimizer itself reports per
//     iteration (its log line "loss is L, iteration time is Ts ...", caught by a log4j2 appender);
//   - on a Spark cluster (`comm: bigdl_spark`, SparkCluster.java): ONE DistriOptimizer.optimize()
//     on the driver, each step's mini-batch split over the executors, its per-iteration time,
//     loss and compute / communication split read from DistriOptimizer's own log.
// Compiled at build time with javac against the BigDL jar (plugins/cpu_bigdl/CMakeLists.txt).
// Scala's generics are erased to Object here; raw types are used on purpose.
// Thread-safety: one instance is used from the plugin's JVM thread only (jvm.h).
package dlhost.bigdl;

import com.intel.analytics.bigdl.dllib.feature.dataset.DataSet$;
import com.intel.analytics.bigdl.dllib.feature.dataset.DistributedDataSet;
import com.intel.analytics.bigdl.dllib.feature.dataset.LocalArrayDataSet;
import com.intel.analytics.bigdl.dllib.feature.dataset.MiniBatch;
import com.intel.analytics.bigdl.dllib.feature.dataset.MiniBatch$;
import com.intel.analytics.bigdl.dllib.nn.Sequential;
import com.intel.analytics.bigdl.dllib.nn.abstractnn.AbstractCriterion;
import com.intel.analytics.bigdl.dllib.nn.abstractnn.AbstractModule;
import com.intel.analytics.bigdl.dllib.nn.abstractnn.Activity;
import com.intel.analytics.bigdl.dllib.optim.DistriOptimizer;
import com.intel.analytics.bigdl.dllib.optim.LocalOptimizer;
import com.intel.analytics.bigdl.dllib.optim.LocalOptimizer$;
import com.intel.analytics.bigdl.dllib.optim.OptimMethod;
import com.intel.analytics.bigdl.dllib.tensor.Tensor;
import com.intel.analytics.bigdl.dllib.tensor.TensorNumericMath;
import com.intel.analytics.bigdl.dllib.utils.Engine$;
import com.intel.analytics.bigdl.dllib.utils.python.api.JTensor;
import com.intel.analytics.bigdl.dllib.utils.python.api.PythonBigDL;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.logging.log4j.Level;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

@SuppressWarnings({"rawtypes", "unchecked"})
public final class BigDLModel {
  // --- the engine: once per JVM ----------------------------------------------------------------

  private static PythonBigDL py;  // BigDL's Java-friendly factory (what its Python API calls)
  private static TensorNumericMath.TensorNumeric ev;
  private static final ClassTag FLOAT = ClassTag$.MODULE$.Float();
  private static StepLog stepLog;

  // BigDL's Engine in local mode (no Spark context) on `cores` threads (bigdl.coreNumber: a
  // LocalOptimizer step splits the mini-batch over that many model replicas, one thread each).
  // Returns "MklBlas engine, N cores, local mode" as BigDL itself reports it.
  public static synchronized String init(int cores) throws Exception {
    if (py == null) {
      System.setProperty("bigdl.localMode", "true");
      if (cores > 0) System.setProperty("bigdl.coreNumber", Integer.toString(cores));
      Engine$.MODULE$.init();
      py = PythonBigDL.ofFloat();
      // NumericFloat is an object nested in two Scala objects: named through its class.
      ev = (TensorNumericMath.TensorNumeric)
          Class.forName(
                  "com.intel.analytics.bigdl.dllib.tensor.TensorNumericMath$TensorNumeric$NumericFloat$")
              .getField("MODULE$")
              .get(null);
      stepLog = StepLog.attach();
    }
    return Engine$.MODULE$.getEngineType() + " engine, " + Engine$.MODULE$.coreNumber()
        + " cores, local mode";
  }

  // --- the network, built node by node -----------------------------------------------------------

  private final Sequential model;
  private AbstractCriterion criterion;
  private final List<AbstractModule> paramModule = new ArrayList<>();  // per dlhost parameter id
  private final List<Integer> paramIndex = new ArrayList<>();  // into module.parameters()
  private Tensor input;   // [N, ...] the data input
  private Tensor target;  // [N] class indices from 1 (BigDL's), or the MSE target
  private Tensor output;
  private float lastLoss = Float.NaN;
  private OptimMethod sgd;
  private double clipNorm;
  private Tensor weights, grads;  // the flat views of every parameter (getParameters)

  public BigDLModel() {
    model = (Sequential) py.createSequential();
  }

  private void add(AbstractModule m) {
    model.add(m);
  }

  // The parameters of `m`, in module.parameters() order, as dlhost's ids `ids` (-1: none).
  private void own(AbstractModule m, int... ids) {
    for (int k = 0; k < ids.length; ++k) {
      if (ids[k] < 0) continue;
      while (paramModule.size() <= ids[k]) {
        paramModule.add(null);
        paramIndex.add(-1);
      }
      paramModule.set(ids[k], m);
      paramIndex.set(ids[k], k);
    }
  }

  public void conv(int inC, int outC, int kh, int kw, int sh, int sw, int ph, int pw, int groups,
                   boolean bias, int weightId, int biasId) {
    AbstractModule m = py.createSpatialConvolution(inC, outC, kw, kh, sw, sh, pw, ph, groups, true,
        null, null, null, null, null, null, bias, "NCHW");
    add(m);
    own(m, weightId, bias ? biasId : -1);
  }

  public void maxPool(int kh, int kw, int sh, int sw, int ph, int pw, boolean ceil) {
    add(py.createSpatialMaxPooling(kw, kh, sw, sh, pw, ph, ceil, "NCHW"));
  }

  public void avgPool(int kh, int kw, int sh, int sw, int ph, int pw, boolean ceil,
                      boolean countIncludePad) {
    add(py.createSpatialAveragePooling(kw, kh, sw, sh, pw, ph, false, ceil, countIncludePad, true,
        "NCHW"));
  }

  // [N, C, H, W] -> [N, C]: BigDL's global average pooling, then its reshape.
  public void globalAvgPool(int channels) {
    add(py.createSpatialAveragePooling(1, 1, 1, 1, 0, 0, true, false, true, true, "NCHW"));
    flatten(channels);
  }

  // [N, ...] -> [N, features] in the input's row-major order (what dlhost's fc flattens).
  public void flatten(int features) {
    add(py.createReshape(Arrays.asList((Object) features), Boolean.TRUE));
  }

  public void linear(int in, int out, boolean bias, int weightId, int biasId) {
    AbstractModule m = py.createLinear(in, out, bias, null, null, null, null, null, null);
    add(m);
    own(m, weightId, bias ? biasId : -1);
  }

  public void relu() {
    add(py.createReLU(false));
  }

  public void sigmoid() {
    add(py.createSigmoid());
  }

  public void tanh() {
    add(py.createTanh());
  }

  public void lrn(int size, double alpha, double beta, double k) {
    add(py.createSpatialCrossMapLRN(size, alpha, beta, k, "NCHW"));
  }

  // The loss: LogSoftMax + ClassNLL averaged over the batch (labels from 1), or the MSE.
  public void crossEntropy() {
    criterion = py.createCrossEntropyCriterion(null, true);
  }

  public void mse() {
    criterion = py.createMSECriterion();
  }

  // BigDL's SGD with dlhost's rule: weight decay added to the gradient, then momentum
  // v = m v + g (dampening 0: BigDL's default dampens like Torch 7), constant learning rate;
  // clipping by the global L2 norm first (BigDL's own L2NormClippingProcessor in its loop).
  public void sgd(double lr, double momentum, double weightDecay, double clip) {
    sgd = py.createSGD(lr, 0.0, weightDecay, momentum, 0.0, false, py.createDefault(), null, null);
    clipNorm = clip;
  }

  // After the last node: the input and target tensors (shapes from the graph), the flat
  // parameter views.
  public void finish(int[] inputShape, int[] targetShape) {
    input = tensor(new float[product(inputShape)], inputShape);
    target = tensor(new float[product(targetShape)], targetShape);
    flatParameters();
  }

  private void flatParameters() {
    Tuple2 wg = model.getParameters();
    weights = (Tensor) wg._1();
    grads = (Tensor) wg._2();
  }

  private static int product(int[] dims) {
    int n = 1;
    for (int d : dims) n *= d;
    return n;
  }

  private static Tensor tensor(float[] data, int[] shape) {
    return py.toTensor(new JTensor(data, shape, "float", null));
  }

  // --- parameters and inputs ---------------------------------------------------------------------

  private Tensor param(int id, boolean grad) {
    AbstractModule m = paramModule.get(id);
    Tuple2 p = m.parameters();
    Tensor[] all = (Tensor[]) (grad ? p._2() : p._1());
    return all[paramIndex.get(id)];
  }

  public int paramCount(int id) {
    return id < paramModule.size() && paramModule.get(id) != null ? param(id, false).nElement()
                                                                  : -1;
  }

  // The parameter's elements, in BigDL's (= dlhost's canonical) layout, from/to `data`.
  public void readParam(int id, boolean grad, float[] data) {
    copy(param(id, grad), data, true);
  }

  public void writeParam(int id, boolean grad, float[] data) {
    copy(param(id, grad), data, false);
  }

  private static void copy(Tensor t, float[] data, boolean out) {
    if (!t.isContiguous() || t.nElement() != data.length)
      throw new IllegalStateException("parameter of " + t.nElement() + " elements, not contiguous"
          + " or not " + data.length);
    float[] storage = (float[]) t.storage().array();
    int at = t.storageOffset() - 1;
    if (out)
      System.arraycopy(storage, at, data, 0, data.length);
    else
      System.arraycopy(data, 0, storage, at, data.length);
  }

  public void setInput(float[] data) {
    copy(input, data, false);
  }

  public void setTarget(float[] data) {
    copy(target, data, false);
  }

  // --- one step at a time ------------------------------------------------------------------------

  public float forward() {
    output = (Tensor) model.forward(input);
    lastLoss = ((Number) criterion.forward(output, target)).floatValue();
    return lastLoss;
  }

  // Overwrites every gradient (dlhost's backward), through BigDL's backward.
  public void backward() {
    model.zeroGradParameters();
    Activity gradOutput = (Activity) criterion.backward(output, target);
    model.backward(input, gradOutput);
  }

  public void update() {
    if (clipNorm > 0) {
      double norm = Math.sqrt(((Number) grads.sumSquare()).doubleValue());
      if (norm > clipNorm) grads.mul(Float.valueOf((float) (clipNorm / norm)));
    }
    final Tensor g = grads;
    final Object loss = Float.valueOf(lastLoss);
    // BigDL's feval: the loss and the gradients backward left (Scala's Function1).
    sgd.optimize(new AbstractFunction1() {
      @Override
      public Object apply(Object w) {
        return new Tuple2(loss, g);
      }
    }, weights);
  }

  public float loss() {
    return lastLoss;
  }

  // The output of the last forward (the logits), [N, classes], row-major.
  public void readOutput(float[] data) {
    copy(output.contiguous(), data, true);
  }

  // --- BigDL's own loop --------------------------------------------------------------------------

  private final List<MiniBatch> batches = new ArrayList<>();

  // A copy of the current input and target as the next step's mini-batch.
  public void addBatch() {
    batches.add(MiniBatch$.MODULE$.apply(input.clone(), target.clone(), FLOAT));
  }

  // The steps in the batches' order: BigDL shuffles its array data set at every epoch; dlhost's
  // feed already gave each step its mini-batch.
  private static final class InOrder extends LocalArrayDataSet {
    InOrder(MiniBatch[] batches) {
      super(batches);
    }

    @Override
    public void shuffle() {}
  }

  // ONE LocalOptimizer.optimize() over `steps` steps on the batches added (cycled when fewer),
  // with the SGD above. Returns per step [seconds of LocalOptimizer's iteration time, loss, data
  // fetch seconds], 3 * steps values, as LocalOptimizer logged them.
  public double[] optimize(int steps) {
    if (batches.isEmpty()) throw new IllegalStateException("no mini-batch added before optimize");
    LocalOptimizer opt = new LocalOptimizer(model,
        new InOrder(batches.toArray(new MiniBatch[0])), criterion, FLOAT, ev);
    opt.setOptimMethod(sgd);
    opt.setEndWhen(py.createMaxIteration(steps));
    if (clipNorm > 0) opt.setGradientClippingByl2Norm(clipNorm);
    stepLog.begin();
    try {
      opt.optimize();
    } finally {
      stepLog.end();
    }
    batches.clear();
    flatParameters();  // the optimizer re-laid the parameters out
    double[] got = stepLog.steps();
    if (got.length != 3 * steps)
      throw new IllegalStateException("LocalOptimizer logged " + got.length / 3
          + " iterations of " + steps + " (its log line changed?): " + stepLog.unmatched());
    return got;
  }

  // ONE DistriOptimizer.optimize() over `steps` steps on the Spark cluster of this process's
  // driver (SparkCluster.startDriver), on BigDL's distributed data set of the batches added:
  // each step's mini-batch split into `executors` equal slices, executor k's partition holding
  // slice k of every step (BigDL's data set then takes them from a random start, as its users'
  // data). Returns per step [seconds of DistriOptimizer's iteration, loss, compute seconds,
  // communication seconds] (4 * steps values; NaN where its Metrics summary said nothing).
  public double[] optimizeSpark(int steps, int executors) {
    if (batches.isEmpty()) throw new IllegalStateException("no mini-batch added before optimize");
    final int rows = input.size(1);
    if (rows % executors != 0)
      throw new IllegalArgumentException("a mini-batch of " + rows + " does not split over "
          + executors + " Spark executors");
    final int slice = rows / executors;
    List<MiniBatch> parts = new ArrayList<>();
    for (int k = 0; k < executors; ++k) {
      for (MiniBatch b : batches) {
        Tensor in = (Tensor) b.getInput();
        Tensor tg = (Tensor) b.getTarget();
        parts.add(MiniBatch$.MODULE$.apply(in.narrow(1, k * slice + 1, slice).clone(),
            tg.narrow(1, k * slice + 1, slice).clone(), FLOAT));
      }
    }
    JavaSparkContext sc = new JavaSparkContext(SparkCluster.driver());
    DistributedDataSet data = DataSet$.MODULE$.rdd(sc.parallelize(parts, executors).rdd(),
        executors, DataSet$.MODULE$.rdd$default$3(), DataSet$.MODULE$.rdd$default$4(),
        ClassTag$.MODULE$.apply(MiniBatch.class));
    DistriOptimizer opt = new DistriOptimizer(model, data, criterion, FLOAT, ev);
    opt.setOptimMethod(sgd);
    opt.setEndWhen(py.createMaxIteration(steps));
    if (clipNorm > 0) opt.setGradientClippingByl2Norm(clipNorm);
    SparkCluster.IterationLog log = SparkCluster.iterations();
    log.begin();
    try {
      opt.optimize();
    } finally {
      log.end();
    }
    batches.clear();
    flatParameters();
    double[] got = log.steps();
    if (got.length != 4 * steps)
      throw new IllegalStateException("DistriOptimizer logged " + got.length / 4
          + " iterations of " + steps + " (its log line changed?): " + log.unmatched());
    return got;
  }

  // LocalOptimizer's per-iteration line, caught on its logger (log4j2, as BigDL 2.4 logs):
  // "[Epoch 1 64/64][Iteration 1][Wall Clock 0.05s] loss is 2.30, iteration time is 0.05s data
  // fetch time is 1.0E-4s, train time 0.05s. Throughput is ...".
  private static final class StepLog extends OptimizerLog {
    private static final Pattern LINE = Pattern.compile(
        "loss is ([-+0-9.eEaNInfity]+), iteration time is ([-+0-9.eE]+)s data fetch time is "
        + "([-+0-9.eE]+)s");

    private StepLog() {
      super("dlhost-bigdl-steps", 3);  // seconds of the iteration, loss, data fetch seconds
    }

    static StepLog attach() {
      return attach(new StepLog(), LocalOptimizer$.MODULE$.logger(), Level.INFO);
    }

    @Override
    protected void read(String text) {
      Matcher m = LINE.matcher(text);
      if (m.find())
        add(Double.parseDouble(m.group(2)), Double.parseDouble(m.group(1)),
            Double.parseDouble(m.group(3)));
      else if (text.contains("loss is"))
        unmatched(text);
    }
  }
}
