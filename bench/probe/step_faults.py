#!/usr/bin/env python3
"""step_faults.py: when each side of one fairness pair reaches its steady step, step by step: the
memory each step touches for the first time (minor page faults) and each step's time, on both
sides (a dlhost framework backend and the same framework in its own Python).

A step that writes into memory its process never touched pays a page fault per 4 KiB page (the
kernel zeroes it); an allocator that hands a step fresh memory makes that step slower than the
steady ones, and a table that times it (too short a warm-up) reads the transient, not the tool
(issue 40's cpu_mxnet AlexNet-R row, bench/results/2026-12-07-warmup). Each side runs as
bench/fairness.py runs it (the same suite, `dlhost run --set` case keys, the peer's environment
from `dlhost case-env`), with no warm-up and 1, 2, ... K timed steps, one process each; the
minor faults of the run of n steps (getrusage of the waited-for children) less the run of n - 1
give step n's. Start-up differs from run to run by a few hundred faults; a step that touches
new memory shows as thousands. Per run the step times are printed too.

    python3 bench/probe/step_faults.py --build /work/main/build --venvs /work/wt/h40-truth/build \
        cpu_mxnet alexnet_r 1024 --threads 1 --k2 6
"""
import json
import os
import resource
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fairness  # noqa: E402


def main():
    ap = fairness.probe_arguments(__doc__, 1, 6, "build/bench-results/step-faults")
    a = ap.parse_args()
    a.warmup = 0  # every step is counted: the point is where the steady state begins
    f, ns = fairness.probe_pair(a)
    for side in ("dlhost", "peer"):
        before, faults = None, []
        for n in range(1, a.k2 + 1):
            ns.iterations = n
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            run = (f.run_dlhost if side == "dlhost" else f.run_peer)(a.backend, a.network,
                                                                     a.batch, a.threads)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if "error" in run:
                sys.exit(f"step_faults.py: {side}: {run['error']}")
            total = r1.ru_minflt - r0.ru_minflt
            faults.append(total - before if before is not None else None)
            before = total
            line = {"side": side, "steps": n, "minor_faults": total,
                    "step_ms": [round(s, 1) for s in run["step_ms"]]}
            print(json.dumps(line), flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as out:
                    out.write(json.dumps(line) + "\n")
        print(f"{side}: minor faults of step 2..{a.k2} (step n's run less step n-1's): "
              + " ".join(str(x) for x in faults[1:]), flush=True)


if __name__ == "__main__":
    main()
