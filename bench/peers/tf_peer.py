"""tf_peer.py: the 12 seed networks in TensorFlow (Keras layers, a tf.function training step),
trained on resident synthetic data, one case per process; prints one JSON line like
torch_peer.py.

Same layer shapes as plugins/networks_paper/*.cpp. Images are NHWC (TensorFlow's CPU
convolutions have no NCHW kernels); the work per step is the same. Keras's LSTM has one bias
per layer, as dlhost. Weight decay is added to the gradients (g + wd * w) before the momentum
update, which is exactly SGD's rule in dlhost and PyTorch.

    python tf_peer.py NETWORK --batch B --threads T --warmup W --iterations N
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from optimizers import OPTIMIZERS  # noqa: E402

L = tf.keras.layers


def fc_classifier(inputs, hidden, classes):
    x = inp = tf.keras.Input((inputs,))
    for h in hidden:
        x = L.Dense(h, activation="sigmoid")(x)
    return tf.keras.Model(inp, L.Dense(classes)(x))


def sequential(shape, layers):
    x = inp = tf.keras.Input(shape)
    for layer in layers:
        x = layer(x)
    return tf.keras.Model(inp, x)


def alexnet():
    return sequential((224, 224, 3), [
        L.ZeroPadding2D(2), L.Conv2D(96, 11, 4, activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(256, 5, padding="same", activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(384, 3, padding="same", activation="relu"),
        L.Conv2D(256, 3, padding="same", activation="relu"), L.MaxPool2D(3, 2), L.Flatten(),
        L.Dense(4096, activation="relu"), L.Dropout(0.5),
        L.Dense(4096, activation="relu"), L.Dropout(0.5), L.Dense(1000)])


def alexnet_r():
    # Ceil-mode pooling of 32 -> 16 -> 8 -> 4 is 'same' pooling for these sizes.
    return sequential((32, 32, 3), [
        L.Conv2D(32, 5, padding="same"), L.MaxPool2D(3, 2, padding="same"), L.ReLU(),
        L.Conv2D(32, 5, padding="same", activation="relu"), L.MaxPool2D(3, 2, padding="same"),
        L.Conv2D(64, 5, padding="same", activation="relu"),
        L.AveragePooling2D(3, 2, padding="same"), L.Flatten(), L.Dense(10)])


def lenet():
    return sequential((28, 28, 1), [
        L.Conv2D(20, 5), L.MaxPool2D(2, 2), L.Conv2D(50, 5), L.MaxPool2D(2, 2), L.Flatten(),
        L.Dense(500, activation="relu"), L.Dense(10)])


def autoencoder():
    x = inp = tf.keras.Input((784,))
    for w in (1000, 500, 250, 30, 250, 500, 1000, 784):
        x = L.Dense(w, activation=None if w == 30 else "sigmoid")(x)
    return tf.keras.Model(inp, x)


def conv_bn(x, cout, k, s, relu):
    if k > 1:
        x = L.ZeroPadding2D(k // 2)(x)
    x = L.BatchNormalization()(L.Conv2D(cout, k, s, use_bias=False)(x))
    return L.ReLU()(x) if relu else x


def resnet50():
    x = inp = tf.keras.Input((224, 224, 3))
    x = conv_bn(x, 64, 7, 2, True)
    x = L.MaxPool2D(3, 2)(L.ZeroPadding2D(1)(x))
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for i in range(blocks):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = conv_bn(x, width, 1, stride, True)
            y = conv_bn(y, width, 3, 1, True)
            y = conv_bn(y, 4 * width, 1, 1, False)
            s = conv_bn(x, 4 * width, 1, stride, False) if i == 0 else x
            x = L.ReLU()(L.Add()([y, s]))
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inp, L.Dense(1000)(x))


def resnet56():
    x = inp = tf.keras.Input((32, 32, 3))
    x = conv_bn(x, 16, 3, 1, True)
    for stage, width in enumerate((16, 32, 64)):
        for i in range(9):
            stride = 2 if (i == 0 and stage > 0) else 1
            y = conv_bn(x, width, 3, stride, True)
            y = L.Conv2D(width, 3, padding="same", use_bias=False)(y)
            s = L.Conv2D(width, 1, 2, use_bias=False)(x) if stride == 2 else x
            x = L.BatchNormalization()(L.Add()([y, s]))
    x = L.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inp, L.Dense(10)(x))


def language_model(steps):
    x = inp = tf.keras.Input((steps,), dtype="int32")
    x = L.Embedding(10000, 256)(x)
    x = L.LSTM(256, return_sequences=True)(L.LSTM(256, return_sequences=True)(x))
    return tf.keras.Model(inp, L.Dense(10000)(x))


def make(name, batch):
    """(model, input, target, loss) for one network; data random and resident."""
    g = tf.random.Generator.from_seed(42)
    ce = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def labels(shape, classes):
        return g.uniform(shape, 0, classes, dtype=tf.int32)

    if name in ("fcn5", "fcn8"):
        model = fc_classifier(26752, [2048] * (3 if name == "fcn5" else 6), 26752)
        return model, g.normal((batch, 26752)), labels((batch,), 26752), ce
    if name == "fcnr":
        return (fc_classifier(784, [2048, 4096, 1024], 10), g.normal((batch, 784)),
                labels((batch,), 10), ce)
    if name == "autoencoder":
        x = g.uniform((batch, 784))
        return autoencoder(), x, x, tf.keras.losses.MeanSquaredError()
    if name.startswith("lstm"):
        steps = 64 if name == "lstm64" else 32
        return (language_model(steps), labels((batch, steps), 10000),
                labels((batch, steps), 10000), ce)
    builders = {"alexnet": (alexnet, 224, 3, 1000), "resnet50": (resnet50, 224, 3, 1000),
                "alexnet_r": (alexnet_r, 32, 3, 10), "resnet56": (resnet56, 32, 3, 10),
                "lenet": (lenet, 28, 1, 10)}
    build, h, c, classes = builders[name]
    return build(), g.normal((batch, h, h, c)), labels((batch,), classes), ce


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("network", choices=sorted(OPTIMIZERS))
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=6)
    a = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(42)
    model, x, target, loss_fn = make(a.network, a.batch)
    lr, momentum, wd, clip = OPTIMIZERS[a.network]
    opt = tf.keras.optimizers.SGD(learning_rate=float(lr), momentum=float(momentum))
    variables = model.trainable_variables

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(x, training=True))
        grads = tape.gradient(loss, variables)
        if wd:
            grads = [gr + wd * v for gr, v in zip(grads, variables)]
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        opt.apply_gradients(zip(grads, variables))
        return loss

    times, losses = [], []
    for i in range(a.warmup + a.iterations):
        t0 = time.perf_counter()
        loss = step().numpy()  # .numpy() waits for the step
        t1 = time.perf_counter()
        losses.append(float(loss))
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    print(json.dumps({
        "tool": "tensorflow " + tf.__version__, "network": a.network, "batch": a.batch,
        "threads": a.threads, "step_ms_median": statistics.median(times), "step_ms": times,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "params": int(sum(tf.size(v) for v in variables)), "loss_first": losses[0],
        "loss_last": losses[-1], "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
