#!/bin/sh
# library_output_e2e.sh — the libraries' own log lines stay off the console (issue 40): a backend
# that talks as TensorFlow and MXNet do (lines straight to stderr and stdout in compile, the
# faulty fixture's `chatter`) prints none of them under --quiet or by default, one case or two
# ranks (`launcher: local`, and mpirun where it can start 2 ranks); dlhost's own warnings (a plugin's, through the host API) still reach
# the console; a failed case keeps the library's lines in its record's stderr_tail, and its line
# on the console says so and quotes the last; -v shows them live.
# Usage: library_output_e2e.sh DLHOST SOURCE_DIR FIXTURE_BACKEND_DIR FIXTURE_COMM_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; BACKENDS="$3"; COMMS="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "library_output_e2e: FAILED: $*"; exit 1; }

cat > "$WORK/chatter.yaml" <<'YAML'
name: chatter
defaults: {network: lenet, batch: 4, warmup: 0, iterations: 2, threads: 1, timeout: 120,
           backend: faulty}
cases:
  - {tags: [ok], options: {faulty: {chatter: 5}}}
  - {tags: [failed], options: {faulty: {chatter: 5, fault: error}}}
  - {tags: [ranks], comm: store_check, ranks: 2, launcher: local, options: {faulty: {chatter: 5}}}
YAML
# One process per one-rank case and per rank compiles, and says its lines once.
cases=3 processes=4
# The same under mpirun where it can start 2 ranks here (it refuses root and exits 0 when it does).
if command -v mpirun > /dev/null &&
   [ "$(mpirun --allow-run-as-root -np 2 sh -c 'echo x' 2>&1 | grep -cx x || true)" -eq 2 ]; then
  echo "  - {tags: [mpirun], comm: store_check, ranks: 2, launcher: mpirun, options: {faulty: {chatter: 5}}}" >> "$WORK/chatter.yaml"
  cases=4 processes=6
else
  echo "library_output_e2e: mpirun cannot start 2 ranks here: its case is left out"
fi
run() {  # run NAME ARGS...: the console's stdout and stderr in NAME.out and NAME.err
  name=$1; shift
  set +e
  "$DLHOST" --plugin-path "$BACKENDS" --plugin-path "$COMMS" run "$WORK/chatter.yaml" "$@" \
    -o "$WORK/$name.jsonl" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  set -e
  # The failed case makes the run exit 1; anything else is a broken run.
  [ $rc -eq 1 ] || { cat "$WORK/$name.out" "$WORK/$name.err"; fail "$name: exit code $rc, expected 1"; }
}
no_library_lines() {  # no_library_lines NAME (a failed case's note may quote its last line)
  if cat "$WORK/$1.out" "$WORK/$1.err" | grep -v "the last of its libraries: " | grep -q "fixture library"; then
    cat "$WORK/$1.out" "$WORK/$1.err"; fail "$1: the library's own lines reached the console"
  fi
}
# One warning per process that compiled.
warnings() { grep -c "fixture warning through dlhost's log" "$WORK/$1.err" || true; }

run quiet --log-level warn -q
no_library_lines quiet
test "$(wc -l < "$WORK/quiet.out")" -eq 1 || { cat "$WORK/quiet.out"; fail "--quiet printed more than the summary"; }
[ "$(warnings quiet)" -eq $processes ] || { cat "$WORK/quiet.err"; fail "quiet: dlhost's own warnings did not all reach the console"; }

run plain
no_library_lines plain
grep -A1 "tags=failed  *FAILED" "$WORK/plain.out" | grep -q "^    its output: 7 lines in the record's stderr_tail (-v shows them live); the last of its libraries: fixture library: " \
  || { cat "$WORK/plain.out"; fail "the failed case's line does not say where its output went"; }
[ "$(warnings plain)" -eq $processes ] || { cat "$WORK/plain.err"; fail "default: dlhost's own warnings did not all reach the console"; }
/usr/bin/python3 - "$WORK/plain.jsonl" <<'PY' || fail "records"
import json, sys
recs = {r["params"]["tags"][0]: r for r in map(json.loads, open(sys.argv[1]))}
assert recs["ok"]["status"] == "OK", recs["ok"]["reason"]
for ranks in ("ranks", "mpirun"):
    assert ranks not in recs or recs[ranks]["status"] == "OK", recs[ranks]["reason"]
failed = recs["failed"]
assert failed["status"] == "FAILED", failed["status"]
tail = failed["stderr_tail"]
for i in range(1, 6):
    assert f"fixture library: start-up line {i} of 5" in tail, tail
assert "fixture library: a print to stdout" in tail, tail
assert "fixture warning through dlhost's log" in tail, tail
PY
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/plain.jsonl" --cases $cases || fail "schema"

# -v: the libraries' lines live, of every case and rank.
run verbose -v
n=$(grep -c "fixture library: start-up line 5 of 5" "$WORK/verbose.err" || true)
[ "$n" -eq $processes ] || { cat "$WORK/verbose.err"; fail "-v showed the library's lines $n times, expected $processes"; }
echo "library_output_e2e: all checks passed"
