#!/usr/bin/env python3
"""ab.py: A/B of two cpu_onednn builds (and optionally the PyTorch peers) on one network, by CPU
time per training step, for a machine shared with other work.

Under a load average several times the core count, wall-clock step times of one build swing 3x
from run to run, while the CPU time a 1-thread run spends per step stays within a few percent.
Each tool runs twice per round, with warm-up 1 and iterations 1 and 1+K; the difference of the
two processes' CPU times (user + system, from getrusage of the children) divided by K is the CPU
time of one step, free of the compile and start-up costs. Rounds alternate the tools' order;
medians are printed with the ratios. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset for every
tool (they halve OpenBLAS's sgemm on this machine); OMP_WAIT_POLICY=PASSIVE so that waiting
threads do not burn CPU time. Meaningful for --threads 1; with 2 threads CPU time also counts
the threads' waits.

  python3 bench/ab.py lstm32 128 --a /tmp/base/plugins --b build/plugins --peer --rounds 3
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--a", required=True, help="plugin folder of build A (the baseline)")
    ap.add_argument("--b", required=True, help="plugin folder of build B (the change)")
    ap.add_argument("--dlhost", default=os.path.join(ROOT, "build/host/dlhost"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=3,
                    help="extra timed steps of the longer run: K steps must take much longer "
                    "than the compile's CPU time varies (about a second): 3 for the LSTMs, "
                    "FCNs and ResNet-50, 50 or more for LeNet")
    ap.add_argument("--peer", action="store_true", help="also Debian's PyTorch 1.13")
    ap.add_argument("--pt2", default="", help="python of a venv with PyPI's PyTorch, a peer too")
    a = ap.parse_args()

    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[v] = str(a.threads)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    work = tempfile.mkdtemp(prefix="dlhost-ab-")
    suite = os.path.join(work, "ab.yaml")
    with open(suite, "w") as f:
        f.write(f"name: ab\nmatrix:\n  network: [{a.network}]\n  backend: [cpu_onednn]\n"
                f"  threads: [{a.threads}]\n  batch: [{a.batch}]\n")
    case = f"{a.network}.cpu_onednn.b{a.batch}.t{a.threads}"

    def cpu_ms(cmd):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            sys.exit(f"ab.py: {' '.join(cmd)} failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3

    def dlhost(plugins, it):
        return cpu_ms([a.dlhost, "--plugin-path", plugins, "run", suite, "--case", case,
                       "--no-isolate", "-q", "--set", "warmup=1", "--set", f"iterations={it}",
                       "-o", os.path.join(work, "results.jsonl")])

    def torch(python, it):
        return cpu_ms([python, os.path.join(ROOT, "bench/peers/torch_peer.py"), a.network,
                       "--batch", str(a.batch), "--threads", str(a.threads), "--warmup", "1",
                       "--iterations", str(it)])

    tools = {"A": lambda it: dlhost(a.a, it), "B": lambda it: dlhost(a.b, it)}
    if a.peer:
        tools["pt113"] = lambda it: torch("/usr/bin/python3", it)
    if a.pt2:
        tools["pt2"] = lambda it: torch(a.pt2, it)
    isa = "avx512" if "avx512f" in open("/proc/cpuinfo").read() else "avx2"
    print(f"ab.py: {case}, ISA {isa}, OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset, "
          f"load {open('/proc/loadavg').read().split()[:3]}", flush=True)
    names = list(tools)
    per = {n: [] for n in names}
    for r in range(a.rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            ms = (tools[n](1 + a.k) - tools[n](1)) / a.k
            per[n].append(ms)
            print(f"  round {r} {n}: {ms:.1f} CPU ms/step (load "
                  f"{open('/proc/loadavg').read().split()[0]})", flush=True)
    med = {n: statistics.median(v) for n, v in per.items()}
    print(f"{case}: medians of {a.rounds} rounds, CPU ms/step: " +
          ", ".join(f"{n} {v:.1f}" for n, v in med.items()))
    print("  B/A %.3f" % (med["B"] / med["A"]) +
          "".join(f", A/{n} {med['A'] / med[n]:.3f}, B/{n} {med['B'] / med[n]:.3f}"
                  for n in names[2:]))


if __name__ == "__main__":
    main()
