#!/bin/sh
# sdk_out_of_tree.sh — the SDK is a kit, not just headers: install it alone, build
# examples/network_mlp against the installed package with no access to the source tree, and
# check that dlhost loads the result and can run a case on it. (The backend and comm examples
# are checked the same way by tests/sdk/example_out_of_tree.sh.)
# Usage: sdk_out_of_tree.sh DLHOST SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; BUILD="$3"; WORK="$4"
rm -rf "$WORK"
mkdir -p "$WORK"
. "$SRC/tests/sdk/build_example.sh"
build_example network_mlp
PLUGINS="$WORK/network_mlp/build"
"$DLHOST" --plugin-path "$PLUGINS" networks | grep -q "^example_mlp .* 203,530" \
  || { echo "FAILED: example_mlp not listed with 203,530 parameters"; exit 1; }
printf 'name: mlp\nmatrix:\n  network: [example_mlp]\n  backend: [cpu_onednn]\n  batch: [8]\n  iterations: [2]\n  warmup: [1]\n' > "$WORK/mlp.yaml"
"$DLHOST" --plugin-path "$PLUGINS" run "$WORK/mlp.yaml" -o "$WORK/mlp.jsonl" | grep -q " OK " \
  || { echo "FAILED: the example network did not train"; exit 1; }
echo "sdk_out_of_tree: passed"
