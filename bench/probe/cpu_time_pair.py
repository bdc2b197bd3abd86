#!/usr/bin/env python3
"""cpu_time_pair.py: CPU ms per training step of one fairness pair (a dlhost framework backend and
the same framework in its own Python), at any thread count, by the difference of two runs (warm-up
W + K1 and warm-up W + K2 timed steps: start-up, graph build and compile cancel), the two sides
alternating, which first rotating with the round; medians. CPU time (user + system of the whole
process tree) is far less disturbed than wall time by other processes on a loaded machine; at 2
threads it is the work of both threads (OMP_WAIT_POLICY=passive on both sides, so little spin).
Each run's wall-clock step median (the record's / the peer's) is printed beside it.

Both sides run exactly as bench/fairness.py runs them (the same suite, `dlhost run --set` case
keys, the peer's environment from `dlhost case-env`); a side given twice by --extra-peer-env runs
the peer with extra variables (e.g. to take a library's other path).

    python3 bench/probe/cpu_time_pair.py --build build --venvs /work/wt/h40-truth/build \
        cpu_mxnet resnet50 16 --threads 1 --k2 4 --rounds 3
"""
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fairness  # noqa: E402


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_minflt, r.ru_nvcsw + r.ru_nivcsw


def main():
    a = fairness.probe_arguments(__doc__, 1, 4, "/tmp/cpu_time_pair").parse_args()
    f, ns = fairness.probe_pair(a)
    cpu = {"dlhost": [], "peer": []}
    wall = {"dlhost": [], "peer": []}
    faults = {"dlhost": [], "peer": []}
    switches = {"dlhost": [], "peer": []}

    def once(side, k):
        ns.iterations = k
        c0 = child_cpu()
        run = (f.run_dlhost if side == "dlhost" else f.run_peer)(
            a.backend, a.network, a.batch, a.threads)
        c1 = child_cpu()
        if "error" in run:
            sys.exit(f"cpu_time_pair: {side}: {run['error']}")
        return [y - x for x, y in zip(c0, c1)], run

    for rnd in range(a.rounds):
        for side in (["dlhost", "peer"] if rnd % 2 == 0 else ["peer", "dlhost"]):
            load = os.getloadavg()[0]
            (c_a, f_a, s_a), _ = once(side, a.k1)
            (c_b, f_b, s_b), run = once(side, a.k2)
            n = a.k2 - a.k1
            cpu[side].append((c_b - c_a) / n * 1e3)
            faults[side].append((f_b - f_a) / n)
            switches[side].append((s_b - s_a) / n)
            wall[side].append(run["step_ms_median"])
            print(f"round {rnd + 1} {side:6s}: {cpu[side][-1]:8.1f} CPU ms/step, wall median "
                  f"{wall[side][-1]:8.1f} ms, {faults[side][-1]:.0f} minor faults/step, "
                  f"{switches[side][-1]:.0f} ctx switches/step (load {load:.2f}, malloc "
                  f"{run.get('allocator_ran')}, OPENBLAS_CORETYPE {run.get('openblas_coretype')})",
                  flush=True)
    med = {s: statistics.median(v) for s, v in cpu.items()}
    out = {"backend": a.backend, "network": a.network, "batch": a.batch, "threads": a.threads,
           "k1": a.k1, "k2": a.k2, "rounds": a.rounds, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                          time.gmtime()),
           "cpu_ms_per_step": med, "cpu_ratio": round(med["dlhost"] / med["peer"], 3),
           "cpu_ratio_per_round": [round(d / p, 3) for d, p in zip(cpu["dlhost"], cpu["peer"])],
           "wall_ms_median": {s: statistics.median(v) for s, v in wall.items()},
           "runs_cpu_ms": cpu, "runs_wall_ms": wall,
           "minor_faults_per_step": {s: statistics.median(v) for s, v in faults.items()},
           "ctx_switches_per_step": {s: statistics.median(v) for s, v in switches.items()},
           "load_end": round(os.getloadavg()[0], 2)}
    print(json.dumps(out))
    if a.jsonl:
        with open(a.jsonl, "a") as fh:
            fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
