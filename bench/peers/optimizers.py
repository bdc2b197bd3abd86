"""optimizers.py: each network's SGD settings (lr, momentum, weight_decay, clip_norm), read from
`dlhost networks --json` (what the network plugin sets), so that every peer trains with the same
optimizer as dlhost and no copy of the figures can drift from the plugin's. NETWORKS keeps the
whole listing by name (transformer_settings.py reads AdamW's settings and parameter counts from
it). The dlhost executable is $DLHOST, else build/host/dlhost of this checkout (build it first)."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def float32(v):
    # The plugin holds float32 figures; `networks --json` widens them (0.01 -> 0.00999999977...).
    return float(f"{float(v):.7g}")


def _load():
    exe = os.environ.get("DLHOST") or os.path.join(ROOT, "build", "host", "dlhost")
    try:
        p = subprocess.run([exe, "networks", "--json"], capture_output=True, text=True,
                           timeout=300)
    except OSError as e:
        raise SystemExit(f"optimizers.py: cannot run {exe} (set DLHOST or build dlhost): {e}")
    if p.returncode != 0:
        raise SystemExit(f"optimizers.py: `{exe} networks --json` failed:\n{p.stderr[-1500:]}")
    return {n["name"]: n for n in json.loads(p.stdout)}


def _sgd(networks):
    settings = {}
    for n in networks.values():
        o = n.get("optimizer", {})
        if o.get("kind") != "sgd":
            continue  # AdamW networks: transformer_settings.adamw()
        settings[n["name"]] = tuple(float32(o.get(k, 0))
                                    for k in ("lr", "momentum", "weight_decay", "clip_norm"))
    return settings


NETWORKS = _load()
OPTIMIZERS = _sgd(NETWORKS)
