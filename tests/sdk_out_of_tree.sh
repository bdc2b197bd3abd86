#!/bin/sh
# sdk_out_of_tree.sh — the SDK is a kit, not just headers: install it alone, build
# examples/network_mlp against the installed package with no access to the source tree, and
# check that dlhost loads the result and can run a case on it.
# Usage: sdk_out_of_tree.sh DLHOST SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; BUILD="$3"; WORK="$4"
rm -rf "$WORK"
mkdir -p "$WORK"
cmake --install "$BUILD" --component sdk --prefix "$WORK/sdk" > /dev/null
cp -r "$SRC/examples/network_mlp" "$WORK/src"
cmake -S "$WORK/src" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$WORK/sdk" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" > "$WORK/configure.log"
cmake --build "$WORK/build" > "$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
nm -D --defined-only "$WORK/build/libdlhost_example_mlp.so" | grep -v " dlhost_plugin_entry$" \
  | grep " T " && { echo "FAILED: exports more than the entry symbol"; exit 1; }
"$DLHOST" --plugin-path "$WORK/build" networks | grep -q "^example_mlp .* 203,530" \
  || { echo "FAILED: example_mlp not listed with 203,530 parameters"; exit 1; }
printf 'name: mlp\nmatrix:\n  network: [example_mlp]\n  backend: [cpu_onednn]\n  batch: [8]\n  iterations: [2]\n  warmup: [1]\n' > "$WORK/mlp.yaml"
"$DLHOST" --plugin-path "$WORK/build" run "$WORK/mlp.yaml" -o "$WORK/mlp.jsonl" | grep -q " OK " \
  || { echo "FAILED: the example network did not train"; exit 1; }
echo "sdk_out_of_tree: passed"
