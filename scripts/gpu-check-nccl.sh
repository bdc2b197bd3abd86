#!/bin/sh
# gpu-check-nccl.sh — the NCCL part of the one-call GPU check (scripts/gpu-check.sh runs it after
# the gpu_cudnn part): everything of plugins/comm_nccl that needs real GPUs, in one short run.
#   nccl_unit          test_comm_nccl: every collective and reduce op on device memory ordered on
#                      a stream, bf16/fp16, group calls, barrier, abort, a peer that never joins;
#                      2-GPU cases (two ranks, a dead peer) only where 2 devices exist
#   comm_bench_1rank   `dlhost comm-bench --comm nccl` on device buffers, world size 1, values
#                      checked, busbw = algbw x nccl-tests' factor; f32 sum, then f64 max
#   comm_bench_2ranks  the same on 2 ranks under mpirun (2 GPUs only)
#   data_parallel      suites/paper_repro.yaml's multi-GPU section (--quick): the 1-GPU cases
#                      train (loss goes down) through the whole data-parallel path with gradient
#                      buckets; cases needing more GPUs than the machine has are SKIPPED with the
#                      reason (and run where they exist)
#   buckets_vs_none    FCN-R on 1 GPU with comm: nccl (4 MB buckets, overlap on and off) trains
#                      exactly like comm: none (loss per step within 1e-3 relative)
# Every check prints PASS, FAIL or SKIP with its reason; its log is under OUT. Exit 0 only when
# no check failed. Nothing here is timed against a threshold: the figures are printed.
# Usage: scripts/gpu-check-nccl.sh [BUILD_DIR] (default ./build, built with the CUDA toolkit)
# From a bundle (scripts/gpu-check.sh does this), the environment names the parts instead:
# DLHOST (a dlhost command taking arguments), DLHOST_NCCL_PLUGIN (the comm_nccl library) and
# NCCL_UNIT (the test_comm_nccl executable).
set -u
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
DLHOST="${DLHOST:-$BUILD/host/dlhost}"
NCCL_PLUGIN="${DLHOST_NCCL_PLUGIN:-$BUILD/plugins/libdlhost_comm_nccl.so}"
NCCL_UNIT="${NCCL_UNIT:-$BUILD/tests/comm_nccl/test_comm_nccl}"
OUT="${DLHOST_GPU_CHECK_OUT:-$BUILD/gpu-check-nccl}"
rm -rf "$OUT"
mkdir -p "$OUT"
failed=0

[ -x "$DLHOST" ] || { echo "gpu-check-nccl: FAIL: no $DLHOST (build first: scripts/build.sh)"; exit 1; }
[ -f "$NCCL_PLUGIN" ] ||
  { echo "gpu-check-nccl: FAIL: comm_nccl was not built (CUDA toolkit or NCCL not found)"; exit 1; }
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
echo "gpu-check-nccl: ${gpus:-0} GPU(s): $(nvidia-smi -L 2> /dev/null | head -n 1)"
"$DLHOST" plugins | grep -A1 "^nccl " | tee "$OUT/plugin.txt"
if grep -q "not usable here" "$OUT/plugin.txt"; then
  echo "gpu-check-nccl: SKIP: $(grep -o 'not usable here: .*' "$OUT/plugin.txt")"
  exit 77
fi

# run NAME COMMAND...: the command's exit status decides (77 = SKIP with the reason it printed).
run() {
  name="$1"
  shift
  "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "PASS  $name"
    grep '^  ' "$OUT/$name.log" | head -n 12
  elif [ $rc -eq 77 ]; then
    echo "SKIP  $name: $(grep -m1 'SKIP' "$OUT/$name.log")"
  else
    echo "FAIL  $name (exit $rc), last lines of $OUT/$name.log:"
    tail -n 30 "$OUT/$name.log" | sed 's/^/    /'
    failed=1
  fi
}

unit() {
  DLHOST_NCCL_PLUGIN="$NCCL_PLUGIN" "$NCCL_UNIT" || return 1
  # On a machine with a GPU only the 2-device cases may skip.
  if grep -q 'SKIPPED \] NcclGpu' "$OUT/nccl_unit.log" && [ "${gpus:-0}" -ge 2 ]; then return 1; fi
  grep -q '^\[  SKIPPED \] NcclGpu\.\(WorldOfOne\|Group\|Abort\|APeer\)' "$OUT/nccl_unit.log" &&
    return 1
  echo "  $(grep -c '^\[       OK \] NcclGpu' "$OUT/nccl_unit.log") GPU cases passed"
}

bench() {  # NAME MODE [comm-bench args]: comm_nccl_bench.sh's rows of the largest size shown
  name="$1"
  shift
  sh tests/comm_nccl/comm_nccl_bench.sh "$DLHOST" "$OUT/$name" "$@"
}

comm_bench_1rank() { bench bench_f32_sum 1rank && bench bench_f64_max 1rank -d f64 -o max; }

data_parallel() {
  set --
  for id in $("$DLHOST" run suites/paper_repro.yaml --dry-run | grep -o '^[a-z0-9_]*\.gpu_cudnn\.[^ ]*comm=nccl[^ ]*'); do
    set -- "$@" --case "$id"
  done
  [ $# -eq 18 ] || { echo "expected 9 multi-GPU cases in paper_repro, got $(($# / 2))"; return 1; }
  "$DLHOST" run suites/paper_repro.yaml --quick "$@" -o "$OUT/paper.jsonl"
  python3 - "$OUT/paper.jsonl" "${gpus:-0}" << 'PY'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
gpus = int(sys.argv[2])
bad = []
for r in recs:
    p, d = r["params"], r.get("distributed") or {}
    line = "  %-58s %-8s" % (r["case_id"], r["status"])
    if r["status"] == "OK":
        loss = r["loss"]
        ok = (d.get("comm") == "nccl" and d.get("buckets", 0) >= 1 and
              d.get("allreduce_bytes_per_step", 0) > 0 and math.isfinite(loss["last"]) and
              loss["last"] < loss["warmup_first"])
        line += " step %.2f ms, %d bucket(s), loss %.4f -> %.4f, exposed comm %.3f ms" % (
            r["timing"]["step"]["median"], d.get("buckets", 0), loss["warmup_first"],
            loss["last"], d.get("exposed_comm", {}).get("median", float("nan")))
        if not ok: bad.append(r["case_id"] + ": trained wrong: " + json.dumps(d)[:300])
    elif r["status"] == "SKIPPED" and r["reason"] and p["ranks"] > max(gpus, 1):
        line += " " + r["reason"]
    else:
        bad.append("%s: %s %s" % (r["case_id"], r["status"], r["reason"]))
    print(line)
for b in bad: print("  PROBLEM: " + b)
sys.exit(1 if bad else 0)
PY
}

buckets_vs_none() {
  cat > "$OUT/buckets.yaml" << 'YAML'
name: nccl_buckets_vs_none
defaults: {network: fcnr, backend: gpu_cudnn, batch: 1024, warmup: 0, iterations: 6, bucket_mb: 4}
cases:
  - {comm: none}
  - {comm: nccl, launcher: local, overlap: [true, false]}
YAML
  "$DLHOST" run "$OUT/buckets.yaml" -o "$OUT/buckets.jsonl"
  python3 - "$OUT/buckets.jsonl" << 'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in recs: assert r["status"] == "OK", (r["case_id"], r["reason"])
base = [r for r in recs if r["params"]["comm"] == "none"][0]["loss"]["values"]
for r in recs:
    if r["params"]["comm"] == "none": continue
    v, d = r["loss"]["values"], r["distributed"]
    diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(v, base))
    print("  %s: %d buckets, loss %s, max relative difference from comm none %.2e" %
          (r["case_id"], d["buckets"], ["%.5f" % x for x in v], diff))
    assert len(v) == len(base) and d["buckets"] >= 2 and diff < 1e-3, r["case_id"]
PY
}

run nccl_unit unit
run comm_bench_1rank comm_bench_1rank
run comm_bench_2ranks bench bench_2ranks 2ranks
run data_parallel data_parallel
run buckets_vs_none buckets_vs_none
[ $failed -eq 0 ] && echo "gpu-check-nccl: all checks that could run passed" ||
  echo "gpu-check-nccl: FAILED (logs in $OUT)"
exit $failed
