#!/usr/bin/env python3
"""torch_baseline.py — PyTorch eager on the same networks, mini-batches and precision as a dlhost
results file, side by side: for every OK gpu_cudnn record of DLHOST_JSONL it builds the network
with bench/peers/torch_peer.py (networks_paper's layers, shapes and SGD settings; the Transformers
with AdamW, at the record's sequence; bf16 and fp16 records under torch.autocast), trains it on
resident synthetic data on the GPU, times each step with CUDA events (median of --iterations after
--warmup), and prints the ratio dlhost / PyTorch per network and batch. It also measures the
cuBLAS SGEMM peak (8192^3, fp32) and prints what fraction of it FCN-5/8 reach.

Precision: fp32 strict by default (TF32 off in cuBLAS and cuDNN, as gpu_cudnn's default);
--tf32 turns it on for both sides' comparison. cuDNN autotuning (torch.backends.cudnn.benchmark)
is off by default, like gpu_cudnn's `algo: heuristic`; --benchmark turns it on.

Usage: torch_baseline.py DLHOST_JSONL [--out TORCH_JSONL] [--warmup 3] [--iterations 10]
Runs on the lent GPU machine (scripts/gpu-check.sh); needs torch with CUDA. The results file is
read first and line by line: a line cut short (the check's deadline ended `dlhost run` mid-write)
is skipped with a note, never a crash. Exit 77 (skipped, with the reason on the last line) when
there is nothing to compare, no torch, or no CUDA device.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its sibling peers
try:
    import torch
    from torch import nn
except ImportError as missing:  # reported by main() after the results file has been read
    torch = None
    NO_TORCH = str(missing)
if torch is not None:  # a sibling missing (a bundle without it) is a failure, not "no torch"
    from optimizers import OPTIMIZERS  # the peers' shared SGD settings
    from torch_peer import make, optimizer  # the paper's networks and the Transformers
    from transformer_settings import SHAPES


# A record's precision as PyTorch runs it: bf16 and fp16 through autocast (fp16 with a dynamic
# GradScaler, as gpu_cudnn's fp16 scales its loss). Autocast also keeps activations in 16 bits,
# where gpu_cudnn's modes change only the cuBLAS products: the line says so.
AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}


def grad_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def time_network(name, batch, warmup, iterations, seq=None, precision="fp32"):
    """Median step time (CUDA events) of one network on resident data on the GPU."""
    torch.manual_seed(42)
    model, x, target, loss_fn = make(name, batch, seq)
    model, x, target = model.cuda(), x.cuda(), target.cuda()
    params = list(model.parameters())
    opt, clip = optimizer(name, params)  # SGD (paper networks) or AdamW (Transformers)
    dtype = getattr(torch, AUTOCAST[precision]) if precision in AUTOCAST else None
    scaler = grad_scaler() if precision == "fp16" else None
    times, losses = [], []
    for i in range(warmup + iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x), target)
        if scaler is not None:
            scaler.scale(loss).backward()
            if clip:
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(params, clip)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(params, clip)
            opt.step()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
            losses.append(loss.item())
    del model, opt, params
    torch.cuda.empty_cache()
    return statistics.median(times), losses


def record_sequence(params):
    """The tokens per sample a Transformer case set (options networks_transformer.seq), or None
    for the network's own."""
    seq = params.get("options", {}).get("networks_transformer", {}).get("seq")
    return int(seq) if seq is not None else None


def sgemm_tflops(n=8192, reps=10):
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    for _ in range(3):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        a @ b
    end.record()
    end.synchronize()
    return 2.0 * n ** 3 * reps / (start.elapsed_time(end) / 1e3) / 1e12


def read_records(path):
    """The records of a results file; a line that does not parse is skipped with a note."""
    records, cut = [], 0
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        print(f"torch_baseline: cannot read {path}: {e}")
        return records
    for line in lines:
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            cut += 1
    if cut:
        print(f"torch_baseline: skipped {cut} unreadable line(s) of {path} (a case cut short?)")
    return records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dlhost_jsonl")
    ap.add_argument("--out", default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--benchmark", action="store_true")
    args = ap.parse_args()
    records = read_records(args.dlhost_jsonl)
    if not any(r.get("params", {}).get("backend") == "gpu_cudnn" for r in records):
        print(f"torch_baseline: SKIP: no gpu_cudnn record in {args.dlhost_jsonl}: nothing to compare")
        return 77
    if torch is None:
        print(f"torch_baseline: SKIP: no torch here ({NO_TORCH})")
        return 77
    if not torch.cuda.is_available():
        print("torch_baseline: SKIP: no device (torch.cuda.is_available() is False)")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = args.benchmark
    peak = sgemm_tflops()
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}; precision {'tf32' if args.tf32 else 'fp32 strict'}, "
          f"cudnn.benchmark={args.benchmark}; cuBLAS SGEMM 8192^3: {peak:.1f} TFLOP/s")
    print(f"{'case':34} {'dlhost ms':>10} {'torch ms':>10} {'ratio':>6}  note")
    out = open(args.out, "w") if args.out else None
    worst = {}
    for r in records:
        name, batch = r["params"]["network"], r["params"]["batch"]
        precision = r["params"].get("precision", "fp32")
        if r["params"].get("backend") != "gpu_cudnn":
            continue
        if name not in OPTIMIZERS and name not in SHAPES:
            print(f"{r['case_id']:34} {'-':>10}  not compared: no PyTorch peer for {name}")
            continue
        if precision not in ("fp32", "bf16", "fp16"):
            print(f"{r['case_id']:34} {'-':>10}  not compared: precision {precision}")
            continue
        if r["status"] != "OK":
            print(f"{r['case_id']:34} {r['status']:>10}  {r.get('reason', '')[:80]}")
            continue
        ours = r["timing"]["step"]["median"]
        try:
            theirs, losses = time_network(name, batch, args.warmup, args.iterations,
                                          record_sequence(r["params"]), precision)
        except torch.cuda.OutOfMemoryError as e:
            print(f"{r['case_id']:34} {ours:10.2f} {'OOM':>10}  {str(e)[:60]}")
            continue
        ratio = ours / theirs
        if precision == "fp32" and name in OPTIMIZERS:  # the targets are the paper's, in fp32
            worst[name] = max(worst.get(name, 0.0), ratio)
        note = f"torch autocast {precision}" if precision != "fp32" else ""
        if name in ("fcn5", "fcn8") and batch == 4096:
            note = f"{r['timing']['train_gflops_per_second_est'] / 1e3 / peak:.0%} of SGEMM peak"
        print(f"{r['case_id']:34} {ours:10.2f} {theirs:10.2f} {ratio:6.2f}  {note}")
        if out:
            out.write(json.dumps({"case_id": r["case_id"], "network": name, "batch": batch,
                                  "precision": precision,
                                  "dlhost_ms": ours, "torch_ms": theirs, "ratio": ratio,
                                  "torch_losses": losses, "sgemm_tflops": peak}) + "\n")
            out.flush()
    print("worst ratio per network (target: <= 0.9 on alexnet and resnet50, <= 1.1 everywhere):")
    for name, ratio in worst.items():
        target = 0.9 if name in ("alexnet", "resnet50") else 1.1
        print(f"  {name:10} {ratio:5.2f}  {'meets' if ratio <= target else 'MISSES'} {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
