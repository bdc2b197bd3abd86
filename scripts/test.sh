#!/bin/sh
# test.sh — the test command of the README and of CI: installs what is missing, builds, and runs
# the whole ctest suite. Tests that need a GPU or several MPI ranks print why they skip.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR="${DLHOST_BUILD_DIR:-build}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j 2 --timeout 900
