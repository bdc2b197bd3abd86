#!/bin/sh
# example_device.sh — examples/backend_device, the device backend a vendor copies (the kit's
# device virtuals on the SDK's simulated device), as the docs tell:
#  1. the in-tree build (IN_TREE_SO, with the project's warnings) trains example_mlp through
#     `dlhost run`: status OK, a loss that went down, steps timed by its events and the device's
#     memory in the record;
#  2. built out of tree against the installed SDK only (build_example.sh: Release by default,
#     warnings as errors, one export), `dlhost conform --strict` on every op problem and the
#     example_mlp network exits 0: every problem of the ops it declares (fc, activation,
#     softmax_cross_entropy, mse_loss) PASSED unless it also needs an op it does not declare,
#     the network PASSED, everything else UNIMPLEMENTED.
# Usage: example_device.sh DLHOST IN_TREE_SO SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
DLHOST="$1"; IN_TREE="$2"; SRC="$3"; BUILD="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "example_device: FAILED: $*"; exit 1; }
. "$SRC/tests/sdk/build_example.sh"
build_example network_mlp
NETS="--plugin-path $WORK/network_mlp/build"

train_example example_device example_mlp 32 --plugin-path "$(dirname "$IN_TREE")" $NETS
# The host took the device path: steps timed by the backend's events, memory from its device
# memory extension (the simulated device's 1 GiB).
/usr/bin/python3 - "$WORK/example_mlp.jsonl" <<'PY' || fail "the device path was not taken (above)"
import json, sys
rec = json.loads(open(sys.argv[1]).readline())
assert rec["timing"]["timer"] == "device_events", rec["timing"]["timer"]
mem = rec["memory"]
assert mem["source"] == "device_memory_ext" and mem["device"]["total_bytes"] == 1 << 30, mem
print(f"device path: timer {rec['timing']['timer']}, device memory in use {mem['device']['in_use_bytes']} B")
PY

build_example backend_device
SO="$WORK/backend_device/build/libdlhost_example_device.so"
set +e
"$DLHOST" $NETS conform --backend "$SO" --threads 1 --strict --ops all --networks example_mlp \
  --json "$WORK/conform.json" > "$WORK/conform.txt" 2>&1
rc=$?
set -e
tail -n 1 "$WORK/conform.txt"
[ $rc -eq 0 ] || { cat "$WORK/conform.txt"; fail "conform --strict exited $rc"; }
/usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, sys
rows = {r["id"]: r for r in json.load(open(sys.argv[1]))["checks"]}
mine = ("op=fc,", "op=activation,", "op=softmax_cross_entropy,", "op=mse_loss,")
ran = {k: r["status"] for k, r in rows.items() if k.startswith(mine)
       and "in its capabilities" not in r.get("reason", "")}
assert len(ran) >= 8 and all(s == "PASSED" for s in ran.values()), ran
(net,) = [k for k in rows if k.startswith("net=example_mlp,")]
assert rows[net]["status"] == "PASSED", rows[net]
others = {k: r["status"] for k, r in rows.items() if k not in ran and k != net}
assert others and all(s == "UNIMPLEMENTED" for s in others.values()), others
print(f"out-of-tree example_device: {len(ran) + 1} passed, {len(others)} unimplemented")
PY
echo "example_device: passed"
