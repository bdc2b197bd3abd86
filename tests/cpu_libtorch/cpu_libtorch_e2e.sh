#!/bin/sh
# cpu_libtorch_e2e.sh — the cpu_libtorch backend through the dlhost executable, two checks:
#   conform: `dlhost conform --backend cpu_libtorch` against cpu_reference (every op problem, the
#            networks under 20M parameters) exits 0 with every problem PASSED; only the networks
#            over the size limit may be SKIPPED, none UNIMPLEMENTED or MISTRUSTED;
#   suite:   LeNet's case of suites/frameworks_cpu.yaml on cpu_onednn and on cpu_libtorch (1 and
#            2 threads): every case OK, the loss falls on each, and the backends' losses agree
#            step by step (same graph, weights, data and SGD: only rounding may differ).
# Usage: cpu_libtorch_e2e.sh conform|suite DLHOST SOURCE_DIR WORK_DIR
set -eu
KIND="$1"; DLHOST="$2"; SRC="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "cpu_libtorch_e2e ($KIND): FAILED: $*"; exit 1; }

if [ "$KIND" = conform ]; then
  rc=0
  "$DLHOST" conform --backend cpu_libtorch --threads 1 --json "$WORK/conform.json" \
    > "$WORK/conform.txt" 2> "$WORK/conform.err" || rc=$?
  tail -n 1 "$WORK/conform.txt"
  [ $rc -eq 0 ] || { cat "$WORK/conform.txt" "$WORK/conform.err"; fail "conform exited $rc"; }
  /usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["backend"]["name"] == "cpu_libtorch", doc["backend"]
status = {r["id"]: r["status"] for r in doc["checks"]}
ops = {k: s for k, s in status.items() if k.startswith("op=")}
nets = {k: s for k, s in status.items() if k.startswith("net=")}
assert len(ops) >= 40 and len(nets) >= 6, f"too few problems: {len(ops)} ops, {len(nets)} networks"
bad = {k: s for k, s in ops.items() if s != "PASSED"}
bad.update({k: s for k, s in nets.items() if s not in ("PASSED", "SKIPPED")})
assert not bad, f"not PASSED: {bad}"
assert sum(s == "PASSED" for s in nets.values()) >= 6, nets
print(f"cpu_libtorch: {len(ops)} op problems and "
      f"{sum(s == 'PASSED' for s in nets.values())} networks PASSED")
PY
  echo "cpu_libtorch_e2e (conform): passed"
  exit 0
fi

"$DLHOST" run "$SRC/suites/frameworks_cpu.yaml" --case lenet.cpu_onednn.b64.t1 \
  --case lenet.cpu_libtorch.b64.t1 --case lenet.cpu_libtorch.b64.t2 \
  --set warmup=1 --set iterations=5 -o "$WORK/lenet.jsonl" > "$WORK/run.txt" 2> "$WORK/run.err" \
  || { cat "$WORK/run.txt"; tail -n 30 "$WORK/run.err"; fail "dlhost run"; }
cat "$WORK/run.txt"
/usr/bin/python3 - "$WORK/lenet.jsonl" <<'PY' || fail "suite records (above)"
import json, sys
recs = {(r["params"]["backend"], r["params"]["threads"]): r for r in map(json.loads, open(sys.argv[1]))}
assert len(recs) == 3, sorted(recs)
for key, r in recs.items():
    assert r["status"] == "OK", (key, r["status"], r.get("reason"))
    loss = r["loss"]
    assert loss["warmup_first"] > loss["last"], f"{key}: the loss did not fall: {loss}"
onednn = recs[("cpu_onednn", 1)]["loss"]
for threads in (1, 2):
    torch = recs[("cpu_libtorch", threads)]["loss"]
    pairs = [(onednn["warmup_first"], torch["warmup_first"])] + list(zip(onednn["values"], torch["values"]))
    for step, (a, b) in enumerate(pairs):
        assert abs(a - b) <= 1e-4 * abs(a), f"step {step}, {threads} threads: cpu_onednn {a} vs cpu_libtorch {b}"
print(f"LeNet loss {onednn['warmup_first']:.5f} -> {onednn['last']:.5f} on cpu_onednn, "
      f"{recs[('cpu_libtorch', 1)]['loss']['last']:.5f} on cpu_libtorch")
PY
echo "cpu_libtorch_e2e (suite): passed"
