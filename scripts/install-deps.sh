#!/bin/sh
# install-deps.sh — installs the Debian bookworm packages dlhost builds and tests with: the
# libraries, Open MPI and Gloo (the comms), clang + libFuzzer (fuzz tests) and a one-node Slurm
# (launcher tests), iproute2 (test hosts in network namespaces, tc-shaped links).
# Idempotent and quick when everything is already there (no `apt-get update` then).
set -eu
PACKAGES="build-essential cmake ninja-build pkg-config git python3 python3-jsonschema \
  libdnnl-dev ocl-icd-opencl-dev opencl-headers libopenblas-dev libtorch-dev libyaml-cpp-dev libspdlog-dev libfmt-dev \
  libboost-dev libboost-filesystem-dev libcli11-dev nlohmann-json3-dev \
  libgtest-dev libopenmpi-dev openmpi-bin libgloo-dev gnuplot-nox zlib1g-dev iproute2 \
  clang libclang-rt-14-dev \
  slurmctld slurmd slurm-client munge"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
