#!/bin/sh
# reliability_e2e.sh — issue 18's hostile-but-fair probes, each of which once lost results, passed
# silently or took the machine down: broken plugins, hostile suites, a full results disk, a
# --resume into the wrong file, a second writer, and the documented exit codes.
# Usage: reliability_e2e.sh DLHOST SOURCE_DIR HOSTILE_PLUGIN_DIR FIXTURE_BACKEND_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; HOSTILE="$3"; FIXTURES="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "reliability_e2e: FAILED: $*"; exit 1; }
# run NAME CMD...: runs dlhost, keeping its exit code in $rc and its output in WORK/NAME.{out,err}
run() {
  name="$1"; shift
  set +e
  timeout 120 "$DLHOST" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  set -e
}
expect_rc() { test "$rc" -eq "$1" || { cat "$WORK/$name.out" "$WORK/$name.err"; fail "$name: exit code $rc, expected $1"; }; }
expect_err() { grep -qF -- "$1" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: stderr lacks '$1'"; }; }
expect_out() { grep -qF -- "$1" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: stdout lacks '$1'"; }; }
records() { if [ -f "$1" ]; then grep -c . "$1" || true; else echo 0; fi; }

cat > "$WORK/one.yaml" <<'YAML'
name: one
defaults: {network: lenet, backend: cpu_reference, batch: 4, warmup: 0, iterations: 2, threads: 1}
cases:
  - {seed: 1}
YAML

# --- 1. a plugin that crashes or exits while it loads is refused; everything else works ---
for fault in junk_pointer:SIGSEGV null_functions:"function 'device_count' is NULL" \
             exit_entry:"exit code 0" exit_ctor:"exit code 0" abort_entry:SIGABRT; do
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
