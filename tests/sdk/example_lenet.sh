#!/bin/sh
# example_lenet.sh — examples/backend_lenet, the backend a vendor writes first, as the docs tell:
#  1. the in-tree build (IN_TREE_SO, with the project's warnings) trains LeNet through
#     `dlhost run`: status OK and a loss that went down;
#  2. built out of tree against the installed SDK only (build_example.sh: Release by default,
#     warnings as errors, one export), `dlhost conform --strict` exits 0: every problem of the ops
#     it declares PASSED (pool2d, fc, activation, softmax_cross_entropy, mse_loss; conv2d by
#     descriptor, with grouped, strided, dilated and LeNet's conv2, but not the 256-channel one),
#     the lenet network PASSED, every other op UNIMPLEMENTED.
# Usage: example_lenet.sh DLHOST IN_TREE_SO SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
DLHOST="$1"; IN_TREE="$2"; SRC="$3"; BUILD="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "example_lenet: FAILED: $*"; exit 1; }
. "$SRC/tests/sdk/build_example.sh"

train_example example_lenet lenet 16 --plugin-path "$(dirname "$IN_TREE")"

build_example backend_lenet
# Every op problem but conform's 256-channel convolution (AlexNet's conv4: ten minutes of
# finite differences on plain loops, docs/conform.md), then the convolution problems up to
# LeNet's conv2 by descriptor; both with --strict.
SO="$WORK/backend_lenet/build/libdlhost_example_lenet.so"
conform() {
  set +e
  "$DLHOST" conform --backend "$SO" --threads 1 --strict "$@" > "$WORK/conform.txt" 2>&1
  rc=$?
  set -e
  tail -n 1 "$WORK/conform.txt"
  [ $rc -eq 0 ] || { cat "$WORK/conform.txt"; fail "conform --strict $* exited $rc"; }
}
conform --ops fc,pool2d,activation,softmax_cross_entropy,mse_loss,batch_norm,dropout,add,lrn,embedding,lstm,global_avg_pool,layer_norm,gelu,attention,position_embedding,tied_fc \
  --networks lenet --json "$WORK/conform.json"
/usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, sys
status = {r["id"]: r["status"] for r in json.load(open(sys.argv[1]))["checks"]}
mine = ("op=pool2d", "op=fc", "op=activation", "op=softmax_cross_entropy",
        "op=mse_loss", "net=lenet")
for prefix in mine:
    rows = [s for k, s in status.items() if k.startswith(prefix)]
    assert rows and all(s == "PASSED" for s in rows), f"{prefix}: {rows}"
others = {k: s for k, s in status.items() if not k.startswith(mine)}
assert others and all(s == "UNIMPLEMENTED" for s in others.values()), others
print(f"out-of-tree example_lenet: {sum(s == 'PASSED' for s in status.values())} passed, "
      f"{len(others)} unimplemented")
PY
for d in "n=2,c=3,h=7,w=7,oc=4,k=3,s=1,p=1,d=1,g=1,bias=1" "n=3,c=5,h=9,w=7,oc=4,k=3,s=2,p=1,d=2,g=1,bias=1" \
         "n=1,c=4,h=6,w=5,oc=6,k=3,s=1,p=0,d=1,g=2,bias=0" "n=2,c=6,h=5,w=5,oc=6,k=3,s=1,p=1,d=1,g=6,bias=1" \
         "n=2,c=20,h=12,w=12,oc=50,k=5,s=1,p=0,d=1,g=1,bias=1"; do
  set -- "$@" --case "op=conv2d,$d"
done
conform --networks none "$@"
grep -q "^5 passed, 0 failed" "$WORK/conform.txt" || fail "not every conv2d problem PASSED"
echo "example_lenet: passed"
