#!/bin/sh
# store_e2e.sh — the rendezvous store crosses process boundaries: 2-rank cases whose comm is the
# store_check fixture, which fails its init unless each rank reads the other's key through the
# store that `dlhost run` serves for the case, must end OK with valid records: one started by
# mpirun, one by dlhost itself (`launcher: local`). In each, rank 0 also connects as a stranger
# without the case's secret: it must be refused, and the case's log must say so.
# Usage: store_e2e.sh DLHOST SOURCE_DIR FIXTURE_COMM_DIR WORK_DIR
# Exit 77 (skipped) when mpirun cannot start 2 ranks here.
set -eu
DLHOST="$1"; SRC="$2"; FIXTURES="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "store_e2e: FAILED: $*"; exit 1; }

if ! command -v mpirun > /dev/null; then echo "SKIPPED: mpirun not installed"; exit 77; fi
# mpirun refuses root and exits 0 when it does: check that two ranks really ran.
n=$(mpirun --allow-run-as-root -np 2 sh -c 'echo x' 2>&1 | grep -cx x || true)
if [ "$n" -ne 2 ]; then echo "SKIPPED: mpirun could not start 2 ranks here"; exit 77; fi

cat > "$WORK/store.yaml" <<'YAML'
name: store
defaults: {network: lenet, batch: 4, comm: store_check, ranks: 2, warmup: 0, iterations: 2,
           threads: 1, backend: cpu_onednn, timeout: 120}
cases:
  - {launcher: mpirun}
  - {launcher: local}
YAML
set +e
"$DLHOST" --log-level info --plugin-path "$FIXTURES" run "$WORK/store.yaml" \
  -o "$WORK/store.jsonl" > "$WORK/store.txt" 2> "$WORK/store.err"
rc=$?
set -e
cat "$WORK/store.txt"
if [ $rc -ne 0 ]; then tail -n 40 "$WORK/store.err"; fail "dlhost run exited with $rc"; fi
/usr/bin/python3 - "$WORK/store.jsonl" "$WORK/case_id" <<'PY' || fail "record"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 2, f"{len(recs)} records"
for r, launcher in zip(recs, ["openmpi", "local"]):
    assert r["status"] == "OK", (r["status"], r["reason"])
    d = r["distributed"]
    assert d["ranks"] == 2 and d["comm"] == "store_check" and d["launcher"] == launcher, d
open(sys.argv[2], "w").write(recs[0]["case_id"])
PY
id=$(cat "$WORK/case_id")
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/store.jsonl" --cases 2 \
  --status "$id=OK" || fail "schema"
# Both ranks of both cases got through init, so each read the other's key.
n=$(grep -c "read every rank's key through the store" "$WORK/store.err" || true)
[ "$n" -eq 4 ] || fail "$n ranks logged that they read every key, expected 4"
n=$(grep -c "a connection without the store's secret was refused" "$WORK/store.err" || true)
[ "$n" -eq 2 ] || fail "$n ranks saw a stranger refused, expected 2"
n=$(grep -c "did not present the case's secret" "$WORK/store.err" || true)
[ "$n" -ge 2 ] || fail "the log names $n refused strangers, expected one per case"
grep "did not present the case's secret" "$WORK/store.err" | head -n 2
echo "store_e2e: OK"
