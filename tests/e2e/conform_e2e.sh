#!/bin/sh
# conform_e2e.sh — `dlhost conform` end to end through the real executable:
#  1. cpu_onednn checked against cpu_reference at small shapes (every op problem, the default
#     networks) must pass, print its summary line and write JSON that agrees with it;
#  2. a problem's descriptor, pasted back with --case, reruns that problem alone;
#  3. a backend wrong on purpose (fixture_plugins/wrong_backend.cpp: cpu_onednn ignoring
#     count_include_pad=0), loaded by path as a vendor's .so, fails exactly the average-pooling
#     problems whose windows touch padding, passes the others, and its rerun line fails alone;
#  4. usage errors (a .so that cannot load, a bad descriptor, --threads over 4096) and a --json
#     file that cannot be written (/dev/full) exit 2 with the reason;
#  5. a run that checks nothing (--ops none --networks none, with or without --strict) exits 1,
#     as its help says: a CI gate must not pass on nothing (issue 43).
# Usage: conform_e2e.sh DLHOST WRONG_BACKEND_SO WORK_DIR
set -eu
DLHOST="$1"
WRONG="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "conform_e2e: FAILED: $*"; exit 1; }

# Runs dlhost with stdout/stderr to files and records the exit code in $rc.
run() {
  out="$1"
  shift
  set +e
  "$DLHOST" "$@" > "$WORK/$out.txt" 2> "$WORK/$out.err"
  rc=$?
  set -e
}

"$DLHOST" conform --help > "$WORK/help.txt"
grep -q -- "--case" "$WORK/help.txt" || fail "--help does not mention --case"

# 1. The real backends agree.
run full conform --backend cpu_onednn --reference cpu_reference --shapes small \
  --json "$WORK/full.json"
cat "$WORK/full.txt"
test $rc -eq 0 || fail "cpu_onednn against cpu_reference exited $rc (see the FAILED lines above)"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ unimplemented, [0-9]+ skipped, [0-9]+ mistrusted' "$WORK/full.txt") \
  || fail "no summary line"
echo "$summary" | grep -q ' 0 failed' || fail "summary reports failures: $summary"
passed=$(echo "$summary" | sed 's/ passed.*//')
test "$passed" -ge 40 || fail "only $passed problems passed"
python3 - "$WORK/full.json" "$passed" <<'EOF' || fail "the JSON does not match the run"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] == "dlhost-conform/1"
checks = doc["checks"]
counts = {}
for c in checks:
    assert c["id"] and c["status"] in ("PASSED", "FAILED", "SKIPPED", "UNIMPLEMENTED", "MISTRUSTED")
    counts[c["status"]] = counts.get(c["status"], 0) + 1
    if c["status"] == "PASSED":
        assert c["checks"], c["id"]  # a pass always rests on sub-checks
s = doc["summary"]
assert s["passed"] == counts.get("PASSED", 0) == int(sys.argv[2]), (s, counts)
assert s["failed"] == counts.get("FAILED", 0) == 0
kinds = {c["kind"] for c in checks}
assert kinds == {"op", "network"}, kinds
EOF

# 2. One problem alone, from its descriptor as printed.
case_id=$(grep '^PASSED .* op=conv2d,n=3' "$WORK/full.txt" | head -1 | sed 's/.*  op=/op=/')
test -n "$case_id" || fail "no conv2d problem in the run"
run one conform --backend cpu_onednn --reference cpu_reference --case "$case_id"
test $rc -eq 0 || fail "--case '$case_id' exited $rc"
test "$(grep -c '^PASSED ' "$WORK/one.txt")" -eq 1 || fail "--case did not run exactly one problem"
grep -q "^1 passed, 0 failed, 0 unimplemented, 0 skipped, 0 mistrusted" "$WORK/one.txt" \
  || fail "--case summary"

# 3. A backend wrong on purpose is caught, problem by problem.
run wrong conform --backend "$WRONG" --reference cpu_reference --ops pool2d --networks none
cat "$WORK/wrong.txt"
test $rc -eq 1 || fail "the wrong backend exited $rc, expected 1"
grep -q "^8 passed, 2 failed" "$WORK/wrong.txt" || fail "expected 8 passed, 2 failed"
failed=$(grep '^FAILED ' "$WORK/wrong.txt" | sed 's/.*  op=/op=/')
for id in $failed; do
  case "$id" in
    *kind=avg*cip=0) ;;
    *) fail "a problem the bug does not touch failed: $id" ;;
  esac
  echo "$id" | grep -q 'p=0,' && fail "failed without padding: $id"
done
rerun=$(grep -m1 '^  FAILED  *dlhost conform ' "$WORK/wrong.txt" | sed "s/.*--case '//; s/'\$//")
test -n "$rerun" || fail "no rerun line for the failure"
run wrong_one conform --backend "$WRONG" --reference cpu_reference --case "$rerun"
test $rc -eq 1 || fail "the rerun of '$rerun' exited $rc, expected 1"
test "$(grep -c '^FAILED ' "$WORK/wrong_one.txt")" -eq 1 || fail "the rerun is not that one problem"

# 4. Usage errors.
# A --json file that cannot be written whole is an error, not an empty file (issue 43).
run full_disk conform --backend cpu_onednn --reference cpu_reference --case "$case_id" \
  --json /dev/full
test $rc -eq 2 || fail "--json /dev/full exited $rc, expected 2"
grep -q "/dev/full: cannot write" "$WORK/full_disk.err" || fail "--json /dev/full: no reason given"
run missing conform --backend "$WORK/no_such_backend.so"
test $rc -eq 2 || fail "a missing .so exited $rc, expected 2"
grep -q "no_such_backend.so cannot be used: " "$WORK/missing.err" || fail "missing .so message"
run bad_case conform --backend cpu_onednn --reference cpu_reference --case 'op=conv2d,q=1'
test $rc -eq 2 || fail "a bad descriptor exited $rc, expected 2"
grep -q "has no key 'q'" "$WORK/bad_case.err" || fail "bad descriptor message"
# Five op FAILEDs (every backend refusing threads=5000) used to report a usage error.
run threads conform --backend cpu_onednn --reference cpu_reference --threads 5000 --ops fc
test $rc -eq 2 || fail "--threads 5000 exited $rc, expected 2"
grep -q -- "--threads: Value 5000 not in range 0 to 4096" "$WORK/threads.err" \
  || { cat "$WORK/threads.err"; fail "--threads 5000 message"; }
grep -q "^FAILED" "$WORK/threads.txt" && fail "--threads 5000 ran problems"

# 5. Nothing checked, nothing passed.
grep -q "also when none ran" "$WORK/help.txt" || fail "--help does not say that a run of nothing exits 1"
for strict in "" --strict; do
  run none conform --backend cpu_onednn --reference cpu_reference --ops none --networks none $strict
  test $rc -eq 1 || fail "--ops none --networks none $strict exited $rc, expected 1"
  grep -q "no problem was run (--ops and --networks chose none), so nothing PASSED" "$WORK/none.err" \
    || { cat "$WORK/none.err"; fail "no reason for exit 1 on an empty run"; }
done

echo "conform_e2e: all checks passed ($summary)"
