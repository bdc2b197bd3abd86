#!/bin/sh
# build.sh — configures (Release, Ninja) and builds dlhost, its plugins and tests into ./build
# (or $DLHOST_BUILD_DIR). CUDA/MPI/NCCL parts switch on when found.
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR="${DLHOST_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)"
