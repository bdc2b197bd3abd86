#!/bin/sh
# tf_collective_e2e.sh — a tool's own distributed runtime (issue 41): `comm: tf_collective`,
# TensorFlow's CollectiveReduceV2 over one gRPC server per rank (MultiWorkerMirroredStrategy's
# all-reduce) inside cpu_tensorflow, on ranks that dlhost launches itself. On 2 ranks with half
# the batch each it trains like 1 rank on the whole batch without a comm: fcnr and lenet, the loss
# of every step and the final weights within a relative 1e-4 (tool_runtime_equiv.py); the record
# names the runtime, its mode (sync) and its communication time per step. A wrong pairing
# (cpu_onednn with tf_collective, cpu_tensorflow with torch_ddp) is SKIPPED with the reason. A
# rank killed mid-run ends its case CRASHED naming it, and no process of the case outlives it
# (tool_runtime_checks.sh); so do the cases that end normally (their servers are never deleted:
# each rank leaves through _exit).
# Usage: tf_collective_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_tensorflow is not built here.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "tf_collective_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/tool_runtime_checks.sh"

plugin_or_skip "$DLHOST" cpu_tensorflow "the PyPI tensorflow-cpu wheel"
trains_like_one_rank "$DLHOST" "$WORK" tf_collective cpu_tensorflow CollectiveReduceV2 \
  "  - {network: fcnr, batch: 32, lr: 0.2, comm: torch_ddp, ranks: 2, tags: [torch]}"
/usr/bin/python3 - "$WORK/equiv.jsonl" <<'PY' || fail "cpu_tensorflow + torch_ddp was not SKIPPED"
import json, sys
(r,) = [r for r in map(json.loads, open(sys.argv[1])) if r["params"]["comm"] == "torch_ddp"]
assert r["status"] == "SKIPPED" and "(it owns: tf_collective" in r["reason"], (r["status"], r["reason"])
print(f"cpu_tensorflow + torch_ddp: SKIPPED: {r['reason']}")
PY
no_process_left "$WORK/equiv.yaml" "the finished cases"

# Killed mid-run: start-up (loading TensorFlow, compile, the servers, rank 0's broadcast) takes a
# few seconds here; after that every second is steps.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_tensorflow tf_collective 1 12 strict
echo "tf_collective_e2e: OK"
