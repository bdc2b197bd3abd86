#!/bin/sh
# run_fuzzer.sh — builds the fuzz targets with clang and runs one of them for a bounded time
# over the committed corpus (new inputs go to a scratch copy, so the tree is never written).
# Usage: run_fuzzer.sh TARGET SOURCE_DIR WORK_DIR
# By default a fixed seed and a fixed number of executions ($DLHOST_FUZZ_RUNS, 300000: about a
# minute here), so a CI run explores exactly what the run before it explored and cannot fail by
# luck; set DLHOST_FUZZ_SECONDS to fuzz for that long with a random seed instead (to hunt).
# Exit 77 (skipped) when clang/libFuzzer is missing; non-zero when the fuzzer finds a crash.
set -eu
TARGET="$1"; SRC="$2"; WORK="$3"
if [ -n "${DLHOST_FUZZ_SECONDS:-}" ]; then
  BUDGET="-max_total_time=$DLHOST_FUZZ_SECONDS"
else
  BUDGET="-seed=1 -runs=${DLHOST_FUZZ_RUNS:-300000}"
fi
if ! command -v clang++ > /dev/null; then
  echo "SKIPPED: clang++ not installed (Debian: clang, libclang-rt-14-dev)"; exit 77
fi
mkdir -p "$WORK"
# Both targets share one build; a lock keeps two parallel ctest runs from building at once.
(
  flock 9
  if [ ! -f "$WORK/build/build.ninja" ]; then
    cmake -S "$SRC/tests/fuzz" -B "$WORK/build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$WORK/configure.log" 2>&1 || { cat "$WORK/configure.log"; exit 1; }
  fi
  # Incremental: ninja rebuilds what changed in the host sources.
  cmake --build "$WORK/build" > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
) 9> "$WORK/.lock"
rm -rf "$WORK/$TARGET-new" "$WORK/$TARGET-artifacts"
mkdir -p "$WORK/$TARGET-new" "$WORK/$TARGET-artifacts"
CORPUS="$SRC/tests/fuzz/corpus/${TARGET#fuzz_}"
cd "$WORK"
set +e
# -timeout is wall-clock per input: a suite at the 10,000-case limit takes ~2 s of CPU, but 31 s
# of wall time was measured with a dozen builds and tests beside it; 60 s still catches a hang.
"$WORK/build/$TARGET" $BUDGET -timeout=60 -rss_limit_mb=2048 \
  -artifact_prefix="$WORK/$TARGET-artifacts/" -print_final_stats=1 \
  "$WORK/$TARGET-new" "$CORPUS" > "$WORK/$TARGET.log" 2>&1
status=$?
set -e
tail -25 "$WORK/$TARGET.log"
ls "$WORK/$TARGET-artifacts" | grep -q . && { echo "FAILED: crash inputs in $WORK/$TARGET-artifacts"; exit 1; }
exit $status
