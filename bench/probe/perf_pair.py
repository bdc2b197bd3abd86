#!/usr/bin/env python3
"""perf_pair.py: where one fairness pair's training step spends its CPU time, function by function,
on both sides (a dlhost framework backend and the same framework in its own Python), to find a
rule-2 row's cause (issue 40) when the two sides run the same library.

Each side runs as bench/fairness.py runs it (the same suite, `dlhost run --set` case keys, the
peer's environment from `dlhost case-env`) twice, with K1 and K2 timed steps after the warm-up,
under `perf record -a -e cpu-clock` (a software clock: this virtual machine has no hardware
counters); the samples of the K1 run are taken from the K2 run's, function by function (start-up,
imports and graph building cancel), and divided by K2 - K1: CPU ms a step per (library, function).
The two sides alternate, the first rotating with the round; medians over the rounds. The idle
task and perf itself are left out; the machine must be otherwise quiet, since a system-wide
record counts every process.

Also the CPU ms a step per library (dso), and the sum: the table a rule-2 row's note cites.

    python3 bench/probe/perf_pair.py --build /work/main/build --venvs /work/wt/h40-truth/build \
        cpu_tensorflow fcn5 64 --threads 1 --k1 2 --k2 8 --rounds 3
"""
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fairness  # noqa: E402

FREQ = 999  # samples a second
IGNORED_COMMS = ("swapper", "perf")


def samples(data):
    """{(dso, symbol): samples} of a perf.data file, the idle task and perf left out."""
    p = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort",
                        "comm,dso,sym", "-F", "sample,comm,dso,sym", "-t", "|"],
                       capture_output=True, text=True, timeout=600)
    out = collections.Counter()
    for line in p.stdout.splitlines():
        if line.startswith("#") or "|" not in line:
            continue
        n, comm, dso, sym = (f.strip() for f in line.split("|", 3))
        if not n.isdigit() or comm.startswith(IGNORED_COMMS):
            continue
        sym = sym.removeprefix("[.] ").removeprefix("[k] ")
        if dso.startswith("[JIT]"):  # oneDNN's generated kernels: named by thread and address
            dso, sym = "[JIT]", "code generated at run time (oneDNN's kernels)"
        out[(os.path.basename(dso), sym)] += int(n)
    return out


def recorded(run, data):
    """Runs run() under a system-wide perf record into data; (run's result, samples)."""
    rec = subprocess.Popen(["perf", "record", "-a", "-e", "cpu-clock", "-F", str(FREQ), "-o",
                            data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf's start
    try:
        result = run()
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=120)
    return result, samples(data)


def main():
    ap = fairness.probe_arguments(__doc__, 2, 8, "/tmp/perf_pair")
    ap.add_argument("--top", type=int, default=30, help="functions listed")
    a = ap.parse_args()
    f, ns = fairness.probe_pair(a)
    per_step = {"dlhost": [], "peer": []}  # a Counter of CPU ms a step per round
    wall = {"dlhost": [], "peer": []}
    data = os.path.join(a.output, "perf.data")
    for rnd in range(a.rounds):
        for side in (["dlhost", "peer"] if rnd % 2 == 0 else ["peer", "dlhost"]):
            run = f.run_dlhost if side == "dlhost" else f.run_peer
            counts = []
            for k in (a.k1, a.k2):
                ns.iterations = k
                result, c = recorded(lambda: run(a.backend, a.network, a.batch, a.threads), data)
                if "error" in result:
                    sys.exit(f"perf_pair: {side}: {result['error']}")
                counts.append(c)
            n = a.k2 - a.k1
            diff = collections.Counter()
            for key in counts[0].keys() | counts[1].keys():
                diff[key] = (counts[1][key] - counts[0][key]) * 1e3 / FREQ / n
            per_step[side].append(diff)
            wall[side].append(result["step_ms_median"])
            print(f"round {rnd + 1} {side:6s}: {sum(diff.values()):8.1f} CPU ms/step sampled, "
                  f"wall median {result['step_ms_median']:8.1f} ms (load "
                  f"{os.getloadavg()[0]:.2f})", flush=True)

    def median(side, key):
        return statistics.median(r[key] for r in per_step[side])

    keys = set().union(*(r.keys() for s in per_step.values() for r in s))
    rows = sorted(keys, key=lambda k: -max(abs(median("dlhost", k)), abs(median("peer", k))))
    libraries = {d for d, _ in keys}
    dsos = collections.defaultdict(lambda: {"dlhost": [], "peer": []})
    for side, rs in per_step.items():
        for r in rs:
            by = collections.Counter()
            for (dso, _), v in r.items():
                by[dso] += v
            for dso in libraries:
                dsos[dso][side].append(by[dso])
    print(f"\nCPU ms a training step, medians over {a.rounds} rounds "
          f"(({a.k2} - {a.k1} steps) at {FREQ} Hz)")
    print(f"{'dlhost':>9s} {'peer':>9s} {'diff':>8s}  library: function")
    for k in rows[:a.top]:
        d, p = median("dlhost", k), median("peer", k)
        print(f"{d:9.1f} {p:9.1f} {d - p:8.1f}  {k[0]}: {k[1][:90]}")
    print(f"\n{'dlhost':>9s} {'peer':>9s} {'diff':>8s}  library")
    by_dso = {dso: (statistics.median(v["dlhost"]), statistics.median(v["peer"]))
              for dso, v in dsos.items()}
    for dso, (d, p) in sorted(by_dso.items(), key=lambda kv: -max(map(abs, kv[1]))):
        if max(abs(d), abs(p)) >= 1.0:
            print(f"{d:9.1f} {p:9.1f} {d - p:8.1f}  {dso}")
    totals = {s: statistics.median(sum(r.values()) for r in rs) for s, rs in per_step.items()}
    print(f"{totals['dlhost']:9.1f} {totals['peer']:9.1f} {totals['dlhost'] - totals['peer']:8.1f}"
          "  all")
    out = {"backend": a.backend, "network": a.network, "batch": a.batch, "threads": a.threads,
           "k1": a.k1, "k2": a.k2, "rounds": a.rounds,
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "cpu_ms_per_step": totals,
           "wall_ms_median": {s: statistics.median(v) for s, v in wall.items()},
           "by_library": {dso: {"dlhost": round(d, 2), "peer": round(p, 2)}
                          for dso, (d, p) in by_dso.items() if max(abs(d), abs(p)) >= 1.0},
           "by_function": [{"library": k[0], "function": k[1],
                            "dlhost": round(median("dlhost", k), 2),
                            "peer": round(median("peer", k), 2)} for k in rows[:a.top]],
           "load_end": round(os.getloadavg()[0], 2)}
    if a.jsonl:
        with open(a.jsonl, "a") as fh:
            fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
