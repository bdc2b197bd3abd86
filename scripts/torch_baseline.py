#!/usr/bin/env python3
"""torch_baseline.py — PyTorch eager on the same networks, mini-batches and precision as a dlhost
results file, side by side: for every OK gpu_cudnn record of DLHOST_JSONL it builds the network
as networks_paper defines it (docs/networks.md: same layers, shapes, SGD settings), trains it on
resident synthetic data, times each step with CUDA events (median of --iterations after
--warmup), and prints the ratio dlhost / PyTorch per network and batch. It also measures the
cuBLAS SGEMM peak (8192^3, fp32) and prints what fraction of it FCN-5/8 reach.

Precision: fp32 strict by default (TF32 off in cuBLAS and cuDNN, as gpu_cudnn's default);
--tf32 turns it on for both sides' comparison. cuDNN autotuning (torch.backends.cudnn.benchmark)
is off by default, like gpu_cudnn's `algo: heuristic`; --benchmark turns it on.

Usage: torch_baseline.py DLHOST_JSONL [--out TORCH_JSONL] [--warmup 3] [--iterations 10]
Runs on the lent GPU machine (scripts/gpu-check.sh); needs torch with CUDA.
"""
import argparse
import json
import statistics
import sys

import torch
from torch import nn

# --- the networks of networks_paper --------------------------------------------------------------


def fc_classifier(inputs, hidden, classes):
    layers, prev = [], inputs
    for h in hidden:
        layers += [nn.Linear(prev, h), nn.Sigmoid()]
        prev = h
    return nn.Sequential(*layers, nn.Linear(prev, classes))


def alexnet():
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, 1, 1), nn.ReLU(), nn.Conv2d(384, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 1000))


def alexnet_r():
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, 1, 2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
        nn.Conv2d(32, 32, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(32, 64, 5, 1, 2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True), nn.Flatten(),
        nn.Linear(64 * 4 * 4, 10))


def conv_bn(cin, cout, k, stride, pad, relu):
    layers = [nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU()) if relu else nn.Sequential(*layers)


class Bottleneck(nn.Module):
    """ResNet-50's block as networks_paper builds it: the stride on the first 1x1 (Caffe's)."""

    def __init__(self, cin, width, stride, project):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, width, 1, stride, 0, True),
                                  conv_bn(width, width, 3, 1, 1, True),
                                  conv_bn(width, 4 * width, 1, 1, 0, False))
        self.proj = conv_bn(cin, 4 * width, 1, stride, 0, False) if project else None

    def forward(self, x):
        return torch.relu(self.body(x) + (self.proj(x) if self.proj is not None else x))


def resnet50():
    layers, cin = [conv_bn(3, 64, 7, 2, 3, True), nn.MaxPool2d(3, 2, 1)], 64
    for stage, (blocks, width) in enumerate(zip([3, 4, 6, 3], [64, 128, 256, 512])):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if i == 0 and stage > 0 else 1, i == 0))
            cin = 4 * width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


class BasicBlockDlbench(nn.Module):
    """ResNet-56's block, DLBench's Caffe variant: conv-BN-ReLU-conv, add, then BN."""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.a = conv_bn(cin, width, 3, stride, 1, True)
        self.b = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.proj = nn.Conv2d(cin, width, 1, 2, 0, bias=False) if stride == 2 else None
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        return self.bn(self.b(self.a(x)) + (self.proj(x) if self.proj is not None else x))


def resnet56():
    layers, cin = [conv_bn(3, 16, 3, 1, 1, True)], 16
    for stage, width in enumerate([16, 32, 64]):
        for i in range(9):
            layers.append(BasicBlockDlbench(cin, width, 2 if i == 0 and stage > 0 else 1))
            cin = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10000, 256)
        self.lstm = nn.LSTM(256, 256, 2, batch_first=True)
        self.decoder = nn.Linear(256, 10000)

    def forward(self, ids):
        return self.decoder(self.lstm(self.embedding(ids))[0]).reshape(-1, 10000)


# name: (model, per-sample input shape or ("ids", steps), classes, lr, momentum, wd, clip)
NETWORKS = {
    "fcn5": (lambda: fc_classifier(26752, [2048] * 3, 26752), (26752,), 26752, 0.01, 0, 0, 0),
    "fcn8": (lambda: fc_classifier(26752, [2048] * 6, 26752), (26752,), 26752, 0.01, 0, 0, 0),
    "fcnr": (lambda: fc_classifier(784, [2048, 4096, 1024], 10), (784,), 10, 0.05, 0.9, 0, 0),
    "alexnet": (alexnet, (3, 224, 224), 1000, 0.01, 0, 0, 0),
    "resnet50": (resnet50, (3, 224, 224), 1000, 0.01, 0, 0, 0),
    "alexnet_r": (alexnet_r, (3, 32, 32), 10, 0.01, 0.9, 0, 0),
    "resnet56": (resnet56, (3, 32, 32), 10, 0.01, 0.9, 1e-4, 0),
    "lstm32": (LanguageModel, ("ids", 32), 10000, 1.0, 0, 0, 5),
    "lstm64": (LanguageModel, ("ids", 64), 10000, 1.0, 0, 0, 5),
    "lstm_ptb": (LanguageModel, ("ids", 32), 10000, 1.0, 0, 0, 5),
}


def time_network(name, batch, warmup, iterations):
    make, shape, classes, lr, momentum, wd, clip = NETWORKS[name]
    torch.manual_seed(42)
    model = make().cuda()
    if shape[0] == "ids":
        x = torch.randint(0, 10000, (batch, shape[1]), device="cuda")
        y = torch.randint(0, classes, (batch * shape[1],), device="cuda")
    else:
        x = torch.randn((batch,) + shape, device="cuda")
        y = torch.randint(0, classes, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=wd)
    loss_fn = nn.CrossEntropyLoss()
    times, losses = [], []
    for i in range(warmup + iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(end))
            losses.append(loss.item())
    del model, opt
    torch.cuda.empty_cache()
    return statistics.median(times), losses


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dlhost_jsonl")
    ap.add_argument("--out", default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--benchmark", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = args.benchmark
    records = [json.loads(line) for line in open(args.dlhost_jsonl)]
    peak = sgemm_tflops()
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}; precision {'tf32' if args.tf32 else 'fp32 strict'}, "
          f"cudnn.benchmark={args.benchmark}; cuBLAS SGEMM 8192^3: {peak:.1f} TFLOP/s")
    print(f"{'case':34} {'dlhost ms':>10} {'torch ms':>10} {'ratio':>6}  note")
    out = open(args.out, "w") if args.out else None
    worst = {}
    for r in records:
        name, batch = r["params"]["network"], r["params"]["batch"]
        if r["params"].get("backend") != "gpu_cudnn" or name not in NETWORKS:
            continue
        if r["status"] != "OK":
            print(f"{r['case_id']:34} {r['status']:>10}  {r.get('reason', '')[:80]}")
            continue
        ours = r["timing"]["step"]["median"]
        try:
            theirs, losses = time_network(name, batch, args.warmup, args.iterations)
        except torch.cuda.OutOfMemoryError as e:
            print(f"{r['case_id']:34} {ours:10.2f} {'OOM':>10}  {str(e)[:60]}")
            continue
        ratio = ours / theirs
        worst[name] = max(worst.get(name, 0.0), ratio)
        note = ""
        if name in ("fcn5", "fcn8") and batch == 4096:
            note = f"{r['timing']['train_gflops_per_second_est'] / 1e3 / peak:.0%} of SGEMM peak"
        print(f"{r['case_id']:34} {ours:10.2f} {theirs:10.2f} {ratio:6.2f}  {note}")
        if out:
            out.write(json.dumps({"case_id": r["case_id"], "network": name, "batch": batch,
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
