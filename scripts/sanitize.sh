#!/bin/sh
# sanitize.sh — the sanitizer build of CI: builds dlhost, its plugins and tests with
# AddressSanitizer + UndefinedBehaviorSanitizer (DLHOST_SANITIZE, GCC, -O1 -g) into
# build-asan (or $DLHOST_ASAN_BUILD_DIR), runs every GoogleTest executable and a short 2-rank
# data-parallel case (overlapped and not) with the sanitizers set to stop at the first error.
# Any sanitizer report, failed test or failed case fails the script.
# Usage: scripts/sanitize.sh
set -eu
cd "$(dirname "$0")/.."
SRC=$(pwd)
BUILD="${DLHOST_ASAN_BUILD_DIR:-build-asan}"
case "$BUILD" in /*) ;; *) BUILD="$SRC/$BUILD" ;; esac
fail() { echo "sanitize: FAILED: $*"; exit 1; }

# Leak checking stays on; the few leaks of uninstrumented libraries (Open MPI's, oneDNN's) are
# suppressed one by one in the file, each with its reason. Reports go to files (as well as to
# the tests' stderr) so that one from a case process or an MPI rank cannot be swallowed.
LOGS="$BUILD/sanitizer-logs"
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime (Debian's, as up to GCC 13 and LLVM 16)
# takes a dynamic TLS block whose start lies 16 bytes into a page for glibc <= 2.18's layout and
# reads the two words before it as the block's bounds; a malloc'd block lands there by chance,
# and LeakSanitizer's tracer then dies at exit ("Tracer caught signal 11", no leak named). That
# is what failed CI (a gtest process, after its tests had passed; again here) and, every time,
# test_cpu_onednn (2 runs of 2 here). Off, the interceptor no longer guesses; leaks are still
# checked.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0:intercept_tls_get_addr=0:log_path=$LOGS/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGS/ubsan"
export LSAN_OPTIONS="suppressions=$SRC/scripts/sanitizer/lsan.supp:print_suppressions=0"

configure_and_build() {  # DIR SANITIZERS
  # -O1 -g: line numbers in the reports, asserts kept, and a quicker build than -O2.
  # GCC is required (checked by the option block in CMakeLists.txt): its shared runtime.
  mkdir -p "$1"
  # No GPU code: nothing of it can run on a CI machine, and nvcc's objects are not instrumented.
  # No wheel-based framework backends (DLHOST_PYPI_DIR empty: TensorFlow, MXNet, PyPI libtorch):
  # they are ~2 GB of uninstrumented runtime with their own allocators and thread pools whose
  # process-lifetime allocations LeakSanitizer would report; their glue is tested in the normal
  # build (ctest), and configure says in one line each that they are left out here.
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLHOST_SANITIZE="$2" -DDLHOST_GPU=OFF \
    -DDLHOST_PYPI_DIR= \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    > "$1/configure.log" 2>&1 || { cat "$1/configure.log"; fail "configure $1"; }
  nice cmake --build "$1" -j "$(nproc)"
}

# Every sanitizer report file names the process and its error; print them all and fail.
check_logs() {  # DIR-OF-LOGS WHAT
  if ls "$1"/* > /dev/null 2>&1; then
    for f in "$1"/*; do echo "=== $f"; cat "$f"; done
    fail "sanitizer reports during $2 (above)"
  fi
}

# GoogleTest executables by name (test_*), wherever the tests' CMakeLists puts them.
gtest_executables() {  # BUILD-DIR
  find "$1/tests" -type f -perm -u+x -name 'test_*' ! -name '*.so' | sort
}

run_gtests() {  # BUILD-DIR LOG-DIR
  failed=""
  for t in $(gtest_executables "$1"); do
    echo "--- $t"
    # From the build folder, as ctest runs them (the tests find plugins by absolute paths).
    # A report's file is named after its test (and the process id), so it says where it came from.
    opts="$(echo "$ASAN_OPTIONS" | sed "s|log_path=[^:]*|log_path=$2/asan.$(basename "$t")|")"
    case "$(basename "$t")" in
      # Leak checking off for this one only; address and UB errors still stop it.
      # test_comm_mpi: Open MPI's process-lifetime allocations have unnamed frames
      #   ("<unknown module>": its dlclose'd components), which no suppression can name.
      # (test_cpu_onednn was here too: its "Tracer caught signal 11" was the TLS guess that
      # intercept_tls_get_addr=0 turns off; with it, it passes with leaks checked, 5 runs of 5.)
      test_comm_mpi) opts="$opts:detect_leaks=0" ;;
    esac
    (cd "$1/tests" && ASAN_OPTIONS="$opts" "$t" --gtest_brief=1) || failed="$failed $(basename "$t")"
  done
  check_logs "$2" "the unit tests"
  [ -z "$failed" ] || fail "unit tests:$failed"
}

# Two ranks over MPI, FCN and CNN, overlapped all-reduce and not; every case must end OK.
data_parallel_case() {  # BUILD-DIR LOG-DIR
  work="$1/sanitize-dp"
  rm -rf "$work"; mkdir -p "$work"
  if ! command -v mpirun > /dev/null; then echo "sanitize: no mpirun, 2-rank case skipped"; return; fi
  cat > "$work/dp.yaml" <<'YAML'
name: sanitize_dp
defaults: {backend: cpu_onednn, comm: mpi, ranks: 2, threads: 1, bucket_mb: 1, timeout: 300}
matrix:
  network: [fcnr, lenet]
  overlap: [true, false]
  include:
    - {network: fcnr, batch: 32}
    - {network: lenet, batch: 16}
YAML
  # Leak checking off for the MPI ranks only: Open MPI leaves ~3,350 allocations (~117 KB) per
  # rank at exit whose stacks end in "<unknown module>" (its dlclose'd components), which no
  # suppression can name. Address and UB errors still stop the ranks.
  ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
    "$1/host/dlhost" run "$work/dp.yaml" --quick -o "$work/dp.jsonl" || true
  check_logs "$2" "the 2-rank data-parallel case"
  /usr/bin/python3 - "$work/dp.jsonl" <<'PY' || fail "2-rank data-parallel case"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 4, f"{len(recs)} records, expected 4"
for r in recs:
    assert r["status"] == "OK", (r["case_id"], r["status"], r.get("reason"))
    assert r["distributed"]["ranks"] == 2, r["distributed"]
print(f"sanitize: {len(recs)} two-rank cases OK")
PY
}

start=$(date +%s)
rm -rf "$LOGS"; mkdir -p "$LOGS"
configure_and_build "$BUILD" "address,undefined"
run_gtests "$BUILD" "$LOGS"
data_parallel_case "$BUILD" "$LOGS"
echo "sanitize: ASan+UBSan passed in $(($(date +%s) - start)) s"

echo "sanitize: all passed in $(($(date +%s) - start)) s"
