#!/bin/sh
# tf_ps_e2e.sh — a tool's own distributed runtime with an extra role (issue 41): `comm: tf_ps`,
# TensorFlow's parameter servers as Du et al. ran them, inside cpu_tensorflow: dlhost starts one
# ps task beside 2 workers (`dlhost runtime-role`), every variable and its update live on it, and
# the workers pull and push asynchronously. Checked: one worker trains exactly like 1 rank without
# a comm (fcnr, lenet); on 2 workers the loss falls (lenet, plain SGD: asynchrony adds momentum of
# its own, and with the default 0.9 two workers' stale updates diverged here now and then); the
# record says mode async, the runtime's library, its pull + push time per step and where the ps
# ran;
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
defaults: {backend: cpu_tensorflow, launcher: local, warmup: 0, iterations: 12, threads: 1,
           timeout: 300}
cases:
  - {network: lenet, batch: 16, lr: 0.1, comm: none, ranks: 1}
  - {network: lenet, batch: 16, lr: 0.1, comm: tf_ps, ranks: 1}
  - {network: fcnr, batch: 32, lr: 0.2, comm: none, ranks: 1}
  - {network: fcnr, batch: 32, lr: 0.2, comm: tf_ps, ranks: 1}
  - {network: lenet, batch: 16, lr: 0.05, momentum: 0, comm: tf_ps, ranks: 2}
YAML
"$DLHOST" run "$WORK/train.yaml" -o "$WORK/train.jsonl" > "$WORK/train.txt" 2>&1 ||
  { cat "$WORK/train.txt"; fail "run of the suite"; }
cat "$WORK/train.txt"
/usr/bin/python3 - "$WORK/train.jsonl" <<'PY' || fail "tf_ps did not train"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
base = {r["params"]["network"]: r for r in recs if r["params"]["comm"] == "none"}
for r in recs:
    if r["params"]["comm"] != "tf_ps":
        continue
    net, ranks = r["params"]["network"], r["params"]["ranks"]
    assert r["status"] == "OK", (net, ranks, r["status"], r["reason"])
    d = r["distributed"]
    assert d["runtime"] == "tf_ps" and d["mode"] == "async" and d["ranks"] == ranks, d
    assert "parameter servers" in d["runtime_library"] and "comm_time" in d, d
    assert len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
    roles = [(x["role"], x["index"]) for x in r["runtime_roles"]]
    assert roles == [("ps", 0)], r["runtime_roles"]
    loss = r["loss"]["values"]
    if ranks == 1:  # one worker: the ps applies exactly the update the model would
        want = base[net]["loss"]["values"]
        diff = max(abs(a - b) / abs(b) for a, b in zip(loss, want))
        print(f"{net} tf_ps x1: losses within {diff:.2e} of 1 rank without comm")
        assert len(loss) == len(want) == 12 and diff < 1e-6, (loss, want)
        continue
    first, last = loss[0], sum(loss[-4:]) / 4
    print(f"{net} tf_ps x2 (async, 1 ps): loss {first:.4f} -> {last:.4f} (mean of the last 4); "
          f"step {r['timing']['step']['median']:.2f} ms, pull + push {d['allreduce']['median']:.2f} ms")
    assert last < first, f"{net}: the loss did not fall: {loss}"
PY
no_process_left "$WORK/train.yaml" "the finished cases"

# The ps task killed mid-run: start-up (TensorFlow, compile, the servers, the chief's
# initialization) takes a few seconds here; after that every second is steps.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_tensorflow tf_ps ps 12 strict 0.001
echo "tf_ps_e2e: OK"
