#!/bin/sh
# example_out_of_tree.sh — the backend and comm examples as a third party builds and runs them:
# each built against the installed SDK only (build_example.sh), then
#   backend: `dlhost conform --backend <its .so>` on every op problem and on the example_mlp
#            network (examples/network_mlp, built the same way): it must exit 0 with no FAILED,
#            PASS the ops it implements (conv2d, fc, activation, add, the two losses) and the
#            network, and report every problem that needs another op UNIMPLEMENTED;
#   comm:    `dlhost comm-bench --comm example_store` on one rank with #wrong 0, then a 2-rank
#            data-parallel case (launcher: local, the store carries every gradient) that ends OK
#            with a loss that went down, on the example backend and network.
# Usage: example_out_of_tree.sh backend|comm DLHOST SOURCE_DIR BUILD_DIR WORK_DIR
set -eu
KIND="$1"; DLHOST="$2"; SRC="$3"; BUILD="$4"; WORK="$5"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "example_out_of_tree ($KIND): FAILED: $*"; exit 1; }
. "$SRC/tests/sdk/build_example.sh"
build_example backend_naive
build_example network_mlp
NAIVE="$WORK/backend_naive/build/libdlhost_example_naive.so"
PATHS="--plugin-path $WORK/backend_naive/build --plugin-path $WORK/network_mlp/build"

if [ "$KIND" = backend ]; then
  set +e
  "$DLHOST" $PATHS conform --backend "$NAIVE" --networks example_mlp --threads 1 \
    --json "$WORK/conform.json" > "$WORK/conform.txt" 2> "$WORK/conform.err"
  rc=$?
  set -e
  tail -n 1 "$WORK/conform.txt"
  [ $rc -eq 0 ] || { cat "$WORK/conform.txt" "$WORK/conform.err"; fail "conform exited $rc"; }
  /usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["backend"]["name"] == "example_naive", doc["backend"]
status = {r["id"]: r["status"] for r in doc["checks"]}
assert status, "no problems in the JSON"
bad = {k: s for k, s in status.items() if s not in ("PASSED", "UNIMPLEMENTED")}
assert not bad, f"not PASSED nor UNIMPLEMENTED: {bad}"
def passed(prefix):
    return [k for k, s in status.items() if k.startswith(prefix) and s == "PASSED"]
for op in ("op=conv2d", "op=fc", "op=activation", "op=add", "op=softmax_cross_entropy",
           "op=mse_loss", "net=example_mlp"):
    assert passed(op), f"no {op} problem PASSED: {[(k, s) for k, s in status.items() if k.startswith(op)]}"
for op in ("op=pool2d", "op=batch_norm", "op=lstm", "op=embedding"):
    rows_op = [s for k, s in status.items() if k.startswith(op)]
    assert rows_op and all(s == "UNIMPLEMENTED" for s in rows_op), f"{op}: {rows_op}"
print(f"example backend: {sum(s == 'PASSED' for s in status.values())} passed, "
      f"{sum(s == 'UNIMPLEMENTED' for s in status.values())} unimplemented")
PY
  echo "example_out_of_tree (backend): passed"
  exit 0
fi

build_example comm_store
PATHS="$PATHS --plugin-path $WORK/comm_store/build"
"$DLHOST" $PATHS plugins | grep -q "example_store" || fail "dlhost plugins does not list example_store"
"$DLHOST" $PATHS comm-bench --comm example_store -b 1K -e 256K -f 4 -n 3 -w 1 \
  --json "$WORK/bench.json" > "$WORK/bench.txt" 2> "$WORK/bench.err" \
  || { cat "$WORK/bench.txt" "$WORK/bench.err"; fail "comm-bench"; }
grep -q "^# Out of bounds values : 0 OK" "$WORK/bench.txt" || { cat "$WORK/bench.txt"; fail "#wrong"; }
grep "^# Out of bounds" "$WORK/bench.txt"
cat > "$WORK/dp.yaml" <<'YAML'
name: example_dp
defaults: {network: example_mlp, backend: example_naive, comm: example_store, launcher: local,
           batch: 8, warmup: 1, iterations: 4, threads: 1, timeout: 300}
cases:
  - {ranks: 2}
YAML
"$DLHOST" $PATHS run "$WORK/dp.yaml" -o "$WORK/dp.jsonl" > "$WORK/dp.txt" 2> "$WORK/dp.err" \
  || { cat "$WORK/dp.txt"; tail -n 30 "$WORK/dp.err"; fail "dlhost run"; }
cat "$WORK/dp.txt"
/usr/bin/python3 - "$WORK/dp.jsonl" <<'PY' || fail "data-parallel record (above)"
import json, sys
(rec,) = [json.loads(l) for l in open(sys.argv[1])]
assert rec["status"] == "OK", (rec["status"], rec.get("reason"))
d = rec["distributed"]
assert d["ranks"] == 2 and d["comm"] == "example_store" and d["launcher"] == "local", d
loss = rec["loss"]
assert loss["warmup_first"] > loss["last"], f"the loss did not go down: {loss}"
print(f"2-rank case on example_store: {rec['status']}, loss {loss['warmup_first']:.4f} -> "
      f"{loss['last']:.4f}")
PY
echo "example_out_of_tree (comm): passed"
