#!/bin/sh
# gpu-bundle.sh — packs everything scripts/gpu-check.sh needs on the lent GPU machine into one
# self-contained folder small enough to carry (the device tool carries at most 64 MiB):
#   bin/      dlhost, test_gpu_cudnn and (where NCCL was found) test_comm_nccl;
#   plugins/  gpu_cudnn, cpu_reference, networks_paper, networks_transformer and comm_nccl: the
#             only plugins the check
#             may use (suites/gpu_check.yaml names nothing else; the rehearsal proves it);
#   lib/      every shared library those need that the GPU machine lacks, found with ldd. Left
#             out: the C runtime (libc, libm, ...: the machine has a newer one) and the CUDA
#             libraries (cudart, cuBLAS, cuDNN, NCCL, ...), which that machine has as Python
#             wheels (nvidia-*-cu13 beside PyTorch); gpu-check.sh points LD_LIBRARY_PATH at them;
#   scripts/gpu-check.sh, bench/peers/torch_baseline.py, suites/gpu_check.yaml,
#   tests/plugins/comm_nccl/comm_nccl_bench.sh, bench/peers/{torch_peer,optimizers,peer_main,
#   transformer_settings}.py (torch_peer imports the last two): the check itself, at the same
#             paths as in the repository, so it runs from the bundle alone.
# Usage: scripts/gpu-bundle.sh [BUILD_DIR=build] [OUT=.gpu-bundle]
#   then carry OUT and run OUT/scripts/gpu-check.sh there.
set -eu
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
OUT="${2:-.gpu-bundle}"
LIMIT_MIB=60
fail() { echo "gpu-bundle: $*" >&2; exit 1; }

[ -x "$BUILD/host/dlhost" ] || fail "$BUILD/host/dlhost not built (scripts/build.sh)"
[ -f "$BUILD/plugins/libdlhost_gpu_cudnn.so" ] ||
  fail "gpu_cudnn not built in $BUILD (see the configure line 'dlhost: gpu_cudnn ...')"
[ -x "$BUILD/tests/gpu/test_gpu_cudnn" ] ||
  fail "$BUILD/tests/gpu/test_gpu_cudnn not built (cmake --build $BUILD --target test_gpu_cudnn)"
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/plugins" "$OUT/lib" "$OUT/scripts" "$OUT/suites" \
  "$OUT/tests/plugins/comm_nccl" "$OUT/bench/peers"
cp "$BUILD/host/dlhost" "$BUILD/tests/gpu/test_gpu_cudnn" "$OUT/bin/"
for p in gpu_cudnn cpu_reference networks_paper networks_transformer; do
  cp "$BUILD/plugins/libdlhost_$p.so" "$OUT/plugins/"
done
# comm_nccl and its unit test, where NCCL was found (gpu-check.sh says so when they are absent).
if [ -f "$BUILD/plugins/libdlhost_comm_nccl.so" ]; then
  cp "$BUILD/plugins/libdlhost_comm_nccl.so" "$OUT/plugins/"
  cp "$BUILD/tests/comm_nccl/test_comm_nccl" "$OUT/bin/"
fi
for f in scripts/gpu-check.sh suites/gpu_check.yaml \
  tests/plugins/comm_nccl/comm_nccl_bench.sh bench/peers/torch_baseline.py bench/peers/torch_peer.py \
  bench/peers/optimizers.py bench/peers/peer_main.py bench/peers/transformer_settings.py; do
  cp "$f" "$OUT/$f"
done

# Libraries the machine has itself (C runtime) or as wheels (CUDA): never carried.
skip='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvrtc.*|libnvJitLink|libcufft.*|libcurand|libcusolver.*|libcusparse.*|libnvToolsExt|libnvblas)\.so'
for f in "$OUT"/bin/* "$OUT"/plugins/*.so; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if echo "$name" | grep -Eq "$skip"; then continue; fi
  cp -L "$path" "$OUT/lib/$name"
done
size=$(du -sm "$OUT" | cut -f1)
echo "gpu-bundle: $OUT holds $(ls "$OUT/bin" | wc -l) programs, $(ls "$OUT/plugins" | wc -l) plugins, $(ls "$OUT/lib" | wc -l) libraries, ${size} MiB"
[ "$size" -le "$LIMIT_MIB" ] || fail "$OUT is ${size} MiB, over the ${LIMIT_MIB} MiB that can travel"
