# build_example.sh — sourced by the out-of-tree tests: installs the SDK alone (component "sdk")
# into $WORK/sdk once, then builds one folder of examples/ against that installed package only,
# exactly as a third party would (find_package(dlhost 1 CONFIG), warnings as errors), and checks
# that the plugin exports nothing but its entry symbol.
# Needs: SRC (source tree), BUILD (dlhost's build tree), WORK (scratch folder).
# No build type is given, as in the documented commands: the package makes it Release, which
# the plugin's dlhost_plugin_build export must then say.
# Usage: build_example NAME [BUILD_TYPE]  -> the plugin is built in $WORK/NAME/build[-BUILD_TYPE]
# (from a folder SRC_DIR instead of examples/NAME when SRC_DIR is set)
build_example() {
  [ -d "$WORK/sdk" ] || cmake --install "$BUILD" --component sdk --prefix "$WORK/sdk" > /dev/null
  [ -d "$WORK/$1" ] || cp -r "${SRC_DIR:-$SRC/examples/$1}" "$WORK/$1"
  _dir="$WORK/$1/build${2:+-$2}"
  cmake -S "$WORK/$1" -B "$_dir" -G Ninja ${2:+-DCMAKE_BUILD_TYPE=$2} \
    -DCMAKE_PREFIX_PATH="$WORK/sdk" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
    > "$WORK/$1.configure.log" || { cat "$WORK/$1.configure.log"; exit 1; }
  cmake --build "$_dir" > "$WORK/$1.build.log" || { cat "$WORK/$1.build.log"; exit 1; }
  for so in "$_dir"/libdlhost_*.so; do
    nm -D --defined-only "$so" | grep -v " dlhost_plugin_entry$" | grep " T " \
      && { echo "FAILED: $so exports more than the entry symbol"; exit 1; }
    _want="optimized=1"; [ "${2:-}" = Debug ] && _want="optimized=0"
    strings "$so" | grep -q "^$_want " \
      || { echo "FAILED: $so (build type '${2:-default}') does not say $_want"; exit 1; }
  done
  return 0
}

# train_example BACKEND NETWORK BATCH [PLUGIN_PATH_OPTIONS...]: one `dlhost run` case of NETWORK
# on BACKEND (2 warm-up and 6 timed steps, one thread), which must end OK with a loss that went
# down; prints the two losses. Needs DLHOST and WORK, and fail().
train_example() {
  _b="$1"; _n="$2"; _batch="$3"; shift 3
  printf 'name: %s\ndefaults: {network: %s, backend: %s, warmup: 2, iterations: 6}\ncases:\n  - {batch: %s, threads: 1}\n' \
    "$_n" "$_n" "$_b" "$_batch" > "$WORK/$_n.yaml"
  "$DLHOST" "$@" run "$WORK/$_n.yaml" -o "$WORK/$_n.jsonl" > "$WORK/$_n.run.txt" 2>&1 \
    || { cat "$WORK/$_n.run.txt"; fail "dlhost run of $_n on $_b"; }
  /usr/bin/python3 - "$WORK/$_n.jsonl" "$_b" <<'PY' || { cat "$WORK/$_n.run.txt"; fail "$_n record (above)"; }
import json, sys
(rec,) = [json.loads(l) for l in open(sys.argv[1])]
assert rec["status"] == "OK", (rec["status"], rec.get("reason"))
loss = rec["loss"]
assert loss["warmup_first"] > loss["last"], f"the loss did not go down: {loss}"
print(f"{sys.argv[2]} trains {rec['params']['network']}: "
      f"loss {loss['warmup_first']:.4f} -> {loss['last']:.4f}")
PY
}
