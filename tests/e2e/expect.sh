# expect.sh — sourced by the end-to-end tests that run dlhost many times and check each run's
# exit code and output (reliability_e2e.sh, run_hardening_e2e.sh, untrusted_paths_e2e.sh). The
# caller sets DLHOST and WORK and defines fail(). POSIX sh.

# run NAME CMD...: runs dlhost (at most 120 s), keeping its exit code in $rc and its output in
# WORK/NAME.{out,err}
run() {
  name="$1"; shift
  set +e
  timeout -k 5 120 "$DLHOST" "$@" > "$WORK/$name.out" 2> "$WORK/$name.err"
  rc=$?
  set -e
}
expect_rc() { test "$rc" -eq "$1" || { cat "$WORK/$name.out" "$WORK/$name.err"; fail "$name: exit code $rc, expected $1"; }; }
expect_err() { grep -qF -- "$1" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: stderr lacks '$1'"; }; }
expect_out() { grep -qF -- "$1" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "$name: stdout lacks '$1'"; }; }
