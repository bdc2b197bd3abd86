# build_example.sh — sourced by the out-of-tree tests: installs the SDK alone (component "sdk")
# into $WORK/sdk once, then builds one folder of examples/ against that installed package only,
# exactly as a third party would (find_package(dlhost 1 CONFIG), warnings as errors), and checks
# that the plugin exports nothing but its entry symbol.
# Needs: SRC (source tree), BUILD (dlhost's build tree), WORK (scratch folder).
# Usage: build_example NAME   -> the plugin is built in $WORK/NAME/build
build_example() {
  [ -d "$WORK/sdk" ] || cmake --install "$BUILD" --component sdk --prefix "$WORK/sdk" > /dev/null
  cp -r "$SRC/examples/$1" "$WORK/$1"
  cmake -S "$WORK/$1" -B "$WORK/$1/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$WORK/sdk" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror" \
    > "$WORK/$1.configure.log" || { cat "$WORK/$1.configure.log"; exit 1; }
  cmake --build "$WORK/$1/build" > "$WORK/$1.build.log" || { cat "$WORK/$1.build.log"; exit 1; }
  for so in "$WORK/$1/build"/libdlhost_*.so; do
    nm -D --defined-only "$so" | grep -v " dlhost_plugin_entry$" | grep " T " \
      && { echo "FAILED: $so exports more than the entry symbol"; exit 1; }
  done
  return 0
}
