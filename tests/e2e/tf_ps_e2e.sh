#!/bin/sh
# tf_ps_e2e.sh — a tool's own distributed runtime with an extra role (issue 41): `comm: tf_ps`,
# TensorFlow's parameter servers as Du et al. ran them, inside cpu_tensorflow: dlhost starts one
# ps task beside 2 workers (`dlhost runtime-role`), every variable and its update live on it, and
# the workers pull and push asynchronously. Checked: the loss falls on fcnr and lenet, the record
# says mode async, the runtime's library and its pull + push time per step, and where the ps ran;
# the ps killed mid-run ends its case naming it, and no process of the case outlives it.
# Usage: tf_ps_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_tensorflow is not built here.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "tf_ps_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/tool_runtime_checks.sh"

plugin_or_skip "$DLHOST" cpu_tensorflow "the PyPI tensorflow-cpu wheel"
cat > "$WORK/train.yaml" <<'YAML'
name: tf_ps_train
defaults: {backend: cpu_tensorflow, comm: tf_ps, launcher: local, ranks: 2, warmup: 0,
           iterations: 20, threads: 1, timeout: 300}
cases:
  - {network: fcnr, batch: 32, lr: 0.2}
  - {network: lenet, batch: 16, lr: 0.1}
YAML
"$DLHOST" run "$WORK/train.yaml" -o "$WORK/train.jsonl" > "$WORK/train.txt" 2>&1 ||
  { cat "$WORK/train.txt"; fail "run of the suite"; }
cat "$WORK/train.txt"
/usr/bin/python3 - "$WORK/train.jsonl" <<'PY' || fail "tf_ps did not train"
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    net = r["params"]["network"]
    assert r["status"] == "OK", (net, r["status"], r["reason"])
    d = r["distributed"]
    assert d["runtime"] == "tf_ps" and d["mode"] == "async" and d["ranks"] == 2, d
    assert "parameter servers" in d["runtime_library"] and "comm_time" in d, d
    assert len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
    roles = [(x["role"], x["index"]) for x in r["runtime_roles"]]
    assert roles == [("ps", 0)], r["runtime_roles"]
    loss = r["loss"]["values"]
    first, last = loss[0], sum(loss[-5:]) / 5
    print(f"{net} tf_ps x2 (async, 1 ps): loss {first:.4f} -> {last:.4f} (mean of the last 5); "
          f"step {r['timing']['step']['median']:.2f} ms, pull + push {d['allreduce']['median']:.2f} ms")
    assert last < first, f"{net}: the loss did not fall: {loss}"
PY
no_process_left "$WORK/train.yaml" "the finished cases"

# The ps task killed mid-run: start-up (TensorFlow, compile, the servers, the chief's
# initialization) takes a few seconds here; after that every second is steps.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_tensorflow tf_ps ps 12 any
echo "tf_ps_e2e: OK"
