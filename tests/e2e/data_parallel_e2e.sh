#!/bin/sh
# data_parallel_e2e.sh — synchronous data-parallel SGD over 2 MPI ranks is the same training as
# 1 rank on the whole mini-batch: after k steps, 2 ranks each on half the batch end with the same
# weights as 1 rank (FCN and CNN, with and without overlap), within a relative tolerance of 1e-4
# (float sums in another order). Then a rank that crashes, or hangs, ends its case with a
# failure naming the rank, and the suite goes on.
# Usage: data_parallel_e2e.sh DLHOST SOURCE_DIR FIXTURE_BACKEND_DIR WORK_DIR
# Exit 77 (skipped) when mpirun cannot start 2 ranks here.
set -eu
DLHOST="$1"; SRC="$2"; FIXTURES="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK/params"
fail() { echo "data_parallel_e2e: FAILED: $*"; exit 1; }
. "$(dirname "$0")/rank_faults.sh"

if ! command -v mpirun > /dev/null; then echo "SKIPPED: mpirun not installed"; exit 77; fi
# mpirun refuses root and exits 0 when it does: check that two ranks really ran.
n=$(mpirun --allow-run-as-root -np 2 sh -c 'echo rank-ran' 2>&1 | grep -c rank-ran || true)
if [ "$n" -ne 2 ]; then echo "SKIPPED: mpirun could not start 2 ranks here"; exit 77; fi

cat > "$WORK/equiv.yaml" <<'YAML'
name: equiv
defaults: {backend: cpu_onednn, comm: mpi, warmup: 0, iterations: 6, threads: 1, timeout: 120}
matrix:
  network: [fcnr, lenet]
  ranks: [1, 2]
  overlap: [true, false]
  bucket_mb: [1]
  include:
    - {network: fcnr, batch: 32, lr: 0.2}
    - {network: lenet, batch: 16, lr: 0.1}
YAML
DLHOST_DUMP_PARAMS_DIR="$WORK/params" "$DLHOST" run "$WORK/equiv.yaml" -o "$WORK/equiv.jsonl" \
  > "$WORK/equiv.txt" 2>&1 || { cat "$WORK/equiv.txt"; fail "run"; }
cat "$WORK/equiv.txt"
/usr/bin/python3 - "$WORK" <<'PY' || fail "2 ranks did not train like 1 rank"
import glob, json, os, struct, sys
work = sys.argv[1]
recs = {json.loads(l)["case_id"]: json.loads(l) for l in open(f"{work}/equiv.jsonl")}
def weights(case):
    data = open(f"{work}/params/{case}.params", "rb").read()
    return struct.unpack(f"{len(data) // 4}f", data)
worst = 0.0
for case, r in recs.items():
    assert r["status"] == "OK", (case, r["reason"])
    if r["params"]["ranks"] != 2:
        continue
    d = r["distributed"]
    assert d["ranks"] == 2 and d["per_rank_batch"] * 2 == d["global_batch"], d
    assert d["buckets"] >= 2, "bucket_mb 1 should give several buckets"
    base = case.replace("ranks=2", "ranks=1")
    a, b = weights(case), weights(base)
    assert len(a) == len(b) and len(a) > 0
    scale = max(abs(x) for x in b)
    diff = max(abs(x - y) for x, y in zip(a, b)) / scale
    worst = max(worst, diff)
    print(f"{case}: max |w2 - w1| / max |w1| = {diff:.2e}")
    assert diff < 1e-4, f"{case}: weights differ from 1 rank by {diff:.2e}"
    assert abs(r["loss"]["first"] - recs[base]["loss"]["first"]) < 1e-4 * abs(recs[base]["loss"]["first"])
    assert "vs_1_rank" in d and "ranks=1.overlap=true" in d["vs_1_rank"]["baseline_case"], d
print(f"worst relative weight difference {worst:.2e}")
PY

# A rank that crashes or hangs: the case fails naming the rank; the next case still runs.
check_rank_faults "$DLHOST" "$FIXTURES" "$WORK" mpi mpirun strict
echo "data_parallel_e2e: all checks passed"
