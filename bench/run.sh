#!/bin/bash
# run.sh — the one command of bench/: installs the peers (once), builds dlhost and the bench
# probes, then runs bench.py (cpu_onednn vs PyTorch from PyPI, Debian's PyTorch 1.13 and
# TensorFlow; machine limits; host overhead). Arguments go to bench.py (--quick, --networks,
# --threads, --rounds, ...); `run.sh fairness ARGS` runs fairness.py instead (each framework
# backend against its framework's own Python: PyTorch 2.15, 1.13, TensorFlow, MXNet Gluon). See bench/README.md. Every command below runs without
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (they halve OpenBLAS's sgemm on this machine).
set -euo pipefail
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
echo "run.sh: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for this run (dlhost and peers alike)"
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DLHOST_BUILD:-$root/build}
cd "$root"

# Debian's packages: PyTorch 1.13 (third peer, /usr/bin/python3), the allocators dlhost's
# `allocator` key preloads (tcmalloc, jemalloc; `dlhost case-env` gives them to the peers), venv.
need=()
dpkg -s python3-torch >/dev/null 2>&1 || need+=(python3-torch)
dpkg -s libtcmalloc-minimal4 >/dev/null 2>&1 || need+=(libtcmalloc-minimal4)
dpkg -s libjemalloc2 >/dev/null 2>&1 || need+=(libjemalloc2)
dpkg -s python3-venv >/dev/null 2>&1 || need+=(python3-venv)
if ((${#need[@]})); then
  echo "run.sh: apt-get install ${need[*]}"
  apt-get install -y "${need[@]}" >/dev/null || { apt-get update >/dev/null && apt-get install -y "${need[@]}" >/dev/null; }
fi

# The PyPI peers live in a virtual environment under the build folder, never in dlhost's deps.
# Their versions are those of the wheels scripts/install-deps.sh gives the framework backends
# (cpu_tensorflow, cpu_libtorch2): a fairness row compares one library used two ways.
TORCH_VERSION=2.15.0
TF_VERSION=2.21.0
venv=$build/bench-venv
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
py=$venv/bin/python
pypi=$root/deps/pypi
if [ -d "$pypi/torch-$TORCH_VERSION.dist-info" ] && [ -d "$pypi/tensorflow_cpu-$TF_VERSION.dist-info" ]; then
  # scripts/install-deps.sh already unpacked these very wheels into deps/pypi (--no-deps) for the
  # backends: the venv reads them through a .pth and gets only their own requirements from PyPI
  # (the CUDA runtime libraries torch's _C links, numpy, keras, ...), not a second 4 GB copy.
  echo "$(cd "$pypi" && pwd -P)" > "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/dlhost-deps-pypi.pth"
  if ! "$py" -c "import torch, tensorflow" 2>/dev/null; then
    echo "run.sh: the venv uses deps/pypi's torch $TORCH_VERSION and tensorflow-cpu $TF_VERSION; pip install their requirements"
    mapfile -t reqs < <(sed -n 's/^Requires-Dist: //p' "$pypi/torch-$TORCH_VERSION.dist-info/METADATA" \
      "$pypi/tensorflow_cpu-$TF_VERSION.dist-info/METADATA" | grep -v 'extra ==')
    "$py" -m pip install -q "${reqs[@]}"
  fi
fi
if ! "$py" -c "import torch" 2>/dev/null; then
  # The CPU-only wheel (~200 MB) instead of the default CUDA wheels (~4 GB); where
  # download.pytorch.org cannot be reached, PyPI's default wheel (it runs on the CPU too).
  echo "run.sh: pip install torch (CPU wheel from download.pytorch.org, else PyPI's default)"
  "$py" -m pip install -q "torch==$TORCH_VERSION" --index-url https://download.pytorch.org/whl/cpu ||
    { echo "run.sh: CPU index unreachable: installing PyPI's default torch (CUDA wheels, ~4 GB)";
      "$py" -m pip install -q "torch==$TORCH_VERSION"; }
fi
if ! "$py" -c "import tensorflow" 2>/dev/null; then
  echo "run.sh: pip install tensorflow-cpu"
  "$py" -m pip install -q "tensorflow-cpu==$TF_VERSION" ||
    echo "run.sh: tensorflow-cpu cannot be installed for $("$py" --version): TensorFlow skipped"
fi
# MXNet 1.9.1 (cpu_mxnet's version) needs numpy < 1.24 (it uses np.bool, removed in 1.24): its
# Gluon peer (bench/peers/mxnet_peer.py) gets a venv of its own.
MXNET_VERSION=1.9.1
mxvenv=$build/bench-venv-mxnet
[ -x "$mxvenv/bin/python" ] || /usr/bin/python3 -m venv "$mxvenv"
if ! "$mxvenv/bin/python" -c "import mxnet" 2>/dev/null; then
  echo "run.sh: pip install mxnet==$MXNET_VERSION 'numpy<1.24' into $mxvenv"
  "$mxvenv/bin/python" -m pip install -q "mxnet==$MXNET_VERSION" "numpy<1.24" ||
    echo "run.sh: mxnet $MXNET_VERSION cannot be installed for $("$mxvenv/bin/python" --version): MXNet skipped"
fi

# dlhost itself and the bench probes (null backend, limits), Release.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
[ -f "$build/build.ninja" ] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
nice cmake --build "$build" -j2 >/dev/null  # every plugin built here, the framework backends too
[ -f "$build/bench/build.ninja" ] || cmake -S bench -B "$build/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
nice cmake --build "$build/bench" -j2 >/dev/null

if [ "${1:-}" = fairness ]; then  # the framework backends against their own Pythons (issue 40)
  shift
  exec python3 "$root/bench/fairness.py" --build "$build" "$@"
fi
exec python3 "$root/bench/bench.py" --build "$build" "$@"
