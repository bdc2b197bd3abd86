#!/bin/sh
# torch_ddp_e2e.sh — a tool's own distributed runtime (issue 41): `comm: torch_ddp`, PyTorch's
# DistributedDataParallel (c10d's Reducer over ProcessGroupGloo) inside cpu_libtorch2, on 2 ranks
# that dlhost launches itself. Synchronous DDP over 2 ranks on half the batch each trains like 1
# rank on the whole batch without a comm: fcnr and lenet (no batch norm), the loss of every step
# and the final weights within a relative 1e-4. The record names the runtime and its mode (sync)
# and carries the runtime's own communication time per step. A wrong pairing (cpu_onednn with
# torch_ddp, and Debian's libtorch 1.13 where it is built) is SKIPPED with the reason. A rank that
# dies mid-run ends its case within the case's limits, and no rank outlives it.
# Usage: torch_ddp_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_libtorch2 is not built here.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "torch_ddp_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/tool_runtime_checks.sh"

plugin_or_skip "$DLHOST" cpu_libtorch2 "the PyPI torch wheel"
trains_like_one_rank "$DLHOST" "$WORK" torch_ddp cpu_libtorch2 ProcessGroupGloo

# Debian's libtorch 1.13 (cpu_libtorch), where built: SKIPPED with its reason.
if "$DLHOST" plugins 2>/dev/null | grep -q '^cpu_libtorch '; then
  cat > "$WORK/old.yaml" <<'YAML'
name: torch_ddp_old
defaults: {backend: cpu_libtorch, comm: torch_ddp, network: fcnr, launcher: local, ranks: 2,
           warmup: 0, iterations: 1, threads: 1, timeout: 60}
cases:
  - {batch: 32}
YAML
  "$DLHOST" run "$WORK/old.yaml" -o "$WORK/old.jsonl" > /dev/null 2>&1 || true
  /usr/bin/python3 - "$WORK/old.jsonl" <<'PY' || fail "cpu_libtorch + torch_ddp was not SKIPPED with its reason"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs, "no record"
for r in recs:
    assert r["status"] == "SKIPPED" and "libtorch 1." in r["reason"], (r["status"], r["reason"])
print(f"cpu_libtorch + torch_ddp: SKIPPED: {recs[0]['reason']}")
PY
fi
# A rank killed mid-run ends the case well within its timeout, as a failure naming the rank, and
# leaves no rank (tool_runtime_checks.sh). Start-up (loading libtorch, compile, the c10d
# rendezvous) takes a few seconds here; after that every second is steps.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_libtorch2 torch_ddp 1 8 any
echo "torch_ddp_e2e: OK"
