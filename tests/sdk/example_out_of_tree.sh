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
# Both are built with no build type given (Release by the package's default); the backend also in
# Debug, whose case must carry the plugin_debug_build warning.
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
  # `dlhost new-backend`: the template builds out of tree (Release by default, warnings as errors),
  # loads, and conform reports every problem UNIMPLEMENTED (and exits 1: nothing PASSED).
  "$DLHOST" new-backend acme_tpl --dir "$WORK/acme_tpl" > "$WORK/tpl.txt" || { cat "$WORK/tpl.txt"; fail "new-backend"; }
  build_example acme_tpl
  set +e
  "$DLHOST" conform --backend "$WORK/acme_tpl/build/libdlhost_acme_tpl.so" --ops fc,conv2d \
    --networks none > "$WORK/tpl_conform.txt" 2>&1; rc=$?
  set -e
  [ $rc -eq 1 ] && grep -q "^0 passed, 0 failed, [1-9][0-9]* unimplemented" "$WORK/tpl_conform.txt" \
    || { cat "$WORK/tpl_conform.txt"; fail "the template's conform (exit $rc)"; }
  echo "template: $(tail -n 2 "$WORK/tpl_conform.txt" | head -n 1)"
  # A Debug build of the example (-O0): a case on it carries the plugin_debug_build warning, in
  # its record and on the console.
  build_example backend_naive Debug
  printf 'name: dbg\ndefaults: {network: example_mlp, backend: example_naive, batch: 2, warmup: 1, iterations: 2}\ncases:\n  - {threads: 1}\n' > "$WORK/dbg.yaml"
  "$DLHOST" --plugin-path "$WORK/backend_naive/build-Debug" --plugin-path "$WORK/network_mlp/build" \
    run "$WORK/dbg.yaml" -o "$WORK/dbg.jsonl" > "$WORK/dbg.txt" 2>&1 || { cat "$WORK/dbg.txt"; fail "debug case"; }
  grep -q "warning \[plugin_debug_build\]" "$WORK/dbg.txt" || { cat "$WORK/dbg.txt"; fail "no console warning for a Debug plugin"; }
  grep -q '"code":"plugin_debug_build"' "$WORK/dbg.jsonl" || fail "no plugin_debug_build in the Debug plugin's record"
  echo "debug plugin: warned"
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
  # Exit codes a vendor's CI relies on: nothing PASSED is not success; --strict fails on an op the
  # backend declares (example_naive publishes no capabilities: every op counts as declared) that
  # did not PASS, and passes when all checked ops did.
  run_conform() { set +e; "$DLHOST" $PATHS conform --backend "$NAIVE" --networks none --threads 1 "$@" \
    > "$WORK/c.txt" 2> "$WORK/c.err"; rc=$?; set -e; }
  run_conform --ops pool2d
  [ $rc -eq 1 ] && grep -q "no problem PASSED" "$WORK/c.err" || { cat "$WORK/c.txt" "$WORK/c.err"; fail "nothing passed, exit $rc"; }
  run_conform --ops fc,pool2d --strict
  [ $rc -eq 1 ] && grep -q "^  UNIMPLEMENTED op=pool2d" "$WORK/c.err" || { cat "$WORK/c.txt" "$WORK/c.err"; fail "--strict with pool2d unimplemented, exit $rc"; }
  run_conform --ops fc --strict
  [ $rc -eq 0 ] || { cat "$WORK/c.txt" "$WORK/c.err"; fail "--strict on fc alone, exit $rc"; }
  echo "conform exit codes: nothing passed 1, --strict 1 then 0"
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
