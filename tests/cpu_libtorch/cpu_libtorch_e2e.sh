#!/bin/sh
# cpu_libtorch_e2e.sh — a cpu_libtorch backend (cpu_libtorch on Debian's libtorch, cpu_libtorch2 on
# the PyPI wheel: the same source) through the dlhost executable, two checks:
#   conform: `dlhost conform --backend BACKEND` against cpu_reference (every op problem, the
#            networks under 20M parameters) exits 0 with every problem PASSED; only the networks
#            over the size limit may be SKIPPED, none UNIMPLEMENTED or MISTRUSTED;
#   suite:   LeNet at batch 64 on cpu_onednn and on BACKEND (1 and 2 threads), from a suite written
#            here (suites/frameworks_cpu.yaml names only cpu_libtorch): every case OK, the loss
#            falls on each, and the backends' losses agree step by step (same graph, weights, data
#            and SGD: only rounding may differ); the record names the libtorch it ran on.
# Usage: cpu_libtorch_e2e.sh conform|suite BACKEND DLHOST SOURCE_DIR WORK_DIR
set -eu
KIND="$1"; BACKEND="$2"; DLHOST="$3"; SRC="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "cpu_libtorch_e2e ($BACKEND $KIND): FAILED: $*"; exit 1; }
export BACKEND

if [ "$KIND" = conform ]; then
  rc=0
  "$DLHOST" conform --backend "$BACKEND" --threads 1 --json "$WORK/conform.json" \
    > "$WORK/conform.txt" 2> "$WORK/conform.err" || rc=$?
  tail -n 1 "$WORK/conform.txt"
  [ $rc -eq 0 ] || { cat "$WORK/conform.txt" "$WORK/conform.err"; fail "conform exited $rc"; }
  /usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, os, sys
backend = os.environ["BACKEND"]
doc = json.load(open(sys.argv[1]))
assert doc["backend"]["name"] == backend, doc["backend"]
status = {r["id"]: r["status"] for r in doc["checks"]}
ops = {k: s for k, s in status.items() if k.startswith("op=")}
nets = {k: s for k, s in status.items() if k.startswith("net=")}
assert len(ops) >= 40 and len(nets) >= 6, f"too few problems: {len(ops)} ops, {len(nets)} networks"
bad = {k: s for k, s in ops.items() if s != "PASSED"}
bad.update({k: s for k, s in nets.items() if s not in ("PASSED", "SKIPPED")})
assert not bad, f"not PASSED: {bad}"
assert sum(s == "PASSED" for s in nets.values()) >= 6, nets
print(f"{backend}: {len(ops)} op problems and "
      f"{sum(s == 'PASSED' for s in nets.values())} networks PASSED")
PY
  echo "cpu_libtorch_e2e ($BACKEND conform): passed"
  exit 0
fi

cat > "$WORK/lenet.yaml" <<YAML
# Written by cpu_libtorch_e2e.sh: LeNet on cpu_onednn and $BACKEND.
name: ${BACKEND}_e2e
description: LeNet on cpu_onednn and $BACKEND, the loss compared step by step.
defaults: {warmup: 1, iterations: 5}
cases:
  - {network: lenet, batch: 64, backend: [cpu_onednn, $BACKEND], threads: [1, 2]}
YAML
"$DLHOST" run "$WORK/lenet.yaml" --case lenet.cpu_onednn.b64.t1 \
  --case "lenet.$BACKEND.b64.t1" --case "lenet.$BACKEND.b64.t2" \
  -o "$WORK/lenet.jsonl" > "$WORK/run.txt" 2> "$WORK/run.err" \
  || { cat "$WORK/run.txt"; tail -n 30 "$WORK/run.err"; fail "dlhost run"; }
cat "$WORK/run.txt"
/usr/bin/python3 - "$WORK/lenet.jsonl" <<'PY' || fail "suite records (above)"
import json, os, sys
backend = os.environ["BACKEND"]
recs = {(r["params"]["backend"], r["params"]["threads"]): r for r in map(json.loads, open(sys.argv[1]))}
assert len(recs) == 3, sorted(recs)
for key, r in recs.items():
    assert r["status"] == "OK", (key, r["status"], r.get("reason"))
    loss = r["loss"]
    assert loss["warmup_first"] > loss["last"], f"{key}: the loss did not fall: {loss}"
library = recs[(backend, 1)]["backend"]["device"]["library"]
assert library.startswith("libtorch "), library
onednn = recs[("cpu_onednn", 1)]["loss"]
for threads in (1, 2):
    torch = recs[(backend, threads)]["loss"]
    pairs = [(onednn["warmup_first"], torch["warmup_first"])] + list(zip(onednn["values"], torch["values"]))
    for step, (a, b) in enumerate(pairs):
        assert abs(a - b) <= 1e-4 * abs(a), f"step {step}, {threads} threads: cpu_onednn {a} vs {backend} {b}"
print(f"LeNet loss {onednn['warmup_first']:.5f} -> {onednn['last']:.5f} on cpu_onednn, "
      f"{recs[(backend, 1)]['loss']['last']:.5f} on {backend} ({library})")
PY
echo "cpu_libtorch_e2e ($BACKEND suite): passed"
