#!/usr/bin/env python3
"""mx_gluon_phases.py: mxnet_peer.py's Gluon training step (hybridized, static_alloc +
static_shape; the fairness peer of cpu_mxnet) split into the phases dlhost's record times
(timing.forward / backward / update, each ended by mx.nd.waitall()), in wall and in process CPU
time (all threads), to find which phase of a rule-2 row (issue 40) Gluon spends more in than
dlhost's cpu_mxnet. Variants, one at a time:

  gluon      mxnet_peer.py's step: Trainer.step (MXNet 1.9.1 aggregates the SGD update into
             multi_sgd_mom_update, or multi_sgd_update without momentum, over
             MXNET_OPTIMIZER_AGGREGATION_SIZE = 4 arrays a call)
  gluon_agg1 `gluon` under MXNET_OPTIMIZER_AGGREGATION_SIZE=1 (MXNet's switch: Trainer.step
             then calls the multi operator with one array a call; SGD._update_impl never
             falls back to the per-array operators for dense arrays)
  per_array  the update as cpu_mxnet runs it (optimizer.cpp): one sgd_mom_update per array, or
             sgd_update without momentum (same rule, same rescale_grad = 1 / batch),
             everything else as `gluon`
  activation ResNet-50 only: `gluon` with the ReLU after each bottleneck's add as the model zoo's
             BottleneckV1 writes it, F.Activation(act_type='relu') (oneDNN's eltwise, what
             cpu_mxnet lowers), not mxnet_peer.py's F.relu (MXNet's own `relu` operator)

Each variant in its own process, under the environment `dlhost case-env` gives cpu_mxnet
(the fairness runs'); alternating, the first rotating with the round; medians.

    python3 bench/probe/mx_gluon_phases.py --build build --venvs /work/wt/h40-truth/build \
        fcn5 64 --threads 1 --rounds 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("gluon", "gluon_agg1", "per_array", "activation")
PHASES = ("forward", "backward", "update")


def child(a):
    sys.path.insert(0, os.path.join(HERE, "..", "peers"))
    import mxnet_peer
    mx, gluon, autograd = mxnet_peer.mx, mxnet_peer.gluon, mxnet_peer.autograd
    from optimizers import OPTIMIZERS
    if a.variant == "activation":
        def model_zoo_add(self, F, x):  # gluon/model_zoo/vision/resnet.py, BottleneckV1
            s = self.proj(x) if self.proj is not None else x
            return F.Activation(self.body(x) + s, act_type="relu")
        mxnet_peer.Bottleneck.hybrid_forward = model_zoo_add
    net, x, target, loss_fn, samples = mxnet_peer.make(a.network, a.batch)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn.hybridize(static_alloc=True, static_shape=True)
    lr, momentum, wd, clip = OPTIMIZERS[a.network]
    if clip:
        sys.exit("mx_gluon_phases.py: the clipped networks are not split here")
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    trainer = gluon.Trainer(net.collect_params(), "sgd",
                            {"learning_rate": lr, "momentum": momentum, "wd": wd})
    moms = None
    wall = {p: [] for p in PHASES}
    cpu = {p: [] for p in PHASES}
    for i in range(a.warmup + a.iterations):
        marks = [(time.perf_counter(), time.process_time())]
        with autograd.record():
            loss = loss_fn(net(x), target)
        mx.nd.waitall()
        marks.append((time.perf_counter(), time.process_time()))
        loss.backward()
        mx.nd.waitall()
        marks.append((time.perf_counter(), time.process_time()))
        if a.variant in ("gluon", "gluon_agg1", "activation"):
            trainer.step(samples)
        else:
            if moms is None:
                moms = [mx.nd.zeros(p.shape) if momentum else None for p in params]
            for p, m in zip(params, moms):
                if m is None:
                    mx.nd.sgd_update(p.data(), p.grad(), out=p.data(), lr=lr, wd=wd,
                                     rescale_grad=1.0 / samples)
                else:
                    mx.nd.sgd_mom_update(p.data(), p.grad(), m, out=p.data(), lr=lr,
                                         momentum=momentum, wd=wd, rescale_grad=1.0 / samples)
        mx.nd.waitall()
        marks.append((time.perf_counter(), time.process_time()))
        if i >= a.warmup:
            for k, ph in enumerate(PHASES):
                wall[ph].append((marks[k + 1][0] - marks[k][0]) * 1e3)
                cpu[ph].append((marks[k + 1][1] - marks[k][1]) * 1e3)
    print(json.dumps({"variant": a.variant,
                      "wall_ms": {p: statistics.median(v) for p, v in wall.items()},
                      "cpu_ms": {p: statistics.median(v) for p, v in cpu.items()},
                      "loss_last": float(loss.mean().asscalar())}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", default="gluon,per_array")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # the child's
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--venvs", default=None)
    ap.add_argument("--jsonl", default=None)
    a = ap.parse_args()
    if a.variant:
        return child(a)
    sys.path.insert(0, os.path.join(HERE, ".."))
    from bench import case_env
    env, allocator = case_env(os.path.join(a.build, "host", "dlhost"), "cpu_mxnet", a.threads,
                              ["omp_wait_policy=passive"])
    py = os.path.join(a.venvs or a.build, "bench-venv-mxnet", "bin", "python")
    variants = [v for v in a.variants.split(",") if v]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        sys.exit(f"mx_gluon_phases.py: unknown variants {bad}; known: {list(VARIANTS)}")
    res = {v: [] for v in variants}
    for rnd in range(a.rounds):
        for v in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
            load = os.getloadavg()[0]
            p = subprocess.run([py, os.path.abspath(__file__), a.network, str(a.batch),
                                "--threads", str(a.threads), "--variant", v, "--warmup",
                                str(a.warmup), "--iterations", str(a.iterations)],
                               env=dict(env, MXNET_OPTIMIZER_AGGREGATION_SIZE="1")
                               if v == "gluon_agg1" else env, capture_output=True, text=True)
            line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")),
                        None)
            if p.returncode or not line:
                sys.exit(f"mx_gluon_phases.py: {v}: exit {p.returncode}: {p.stderr[-800:]}")
            r = json.loads(line)
            res[v].append(r)
            print(f"round {rnd + 1} {v:10s}: CPU ms " + " ".join(
                f"{ph} {r['cpu_ms'][ph]:.1f}" for ph in PHASES) + "; wall ms " + " ".join(
                f"{ph} {r['wall_ms'][ph]:.1f}" for ph in PHASES) +
                f"; loss {r['loss_last']:.4f} (load {load:.2f}, malloc {allocator['name']})",
                flush=True)
    out = {"network": a.network, "batch": a.batch, "threads": a.threads,
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cpu_ms": {v: {ph: statistics.median(x["cpu_ms"][ph] for x in r) for ph in PHASES}
                      for v, r in res.items()},
           "wall_ms": {v: {ph: statistics.median(x["wall_ms"][ph] for x in r) for ph in PHASES}
                       for v, r in res.items()},
           "load_end": round(os.getloadavg()[0], 2)}
    print(json.dumps(out))
    if a.jsonl:
        with open(a.jsonl, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
