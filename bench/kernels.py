#!/usr/bin/env python3
"""kernels.py: the GEMMs of one cpu_onednn training step, each timed bare through oneDNN's
dnnl_sgemm (the library cpu_onednn is built on), OpenBLAS's cblas_sgemm (both by bench_limits
--each) and PyTorch's torch.mm (MKL's sgemm in the PyPI wheel, the fastest peer's kernel), with
the same shapes and transposes, the three alternating, medians over rounds.

Where dlhost's step is no faster than a peer's, this says whether the gap is in the library's
kernel for that shape (issue 29: "show the kernel, its measured rate and the peer's rate for the
same shape"). The shapes are the ones cpu_onednn issues on its GEMM path (plugins/cpu_onednn/
layers.cpp, FcLayer: forward Y = X W^T with W [out, in] row-major, dW = dY^T X, dX = dY W), for
FCN-5, FCN-8 and FCN-R at their paper batches and the language models' decoder (LSTM-32/PTB:
4096 positions, 256 -> 10000), with alpha 1 and beta 0 as the split step runs them (under the
host's fused_step an FC's weight-gradient call has beta 1 and writes the SGD step into W, which
oneDNN runs at another speed: bench/results/2026-12-06-spr-issue29/README.md). Like bench.py, every command runs with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset.

    python3 bench/kernels.py --build build [--threads 1,2] [--rounds 3] [--output DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import FC_STACKS, base_env, thread_env  # noqa: E402

BATCH = {"fcn5": 64, "fcn8": 64, "fcnr": 1024}
# The language models' decoder: batch 128 x 32 steps, hidden 256, vocabulary 10000.
DECODER = (4096, 256, 10000)

TORCH_TIMER = r"""
import json, sys, time, torch
shapes = json.loads(sys.argv[1]); reps = int(sys.argv[2])
torch.set_num_threads(int(sys.argv[3]))
out = []
for m, n, k, tr in shapes:
    a = torch.full((m, k) if tr[0] == "N" else (k, m), 0.5)
    b = torch.full((k, n) if tr[1] == "N" else (n, k), 0.25)
    a = a if tr[0] == "N" else a.t()  # a transposed view: torch.mm passes the transpose on
    b = b if tr[1] == "N" else b.t()
    c = torch.empty(m, n)
    torch.mm(a, b, out=c)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); torch.mm(a, b, out=c); t.append(time.perf_counter() - t0)
    out.append(sorted(t)[len(t) // 2] * 1e3)
print(json.dumps(out))
"""


def step_kernels():
    """(name, m, n, k, trans) of each GEMM cpu_onednn's GEMM path runs in one step."""
    out = []
    for net, widths in FC_STACKS.items():
        b = BATCH[net]
        for i in range(len(widths) - 1):
            k, n = widths[i], widths[i + 1]
            layer = f"{net} fc{i + 1} {k}->{n}"
            out.append((f"{layer} fwd", b, n, k, "NT"))       # Y = X W^T
            out.append((f"{layer} bwd_w", n, k, b, "TN"))     # dW = dY^T X
            if i > 0:
                out.append((f"{layer} bwd_d", b, k, n, "NN"))  # dX = dY W
    rows, hidden, vocab = DECODER
    out.append(("lstm decoder fwd", rows, vocab, hidden, "NT"))
    out.append(("lstm decoder bwd_w", vocab, hidden, rows, "TN"))
    out.append(("lstm decoder bwd_d", rows, hidden, vocab, "NN"))
    return out


def run_limits(exe, kernels, threads, reps):
    shapes = ",".join(f"{m}:{n}:{k}:{tr}" for _, m, n, k, tr in kernels)
    p = subprocess.run([exe, "--threads", str(threads), "--shapes", shapes, "--each", "1",
                        "--reps", str(reps), "--triad-mb", "0"],
                       env=thread_env(base_env(), threads, ""), capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        sys.exit(f"kernels: bench_limits failed: {p.stderr.strip()}")
    rows = [json.loads(x) for x in p.stdout.splitlines() if '"gemm"' in x]
    isa = next((json.loads(x)["onednn_isa"] for x in p.stdout.splitlines() if '"isa"' in x), "?")
    return [(r["onednn_ms"], r["openblas_ms"]) for r in rows], isa


def run_torch(python, kernels, threads, reps):
    shapes = json.dumps([[m, n, k, tr] for _, m, n, k, tr in kernels])
    p = subprocess.run([python, "-c", TORCH_TIMER, shapes, str(reps), str(threads)],
                       env=thread_env(base_env(), threads, ""), capture_output=True, text=True,
                       timeout=1800)
    if p.returncode != 0:
        sys.exit(f"kernels: the PyTorch timer failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3, help="alternating passes; medians over them")
    ap.add_argument("--reps", type=int, default=3, help="calls per kernel and pass (median)")
    ap.add_argument("--output", default=None, help="folder for kernels.json")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench_limits")
    python = os.path.join(a.build, "bench-venv", "bin", "python")
    for path, what in ((exe, "bench_limits (bench/run.sh builds it)"),
                       (python, "the bench venv's python (bench/run.sh makes it)")):
        if not os.path.exists(path):
            sys.exit(f"kernels: {path}: missing: {what}")
    kernels = step_kernels()
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, env=base_env()).stdout.strip()
    print(f"kernels: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset; PyTorch {version} (MKL sgemm); "
          f"{a.rounds} alternating rounds x {a.reps} calls, medians; load {os.getloadavg()[0]:.2f}",
          flush=True)
    result = {"torch": version, "rounds": a.rounds, "threads": {}}
    for t in (int(x) for x in a.threads.split(",")):
        samples = {"onednn": [], "openblas": [], "mkl": []}
        isa = "?"
        for r in range(a.rounds):
            # Alternate which library goes first, so that drift in the load is shared.
            order = ("limits", "torch") if r % 2 == 0 else ("torch", "limits")
            for who in order:
                if who == "limits":
                    pairs, isa = run_limits(exe, kernels, t, a.reps)
                    samples["onednn"].append([p[0] for p in pairs])
                    samples["openblas"].append([p[1] for p in pairs])
                else:
                    samples["mkl"].append(run_torch(python, kernels, t, a.reps))
        med = {lib: [statistics.median(s[i] for s in runs) for i in range(len(kernels))]
               for lib, runs in samples.items()}
        print(f"\nthreads {t}, oneDNN ISA {isa}, load {os.getloadavg()[0]:.2f}; ms (GFLOP/s)")
        print(f"{'kernel':34s} {'M:N:K op':22s} {'oneDNN 2.6':>16s} {'OpenBLAS':>16s} "
              f"{'MKL (torch)':>16s} {'oneDNN/MKL':>10s}")
        rows = []
        for i, (name, m, n, k, tr) in enumerate(kernels):
            gf = 2.0 * m * n * k / 1e6
            cell = lambda ms: f"{ms:7.2f} ({gf / ms:5.0f})"  # noqa: E731
            ratio = med["onednn"][i] / med["mkl"][i]
            print(f"{name:34s} {f'{m}:{n}:{k} {tr}':22s} {cell(med['onednn'][i]):>16s} "
                  f"{cell(med['openblas'][i]):>16s} {cell(med['mkl'][i]):>16s} {ratio:10.2f}")
            rows.append({"kernel": name, "m": m, "n": n, "k": k, "trans": tr,
                         "onednn_ms": med["onednn"][i], "openblas_ms": med["openblas"][i],
                         "mkl_ms": med["mkl"][i]})
        # Per network, the step's GEMMs summed: what the library alone gives or takes.
        for net in list(FC_STACKS) + ["lstm"]:
            mine = [i for i, kern in enumerate(kernels) if kern[0].startswith(net + " ")]
            sums = {lib: sum(med[lib][i] for i in mine) for lib in med}
            print(f"{net + ' step GEMMs':34s} {'':22s} {sums['onednn']:16.2f} "
                  f"{sums['openblas']:16.2f} {sums['mkl']:16.2f} "
                  f"{sums['onednn'] / sums['mkl']:10.2f}")
        result["threads"][str(t)] = {"isa": isa, "rows": rows, "load": os.getloadavg()[0]}
    if a.output:
        os.makedirs(a.output, exist_ok=True)
        with open(os.path.join(a.output, "kernels.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(f"\nkernels: wrote {os.path.join(a.output, 'kernels.json')}")


if __name__ == "__main__":
    main()
