#!/bin/sh
# runtime_settings_e2e.sh — the case keys that set the process a case runs in (issue 40):
#  1. `dlhost case-env` prints the environment bench gives a peer (MXNet's cap, no
#     OMP_NUM_THREADS), and refuses an unknown value;
#  2. `validate` refuses an unknown allocator with FILE:LINE:COL;
#  3. each allocator installed here is the one the case's process runs on
#     (environment.allocator); one that is not installed SKIPS the case with the reason;
#  4. cpu_libtorch2 (libtorch in its own link-map namespace), where built: its ATen memory comes
#     from the case's allocator too (the library line's "malloc ...");
#  5. `openblas_coretype` reaches OpenBLAS in the case's process (environment.library_dispatch,
#     cpu_reference), and a core below the CPU's ISA draws the library_dispatch warning.
# Usage: runtime_settings_e2e.sh DLHOST WORK_DIR
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "runtime_settings_e2e: FAILED: $*"; exit 1; }
PY=/usr/bin/python3
# run_suite NAME DEFAULTS AXIS VALUES: a suite of one matrix axis over the given defaults, run
# into $WORK/NAME.jsonl.
run_suite() {
  printf 'name: %s\ndefaults: {%s}\nmatrix:\n  %s: [%s]\n' "$1" "$2" "$3" "$4" > "$WORK/$1.yaml"
  "$DLHOST" run "$WORK/$1.yaml" -o "$WORK/$1.jsonl" > "$WORK/$1.txt" 2>&1 \
    || { cat "$WORK/$1.txt"; fail "run $1.yaml"; }
}
SMALL="network: lenet, batch: 8, warmup: 1, iterations: 2, threads: 1"

# --- 1. case-env ---
"$DLHOST" case-env --set backend=cpu_mxnet --set threads=2 --set allocator=system \
  > "$WORK/env.json" || fail "case-env"
$PY - "$WORK/env.json" <<'PYEOF' || fail "case-env's JSON (above)"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["set"]["MXNET_OMP_MAX_THREADS"] == "2", e
assert "OMP_NUM_THREADS" in e["unset"], e
assert e["allocator"]["name"] == "system", e
PYEOF
rc=0; "$DLHOST" case-env --set allocator=mimalloc > "$WORK/bad.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "case-env --set allocator=mimalloc exited $rc, not 2"
grep -q "system, tcmalloc, jemalloc" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "no choices named"; }
echo "case-env: the environment as JSON, bad values refused"

# --- 2. validate ---
cat > "$WORK/bad.yaml" <<'YAML'
name: bad
defaults: {network: lenet, batch: 2}
cases:
  - {backend: cpu_reference, allocator: mimalloc}
YAML
rc=0; "$DLHOST" validate "$WORK/bad.yaml" > "$WORK/validate.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/validate.txt"; fail "validate exited $rc, not 2"; }
grep -q "bad.yaml:4:[0-9]*: .*'allocator' must be one of system, tcmalloc, jemalloc" \
  "$WORK/validate.txt" || { cat "$WORK/validate.txt"; fail "no FILE:LINE:COL for the allocator"; }
echo "validate: an unknown allocator refused at its line"

# --- 3. the allocator a case runs on ---
run_suite alloc "$SMALL, backend: cpu_onednn" allocator "system, tcmalloc, jemalloc"
JEMALLOC_CASE=$("$DLHOST" run "$WORK/alloc.yaml" --dry-run | grep '^lenet.*jemalloc')
DLHOST_ALLOCATOR_PATH="$WORK/nowhere" "$DLHOST" run "$WORK/alloc.yaml" --case "$JEMALLOC_CASE" \
  -o "$WORK/missing.jsonl" > "$WORK/missing.txt" 2>&1 || true
$PY - "$WORK/alloc.jsonl" "$WORK/missing.jsonl" <<'PYEOF' || fail "allocator records (above)"
import json, os, sys
files = {"tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
         "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}
for r in map(json.loads, open(sys.argv[1])):
    want = r["params"]["allocator"]
    if want != "system" and not os.path.exists(files[want]):
        assert r["status"] == "SKIPPED" and files[want].split("/")[-1] in r["reason"], r["reason"]
        print(f"{want}: not installed here, SKIPPED: {r['reason']}")
        continue
    assert r["status"] == "OK", (want, r["status"], r.get("reason"))
    got = r["environment"]["allocator"]
    assert got["name"] == want, (want, got)
    print(f"{want}: the case ran on {got['name']} {got['version']} ({got['library']})")
missing = [json.loads(l) for l in open(sys.argv[2])]
assert len(missing) == 1, missing
assert missing[0]["status"] == "SKIPPED", missing[0]["status"]
assert "libjemalloc.so.2 is not installed here" in missing[0]["reason"], missing[0]["reason"]
PYEOF
echo "allocator: each one the case asked for is the one it ran on; a missing one SKIPPED"

# --- 4. cpu_libtorch2's namespace ---
if "$DLHOST" plugins 2>/dev/null | grep -q "^cpu_libtorch2 "; then
  run_suite ns "$SMALL, backend: cpu_libtorch2" allocator "system, tcmalloc, jemalloc"
  $PY - "$WORK/ns.jsonl" <<'PYEOF' || fail "cpu_libtorch2 records (above)"
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    want = r["params"]["allocator"]
    if r["status"] == "SKIPPED":
        continue
    assert r["status"] == "OK", (want, r["status"], r.get("reason"), r.get("stderr_tail"))
    library = r["backend"]["device"]["library"]
    inside = {"system": "malloc glibc", "tcmalloc": "malloc tcmalloc", "jemalloc": "malloc jemalloc"}[want]
    assert inside in library, (want, library)
    print(f"cpu_libtorch2 on {want}: {library}")
PYEOF
  echo "cpu_libtorch2: its namespace runs the case's allocator"
else
  echo "cpu_libtorch2 not built here: its namespace's allocator not checked"
fi

# --- 5. OpenBLAS's core ---
CORE=$($PY -c 'import re; f=open("/proc/cpuinfo").read(); fl=set(re.search(r"^flags\s*:(.*)$", f, re.M).group(1).split()); print("SkylakeX" if {"avx512f","avx512bw","avx512vl","avx512dq"} <= fl else "Haswell" if {"avx2","fma"} <= fl else "Sandybridge" if "avx" in fl else "")')
run_suite blas "network: fcnr, batch: 8, warmup: 1, iterations: 2, threads: 1, backend: cpu_reference" \
  openblas_coretype "auto, Prescott"
CORE="$CORE" $PY - "$WORK/blas.jsonl" <<'PYEOF' || fail "OpenBLAS records (above)"
import json, os, sys
core = os.environ["CORE"]
for r in map(json.loads, open(sys.argv[1])):
    assert r["status"] == "OK", (r["status"], r.get("reason"))
    key = r["params"]["openblas_coretype"]
    d = [x for x in r["environment"]["library_dispatch"] if x["library"] == "OpenBLAS"]
    assert len(d) == 1, r["environment"]["library_dispatch"]
    want = core if key == "auto" else key
    if want:
        assert d[0]["dispatched"].lower() == want.lower(), (key, d[0])
    codes = [w["code"] for w in r.get("warnings", [])]
    assert ("library_dispatch" in codes) == (key == "Prescott" and core != ""), (key, r.get("warnings"))
    print(f"openblas_coretype {key}: OpenBLAS ran {d[0]['dispatched']} ({d[0]['version']}); warnings {codes}")
PYEOF
echo "runtime_settings_e2e: passed"
