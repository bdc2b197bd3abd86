#!/bin/sh
# cli_e2e.sh — the command line a vendor meets first (issue 31, point 7):
#  1. --plugin-path and -v are accepted after the subcommand as before it;
#  2. the `searched:` line of `dlhost plugins` lists the --plugin-path folders;
#  3. `plugins -v` names a backend's ops (async_device declares input, fc, activation and the
#     two losses);
#  4. `validate` counts a case whose network needs an op the backend's capabilities lack (LeNet's
#     conv2d on async_device) as skipped here;
#  5. an installed dlhost (copied to PREFIX/bin) searches PREFIX's plugin folder, not the build's.
# Usage: cli_e2e.sh DLHOST BUILD_DIR PLUGIN_RELDIR WORK_DIR
set -eu
DLHOST="$1"; BUILD="$2"; RELDIR="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "cli_e2e: FAILED: $*"; exit 1; }
FD="$BUILD/tests/fixture_device"

"$DLHOST" plugins -v --plugin-path "$FD" > "$WORK/plugins.txt" 2>&1 \
  || { cat "$WORK/plugins.txt"; fail "plugins -v --plugin-path after the subcommand"; }
grep -q "^async_device " "$WORK/plugins.txt" || { cat "$WORK/plugins.txt"; fail "async_device not listed"; }
grep -q "^    ops: input, fc, activation, softmax_cross_entropy, mse_loss$" "$WORK/plugins.txt" \
  || { cat "$WORK/plugins.txt"; fail "plugins -v does not name async_device's ops"; }
grep "^searched: " "$WORK/plugins.txt" | grep -q "$FD" \
  || { grep "^searched" "$WORK/plugins.txt"; fail "searched: lacks the --plugin-path folder"; }
echo "plugins: options after the subcommand, ops named, --plugin-path searched"

cat > "$WORK/caps.yaml" <<'YAML'
name: caps
defaults: {network: lenet, batch: 2, warmup: 1, iterations: 2, threads: 1}
cases:
  - {backend: async_device}
  - {backend: cpu_reference}
YAML
"$DLHOST" validate "$WORK/caps.yaml" --plugin-path "$FD" -v > "$WORK/validate.txt" 2> "$WORK/validate.err" \
  || { cat "$WORK/validate.txt" "$WORK/validate.err"; fail "validate"; }
grep -q "valid, 2 cases (1 skipped here)" "$WORK/validate.txt" \
  || { cat "$WORK/validate.txt"; fail "validate did not count lenet on async_device as skipped"; }
echo "validate: $(cat "$WORK/validate.txt")"

# Outside the build tree (a dlhost inside it searches the build's folder by design).
PREFIX=$(mktemp -d /tmp/dlhost_cli_e2e.XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT
mkdir -p "$PREFIX/bin" "$PREFIX/$RELDIR"
cp "$DLHOST" "$PREFIX/bin/dlhost"
cp "$BUILD/plugins/libdlhost_cpu_reference.so" "$BUILD/plugins/libdlhost_networks_paper.so" \
  "$PREFIX/$RELDIR/"
"$PREFIX/bin/dlhost" plugins > "$WORK/installed.txt" 2>&1 || { cat "$WORK/installed.txt"; fail "installed plugins"; }
grep -q "^cpu_reference .* $PREFIX/$RELDIR/libdlhost_cpu_reference.so" "$WORK/installed.txt" \
  || { cat "$WORK/installed.txt"; fail "the installed dlhost did not load its prefix's plugin"; }
grep -q "$BUILD/plugins" "$WORK/installed.txt" \
  && { cat "$WORK/installed.txt"; fail "the installed dlhost searched the build tree"; }
echo "installed: searches $PREFIX/$RELDIR"
echo "cli_e2e: passed"
