#!/bin/sh
# e2e_smoke.sh — end to end through the real executable: `dlhost plugins`, `networks`, `run` of
# suites/smoke.yaml (records validated against docs/results-schema.json), `--case` rerunning one
# case alone, `--dry-run`, and a bad suite failing with FILE:LINE:COL and exit code 2.
# Usage: e2e_smoke.sh DLHOST SOURCE_DIR WORK_DIR
set -eu
DLHOST="$1"
SRC="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "e2e_smoke: FAILED: $*"; exit 1; }

"$DLHOST" plugins > "$WORK/plugins.txt"
grep -q "^cpu_onednn  *backend" "$WORK/plugins.txt" || fail "cpu_onednn not listed"
grep -q "ISA avx" "$WORK/plugins.txt" || grep -q "ISA " "$WORK/plugins.txt" || fail "no ISA shown"
"$DLHOST" networks > "$WORK/networks.txt"
grep -q "^lenet .* 431,080" "$WORK/networks.txt" || fail "lenet parameter count not shown"

"$DLHOST" run "$SRC/suites/smoke.yaml" -o "$WORK/smoke.jsonl" | tee "$WORK/run.txt"
test "$(grep -c ' OK ' "$WORK/run.txt")" -eq 3 || fail "expected 3 OK cases"
grep -q "SKIPPED .*gpu_cudnn" "$WORK/run.txt" || fail "the GPU case was not reported SKIPPED with its reason"
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/smoke.jsonl" --cases 4 \
  --status lenet.cpu_onednn.b16.t1=OK --status autoencoder.cpu_onednn.b16.t1=OK \
  --status fcnr.cpu_onednn.b16.t1=OK || fail "results do not validate"

# A case worker loads only the plugins its case names (here the backend and the network), never
# libtorch, cuDNN or NCCL: their memory would count in the case's peak.
python3 - "$WORK/smoke.jsonl" <<'PY' || fail "a case worker loaded plugins its case does not name"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["case_id"] != "lenet.cpu_onednn.b16.t1":
        continue
    loaded = sorted(p["name"] for p in r["environment"]["plugins_loaded"])
    print("e2e_smoke: lenet's worker loaded", loaded)
    sys.exit(0 if loaded == ["cpu_onednn", "networks_paper"] else 1)
sys.exit(1)
PY

# One case alone, appended to a fresh file.
"$DLHOST" run "$SRC/suites/smoke.yaml" --case lenet.cpu_onednn.b16.t1 -o "$WORK/one.jsonl" > /dev/null
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/one.jsonl" --cases 1 \
  --status lenet.cpu_onednn.b16.t1=OK || fail "--case did not run exactly that case"

"$DLHOST" run "$SRC/suites/smoke.yaml" --dry-run > "$WORK/dry.txt"
grep -q "^4 cases" "$WORK/dry.txt" || fail "--dry-run did not print 4 cases"

printf 'name: bad\nmatrix:\n  network: [lenet]\n  thread: [1]\n' > "$WORK/bad.yaml"
set +e
"$DLHOST" run "$WORK/bad.yaml" 2> "$WORK/bad.txt"
rc=$?
set -e
test $rc -eq 2 || fail "bad suite exit code $rc, expected 2"
grep -q "bad.yaml:4:3: .*unknown key 'thread'" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "bad suite message"; }
echo "e2e_smoke: all checks passed"
