#!/bin/bash
# gpu-check.sh — the one command for a lent GPU machine (the device tool's H200; see
# docs/gpu_cudnn.md): with a bundle made here by scripts/gpu-bundle.sh and carried there, it runs
#   1. `dlhost plugins` (the device, its clocks, driver, runtime, cuDNN and cuBLAS versions);
#   2. `dlhost conform --backend gpu_cudnn` against cpu_reference;
#   3. the single-GPU cases of suites/paper_repro.yaml at short iteration counts;
#   4. PyTorch eager on the same networks, batches and precision (fp32 strict), side by side,
#      with the ratio per network and the SGEMM peak FCN-5/8 are measured against
#      (scripts/torch_baseline.py);
#   5. scripts/gpu-check-nccl.sh from the bundle: comm_nccl's unit test on the GPU, comm-bench
#      --comm nccl on device buffers, the multi-GPU cases of paper_repro (world size 1 trains
#      through the whole data-parallel path; 2 and 4 are SKIPPED with the reason on one GPU), and
#      buckets vs no comm (its logs under $OUT/nccl).
# Every output lands in $OUT (the device tool brings that folder back; ./gpu-check-out
# elsewhere): plugins.txt, conform.txt, conform.json, dlhost.txt, dlhost.jsonl, torch.txt,
# torch.jsonl. A failing step is reported and the next one still runs; the exit status is the
# number of failed steps. Sized to end within about 10 minutes on an H200: each phase is cut at PHASE_TIMEOUT (200 s),
# each case at 120 s.
# Usage (from the repository root, on the GPU machine):
#   scripts/gpu-check.sh [BUNDLE=.gpu-bundle] [WARMUP=3] [ITERATIONS=10]
set -u
cd "$(dirname "$0")/.."
BUNDLE="$(cd "${1:-.gpu-bundle}" && pwd)" || { echo "gpu-check: no bundle (scripts/gpu-bundle.sh)"; exit 1; }
WARMUP="${2:-3}"
ITERATIONS="${3:-10}"
OUT="${OUT:-$PWD/gpu-check-out}"
PHASE_TIMEOUT="${PHASE_TIMEOUT:-200}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
failed=0

# The CUDA libraries come from the machine's Python wheels (nvidia-*), the driver from its mount.
PY="${PYTHON:-python3}"
wheel_libs=$("$PY" - <<'PY' 2>/dev/null
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
libs="$BUNDLE/lib:$wheel_libs:/usr/local/nvidia/lib64:/usr/local/nvidia/lib:${LD_LIBRARY_PATH:-}"
DLHOST=(env "LD_LIBRARY_PATH=$libs" "$BUNDLE/bin/dlhost" --plugin-path "$BUNDLE/plugins")
echo "gpu-check: bundle $BUNDLE; CUDA libraries from: ${wheel_libs:-none found}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv 2>&1 | head -3

step() {  # step NAME LOG COMMAND...: runs COMMAND under the phase timeout, output to LOG and here
  local name="$1" log="$2"
  shift 2
  echo "=== $name"
  timeout "$PHASE_TIMEOUT" "$@" 2>&1 | tee "$OUT/$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "=== $name FAILED (exit $rc)"
    failed=$((failed + 1))
  fi
}

step "dlhost plugins" plugins.txt "${DLHOST[@]}" plugins
step "dlhost conform --backend gpu_cudnn" conform.txt \
  "${DLHOST[@]}" conform --backend gpu_cudnn --reference cpu_reference --json "$OUT/conform.json"

mapfile -t cases < <("${DLHOST[@]}" run suites/paper_repro.yaml --dry-run | grep -E '^[a-z0-9_]+\.gpu_cudnn\.')
case_args=()
for c in "${cases[@]}"; do case_args+=(--case "$c"); done
rm -f "$OUT/dlhost.jsonl"
step "paper_repro single-GPU (${#cases[@]} cases, warmup $WARMUP, iterations $ITERATIONS)" dlhost.txt \
  "${DLHOST[@]}" run suites/paper_repro.yaml "${case_args[@]}" --set "warmup=$WARMUP" \
  --set "iterations=$ITERATIONS" --set timeout=120 -o "$OUT/dlhost.jsonl"

step "PyTorch eager side by side (fp32 strict)" torch.txt \
  "$PY" scripts/torch_baseline.py "$OUT/dlhost.jsonl" --out "$OUT/torch.jsonl" \
  --warmup "$WARMUP" --iterations "$ITERATIONS"
if [ -f "$BUNDLE/plugins/libdlhost_comm_nccl.so" ]; then
  # One command word for the NCCL script and its comm-bench helper: the bundle's dlhost with
  # its libraries and plugin folder.
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" --plugin-path "%s" "$@"\n' \
    "$libs" "$BUNDLE/bin/dlhost" "$BUNDLE/plugins" > "$OUT/dlhost"
  chmod +x "$OUT/dlhost"
  step "comm_nccl (scripts/gpu-check-nccl.sh)" nccl.txt \
    env DLHOST="$OUT/dlhost" DLHOST_NCCL_PLUGIN="$BUNDLE/plugins/libdlhost_comm_nccl.so" \
    NCCL_UNIT="$BUNDLE/bin/test_comm_nccl" DLHOST_GPU_CHECK_OUT="$OUT/nccl" \
    LD_LIBRARY_PATH="$libs" sh scripts/gpu-check-nccl.sh
else
  echo "=== comm_nccl: not in the bundle (NCCL was not found where it was built)"
  failed=$((failed + 1))
fi
echo "gpu-check: $failed step(s) failed; outputs in $OUT"
exit "$failed"
