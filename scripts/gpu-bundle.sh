#!/bin/sh
# gpu-bundle.sh — packs what scripts/gpu-check.sh needs on the lent GPU machine into one folder
# small enough to carry (the device tool carries at most 64 MiB): the dlhost executable, the
# plugins the check loads (gpu_cudnn, cpu_reference, networks_paper; comm_nccl and its unit test
# where NCCL was found) and every shared library
# they need that the GPU machine lacks, found with ldd. Left out: the C runtime (libc, libm, ...:
# the machine has a newer one) and the CUDA libraries (cudart, cuBLAS, cuDNN, NCCL, ...), which
# that machine has as Python wheels (nvidia-*-cu13 beside PyTorch); gpu-check.sh points
# LD_LIBRARY_PATH at them.
# Usage: scripts/gpu-bundle.sh [BUILD_DIR=build] [OUT=.gpu-bundle]
#   then carry OUT (and run scripts/gpu-check.sh OUT there).
set -eu
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
OUT="${2:-.gpu-bundle}"
LIMIT_MIB=60
fail() { echo "gpu-bundle: $*" >&2; exit 1; }

[ -x "$BUILD/host/dlhost" ] || fail "$BUILD/host/dlhost not built (scripts/build.sh)"
[ -f "$BUILD/plugins/libdlhost_gpu_cudnn.so" ] ||
  fail "gpu_cudnn not built in $BUILD (see the configure line 'dlhost: gpu_cudnn ...')"
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/plugins" "$OUT/lib"
cp "$BUILD/host/dlhost" "$OUT/bin/"
for p in gpu_cudnn cpu_reference networks_paper; do
  cp "$BUILD/plugins/libdlhost_$p.so" "$OUT/plugins/"
done
# comm_nccl and its unit test, for scripts/gpu-check-nccl.sh (run by gpu-check.sh), where built.
if [ -f "$BUILD/plugins/libdlhost_comm_nccl.so" ]; then
  cp "$BUILD/plugins/libdlhost_comm_nccl.so" "$OUT/plugins/"
  cp "$BUILD/tests/comm_nccl/test_comm_nccl" "$OUT/bin/"
fi

# Libraries the machine has itself (C runtime) or as wheels (CUDA): never carried.
skip='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvrtc.*|libnvJitLink|libcufft.*|libcurand|libcusolver.*|libcusparse.*|libnvToolsExt|libnvblas)\.so'
for f in "$OUT"/bin/* "$OUT"/plugins/*.so; do
  ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if echo "$name" | grep -Eq "$skip"; then continue; fi
  cp -L "$path" "$OUT/lib/$name"
done
size=$(du -sm "$OUT" | cut -f1)
echo "gpu-bundle: $OUT holds $(ls "$OUT/lib" | wc -l) libraries, ${size} MiB:"
ls "$OUT/lib"
[ "$size" -le "$LIMIT_MIB" ] || fail "$OUT is ${size} MiB, over the ${LIMIT_MIB} MiB that can travel"
