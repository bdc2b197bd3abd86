#!/bin/sh
# reliability_e2e.sh — issue 18's hostile-but-fair probes, each of which once lost results, passed
# silently or took the machine down: broken plugins, hostile suites, a full results disk, a
# --resume into the wrong file, a second writer, and the documented exit codes.
# Usage: reliability_e2e.sh DLHOST SOURCE_DIR HOSTILE_PLUGIN_DIR FIXTURE_BACKEND_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; HOSTILE="$3"; FIXTURES="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "reliability_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/expect.sh"  # run NAME CMD..., expect_rc, expect_err, expect_out
records() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }

cat > "$WORK/one.yaml" <<'YAML'
name: one
defaults: {network: lenet, backend: cpu_reference, batch: 4, warmup: 0, iterations: 2, threads: 1}
cases:
  - {seed: 1}
YAML

# --- 1. a plugin that crashes or exits while it loads is refused; everything else works ---
for fault in junk_pointer:SIGSEGV null_functions:"function 'device_count' is NULL" \
             exit_entry:"exit code 0" exit_ctor:"exit code 0" abort_entry:SIGABRT \
             throw_entry:"an exception escaped the plugin's entry (acme: licence file not found)" \
             said_abort:"SIGABRT, Aborted); its stderr: acme: cannot find libacme_rt.so.3"; do
  dir="${fault%%:*}"; why="${fault#*:}"
  run "plugins-$dir" --plugin-path "$HOSTILE/$dir" plugins
  expect_rc 0; expect_out "refused $HOSTILE/$dir/"; expect_out "$why"; expect_out "cpu_reference"
  run "networks-$dir" --plugin-path "$HOSTILE/$dir" networks
  expect_rc 0; expect_out lenet
  run "run-$dir" --plugin-path "$HOSTILE/$dir" run "$WORK/one.yaml" -o "$WORK/$dir.jsonl"
  expect_rc 0; expect_out "done: 1 OK"
  test "$(records "$WORK/$dir.jsonl")" -eq 1 || fail "$dir: no record"
done

# exit(0) inside a case run in-process is not a success: no summary line, exit code 2.
cat > "$WORK/exit0.yaml" <<'YAML'
name: exit0
cases:
  - {network: lenet, backend: faulty, batch: 4, warmup: 0, iterations: 2, options: {faulty: {fault: exit0}}}
YAML
run exit0 --plugin-path "$FIXTURES" run "$WORK/exit0.yaml" --no-isolate -o "$WORK/exit0.jsonl"
expect_rc 2; expect_err "called exit() before the command finished"

# --- 2. hostile suites: refused with FILE:LINE before anything is allocated, exit code 2 ---
printf 'cases:\n  - {network: lenet, batch: &v [1,2,3,4,5,6,7,8,9,10], seed: *v, warmup: *v, iterations: *v, threads: *v, lr: *v}\n' > "$WORK/bomb.yaml"
run bomb validate "$WORK/bomb.yaml"
expect_rc 2; expect_err "$WORK/bomb.yaml:2:5: this entry of 'cases' brings the suite to more than 10000 cases"
expect_err "--max-cases N"
run bomb-run run "$WORK/bomb.yaml" --dry-run
expect_rc 2
run devzero validate /dev/zero
expect_rc 2; expect_err "/dev/zero: not a regular file (a device)"
mkfifo "$WORK/fifo"
run fifo validate "$WORK/fifo"
expect_rc 2; expect_err "not a regular file (a FIFO)"
/usr/bin/python3 -c "print('cases: ' + '[' * 100000 + ']' * 100000)" > "$WORK/deep.yaml"
run deep validate "$WORK/deep.yaml"
expect_rc 2; expect_err "deep.yaml:1:72: nested deeper than 64 levels"
run missing run "$WORK/absent.yaml"
expect_rc 2; expect_err "absent.yaml: cannot open: No such file or directory"
run usage run --no-such-flag "$WORK/one.yaml"
expect_rc 2

# --- 3. a results write that fails keeps every whole record and says how to finish ---
cat > "$WORK/two.yaml" <<'YAML'
name: two
defaults: {network: lenet, backend: cpu_reference, batch: 4, warmup: 0, iterations: 2, threads: 1}
cases:
  - {seed: 1}
  - {seed: 2}
YAML
run size-probe run "$WORK/one.yaml" -o "$WORK/size-probe.jsonl"
run sizes run "$WORK/two.yaml" --set threads=1 -o "$WORK/sizes.jsonl"
size=$(head -n 1 "$WORK/sizes.jsonl" | wc -c)  # of the first record; two are far more
# full FILE LABEL: the second record does not fit; FILE must then hold exactly the first.
full_checks() {
  expect_rc 2; expect_err "cannot write results file"; expect_err '"case_id":"lenet.cpu_reference.b4.t1.seed=2"'
  expect_err "finish with: $DLHOST run $WORK/two.yaml --set threads=1 --resume $1"
  test "$(records "$1")" -eq 1 || fail "$name: $(records "$1") records, expected 1"
  tail -c 1 "$1" | od -c | grep -q '\\n' || fail "$name: the file ends in a torn line"
  run "$name-resume" run "$WORK/two.yaml" --set threads=1 --resume "$1"
}
# A file-size limit (RLIMIT_FSIZE) fails write() as a full disk does, with no root needed.
# The limit binds every file dlhost writes, its stderr file too, and the stderr holds the unwritten
# record (about the limit's size): stderr goes through a pipe to an unlimited cat, whole.
name=fsize; set +e
{ prlimit --fsize=$((size + 512)) "$DLHOST" run "$WORK/two.yaml" --set threads=1 -o "$WORK/fsize.jsonl" > "$WORK/fsize.out"; echo $? > "$WORK/fsize.rc"; } 2>&1 | cat > "$WORK/fsize.err"
rc=$(cat "$WORK/fsize.rc"); set -e
full_checks "$WORK/fsize.jsonl"
expect_rc 0; test "$(records "$WORK/fsize.jsonl")" -eq 2 || fail "resume after the full disk"
# A real full filesystem where this test may mount one (root): a tmpfs of one page.
mkdir -p "$WORK/tmpfs"
if [ "$size" -lt 4096 ] && [ "$(wc -c < "$WORK/sizes.jsonl")" -gt 4096 ] && mount -t tmpfs -o size=4k tmpfs "$WORK/tmpfs" 2>/dev/null; then
  run tmpfs run "$WORK/two.yaml" --set threads=1 -o "$WORK/tmpfs/full.jsonl"
  name=tmpfs; full_checks "$WORK/tmpfs/full.jsonl"
  umount "$WORK/tmpfs"
else
  echo "reliability_e2e: no tmpfs mount here (needs root); the file-size limit stood in for a full disk"
fi

# --- 4. one writer per results file ---
cp "$WORK/size-probe.jsonl" "$WORK/locked.jsonl"
/usr/bin/python3 -c "import fcntl, sys, time
f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)" \
  "$WORK/locked.jsonl" > "$WORK/holder.out" 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q locked "$WORK/holder.out" && break; sleep 0.1; done
run locked run "$WORK/one.yaml" --resume "$WORK/locked.jsonl"
kill "$holder"; wait "$holder" 2>/dev/null || true
expect_rc 2; expect_err "is being written by another dlhost run"
test "$(records "$WORK/locked.jsonl")" -eq 1 || fail "locked: the file changed"

# --- 5. --resume checks what it resumes ---
run resume-other run "$WORK/two.yaml" --resume "$WORK/size-probe.jsonl"
expect_rc 2; expect_err "size-probe.jsonl:1: a record of suite 'one', not of 'two'"
sed '/^name:/d' "$WORK/one.yaml" > "$WORK/first.yaml"
run resume-first run "$WORK/first.yaml" -o "$WORK/first.jsonl"
cp "$WORK/first.yaml" "$WORK/renamed.yaml"
run resume-renamed run "$WORK/renamed.yaml" --resume "$WORK/first.jsonl"
expect_rc 2; expect_err "a record of suite 'first', not of 'renamed'"
run resume-params run "$WORK/one.yaml" --set iterations=3 --resume "$WORK/size-probe.jsonl"
expect_rc 2; expect_err "size-probe.jsonl:1: case 'lenet.cpu_reference.b4.t1' was recorded with other parameters"
test "$(records "$WORK/size-probe.jsonl")" -eq 1 || fail "resume-params: the file changed"
echo '{"case_id": 5, "params_hash": "x", "status": "OK"}' >> "$WORK/size-probe.jsonl"
run resume-badline run "$WORK/one.yaml" --resume "$WORK/size-probe.jsonl"
expect_rc 0; expect_out "size-probe.jsonl:2: not a record"; expect_out "1 of 1 cases already recorded"

# --- 6. exit codes: SIGINT 130, SIGTERM 143, each with the whole command to finish ---
cat > "$WORK/slow.yaml" <<'YAML'
name: slow
defaults: {network: lenet, batch: 4, warmup: 0, iterations: 2, threads: 1}
cases:
  - {backend: cpu_reference}
  - {backend: faulty, timeout: 60, options: {faulty: {fault: hang}}}
YAML
for sig in INT:130 TERM:143; do
  name="signal-${sig%%:*}"
  "$DLHOST" --plugin-path "$FIXTURES" run "$WORK/slow.yaml" --set seed=7 -o "$WORK/$name.jsonl" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  pid=$!
  for _ in $(seq 1 600); do grep -q '^\[1/2\]' "$WORK/$name.out" && break; sleep 0.1; done
  sleep 0.5
  kill -s "${sig%%:*}" "$pid"
  set +e; wait "$pid"; rc=$?; set -e
  expect_rc "${sig#*:}"
  expect_out "finish with: $DLHOST --plugin-path $FIXTURES run $WORK/slow.yaml --set seed=7 --resume $WORK/$name.jsonl"
done
# --- 7. out of memory is OOM on every backend (cpu_onednn said INTERNAL) ---
cat > "$WORK/oom.yaml" <<'YAML'
name: oom
defaults: {network: lenet, batch: 2000000, memory_limit_mb: 2048, warmup: 0, iterations: 1, threads: 1}
matrix:
  backend: [cpu_onednn, cpu_reference]
YAML
run oom run "$WORK/oom.yaml" -o "$WORK/oom.jsonl"
expect_rc 1; expect_out "done: 2 OOM"
echo "reliability_e2e: all probes passed"
