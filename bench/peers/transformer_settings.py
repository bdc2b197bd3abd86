"""transformer_settings.py: the shapes of networks_transformer's four networks (BERT-base,
GPT-2 small and their tiny variants) for the PyTorch and TensorFlow peers, the case settings they
take from `dlhost networks --json` (AdamW's hyper-parameters, the sequence, the parameter count),
and the check that a peer's model has exactly dlhost's parameter count.

The shapes repeat plugins/networks_transformer/plugin.cpp's table (a network plugin's layers are
not exported); `check_params` catches any drift, on every peer run and in ctest
(tests/repo/bench_peers_check.sh).
"""
from collections import namedtuple

from optimizers import NETWORKS, float32

# As plugin.cpp: L layers, C hidden, H heads, F feed-forward, V vocab, P position rows, and
# decoder (GPT-2: pre-LN, causal, tanh GELU, eps 1e-5, tied head without bias) or encoder
# (BERT: post-LN, erf GELU, eps 1e-12, MLM transform and a tied decoder with its own bias).
Shape = namedtuple("Shape", "layers hidden heads ffn vocab positions decoder")
SHAPES = {
    "bert_base": Shape(12, 768, 12, 3072, 30522, 512, False),
    "gpt2": Shape(12, 768, 12, 3072, 50257, 1024, True),
    "bert_tiny": Shape(2, 64, 4, 256, 1000, 64, False),
    "gpt2_tiny": Shape(2, 64, 4, 256, 1000, 64, True),
}
# transformer.cpp's default for the option `dropout` (embeddings, attention probabilities, the
# attention's and the MLP's output projections; none after the GELU).
DROPOUT = 0.1


def adamw(name):
    """(lr, (beta1, beta2), epsilon, weight_decay) of the network's AdamW in dlhost."""
    o = NETWORKS[name]["optimizer"]
    if o.get("kind") != "adamw" or "epsilon" not in o:
        raise SystemExit(f"transformer_settings.py: `dlhost networks --json` gives {name} no AdamW "
                         f"settings with beta1/beta2/epsilon (an older dlhost?): {o}")
    return (float32(o["lr"]), (float32(o["beta1"]), float32(o["beta2"])), float32(o["epsilon"]),
            float32(o["weight_decay"]))


def default_sequence(name):
    """The network's own sequence length: `input_shape` is "128 ids"."""
    return int(NETWORKS[name]["input_shape"].split()[0])


def check_params(tool, name, params):
    """None when `params` equals dlhost's count for `name`, else the error line."""
    want = NETWORKS[name]["params"]
    if params == want:
        return None
    return f"{tool} {name}: {params:,} parameters, dlhost has {want:,}"
