#!/bin/bash
# gpu-check.sh — the one command for a lent GPU machine (docs/gpu_cudnn.md): gpu_cudnn and
# comm_nccl on their first contact with a GPU, from a bundle made here by scripts/gpu-bundle.sh
# (the bundle carries this script; run it from there: .gpu-bundle/scripts/gpu-check.sh).
#
# One total deadline (DEADLINE, default 540 s, under the 600 s a device command may run);
# the phases run cheapest and most informative first, each cut at its own cap or at what is
# left of the deadline, whichever comes first, and a phase the deadline leaves no time for is
# reported as such:
#   versions    driver, GPUs, the CUDA wheels (runtime, cuDNN, cuBLAS, NCCL) and torch
#   plugins     `dlhost plugins -v`: the device, its clocks, the library versions; every plugin
#               must come from the bundle
#   suite       suites/gpu_check.yaml parses with only the bundle's plugins; its cases split
#               into control / single / nccl (nothing to do: a clear line, and a failure)
#   unit        test_gpu_cudnn and test_comm_nccl (their device tests skip without a device)
#   conform     `dlhost conform --backend gpu_cudnn` against cpu_reference (every op, the
#               networks under 20M parameters, gpt2_tiny and bert_tiny with AdamW among them)  [GPU]
#   conform_bf16, conform_fp16  the same for the cuBLAS ops (fc and the Transformer's) and the
#               tiny Transformers in bf16 and fp16 (dynamic loss scale), tolerances per mode [GPU]
#   control     the cpu_reference case: the host's own path on this machine
#   single      the single-GPU cases, one process each                                 [GPU]
#   transformer gpt2_tiny and bert_tiny in fp32/bf16/fp16, GPT-2 small (1024 tokens) and
#               BERT-base at realistic mini-batches: every case trains (loss down)      [GPU]
#   comm-bench  `dlhost comm-bench --comm nccl` on device buffers, world size 1        [GPU]
#   nccl        data parallel over NCCL (1/2/4 ranks; more than the GPUs: SKIPPED) and
#               gradient buckets vs no comm (losses agree)                             [GPU]
#   torch       PyTorch eager on the single cases, side by side (torch_baseline.py)    [GPU]
#   torch_transformer  the same on the transformer phase's cases (AdamW; bf16/fp16 under
#               torch.autocast)                                                        [GPU]
# A [GPU] phase without a usable device prints "SKIPPED: no device: <why>" and runs nothing.
#
# Everything is written to ONE archive, $OUT/gpu-check.tar.gz (the device tool brings back few
# files), rewritten after every phase: a kill keeps every phase finished before it. The exit
# status is the number of phases that failed (a cut phase counts; a skipped one does not).
#
# --rehearse [BUILD_DIR]: the same check on this CPU machine, as CI runs it: bundles BUILD_DIR,
# unpacks the bundle into an empty folder, hides the build and source trees (a private mount
# namespace; needs root, else exit 77), runs the unpacked copy of this script with a short
# deadline plus a drill (a phase cut by its budget, its half-written results line read by
# torch_baseline.py), and checks the outcome: every [GPU] phase said "no device", no phase
# failed, the archive holds every log. /usr/local/cuda stays visible: it stands in for the wheels.
#
# Usage: gpu-check.sh [BUNDLE]            (default: the bundle this script is in, else .gpu-bundle)
#        gpu-check.sh --rehearse [BUILD_DIR=build]
# Environment: OUT (default ./gpu-check-out), DEADLINE (s), PYTHON (python3).
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# --- the rehearsal -------------------------------------------------------------------------------
rehearse() {
  local build="${1:-build}" t0 tmp rc
  t0=$(date +%s)
  build="$(cd "$ROOT" && cd "$build" && pwd)" || { echo "rehearse: no build folder"; return 1; }
  tmp=$(mktemp -d /tmp/gpu-check-rehearsal.XXXXXX)
  case "$tmp" in "$build"/* | "$ROOT"/*)
    echo "rehearse: FAILED: the temporary folder $tmp is inside the trees it must hide"
    return 1 ;;
  esac
  echo "rehearse: bundling $build"
  sh "$ROOT/scripts/gpu-bundle.sh" "$build" "$tmp/made" || { echo "rehearse: FAILED: gpu-bundle.sh"; return 1; }
  tar -C "$tmp/made" -cf "$tmp/bundle.tar" . && mkdir "$tmp/unpacked" &&
    [ -z "$(ls -A "$tmp/unpacked")" ] && tar -C "$tmp/unpacked" -xf "$tmp/bundle.tar" ||
    { echo "rehearse: FAILED: cannot pack and unpack the bundle"; return 1; }
  if ! unshare --mount --propagation private true 2> /dev/null; then
    echo "rehearse: SKIPPED: cannot hide the build tree here (unshare --mount needs root)"
    rm -rf "$tmp"
    return 77
  fi
  echo "rehearse: running $tmp/unpacked/scripts/gpu-check.sh with $build and $ROOT hidden"
  # The hiding bites: with the trees hidden, a suite naming a backend the bundle lacks is refused
  # (paper_repro.yaml's cpu_onednn was found in the build folder, and only there).
  printf 'name: bite\ncases:\n  - {network: lenet, backend: cpu_onednn, batch: 8}\n' > "$tmp/bite.yaml"
  unshare --mount --propagation private -- sh -c '
    mount -t tmpfs -o size=1m hidden "$1" && mount -t tmpfs -o size=1m hidden "$2" || exit 90
    cd "$3" || exit 91
    if bin/dlhost --plugin-path plugins run "$5" --dry-run > "$5.txt" 2>&1; then exit 92; fi
    exec env OUT="$4" DEADLINE="${REHEARSAL_DEADLINE:-90}" DLHOST_CHECK_DRILL=1 \
      bash ./scripts/gpu-check.sh' sh "$build" "$ROOT" "$tmp/unpacked" "$tmp/out" "$tmp/bite.yaml" \
    > "$tmp/check.txt" 2>&1
  rc=$?
  cat "$tmp/check.txt"
  local bad=""
  [ $rc -eq 90 ] && bad="$bad; could not hide the trees"
  [ $rc -eq 92 ] && bad="$bad; a suite naming cpu_onednn parsed with the trees hidden: they were not"
  grep -q "cpu_onednn" "$tmp/bite.yaml.txt" 2> /dev/null &&
    echo "rehearse: with the trees hidden, a suite naming cpu_onednn is refused: $(grep -m1 cpu_onednn "$tmp/bite.yaml.txt")"
  [ $rc -eq 0 ] || bad="$bad; the check exited $rc"
  [ "$(ls -A "$tmp/out" 2> /dev/null)" = "gpu-check.tar.gz" ] ||
    bad="$bad; \$OUT holds '$(ls -A "$tmp/out" 2> /dev/null | tr '\n' ' ')', not the one archive"
  local listed
  listed=$(tar -tzf "$tmp/out/gpu-check.tar.gz" 2> /dev/null)
  for f in summary.txt versions.txt plugins.txt plugins.json suite.txt unit_gpu_cudnn.txt \
    control.txt control.jsonl drill.txt drill_torch.txt; do
    echo "$listed" | grep -qx "\(\./\)\?$f" || bad="$bad; $f missing from the archive"
  done
  for phase in conform conform_bf16 conform_fp16 single transformer comm-bench nccl torch \
    torch_transformer; do
    grep -q "^=== $phase: SKIPPED: no device: " "$tmp/check.txt" || bad="$bad; $phase did not skip for no device"
  done
  grep -q "^=== drill: CUT" "$tmp/check.txt" || bad="$bad; the drill phase was not cut"
  grep -q "skipped 1 unreadable line" "$tmp/check.txt" || bad="$bad; torch_baseline.py did not survive the cut line"
  grep -q "^=== control: PASS" "$tmp/check.txt" || bad="$bad; the control case did not pass"
  grep -q "^=== suite: PASS" "$tmp/check.txt" || bad="$bad; the suite did not parse with the bundle's plugins"
  local took=$(($(date +%s) - t0))
  if [ -n "$bad" ]; then
    echo "rehearse: FAILED${bad} (logs: $tmp)"
    return 1
  fi
  rm -rf "$tmp"
  echo "rehearse: PASSED in ${took}s: bundle unpacked alone, trees hidden, every GPU phase skipped for no device, one archive"
  return 0
}
if [ "${1:-}" = "--rehearse" ]; then
  shift
  rehearse "$@"
  exit $?
fi

# --- where things are ----------------------------------------------------------------------------
if [ -n "${1:-}" ]; then
  BUNDLE="$(cd "$1" && pwd)" || { echo "gpu-check: no bundle at $1"; exit 1; }
elif [ -x "$ROOT/bin/dlhost" ]; then
  BUNDLE="$ROOT"
else
  BUNDLE="$(cd "$ROOT/.gpu-bundle" 2> /dev/null && pwd)" ||
    { echo "gpu-check: no bundle (scripts/gpu-bundle.sh, then carry .gpu-bundle)"; exit 1; }
fi
cd "$BUNDLE" || exit 1
OUT="${OUT:-$PWD/gpu-check-out}"
DEADLINE="${DEADLINE:-540}"
PY="${PYTHON:-python3}"
START=$(date +%s)
END=$((START + DEADLINE))
RESERVE=8  # for the last archive
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
mkdir -p "$OUT"
rm -f "$OUT/gpu-check.tar.gz"
export PYTHONUNBUFFERED=1

# The CUDA libraries come from the machine's Python wheels (nvidia-*), the driver from its mount.
wheel_libs=$("$PY" - << 'PY' 2> /dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = sorted({os.path.dirname(p) for r in roots for p in glob.glob(r + "/**/lib/*.so*", recursive=True)})
print(":".join(dirs))
PY
)
# Only dlhost sees the bundle's libraries: PyTorch keeps the machine's newer C++ runtime.
LIBS="$BUNDLE/lib:$wheel_libs:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}"
# One command word for dlhost with the bundle's libraries and plugins (also for comm_nccl_bench.sh).
printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" --plugin-path "%s" "$@"\n' \
  "$LIBS" "$BUNDLE/bin/dlhost" "$BUNDLE/plugins" > "$WORK/dlhost"
chmod +x "$WORK/dlhost"
DLHOST="$WORK/dlhost"

# --- phases --------------------------------------------------------------------------------------
failed=0
NODEV=""  # why there is no usable GPU ("" when there is one), from the plugins phase
summary() { echo "$*" >> "$WORK/summary.txt"; }
archive() {  # the one file under $OUT, replaced whole so that a kill never leaves half of it
  tar -C "$WORK" -czf "$OUT/.gpu-check.tar.gz.part" --exclude=dlhost . 2> /dev/null &&
    mv -f "$OUT/.gpu-check.tar.gz.part" "$OUT/gpu-check.tar.gz"
}
# phase NAME CAP_S GPU|- COMMAND...: runs COMMAND (output to $WORK/NAME.txt) within CAP_S and the
# deadline; exit 0 PASS, 77 SKIPPED (its last line says why), 124/137 CUT, else FAILED.
phase() {
  local name="$1" cap="$2" gpu="$3" left budget t0 rc took
  shift 3
  if [ "$gpu" = GPU ] && [ -n "$NODEV" ]; then
    echo "=== $name: SKIPPED: no device: $NODEV"
    summary "SKIPPED  $name: no device"
    return 0
  fi
  left=$((END - $(date +%s) - RESERVE))
  if [ "$left" -lt 5 ]; then
    echo "=== $name: SKIPPED: the ${DEADLINE}s deadline is spent"
    summary "SKIPPED  $name: deadline spent"
    return 0
  fi
  budget=$((cap < left ? cap : left))
  echo "=== $name (at most ${budget}s, $((END - $(date +%s)))s of the deadline left)"
  t0=$(date +%s)
  # bash -c: COMMAND may be one of the functions below (exported); timeout kills its group.
  timeout -k 5 "$budget" bash -c '"$@"' "$name" "$@" > "$WORK/$name.txt" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  tail -n "${TAIL_LINES:-12}" "$WORK/$name.txt" | sed 's/^/    /'
  case $rc in
    0) echo "=== $name: PASS (${took}s)"; summary "PASS     $name (${took}s)" ;;
    77) echo "=== $name: SKIPPED: $(tail -n 1 "$WORK/$name.txt")"; summary "SKIPPED  $name" ;;
    124 | 137)
      echo "=== $name: CUT at ${budget}s (its output so far is in the archive)"
      summary "CUT      $name at ${budget}s"
      [ "$name" = drill ] || failed=$((failed + 1)) ;;
    *) echo "=== $name: FAILED (exit $rc, ${took}s)"; summary "FAILED   $name (exit $rc)"; failed=$((failed + 1)) ;;
  esac
  archive
}

versions() {
  echo "bundle $BUNDLE; CUDA libraries from: ${wheel_libs:-no nvidia wheels found}"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv
  else
    echo "nvidia-smi: not on this machine"
  fi
  "$PY" - << 'PY'
from importlib import metadata
for d in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"].lower()):
    n = d.metadata["Name"].lower()
    if n.startswith("nvidia-") or n in ("torch", "numpy"):
        print(f"{n} {d.version}")
PY
  return 0
}

plugins() {
  "$DLHOST" plugins -v || return 1
  "$DLHOST" plugins --json > "$WORK/plugins.json" || return 1
  "$PY" - "$WORK/plugins.json" "$BUNDLE/plugins" << 'PY'
import json, os, sys
doc = json.load(open(sys.argv[1]))
bundle = os.path.realpath(sys.argv[2])
bad = [p for p in doc["plugins"] if os.path.dirname(os.path.realpath(p["path"])) != bundle]
for p in bad: print(f"PROBLEM: {p['name']} was loaded from {p['path']}, outside the bundle")
names = {p["name"] for p in doc["plugins"]}
for need in ("gpu_cudnn", "cpu_reference", "networks_paper", "networks_transformer"):
    if need not in names: bad.append(need); print(f"PROBLEM: {need} did not load (see 'refused')")
sys.exit(1 if bad else 0)
PY
}

# Splits the suite's cases into the phases' lists (control.ids, single.ids, nccl.ids).
suite() {
  "$DLHOST" run suites/gpu_check.yaml --dry-run > "$WORK/suite.dry" || { cat "$WORK/suite.dry"; return 1; }
  "$PY" - "$WORK/suite.dry" "$WORK" << 'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
lists = {"control": [], "single": [], "nccl": [], "transformer": []}
transformers = {"gpt2", "gpt2_tiny", "bert_base", "bert_tiny"}
for i, line in enumerate(lines[:-1]):
    if line.startswith(" ") or not lines[i + 1].startswith("    {"):
        continue
    p = json.loads(lines[i + 1])
    if p["backend"] != "gpu_cudnn":
        lists["control"].append(line)
    # A bucket_mb other than the default marks the buckets-vs-none cases, comm: none included.
    elif p["comm"] == "nccl" or p["bucket_mb"] != 25:
        lists["nccl"].append(line)
    elif p["network"] in transformers:
        lists["transformer"].append(line)
    else:
        lists["single"].append(line)
for k, v in lists.items():
    open(f"{sys.argv[2]}/{k}.ids", "w").write("".join(x + "\n" for x in v))
    print(f"{k}: {len(v)} case(s)")
if not lists["single"] or not lists["control"] or not lists["transformer"]:
    print("gpu_check.yaml holds no single-GPU, transformer or control case: nothing to do"); sys.exit(1)
PY
}

run_cases() {  # run_cases LIST: the cases of $WORK/LIST.ids into $WORK/LIST.jsonl
  local args=() id
  while read -r id; do args+=(--case "$id"); done < "$WORK/$1.ids"
  [ ${#args[@]} -gt 0 ] || { echo "no $1 case in the suite: nothing to do"; return 1; }
  "$DLHOST" run suites/gpu_check.yaml "${args[@]}" -o "$WORK/$1.jsonl"
}

# Every case OK (or SKIPPED for GPUs this machine lacks), trained (loss down), and the bucket
# runs' losses within 1e-3 of comm: none's.
check_cases() {
  "$PY" - "$WORK/$1.jsonl" "$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')" << 'PY'
import json, math, sys
recs = []
for line in open(sys.argv[1]):
    try: recs.append(json.loads(line))
    except json.JSONDecodeError: print("  (a line cut short)")
gpus, bad = int(sys.argv[2] or 0), []
for r in recs:
    p, loss = r["params"], r.get("loss") or {}
    line = f"  {r['case_id'][:70]:70} {r['status']:8}"
    if r["status"] == "OK":
        first, last = loss.get("warmup_first"), loss.get("last")
        line += f" step {r['timing']['step']['median']:.2f} ms, loss {first} -> {last}"
        if last is None or not math.isfinite(last) or (p["warmup"] > 0 and not last < first):
            bad.append(r["case_id"] + ": did not train")
    elif r["status"] == "SKIPPED" and p["ranks"] > max(gpus, 1):
        line += " " + r["reason"][:80]
    else:
        bad.append(f"{r['case_id']}: {r['status']} {r.get('reason', '')[:200]}")
    print(line)
# Each network's buckets against its own comm: none run (FCN-R with SGD, gpt2_tiny with AdamW).
base = {r["params"]["network"]: r for r in recs
        if r["params"]["bucket_mb"] != 25 and r["params"]["comm"] == "none" and r["status"] == "OK"}
for r in recs:
    if r["params"]["bucket_mb"] == 25 or r["params"]["comm"] != "nccl" or r["status"] != "OK" or r["params"]["network"] not in base: continue
    v, b = r["loss"]["values"], base[r["params"]["network"]]["loss"]["values"]
    diff = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(v, b))
    print(f"  {r['params']['network']} {r['params']['ranks']} rank(s), buckets {r['distributed'].get('buckets')}, overlap {r['params']['overlap']}: max relative loss difference from comm none {diff:.2e}")
    if len(v) != len(b) or diff >= 1e-3: bad.append(r["case_id"] + f": losses differ from comm none by {diff:.2e}")
for b in bad: print("  PROBLEM: " + b)
sys.exit(1 if bad else 0)
PY
}

unit_gpu_cudnn() {
  LD_LIBRARY_PATH="$LIBS" DLHOST_GPU_CUDNN_PLUGIN="$BUNDLE/plugins/libdlhost_gpu_cudnn.so" \
    "$BUNDLE/bin/test_gpu_cudnn" || return 1
  # On a machine with a usable GPU no device test may skip.
  if [ -z "$NODEV" ] && grep -q '^\[  SKIPPED \]' "$WORK/unit_gpu_cudnn.txt"; then
    echo "PROBLEM: device tests skipped on a machine with a GPU"
    return 1
  fi
}

unit_comm_nccl() {
  if [ ! -x "$BUNDLE/bin/test_comm_nccl" ]; then
    echo "comm_nccl is not in the bundle (NCCL was not found where it was built)"
    [ -n "$NODEV" ] && return 77  # no device either: nothing lost here
    return 1
  fi
  LD_LIBRARY_PATH="$LIBS" DLHOST_NCCL_PLUGIN="$BUNDLE/plugins/libdlhost_comm_nccl.so" \
    "$BUNDLE/bin/test_comm_nccl" || return 1
  # One GPU runs every world-of-one case; only the 2-device cases may skip there.
  if [ -z "$NODEV" ] && grep -q '^\[  SKIPPED \] NcclGpu\.\(WorldOfOne\|Group\|Abort\|APeer\)' \
    "$WORK/unit_comm_nccl.txt"; then
    echo "PROBLEM: world-of-one NCCL tests skipped on a machine with a GPU"
    return 1
  fi
}

comm_bench() {
  echo "GPUs: $(nvidia-smi -L 2> /dev/null | grep -c '^GPU ') (2-rank comm-bench and 2/4-rank cases need as many)"
  sh tests/plugins/comm_nccl/comm_nccl_bench.sh "$DLHOST" "$WORK/bench_f32_sum" 1rank &&
    sh tests/plugins/comm_nccl/comm_nccl_bench.sh "$DLHOST" "$WORK/bench_f64_max" 1rank -d f64 -o max
}

# The rehearsal's drill: a phase cut by its budget while writing a results line, then
# torch_baseline.py reading that half line.
drill() {
  cat "$WORK/control.jsonl"
  printf '{"case_id": "cut-by-the-deadline", "params": {"backend": "gpu_cudnn", "net'
  sleep 60
}

# A phase's bash sees these functions and values.
cases_phase() { run_cases "$1"; local rc=$?; check_cases "$1" || return 1; return $rc; }
export -f versions plugins suite run_cases check_cases cases_phase unit_gpu_cudnn unit_comm_nccl \
  comm_bench drill
export BUNDLE WORK DLHOST PY LIBS wheel_libs

phase versions 20 - versions
phase plugins 40 - plugins
if [ -f "$WORK/plugins.json" ]; then
  NODEV=$("$PY" -c '
import json, sys
g = [p for p in json.load(open(sys.argv[1]))["plugins"] if p["name"] == "gpu_cudnn"]
print("gpu_cudnn did not load" if not g else ("" if g[0]["usable"] else g[0]["unusable_reason"]))
' "$WORK/plugins.json")
else
  NODEV="dlhost plugins failed"
fi
phase suite 20 - suite
export NODEV
TAIL_LINES=4 phase unit_gpu_cudnn 90 - unit_gpu_cudnn
TAIL_LINES=4 phase unit_comm_nccl 90 - unit_comm_nccl
phase conform 90 GPU "$DLHOST" conform --backend gpu_cudnn --reference cpu_reference \
  --json "$WORK/conform.json"
# bf16 and fp16 reach the cuBLAS products only (convolutions and the LSTM refuse them).
for mode in bf16 fp16; do
  phase conform_$mode 45 GPU "$DLHOST" conform --backend gpu_cudnn --reference cpu_reference \
    --precision $mode --ops fc,layer_norm,gelu,attention,position_embedding,tied_fc \
    --networks gpt2_tiny,bert_tiny --json "$WORK/conform_$mode.json"
done
phase control 60 - cases_phase control
phase single 180 GPU cases_phase single
phase transformer 150 GPU cases_phase transformer
phase comm-bench 60 GPU comm_bench
phase nccl 150 GPU cases_phase nccl
if [ "${DLHOST_CHECK_DRILL:-0}" = 1 ]; then
  phase drill 3 - bash -c 'drill > "$WORK/drill.jsonl"'
  phase drill_torch 30 - "$PY" bench/peers/torch_baseline.py "$WORK/drill.jsonl" \
    --out "$WORK/drill_torch.jsonl"
fi
phase torch 150 GPU "$PY" bench/peers/torch_baseline.py "$WORK/single.jsonl" \
  --out "$WORK/torch.jsonl" --warmup 3 --iterations 10
phase torch_transformer 90 GPU "$PY" bench/peers/torch_baseline.py "$WORK/transformer.jsonl" \
  --out "$WORK/torch_transformer.jsonl" --warmup 2 --iterations 5

echo "gpu-check: $failed phase(s) failed, $(($(date +%s) - START))s of ${DEADLINE}s; summary:"
sed 's/^/  /' "$WORK/summary.txt"
archive
echo "gpu-check: everything is in $OUT/gpu-check.tar.gz"
rm -rf "$WORK"
exit "$failed"
