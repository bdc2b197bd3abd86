#!/bin/sh
# onednn_versions_e2e.sh — the two builds of cpu_onednn (cpu_onednn on Debian's oneDNN 2.6,
# cpu_onednn3 on the PyPI oneDNN 3.2 wheel) through the dlhost executable:
#   conform: `dlhost conform --backend cpu_onednn3` against cpu_reference at small shapes exits 0,
#            0 failed, as many problems passed as cpu_onednn's 40+ (conform_e2e.sh);
#   e2e:     `dlhost plugins` loads both into one process, each reporting its own oneDNN (2.x and
#            3.x) and the ISA it dispatches; a suite with both (LeNet b64, 1 thread) runs, every
#            case OK, each record naming its oneDNN, the loss falling on each and agreeing
#            between them; `dlhost compare FILE FILE --backends cpu_onednn,cpu_onednn3` pairs the
#            case by network and prints its ratio and verdict; a bad --backends exits 2.
# Usage: onednn_versions_e2e.sh conform|e2e DLHOST WORK_DIR
set -eu
KIND="$1"; DLHOST="$2"; WORK="$3"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "onednn_versions_e2e ($KIND): FAILED: $*"; exit 1; }

if [ "$KIND" = conform ]; then
  rc=0
  "$DLHOST" conform --backend cpu_onednn3 --reference cpu_reference --shapes small \
    --json "$WORK/conform.json" > "$WORK/conform.txt" 2> "$WORK/conform.err" || rc=$?
  tail -n 1 "$WORK/conform.txt"
  [ $rc -eq 0 ] || { cat "$WORK/conform.txt" "$WORK/conform.err"; fail "conform exited $rc"; }
  /usr/bin/python3 - "$WORK/conform.json" <<'PY' || fail "conform results (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["backend"]["name"] == "cpu_onednn3", doc["backend"]
s = doc["summary"]
assert s["failed"] == 0 and s["passed"] >= 40, s
PY
  echo "onednn_versions_e2e (conform): passed"
  exit 0
fi

# Both builds in one process, each with its own libdnnl.
"$DLHOST" plugins > "$WORK/plugins.txt" 2>&1 || { cat "$WORK/plugins.txt"; fail "dlhost plugins"; }
for pair in "cpu_onednn 2" "cpu_onednn3 3"; do
  set -- $pair
  grep -A1 -E "^$1 +backend" "$WORK/plugins.txt" | grep -qE "ISA [a-z0-9_]+, .*oneDNN $2\.[0-9]+\.[0-9]+ " ||
    { cat "$WORK/plugins.txt"; fail "dlhost plugins: no '$1' on oneDNN $2.x with its ISA"; }
done
grep -q "refused" "$WORK/plugins.txt" && grep -A3 refused "$WORK/plugins.txt" | grep -q onednn &&
  { cat "$WORK/plugins.txt"; fail "a cpu_onednn build was refused"; }

cat > "$WORK/both.yaml" <<'YAML'
name: onednn_both
description: LeNet on both cpu_onednn builds, 1 thread.
defaults: {warmup: 1, iterations: 9, network: lenet, batch: 64, threads: 1}
matrix:
  backend: [cpu_onednn, cpu_onednn3]
YAML
"$DLHOST" run "$WORK/both.yaml" -o "$WORK/both.jsonl" > "$WORK/run.txt" 2>&1 ||
  { cat "$WORK/run.txt"; fail "the suite with both builds"; }
/usr/bin/python3 - "$WORK/both.jsonl" <<'PY' || fail "the suite's records (above)"
import json, sys
recs = {r["backend"]["name"]: r for r in map(json.loads, open(sys.argv[1]))}
assert set(recs) == {"cpu_onednn", "cpu_onednn3"}, list(recs)
for name, major in (("cpu_onednn", "2."), ("cpu_onednn3", "3.")):
    r = recs[name]
    assert r["status"] == "OK", (name, r["status"], r.get("reason"))
    lib = r["backend"]["device"]["library"]
    assert lib.startswith("oneDNN " + major), (name, lib)
    assert r["backend"]["device"]["isa"] not in ("", "any"), r["backend"]["device"]
PY
/usr/bin/python3 - "$WORK/both.jsonl" <<'PY' || fail "losses (above)"
import json, sys
recs = {r["backend"]["name"]: r for r in map(json.loads, open(sys.argv[1]))}
a, b = recs["cpu_onednn"]["loss"]["values"], recs["cpu_onednn3"]["loss"]["values"]
assert len(a) == len(b) >= 5, (a, b)
assert a[-1] < a[0] and b[-1] < b[0], (a, b)  # the loss falls on both
for x, y in zip(a, b):  # same graph, weights, data, SGD: only rounding differs
    assert abs(x - y) <= 1e-3 * max(1.0, abs(x)), (a, b)
print(f"loss {a[0]:.4f} -> {a[-1]:.4f} (2.x), {b[0]:.4f} -> {b[-1]:.4f} (3.x)")
PY

"$DLHOST" compare "$WORK/both.jsonl" "$WORK/both.jsonl" --backends cpu_onednn,cpu_onednn3 \
  > "$WORK/compare.txt" 2>&1 || { cat "$WORK/compare.txt"; fail "compare --backends"; }
cat "$WORK/compare.txt"
grep -qE "^lenet\.b64\.t1 +[0-9.]+ +[0-9.]+ +[0-9.]+ .*(same|faster|REGRESSION|within threshold|inconclusive .*)$" \
  "$WORK/compare.txt" || fail "compare printed no paired lenet row"
grep -q "(backend cpu_onednn3)" "$WORK/compare.txt" || fail "compare does not name the backends"
rc=0
"$DLHOST" compare "$WORK/both.jsonl" "$WORK/both.jsonl" --backends cpu_onednn \
  > "$WORK/bad.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] && grep -q "BASE,NEW" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "bad --backends accepted ($rc)"; }
rc=0
"$DLHOST" compare "$WORK/both.jsonl" "$WORK/both.jsonl" --backends cpu_onednn,cpu_nothere \
  > "$WORK/absent.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "no record of backend cpu_nothere" "$WORK/absent.txt" ||
  { cat "$WORK/absent.txt"; fail "an absent backend gave $rc"; }
echo "onednn_versions_e2e (e2e): passed"
