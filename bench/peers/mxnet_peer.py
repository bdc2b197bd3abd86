"""mxnet_peer.py: the 12 seed networks in MXNet 1.9.1 Gluon, hybridized as MXNet's performance
guide says (`hybridize(static_alloc=True, static_shape=True)`), trained on resident synthetic
data, one case per process; prints one JSON line like torch_peer.py.

Runs in its own virtual environment (MXNet 1.9.1's Python needs numpy < 1.24; bench/run.sh makes
build/bench-venv-mxnet), never with dlhost's build. The layers follow plugins/networks_paper/*.cpp
as torch_peer.py does (same shapes, activations, ceil-mode pooling, BN placement), NCHW like
dlhost's cpu_mxnet backend. The step is what a Gluon user writes: forward and loss under
`autograd.record()`, `backward()`, `Trainer.step(n)` (SGD with the network's lr, momentum and
weight decay from `dlhost networks --json`; clipping by the global norm with
`gluon.utils.clip_global_norm` between `allreduce_grads()` and `update()`, as Gluon's word
language model example does), then `mx.nd.waitall()` inside the timer, since MXNet's engine is
asynchronous. Gluon's losses are per sample and `Trainer.step(n)` rescales the gradient by 1/n:
the mean loss of dlhost and the other peers. MXNet's LSTM has two bias vectors per layer, like
PyTorch's. Weights: Xavier (Gluon's tutorials' choice); the work of a step does not depend on it.

Threads: MXNet reads OMP_NUM_THREADS when libmxnet.so loads (its own kernels and oneDNN's), so
--threads is put into the environment before the import; the engine is left at its default
(ThreadedEnginePerDevice, one CPU worker), as dlhost's cpu_mxnet leaves it.

    python mxnet_peer.py NETWORK --batch B --threads T --warmup W --iterations N
"""
import os
import sys
import time


def _threads_from_argv():
    """--threads before MXNet loads: its OpenMP cap is fixed by a static initializer."""
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


os.environ["OMP_NUM_THREADS"] = _threads_from_argv()
import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn, rnn  # noqa: E402

import peer_main  # noqa: E402
from optimizers import OPTIMIZERS  # noqa: E402
from transformer_settings import SHAPES  # noqa: E402


def fc_classifier(hidden, classes):
    net = nn.HybridSequential()
    for h in hidden:
        net.add(nn.Dense(h, activation="sigmoid"))
    net.add(nn.Dense(classes))
    return net


def sequential(*layers):
    net = nn.HybridSequential()
    net.add(*layers)
    return net


def alexnet():
    return sequential(
        nn.Conv2D(96, 11, 4, 2, activation="relu"), nn.MaxPool2D(3, 2),
        nn.Conv2D(256, 5, 1, 2, activation="relu"), nn.MaxPool2D(3, 2),
        nn.Conv2D(384, 3, 1, 1, activation="relu"),
        nn.Conv2D(384, 3, 1, 1, activation="relu"),
        nn.Conv2D(256, 3, 1, 1, activation="relu"), nn.MaxPool2D(3, 2), nn.Flatten(),
        nn.Dense(4096, activation="relu"), nn.Dropout(0.5),
        nn.Dense(4096, activation="relu"), nn.Dropout(0.5), nn.Dense(1000))


def alexnet_r():
    return sequential(
        nn.Conv2D(32, 5, 1, 2), nn.MaxPool2D(3, 2, ceil_mode=True), nn.Activation("relu"),
        nn.Conv2D(32, 5, 1, 2, activation="relu"), nn.MaxPool2D(3, 2, ceil_mode=True),
        nn.Conv2D(64, 5, 1, 2, activation="relu"), nn.AvgPool2D(3, 2, ceil_mode=True),
        nn.Flatten(), nn.Dense(10))


def lenet():
    return sequential(
        nn.Conv2D(20, 5), nn.MaxPool2D(2, 2), nn.Conv2D(50, 5), nn.MaxPool2D(2, 2),
        nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(10))


def autoencoder():
    net = nn.HybridSequential()
    for w in (1000, 500, 250, 30, 250, 500, 1000, 784):
        net.add(nn.Dense(w, activation=None if w == 30 else "sigmoid"))
    return net


def conv_bn(cout, k, s, p, relu):
    block = sequential(nn.Conv2D(cout, k, s, p, use_bias=False), nn.BatchNorm())
    if relu:
        block.add(nn.Activation("relu"))
    return block


class Bottleneck(nn.HybridBlock):
    """ResNet-50's block as cnn.cpp: stride in the first 1x1, projection with BN, ReLU after add."""

    def __init__(self, width, stride, project):
        super().__init__()
        self.body = sequential(conv_bn(width, 1, stride, 0, True), conv_bn(width, 3, 1, 1, True),
                               conv_bn(4 * width, 1, 1, 0, False))
        self.proj = conv_bn(4 * width, 1, stride, 0, False) if project else None

    def hybrid_forward(self, F, x):
        s = self.proj(x) if self.proj is not None else x
        # The ReLU as Gluon's model zoo writes it (BottleneckV1: F.Activation), oneDNN's kernel: F.relu
        # is MXNet's own, with a layout reorder around it each way (~270 ms a step at b16, 2 threads:
        # bench/results/2026-12-06-quiet-fairness/rows-mxnet-resnet50-2t.md).
        return F.Activation(self.body(x) + s, act_type="relu")


def resnet50():
    net = sequential(conv_bn(64, 7, 2, 3, True), nn.MaxPool2D(3, 2, 1))
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for i in range(blocks):
            net.add(Bottleneck(width, 2 if (i == 0 and stage > 0) else 1, i == 0))
    net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(1000))
    return net


class BasicDlbench(nn.HybridBlock):
    """ResNet-56's DLBench block: conv-bn-relu, conv, add the shortcut, then BN (no ReLU)."""

    def __init__(self, width, stride):
        super().__init__()
        self.a = conv_bn(width, 3, stride, 1, True)
        self.b = nn.Conv2D(width, 3, 1, 1, use_bias=False)
        self.proj = nn.Conv2D(width, 1, 2, 0, use_bias=False) if stride == 2 else None
        self.bn = nn.BatchNorm()

    def hybrid_forward(self, F, x):
        s = self.proj(x) if self.proj is not None else x
        return self.bn(self.b(self.a(x)) + s)


def resnet56():
    net = sequential(conv_bn(16, 3, 1, 1, True))
    for stage, width in enumerate((16, 32, 64)):
        for i in range(9):
            net.add(BasicDlbench(width, 2 if (i == 0 and stage > 0) else 1))
    net.add(nn.GlobalAvgPool2D(), nn.Flatten(), nn.Dense(10))
    return net


class LanguageModel(nn.HybridBlock):
    """rnn.cpp: embedding 256, 2 LSTM layers of 256 (batch-major input, as Gluon's NTC layout),
    per-word fc to the 10000-word vocabulary; logits as [N*T, 10000]."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10000, 256)
        self.lstm = rnn.LSTM(256, num_layers=2, layout="NTC", input_size=256)
        self.decoder = nn.Dense(10000, flatten=False, in_units=256)

    def hybrid_forward(self, F, ids):
        return self.decoder(self.lstm(self.embedding(ids))).reshape((-1, 10000))


class MeanSquared(gluon.loss.Loss):
    """dlhost's MSE: the mean of the squared differences (Gluon's L2Loss halves it), per sample."""

    def __init__(self):
        super().__init__(None, 0)

    def hybrid_forward(self, F, pred, label):
        return F.mean(F.square(pred - label), axis=self._batch_axis, exclude=True)


def make(name, batch):
    """(network, input, target, loss, samples per loss) with random, resident data."""
    mx.random.seed(42)
    ce = gluon.loss.SoftmaxCrossEntropyLoss()

    def labels(shape, classes):
        return mx.nd.random.randint(0, classes, shape).astype("float32")

    if name in ("fcn5", "fcn8"):
        net = fc_classifier([2048] * (3 if name == "fcn5" else 6), 26752)
        return net, mx.nd.random.normal(shape=(batch, 26752)), labels((batch,), 26752), ce, batch
    if name == "fcnr":
        return (fc_classifier([2048, 4096, 1024], 10), mx.nd.random.normal(shape=(batch, 784)),
                labels((batch,), 10), ce, batch)
    if name == "autoencoder":
        x = mx.nd.random.uniform(shape=(batch, 784))
        return autoencoder(), x, x, MeanSquared(), batch
    if name.startswith("lstm"):
        steps = 64 if name == "lstm64" else 32
        return (LanguageModel(), labels((batch, steps), 10000), labels((batch * steps,), 10000),
                ce, batch * steps)
    builders = {"alexnet": (alexnet, 3, 224, 1000), "resnet50": (resnet50, 3, 224, 1000),
                "alexnet_r": (alexnet_r, 3, 32, 10), "resnet56": (resnet56, 3, 32, 10),
                "lenet": (lenet, 1, 28, 10)}
    build, c, h, classes = builders[name]
    return (build(), mx.nd.random.normal(shape=(batch, c, h, h)), labels((batch,), classes), ce,
            batch)


def train(name, batch, seq, warmup, iterations):
    """Times `iterations` steps after `warmup`; (ms per step, losses, parameter count)."""
    if name in SHAPES:
        sys.exit(f"mxnet_peer.py: {name}: the Transformers have no MXNet peer")
    net, x, target, loss_fn, samples = make(name, batch)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn.hybridize(static_alloc=True, static_shape=True)
    lr, momentum, wd, clip = OPTIMIZERS[name]
    params = net.collect_params()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": lr, "momentum": momentum, "wd": wd})
    times, losses = [], []
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(x), target)
        loss.backward()
        if clip:
            trainer.allreduce_grads()
            grads = [p.grad() for p in params.values() if p.grad_req != "null"]
            # the global norm over the mean loss's gradients, as dlhost and PyTorch clip them
            gluon.utils.clip_global_norm(grads, clip * samples)
            trainer.update(samples)
        else:
            trainer.step(samples)
        mx.nd.waitall()  # the engine is asynchronous: the step ends when its work has
        t1 = time.perf_counter()
        losses.append(float(loss.mean().asscalar()))  # outside the timer, as dlhost reads it
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    # trainable arrays only (BatchNorm's running statistics are not parameters), as the peers count
    count = sum(p.data().size for p in params.values() if p.grad_req != "null")
    return times, losses, int(count)


def set_threads(threads):
    if str(threads) != os.environ.get("OMP_NUM_THREADS"):
        sys.exit(f"mxnet_peer.py: OMP_NUM_THREADS {os.environ.get('OMP_NUM_THREADS')} is not "
                 f"--threads {threads}")


if __name__ == "__main__":
    peer_main.main("mxnet " + mx.__version__, set_threads, train,
                   lambda: {"omp_num_threads": int(os.environ["OMP_NUM_THREADS"])})
