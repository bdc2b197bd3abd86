"""peer_main.py: the command line both framework peers share (torch_peer.py, tf_peer.py): time one
case and print its JSON line, or check the Transformers' parameter counts and training (--check).
A peer hands in its tool name, its thread setting and its train() function."""
import argparse
import json
import resource
import statistics
import sys

from optimizers import OPTIMIZERS
from transformer_settings import SHAPES, check_params, default_sequence


def check(tool, names, train):
    """Each Transformer's parameter count against dlhost's; the tiny ones also train 6 steps
    on one batch and their loss must fall. 1 on any difference, else 0."""
    errors = 0
    for name in names:
        steps = 6 if name.endswith("_tiny") else 0
        _, losses, params = train(name, 2, 16, 0, steps)
        bad = check_params(tool, name, params)
        if steps and not losses[-1] < losses[0]:
            bad = (bad or "") + f" loss did not fall over {steps} steps: {losses}"
        print(f"{tool}: {name}: {params:,} parameters" + (
            f", loss {losses[0]:.4f} -> {losses[-1]:.4f}" if steps else "")
            + (" FAIL " + bad if bad else " ok"), flush=True)
        errors += 1 if bad else 0
    return 1 if errors else 0


def main(tool, set_threads, train, extra=dict):
    """train(network, batch, seq, warmup, iterations) -> (ms per step, losses, parameters);
    extra() -> fields the peer adds to its JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("network", nargs="?", choices=sorted(OPTIMIZERS) + sorted(SHAPES))
    ap.add_argument("--batch", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--seq", type=int, default=None,
                    help="Transformers: tokens per sample (default: the network's own)")
    ap.add_argument("--check", default=None,
                    help="comma-separated Transformers: parameter counts and a short training")
    a = ap.parse_args()
    set_threads(a.threads)
    if a.check:
        sys.exit(check(tool, a.check.split(","), train))
    if not a.network or not a.batch:
        ap.error("NETWORK and --batch are required")
    times, losses, params = train(a.network, a.batch, a.seq, a.warmup, a.iterations)
    out = {"tool": tool, "network": a.network, "batch": a.batch, "threads": a.threads, **extra(),
           "step_ms_median": statistics.median(times), "step_ms": times,
           "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "params": params, "loss_first": losses[0], "loss_last": losses[-1],
           "python": sys.version.split()[0]}
    if a.network in SHAPES:
        out["seq"] = a.seq or default_sequence(a.network)
        bad = check_params(tool, a.network, params)
        if bad:  # a different network is no comparison
            sys.exit(f"{sys.argv[0]}: {bad}")
    print(json.dumps(out))
