"""torch_peer.py: the 12 seed networks and the Transformers in PyTorch, trained on resident
synthetic data, one case per process; prints one JSON line (median step ms and friends, peak RSS).

The definitions follow plugins/networks_paper/*.cpp layer by layer (same shapes, same
activations, same optimizer settings as `dlhost networks` lists them). Differences that do not
change the work of a step: PyTorch's LSTM has two bias vectors per layer where dlhost has one
(4096 more parameters in 6.18M). Runs with PyTorch 1.13 (Debian) and 2.x (PyPI) alike.
The Transformers (plugins/networks_transformer) are PyTorch's own nn.TransformerEncoder for BERT
and a minimal GPT-2 in plain modules, trained with torch.optim.AdamW at dlhost's settings; their
parameter counts must equal dlhost's (checked on every run).

    python torch_peer.py NETWORK --batch B --threads T --warmup W --iterations N [--seq S]
    python torch_peer.py --check gpt2_tiny,bert_tiny,gpt2,bert_base   # parameter counts, loss
"""
import time

import torch
from torch import nn

import peer_main
from optimizers import OPTIMIZERS
from transformer_settings import DROPOUT, SHAPES, adamw, default_sequence


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


class Bert(nn.Module):
    """BERT-base as transformer.cpp: word and position embeddings, LayerNorm, dropout, then
    PyTorch's own post-LN nn.TransformerEncoder (erf GELU, eps 1e-12), and the masked-LM head:
    dense, GELU, LayerNorm, a decoder tied to the word embeddings with its own bias."""

    def __init__(self, s, dropout):
        super().__init__()
        c = s.hidden
        self.word_embeddings = nn.Embedding(s.vocab, c)
        self.position_embeddings = nn.Embedding(s.positions, c)
        self.embeddings_norm = nn.LayerNorm(c, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(c, s.heads, s.ffn, dropout, activation="gelu",
                                           layer_norm_eps=1e-12, batch_first=True)
        layer.dropout = nn.Identity()  # BERT (and dlhost) drop nothing after the FFN's GELU
        self.encoder = nn.TransformerEncoder(layer, s.layers, enable_nested_tensor=False)
        self.transform = nn.Sequential(nn.Linear(c, c), nn.GELU(), nn.LayerNorm(c, eps=1e-12))
        self.decoder_bias = nn.Parameter(torch.zeros(s.vocab))
        self.vocab = s.vocab

    def forward(self, ids):
        pos = self.position_embeddings.weight[:ids.shape[1]]
        x = self.drop(self.embeddings_norm(self.word_embeddings(ids) + pos))
        h = self.transform(self.encoder(x))
        logits = nn.functional.linear(h, self.word_embeddings.weight, self.decoder_bias)
        return logits.reshape(-1, self.vocab)


class CausalSelfAttention(nn.Module):
    """GPT-2's attention: one q/k/v projection (c_attn), causal softmax with dropout on the
    probabilities, the output projection and its dropout. PyTorch 2's fused
    scaled_dot_product_attention where there is one, the plain products on 1.13."""

    def __init__(self, c, heads, dropout):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.heads, self.p = heads, dropout
        self.attn_drop, self.resid_drop = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x):
        n, t, c = x.shape
        q, k, v = (z.view(n, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.c_attn(x).split(c, dim=2))
        if hasattr(nn.functional, "scaled_dot_product_attention"):
            y = nn.functional.scaled_dot_product_attention(
                q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        else:
            a = (q @ k.transpose(-2, -1)) * (1.0 / (c // self.heads) ** 0.5)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = self.attn_drop(a.masked_fill(mask, float("-inf")).softmax(-1)) @ v
        return self.resid_drop(self.c_proj(y.transpose(1, 2).reshape(n, t, c)))


class Block(nn.Module):
    """GPT-2's pre-LN block: x + attn(ln_1(x)), then x + mlp(ln_2(x)) with tanh GELU."""

    def __init__(self, s, dropout):
        super().__init__()
        c = s.hidden
        self.ln_1, self.ln_2 = nn.LayerNorm(c, eps=1e-5), nn.LayerNorm(c, eps=1e-5)
        self.attn = CausalSelfAttention(c, s.heads, dropout)
        self.mlp = nn.Sequential(nn.Linear(c, s.ffn), nn.GELU(approximate="tanh"),
                                 nn.Linear(s.ffn, c), nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    """GPT-2 small in plain modules: token and position embeddings, dropout, the blocks, a final
    LayerNorm and the output layer tied to the token embeddings (no bias)."""

    def __init__(self, s, dropout):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(s.vocab, s.hidden), nn.Embedding(s.positions, s.hidden)
        self.drop = nn.Dropout(dropout)
        self.h = nn.Sequential(*(Block(s, dropout) for _ in range(s.layers)))
        self.ln_f = nn.LayerNorm(s.hidden, eps=1e-5)
        self.vocab = s.vocab

    def forward(self, ids):
        x = self.drop(self.wte(ids) + self.wpe.weight[:ids.shape[1]])
        logits = nn.functional.linear(self.ln_f(self.h(x)), self.wte.weight)
        return logits.reshape(-1, self.vocab)


def transformer(name, batch, seq, g):
    """(model, ids, targets, loss): GPT-2's next tokens or BERT's original tokens, one a
    position, random and resident like dlhost's synthetic batch."""
    s = SHAPES[name]
    model = (Gpt2 if s.decoder else Bert)(s, DROPOUT)
    for m in model.modules():  # GPT-2's and BERT's initialisation: N(0, 0.02)
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
    ids = torch.randint(0, s.vocab, (batch, seq), generator=g)
    return model, ids, torch.randint(0, s.vocab, (batch * seq,), generator=g), nn.CrossEntropyLoss()


def make(name, batch, seq=None):
    """(model, input, target, loss) for one network; data random and resident."""
    g = torch.Generator().manual_seed(42)
    ce = nn.CrossEntropyLoss()
    if name in SHAPES:
        return transformer(name, batch, seq or default_sequence(name), g)

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


def optimizer(name, params):
    """The network's optimizer in dlhost: SGD (paper networks) or AdamW (Transformers)."""
    if name in SHAPES:
        lr, betas, eps, wd = adamw(name)
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd), 0
    lr, momentum, wd, clip = OPTIMIZERS[name]
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd), clip


def train(name, batch, seq, warmup, iterations):
    """Times `iterations` steps after `warmup`; (ms per step, losses, parameter count)."""
    torch.manual_seed(42)
    model, x, target, loss_fn = make(name, batch, seq)
    params = list(model.parameters())
    opt, clip = optimizer(name, params)
    model.train()
    times, losses = [], []
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), target)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        t1 = time.perf_counter()
        losses.append(float(loss.detach()))  # outside the timer, as dlhost reads its loss
        if i >= warmup:
            times.append((t1 - t0) * 1e3)
    return times, losses, sum(p.numel() for p in params)


if __name__ == "__main__":
    peer_main.main("pytorch " + torch.__version__, torch.set_num_threads, train,
                   lambda: {"torch_threads": torch.get_num_threads()})
