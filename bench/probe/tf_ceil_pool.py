"""tf_ceil_pool.py: AlexNet-R's training step in TensorFlow two ways, alternating, medians: with
Keras's pooling (`padding="same"`, what tf_peer.py runs; for these sizes it is Caffe's ceil-mode
pooling) and with the pooling as dlhost's cpu_tensorflow lowers a ceil-mode window that hangs over
the end (plugins/cpu_tensorflow/lower.cpp, pool(): PadV2 with the lowest float or zeros, VALID
pooling, and for the average a Mul by window/count). Everything else is the same Keras model, SGD
and tf.function step: the difference is what that lowering costs a step (issue 40, rule 1).

    build/bench-venv/bin/python bench/probe/tf_ceil_pool.py --batch 128 --threads 1 --rounds 5
"""
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_batchnorm import probe_args  # noqa: E402  (this folder)

L = tf.keras.layers


class PaddedPool(L.Layer):
    """cpu_tensorflow's ceil-mode pool: pad the bottom/right by one, VALID pool, and for the
    average rescale each output by window / the count of input elements under it."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def build(self, shape):
        h, w = shape[1], shape[2]
        oh, ow = -(-(h - 3) // 2) + 1, -(-(w - 3) // 2) + 1
        count = lambda o, n: min(o * 2 + 3, n) - o * 2  # noqa: E731
        scale = np.array([[9.0 / (count(i, h) * count(j, w)) for j in range(ow)]
                          for i in range(oh)], np.float32)
        self.scale = tf.constant(scale.reshape(1, oh, ow, 1))
        self.end_h, self.end_w = (oh - 1) * 2 + 3 - h, (ow - 1) * 2 + 3 - w

    def call(self, x):
        value = -np.finfo(np.float32).max if self.kind == "max" else 0.0
        x = tf.pad(x, [[0, 0], [0, self.end_h], [0, self.end_w], [0, 0]], constant_values=value)
        if self.kind == "max":
            return tf.nn.max_pool2d(x, 3, 2, "VALID")
        return tf.nn.avg_pool2d(x, 3, 2, "VALID") * self.scale


def alexnet_r(padded):
    mx = (lambda: PaddedPool("max")) if padded else (lambda: L.MaxPool2D(3, 2, padding="same"))
    av = (lambda: PaddedPool("avg")) if padded else (
        lambda: L.AveragePooling2D(3, 2, padding="same"))
    x = inp = tf.keras.Input((32, 32, 3))
    for layer in [L.Conv2D(32, 5, padding="same"), mx(), L.ReLU(),
                  L.Conv2D(32, 5, padding="same", activation="relu"), mx(),
                  L.Conv2D(64, 5, padding="same", activation="relu"), av(), L.Flatten(),
                  L.Dense(10)]:
        x = layer(x)
    return tf.keras.Model(inp, x)


def stepper(padded, batch):
    tf.random.set_seed(42)
    model = alexnet_r(padded)
    x = tf.random.normal((batch, 32, 32, 3))
    y = tf.random.uniform((batch,), 0, 10, dtype=tf.int32)
    ce = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = ce(y, model(x, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return loss
    step().numpy()
    step().numpy()
    return step


def main():
    a = probe_args(__doc__, steps=10)
    steps = {"keras_same": stepper(False, a.batch), "pad_valid": stepper(True, a.batch)}
    ms = {k: [] for k in steps}
    for r in range(a.rounds):
        for k in (list(steps) if r % 2 == 0 else list(reversed(list(steps)))):
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(a.steps):
                steps[k]().numpy()
            ms[k].append({"wall": (time.perf_counter() - t0) * 1e3 / a.steps,
                          "cpu": (time.process_time() - c0) * 1e3 / a.steps})
    med = {k: {m: statistics.median(x[m] for x in v) for m in ("wall", "cpu")}
           for k, v in ms.items()}
    for k, v in med.items():
        print(f"alexnet_r b{a.batch} t{a.threads} {k:10s}: {v['wall']:.1f} ms wall, "
              f"{v['cpu']:.1f} CPU ms a step", flush=True)
    print(f"pad_valid / keras_same: {med['pad_valid']['cpu'] / med['keras_same']['cpu']:.3f} (CPU), "
          f"{med['pad_valid']['wall'] / med['keras_same']['wall']:.3f} (wall)")
    print(json.dumps({"batch": a.batch, "threads": a.threads, "tensorflow": tf.__version__,
                      "median_ms": med, "runs": ms, "load": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
