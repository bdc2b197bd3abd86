"""mx_global_pool.py: ResNet-56's training step in MXNet 1.9.1 Gluon two ways, alternating: with
Gluon's `GlobalAvgPool2D` (a Pooling with global_pool, what mxnet_peer.py and the model zoo's
ResNets run) and with the global average pool as `mean` over H and W (what dlhost's cpu_mxnet
lowers the ABI's global average pool to: plugins/cpu_mxnet/lower.cpp). Everything else is
mxnet_peer.py's network, SGD and hybridized step. The figure is CPU time per step
(getrusage of the process, every thread: MXNet's engine worker and OpenMP's included), which a
loaded machine disturbs far less than wall-clock time: the difference of two runs of the same
model (W warm-up + 1 step and W warm-up + 1 + K steps) so that building, the first steps and
the timer cancel. This is the figure behind cpu_mxnet's declared departure (issue 40, rule 2;
docs/frameworks.md).

    build/bench-venv-mxnet/bin/python bench/probe/mx_global_pool.py --batch 32 --steps 3 --rounds 2
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "peers"))
sys.argv += [] if "--threads" in " ".join(sys.argv) else ["--threads", "1"]
import mxnet as mx  # noqa: E402  (mxnet_peer sets OMP_NUM_THREADS from --threads first)
import mxnet_peer  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import nn  # noqa: E402


class MeanPool(nn.HybridBlock):
    """cpu_mxnet's global average pool: mean over H and W, [N, C, 1, 1] like the Pooling."""

    def hybrid_forward(self, F, x):
        return F.mean(x, axis=(2, 3), keepdims=True)


def resnet56(pool):
    net = mxnet_peer.resnet56()
    if pool == "mean":  # the last three blocks are the pool, Flatten and Dense
        blocks = list(net._children.values())
        swapped = nn.HybridSequential()
        for b in blocks[:-3]:
            swapped.add(b)
        swapped.add(MeanPool(), blocks[-2], blocks[-1])
        return swapped
    return net


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(pool, batch, steps):
    """CPU and wall seconds of `steps` training steps of one freshly built model."""
    mx.random.seed(42)
    net = resnet56(pool)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    loss_fn.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.normal(shape=(batch, 3, 32, 32))
    y = mx.nd.random.randint(0, 10, (batch,)).astype("float32")
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": 0.01, "momentum": 0.9})
    mx.nd.waitall()
    c0, w0 = cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)
        mx.nd.waitall()
    return cpu_seconds() - c0, time.perf_counter() - w0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="K: the timed steps of the long run")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    per = {"pooling": [], "mean": []}
    for rnd in range(a.rounds):
        for pool in (("pooling", "mean") if rnd % 2 == 0 else ("mean", "pooling")):
            short = run(pool, a.batch, a.warmup + 1)
            long = run(pool, a.batch, a.warmup + 1 + a.steps)
            cpu_ms = (long[0] - short[0]) * 1e3 / a.steps
            wall_ms = (long[1] - short[1]) * 1e3 / a.steps
            per[pool].append({"cpu_ms": cpu_ms, "wall_ms": wall_ms, "load": os.getloadavg()[0]})
            print(f"round {rnd + 1} {pool:8s} {cpu_ms:9.1f} CPU ms a step, {wall_ms:9.1f} wall ms "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    med = {p: statistics.median(r["cpu_ms"] for r in v) for p, v in per.items()}
    print(f"resnet56 b{a.batch} t{a.threads}: GlobalAvgPool2D {med['pooling']:.1f}, mean "
          f"{med['mean']:.1f} CPU ms a step (median of {a.rounds}); mean / GlobalAvgPool2D "
          f"{med['mean'] / med['pooling']:.2f}")
    print(json.dumps({"network": "resnet56", "batch": a.batch, "threads": a.threads,
                      "mxnet": mx.__version__, "steps": a.steps, "rounds": per,
                      "median_cpu_ms": med}))


if __name__ == "__main__":
    main()
