#!/bin/sh
# tf_ps_e2e.sh — a tool's own distributed runtime with extra roles (issue 41): `comm: tf_ps`,
# TensorFlow's parameter servers inside cpu_tensorflow: dlhost starts the ps tasks beside the
# workers (`dlhost runtime-role`), every variable and its update live on them.
# Asynchronous (the default, as Du et al. ran them): one worker trains exactly like 1 rank without
# a comm (fcnr, lenet); on 2 workers the loss falls (lenet, plain SGD: asynchrony adds momentum of
# its own, and with the default 0.9 two workers' stale updates diverged here now and then), with
# 1 ps and with 2 (`ps_tasks: 2`, variables round-robin over them); the record says mode async,
# the runtime's library, its pull + push time per step and where each ps ran.
# Synchronous (`ps_mode: sync`, SyncReplicasOptimizer's accumulators and token queue): 1 and 2
# workers train like 1 rank on the whole batch (fcnr, lenet: losses and final weights within
# 1e-4, tool_runtime_equiv.py), and so do 2 workers over 2 ps tasks (lenet).
# The ps killed mid-run (async) and a worker killed mid-run (sync, the chief waiting for its
# gradients) end their case naming it, and no process of the case outlives it.
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
  - {network: lenet, batch: 16, lr: 0.05, momentum: 0, comm: tf_ps, ranks: 2,
     options: {cpu_tensorflow: {ps_tasks: 2}}}
  - {network: lenet, batch: 16, lr: 0.1, comm: tf_ps, ranks: 2,
     options: {cpu_tensorflow: {ps_mode: sync, ps_tasks: 2}}}
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
    opts = r["params"].get("options", {}).get("cpu_tensorflow", {})
    mode, tasks = opts.get("ps_mode", "async"), int(opts.get("ps_tasks", 1))
    assert r["status"] == "OK", (net, ranks, opts, r["status"], r["reason"])
    d = r["distributed"]
    assert d["runtime"] == "tf_ps" and d["mode"] == mode and d["ranks"] == ranks, d
    assert "parameter servers" in d["runtime_library"] and "comm_time" in d, d
    assert len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
    roles = [(x["role"], x["index"]) for x in r["runtime_roles"]]
    assert roles == [("ps", k) for k in range(tasks)], r["runtime_roles"]
    loss = r["loss"]["values"]
    if ranks == 1 or mode == "sync":  # the ps applies exactly the update 1 rank would
        want = base[net]["loss"]["values"]
        diff = max(abs(a - b) / abs(b) for a, b in zip(loss, want))
        print(f"{net} tf_ps x{ranks} {mode}, {tasks} ps: losses within {diff:.2e} of 1 rank "
              f"without comm; step {r['timing']['step']['median']:.2f} ms, pull + push "
              f"{d['allreduce']['median']:.2f} ms")
        assert len(loss) == len(want) == 12, (loss, want)
        assert diff < (1e-6 if ranks == 1 else 1e-4), (loss, want)
        continue
    first, last = loss[0], sum(loss[-4:]) / 4
    print(f"{net} tf_ps x2 ({mode}, {tasks} ps): loss {first:.4f} -> {last:.4f} (mean of the "
          f"last 4); step {r['timing']['step']['median']:.2f} ms, pull + push "
          f"{d['allreduce']['median']:.2f} ms")
    assert last < first, f"{net}: the loss did not fall: {loss}"
PY
no_process_left "$WORK/train.yaml" "the finished cases"

# Synchronous: 1 and 2 workers (1 ps) train like 1 rank on the whole batch, weights included.
mkdir -p "$WORK/sync"
trains_like_one_rank "$DLHOST" "$WORK/sync" tf_ps cpu_tensorflow SyncReplicasOptimizer "" \
  "options: {cpu_tensorflow: {ps_mode: sync}}"
no_process_left "$WORK/sync/equiv.yaml" "the finished sync cases"
# A sync worker killed mid-run: the chief waits in the accumulators' take for its gradients, and
# the case ends CRASHED naming the rank, not at the timeout.
kill_rank_mid_run "$DLHOST" "$WORK/sync" cpu_tensorflow tf_ps 1 12 strict 0.1 \
  "options: {cpu_tensorflow: {ps_mode: sync, ps_tasks: 2}}"

# The ps task killed mid-run: start-up (TensorFlow, compile, the servers, the chief's
# initialization) takes a few seconds here; after that every second is steps.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_tensorflow tf_ps ps 12 strict 0.001
echo "tf_ps_e2e: OK"
