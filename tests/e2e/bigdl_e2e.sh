#!/bin/sh
# bigdl_e2e.sh — cpu_bigdl (issue 42): BigDL DLlib 2.4 in a JVM the plugin hosts through JNI.
#  1. `dlhost plugins` lists cpu_bigdl with its BigDL, Spark and Java versions;
#  2. LeNet (batch 64, 1 thread) trains with falling loss in BigDL's own loop: the record says the
#     steps were timed by the backend's clock (ABI 1.5 DLHOST_EXT_STEP_LOOP: one
#     LocalOptimizer.optimize() over the warm-up and timed steps), one time per timed step, each
#     inside the host clock around the one call;
#  3. Du et al.'s AutoEncoder (the input is its own MSE target) trains in BigDL's loop with the
#     losses cpu_onednn gives it (the same weights and data);
#  4. a network BigDL is not given here (resnet56: batch norm, residual adds) is SKIPPED with the
#     reason;
#  5. under memory_limit_mb (RLIMIT_DATA) the JVM's heap is sized from the limit: LeNet trains
#     under 1024 MB, and a limit no JVM starts in (300 MB) is OOM saying so.
# Usage: bigdl_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_bigdl is not built here (no JDK or no BigDL/Spark jars), saying why.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "bigdl_e2e: FAILED: $*"; exit 1; }

plugins=$("$DLHOST" plugins 2>/dev/null || true)
if ! echo "$plugins" | grep -q '^cpu_bigdl '; then
  why=$(cat "$(dirname "$DLHOST")/../plugins/cpu_bigdl.left-out" 2>/dev/null || echo "not built")
  echo "SKIPPED: cpu_bigdl is not built here: $why"; exit 77
fi
# The plugin's line and its device line below it.
block=$(echo "$plugins" | grep -A1 '^cpu_bigdl ')
echo "$block"
for want in "BigDL DLlib 2.4.0" "Spark 3.1.3" "OpenJDK"; do
  echo "$block" | grep -q "$want" || fail "dlhost plugins does not say '$want' for cpu_bigdl"
done

cat > "$WORK/bigdl.yaml" <<'YAML'
name: bigdl_e2e
defaults: {backend: cpu_bigdl, warmup: 2, iterations: 10, threads: 1, timeout: 300}
cases:
  - {network: lenet, batch: 64}
  - {network: resnet56, batch: 8}
  - {network: autoencoder, batch: 32}
  - {network: autoencoder, batch: 32, backend: cpu_onednn, tags: [oracle]}
  - {network: lenet, batch: 64, memory_limit_mb: 1024, tags: [limit]}
  - {network: lenet, batch: 64, memory_limit_mb: 300, tags: [limit]}
YAML
# Exit 1: the OOM case is not OK (on purpose); anything else is a failure of the run.
rc=0
"$DLHOST" run "$WORK/bigdl.yaml" -o "$WORK/bigdl.jsonl" > "$WORK/run.txt" 2>&1 || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 1 ] || { cat "$WORK/run.txt"; fail "run of the suite (exit $rc)"; }
cat "$WORK/run.txt"
/usr/bin/python3 - "$WORK/bigdl.jsonl" <<'PY' || fail "the records are not what BigDL's loop gives"
import json, sys
all_recs = [json.loads(l) for l in open(sys.argv[1])]
recs = {r["params"]["network"]: r for r in all_recs if not r["params"].get("tags")}
oracle = next(r for r in all_recs if "oracle" in r["params"].get("tags", []))
limited = {r["params"]["memory_limit_mb"]: r for r in all_recs if "limit" in r["params"].get("tags", [])}
r = recs["lenet"]
assert r["status"] == "OK", r.get("reason")
t = r["timing"]
assert t["timer"] == "backend_clock", t["timer"]
assert "LocalOptimizer" in t["clock"] and "optimize()" in t["loop"], (t["clock"], t["loop"])
steps = t["samples"]["step"]
assert len(steps) == 10 and all(s > 0 for s in steps), steps
# BigDL's own iteration times lie inside the host clock around the one optimize() call.
assert sum(steps) < t["owned_loop_ms"], (sum(steps), t["owned_loop_ms"])
loss = r["loss"]["values"]
assert len(loss) == 10, loss
assert loss[-1] < loss[0], f"loss did not fall: {loss}"
print(f"lenet b64 on cpu_bigdl: median step {t['step']['median']:.1f} ms, loss {loss[0]:.4f} -> {loss[-1]:.4f}")
a = recs["autoencoder"]
assert a["status"] == "OK", (a["status"], a.get("reason"))
assert oracle["status"] == "OK", (oracle["status"], oracle.get("reason"))
got, want = a["loss"]["values"], oracle["loss"]["values"]
assert got[-1] < got[0], f"autoencoder: loss did not fall: {got}"
# The same weights, data and SGD: BigDL's losses follow cpu_onednn's (float sums in another
# order: within 1e-3 of each other over the 10 steps).
assert len(got) == len(want) and all(abs(g - w) <= 1e-3 * abs(w) for g, w in zip(got, want)), (got, want)
print(f"autoencoder b32 on cpu_bigdl: loss {got[0]:.5f} -> {got[-1]:.5f} (cpu_onednn {want[0]:.5f} -> {want[-1]:.5f})")
s = recs["resnet56"]
assert s["status"] == "SKIPPED", s["status"]
assert "cpu_bigdl" in s["reason"] and "batch_norm" in s["reason"], s["reason"]
print(f"resnet56: SKIPPED: {s['reason']}")
r = limited[1024]
assert r["status"] == "OK", (r["status"], r["reason"], r.get("stderr_tail", "")[-800:])
loss = r["loss"]["values"]
assert loss[-1] < loss[0], f"loss did not fall under memory_limit_mb 1024: {loss}"
print(f"lenet b64 under memory_limit_mb 1024: OK, loss {loss[0]:.4f} -> {loss[-1]:.4f}")
r = limited[300]
assert r["status"] == "OOM", (r["status"], r["reason"], r.get("stderr_tail", "")[-800:])
assert "memory_limit_mb 300" in r["reason"] and "JVM" in r["reason"], r["reason"]
print(f"lenet b64 under memory_limit_mb 300: OOM: {r['reason']}")
PY
echo "bigdl_e2e: PASSED"
