#!/bin/sh
# tidy.sh — runs clang-tidy (the checks of .clang-tidy at the root) over the host's and the
# plugins' sources with the compile commands of ./build (or $DLHOST_BUILD_DIR; configure it
# first with scripts/build.sh or cmake). Any warning is an error (WarningsAsErrors in
# .clang-tidy); exits non-zero when one is found. Slow: a few minutes per core.
# Usage: scripts/tidy.sh [FILE-REGEX...]   (default: every .cpp under host/ and plugins/)
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR="${DLHOST_BUILD_DIR:-build}"
TIDY="${CLANG_TIDY:-clang-tidy-14}"
RUNNER="${RUN_CLANG_TIDY:-run-clang-tidy-14}"
[ -f "$BUILD_DIR/compile_commands.json" ] ||
  { echo "tidy: no $BUILD_DIR/compile_commands.json; configure the build first"; exit 2; }
command -v "$RUNNER" > /dev/null || { echo "tidy: $RUNNER not installed (apt-get install clang-tidy-14)"; exit 2; }
# Files from the compile database, so moved or new sources are covered without listing them.
if [ "$#" -eq 0 ]; then set -- "$(pwd)/host/.*\.cpp\$" "$(pwd)/plugins/.*\.cpp\$"; fi
exec nice "$RUNNER" -clang-tidy-binary "$(command -v "$TIDY")" -p "$BUILD_DIR" \
  -j "$(nproc)" -quiet "$@"
