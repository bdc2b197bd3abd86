// OptimizerLog.java — what a BigDL optimizer reports per iteration, caught on its own logger: the
// log4j2 appender that BigDLModel.StepLog (LocalOptimizer's line) and SparkCluster.IterationLog
// (DistriOptimizer's line and its Metrics summary) share. A subclass says which logger, at which
// level, and how one message becomes (or completes) an iteration's values; this class collects
// them between begin() and end() and hands them out flat.
// Attached to the optimizer's own logger object, not one looked up by name: BigDL's classes log
// through LoggerContexts of their own (LogManager.getContext from here is another one), so a
// logger configured by name would not be the one it writes to.
// Thread-safety: BigDL logs from its own threads; every method that touches the values is
// synchronized, and `on` is volatile.
package dlhost.bigdl;

import java.util.ArrayList;
import java.util.List;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.Logger;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Property;

abstract class OptimizerLog extends AbstractAppender {
  private final int width;  // values per iteration
  private final List<double[]> seen = new ArrayList<>();
  private String unmatched = "";
  private volatile boolean on;

  OptimizerLog(String name, int width) {
    super(name, null, null, true, Property.EMPTY_ARRAY);
    this.width = width;
  }

  // Started and made the logger's only appender (its lines stay off dlhost's terminal), at the
  // level whose lines the subclass reads.
  static <T extends OptimizerLog> T attach(T log, Object logger, Level level) {
    log.start();
    Logger optim = (Logger) logger;
    optim.addAppender(log);
    optim.setLevel(level);
    optim.setAdditive(false);
    return log;
  }

  synchronized void begin() {
    seen.clear();
    unmatched = "";
    on = true;
  }

  void end() {
    on = false;
  }

  // One message: read() adds an iteration, completes the last one, or says it is a line the
  // subclass expected to read and could not (kept for the error message).
  protected abstract void read(String text);

  protected final void add(double... values) {
    seen.add(values);
  }

  protected final double[] last() {
    return seen.isEmpty() ? null : seen.get(seen.size() - 1);
  }

  protected final void unmatched(String text) {
    unmatched = text;
  }

  @Override
  public final synchronized void append(LogEvent event) {
    if (on) read(event.getMessage().getFormattedMessage());
  }

  // The iterations seen since begin(), `width` values each, one after the other.
  synchronized double[] steps() {
    double[] out = new double[width * seen.size()];
    for (int i = 0; i < seen.size(); ++i) System.arraycopy(seen.get(i), 0, out, width * i, width);
    return out;
  }

  synchronized String unmatched() {
    return unmatched.isEmpty() ? "no line" : unmatched;
  }
}
