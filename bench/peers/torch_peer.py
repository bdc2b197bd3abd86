"""torch_peer.py: the 12 seed networks in PyTorch, trained on resident synthetic data, one case
per process; prints one JSON line (median step ms and friends, peak RSS).

The definitions follow plugins/networks_paper/*.cpp layer by layer (same shapes, same
activations, same optimizer settings as `dlhost networks` lists them). Differences that do not
change the work of a step: PyTorch's LSTM has two bias vectors per layer where dlhost has one
(4096 more parameters in 6.18M). Runs with PyTorch 1.13 (Debian) and 2.x (PyPI) alike.

    python torch_peer.py NETWORK --batch B --threads T --warmup W --iterations N
"""
import argparse
import json
import resource
import statistics
import sys
import time

import torch
from torch import nn

from optimizers import OPTIMIZERS


def fc_classifier(inputs, hidden, classes):
    layers, width = [], inputs
    for h in hidden:
        layers += [nn.Linear(width, h), nn.Sigmoid()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, classes))


def alexnet():
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(96, 256, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(256, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, 1000))


def alexnet_r():
    return nn.Sequential(
        nn.Conv2d(3, 32, 5, 1, 2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
        nn.Conv2d(32, 32, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(32, 64, 5, 1, 2), nn.ReLU(), nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 10))


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
        nn.Flatten(), nn.Linear(50 * 4 * 4, 500), nn.ReLU(), nn.Linear(500, 10))


def autoencoder():
    layers, width = [], 784
    for w in (1000, 500, 250, 30, 250, 500, 1000, 784):
        layers.append(nn.Linear(width, w))
        if w != 30:
            layers.append(nn.Sigmoid())
        width = w
    return nn.Sequential(*layers)


def conv_bn(cin, cout, k, s, p, relu):
    mods = [nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*(mods + [nn.ReLU()] if relu else mods))


class Bottleneck(nn.Module):
    """ResNet-50's block as cnn.cpp: stride in the first 1x1, projection with BN, ReLU after add."""

    def __init__(self, cin, width, stride, project):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, width, 1, stride, 0, True),
                                  conv_bn(width, width, 3, 1, 1, True),
                                  conv_bn(width, 4 * width, 1, 1, 0, False))
        self.proj = conv_bn(cin, 4 * width, 1, stride, 0, False) if project else None

    def forward(self, x):
        s = self.proj(x) if self.proj is not None else x
        return torch.relu(self.body(x) + s)


def resnet50():
    mods, cin = [conv_bn(3, 64, 7, 2, 3, True), nn.MaxPool2d(3, 2, 1)], 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for i in range(blocks):
            mods.append(Bottleneck(cin, width, 2 if (i == 0 and stage > 0) else 1, i == 0))
            cin = 4 * width
    return nn.Sequential(*mods, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


class BasicDlbench(nn.Module):
    """ResNet-56's DLBench block: conv-bn-relu, conv, add the shortcut, then BN (no ReLU)."""

    def __init__(self, cin, width, stride):
        super().__init__()
        self.a = conv_bn(cin, width, 3, stride, 1, True)
        self.b = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.proj = nn.Conv2d(cin, width, 1, 2, 0, bias=False) if stride == 2 else None
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        s = self.proj(x) if self.proj is not None else x
        return self.bn(self.b(self.a(x)) + s)


def resnet56():
    mods, cin = [conv_bn(3, 16, 3, 1, 1, True)], 16
    for stage, width in enumerate((16, 32, 64)):
        for i in range(9):
            mods.append(BasicDlbench(cin, width, 2 if (i == 0 and stage > 0) else 1))
            cin = width
    return nn.Sequential(*mods, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class LanguageModel(nn.Module):
    """rnn.cpp: embedding 256, 2 LSTM layers of 256, per-word fc to the 10000-word vocabulary."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(10000, 256)
        self.lstm = nn.LSTM(256, 256, num_layers=2, batch_first=True)
        self.decoder = nn.Linear(256, 10000)

    def forward(self, ids):
        y, _ = self.lstm(self.embedding(ids))
        return self.decoder(y).reshape(-1, 10000)


def make(name, batch):
    """(model, input, target, loss) for one network; data random and resident."""
    g = torch.Generator().manual_seed(42)
    ce = nn.CrossEntropyLoss()

    def images(c, h, classes):
        return (torch.randn(batch, c, h, h, generator=g),
                torch.randint(0, classes, (batch,), generator=g), ce)

    if name in ("fcn5", "fcn8"):
        model = fc_classifier(26752, [2048] * (3 if name == "fcn5" else 6), 26752)
        return (model, torch.randn(batch, 26752, generator=g),
                torch.randint(0, 26752, (batch,), generator=g), ce)
    if name == "fcnr":
        return (fc_classifier(784, [2048, 4096, 1024], 10), torch.randn(batch, 784, generator=g),
                torch.randint(0, 10, (batch,), generator=g), ce)
    if name == "autoencoder":
        x = torch.rand(batch, 784, generator=g)
        return autoencoder(), x, x, nn.MSELoss()
    if name.startswith("lstm"):
        steps = 64 if name == "lstm64" else 32
        ids = torch.randint(0, 10000, (batch, steps), generator=g)
        nxt = torch.randint(0, 10000, (batch * steps,), generator=g)
        return LanguageModel(), ids, nxt, ce
    builders = {"alexnet": (alexnet, 3, 224, 1000), "resnet50": (resnet50, 3, 224, 1000),
                "alexnet_r": (alexnet_r, 3, 32, 10), "resnet56": (resnet56, 3, 32, 10),
                "lenet": (lenet, 1, 28, 10)}
    build, c, h, classes = builders[name]
    return (build(),) + images(c, h, classes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("network", choices=sorted(OPTIMIZERS))
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=6)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    model, x, target, loss_fn = make(a.network, a.batch)
    lr, momentum, wd, clip = OPTIMIZERS[a.network]
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=wd)
    model.train()
    params = list(model.parameters())
    times, losses = [], []
    for i in range(a.warmup + a.iterations):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), target)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        t1 = time.perf_counter()
        losses.append(float(loss))  # outside the timer, as dlhost reads its loss
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    print(json.dumps({
        "tool": "pytorch " + torch.__version__, "network": a.network, "batch": a.batch,
        "threads": a.threads, "torch_threads": torch.get_num_threads(),
        "step_ms_median": statistics.median(times), "step_ms": times,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "params": sum(p.numel() for p in params), "loss_first": losses[0], "loss_last": losses[-1],
        "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
