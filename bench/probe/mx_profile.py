#!/usr/bin/env python3
"""mx_profile.py: MXNet's own profiler on both sides of the cpu_mxnet fairness pair (dlhost's
cpu_mxnet and Gluon hybridized in its own Python), op by op: ms per step and calls per step.

MXNET_PROFILER_AUTOSTART=1 makes MXNet 1.9.1 profile from start to exit and write profile.json
(Chrome trace) into the working folder; MXNET_EXEC_BULK_EXEC_TRAIN=0 times each operator alone
(bulked segments would hide them). Both sides run as bench/fairness.py runs them (the peer's
environment from `dlhost case-env`), each in its own temporary folder. All steps (warm-up
included) are profiled; the sums are divided by warm-up + iterations. Check the calls column
against the network first: on FCN-5 (2026-12-06) both traces came out short of operators (3 of
4 FullyConnected a step, no update operators), so no figure was taken from it there.

    python3 bench/probe/mx_profile.py --build build --venvs /work/wt/h40-truth/build fcn5 64 \
        --threads 1
"""
import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fairness  # noqa: E402


def per_op(path):
    """{op: [total µs, calls]} from a profile.json (complete 'X' events or 'B'/'E' pairs)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = collections.defaultdict(lambda: [0.0, 0])
    open_ = {}
    for e in events:
        if e.get("cat") != "operator":
            continue
        if e.get("ph") == "X":
            ops[e["name"]][0] += e.get("dur", 0)
            ops[e["name"]][1] += 1
        elif e.get("ph") == "B":
            open_[(e["name"], e.get("tid"))] = e["ts"]
        elif e.get("ph") == "E":
            t0 = open_.pop((e["name"], e.get("tid")), None)
            if t0 is not None:
                ops[e["name"]][0] += e["ts"] - t0
                ops[e["name"]][1] += 1
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(fairness.ROOT, "build"))
    ap.add_argument("--venvs", default=None)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    steps = a.warmup + a.iterations
    result = {}
    for side in ("dlhost", "peer"):
        work = tempfile.mkdtemp(prefix=f"mx_profile_{side}_")
        ns = argparse.Namespace(
            build=os.path.abspath(a.build), venvs=os.path.abspath(a.venvs or a.build),
            output=work, pairs=["cpu_mxnet"], networks=[(a.network, a.batch)],
            threads=[a.threads], warmup=a.warmup, iterations=a.iterations, allocator="auto",
            wait_policy="passive", timeout=1800)
        f = fairness.Fairness(ns)
        f.write_suite()
        saved = dict(os.environ)
        os.environ.update(MXNET_PROFILER_AUTOSTART="1", MXNET_EXEC_BULK_EXEC_TRAIN="0")
        cwd = os.getcwd()
        os.chdir(work)
        try:
            if side == "dlhost":
                run = f.run_dlhost("cpu_mxnet", a.network, a.batch, a.threads)
            else:
                # run_peer runs in bench/peers; the trace lands there: move it
                run = f.run_peer("cpu_mxnet", a.network, a.batch, a.threads)
                src = os.path.join(fairness.PEERS, "profile.json")
                if os.path.exists(src):
                    os.replace(src, os.path.join(work, "profile.json"))
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
        if "error" in run:
            sys.exit(f"mx_profile: {side}: {run['error']}")
        trace = os.path.join(work, "profile.json")
        if not os.path.exists(trace):
            sys.exit(f"mx_profile: {side}: no profile.json in {work}")
        result[side] = (per_op(trace), run["step_ms_median"], os.getloadavg()[0])
    print(f"# MXNet's profiler (MXNET_PROFILER_AUTOSTART=1, MXNET_EXEC_BULK_EXEC_TRAIN=0), "
          f"{a.network} b{a.batch}, {a.threads} thread(s), {a.warmup} warm-up + {a.iterations} "
          f"steps, ms per step over all {steps}; wall step median under the profiler: dlhost "
          f"{result['dlhost'][1]:.1f} ms, Gluon {result['peer'][1]:.1f} ms; load after each "
          f"{result['dlhost'][2]:.2f} / {result['peer'][2]:.2f}")
    names = set(result["dlhost"][0]) | set(result["peer"][0])
    rows = sorted(names, key=lambda n: -max(result["dlhost"][0].get(n, [0, 0])[0],
                                            result["peer"][0].get(n, [0, 0])[0]))
    print(f"{'op (ms per step)':40s} {'dlhost':>9s} {'n':>5s} {'gluon':>9s} {'n':>5s}")
    tot = {"dlhost": 0.0, "peer": 0.0}
    for n in rows[:a.top]:
        d = result["dlhost"][0].get(n, [0.0, 0])
        g = result["peer"][0].get(n, [0.0, 0])
        print(f"{n:40s} {d[0] / 1e3 / steps:9.1f} {d[1] / steps:5.0f} "
              f"{g[0] / 1e3 / steps:9.1f} {g[1] / steps:5.0f}")
    for side in tot:
        tot[side] = sum(v[0] for v in result[side][0].values()) / 1e3 / steps
    print(f"{'total (all ops)':40s} {tot['dlhost']:9.1f} {'':5s} {tot['peer']:9.1f}")


if __name__ == "__main__":
    main()
