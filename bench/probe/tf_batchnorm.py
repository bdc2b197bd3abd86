"""tf_batchnorm.py: batch normalization in training mode timed both ways in TensorFlow, on the
shapes of a network's BN layers: Keras 3's BatchNormalization (what tf_peer.py's Keras model
runs: moments + batch_normalization, unfused) and FusedBatchNormV3 (what dlhost's cpu_tensorflow
lowers BATCH_NORM to), forward + backward under a GradientTape in a tf.function, alternating,
medians. Prints each shape's ms per call both ways and the sum over the network's layers: the
part of a training step that the choice of BN kernel explains (issue 40, rule 2).

    build/bench-venv/bin/python bench/probe/tf_batchnorm.py --network resnet56 --batch 128 \\
        --threads 1 --rounds 5
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

# (H, W, C, how many BN layers of that shape) as plugins/networks_paper/cnn.cpp builds them.
LAYERS = {
    # stem conv_bn, then per stage 9 blocks of (conv-bn-relu, conv, add, bn): 18 BN a stage
    "resnet56": [(32, 32, 16, 1 + 18), (16, 16, 32, 18), (8, 8, 64, 18)],
    # build_resnet50: the stem, then per stage (3, 4, 6, 3 bottlenecks; the stride in the first
    # 1x1) a, b at the stage's width, c and the first block's projection at 4x: 53 BN layers
    "resnet50": [(112, 112, 64, 1), (56, 56, 64, 6), (56, 56, 256, 3 + 1), (28, 28, 128, 8),
                 (28, 28, 512, 4 + 1), (14, 14, 256, 12), (14, 14, 1024, 6 + 1), (7, 7, 512, 6),
                 (7, 7, 2048, 3 + 1)],
}


def keras_bn(x, c):
    layer = tf.keras.layers.BatchNormalization()
    layer.build(x.shape)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y)
        return tape.gradient(loss, [x] + layer.trainable_variables)
    return step


def fused_bn(x, c):
    gamma, beta = tf.Variable(tf.ones([c])), tf.Variable(tf.zeros([c]))
    mean, var = tf.Variable(tf.zeros([c])), tf.Variable(tf.ones([c]))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y, m, v = tf.compat.v1.nn.fused_batch_norm(x, gamma, beta, epsilon=1e-3,
                                                       is_training=True, data_format="NHWC")
            loss = tf.reduce_sum(y)
        mean.assign(0.99 * mean + 0.01 * m)  # the running statistics, as Keras updates them
        var.assign(0.99 * var + 0.01 * v)
        return tape.gradient(loss, [x, gamma, beta])
    return step


CLOCK = [time.perf_counter]  # main's --cpu-time 1: time.process_time (all threads' CPU time)


def timed(fn, reps):
    fn()  # trace and warm
    ts = []
    for _ in range(reps):
        t0 = CLOCK[0]()
        out = fn()
        _ = [o.numpy() for o in out]
        ts.append((CLOCK[0]() - t0) * 1e3)
    return statistics.median(ts)


def probe_args(doc, **extra):
    """The probes' command line (--batch, --threads, --rounds and `extra` name=default ints);
    TensorFlow's threads set from it. Shared with tf_ceil_pool.py."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    for name, default in extra.items():
        ap.add_argument("--" + name, default=default,
                        **({"choices": sorted(LAYERS)} if name == "network" else {"type": int}))
    a = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    return a


def main():
    a = probe_args(__doc__, network="resnet56", reps=5, cpu_time=0)
    if a.cpu_time:  # a loaded machine: the process's CPU time, far less disturbed than wall
        CLOCK[0] = time.process_time
    rows, totals = [], {"keras": 0.0, "fused": 0.0}
    for h, w, c, count in LAYERS[a.network]:
        x = tf.random.normal([a.batch, h, w, c])
        fns = {"keras": keras_bn(x, c), "fused": fused_bn(x, c)}
        ms = {k: [] for k in fns}
        for r in range(a.rounds):  # alternate which goes first
            for k in (("keras", "fused") if r % 2 == 0 else ("fused", "keras")):
                ms[k].append(timed(fns[k], a.reps))
        med = {k: statistics.median(v) for k, v in ms.items()}
        rows.append({"shape": [a.batch, h, w, c], "layers": count, "keras_ms": med["keras"],
                     "fused_ms": med["fused"]})
        for k in totals:
            totals[k] += med[k] * count
        print(f"BN {a.batch}x{h}x{w}x{c} (x{count}): Keras BatchNormalization {med['keras']:.2f} "
              f"ms, FusedBatchNormV3 {med['fused']:.2f} ms per forward+backward", flush=True)
    print(f"{a.network} b{a.batch} t{a.threads} ({'CPU' if a.cpu_time else 'wall'} ms): BN forward+backward over the step's layers: "
          f"Keras {totals['keras']:.1f} ms, fused {totals['fused']:.1f} ms, difference "
          f"{totals['keras'] - totals['fused']:.1f} ms a step")
    print(json.dumps({"network": a.network, "batch": a.batch, "threads": a.threads,
                      "tensorflow": tf.__version__, "rows": rows, "keras_ms": totals["keras"],
                      "fused_ms": totals["fused"], "clock": "cpu" if a.cpu_time else "wall",
                      "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
