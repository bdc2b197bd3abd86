#!/bin/sh
# install-deps.sh — installs the Debian bookworm packages dlhost builds and tests with: the
# libraries, Open MPI and Gloo (the comms), clang + libFuzzer (fuzz tests) and a one-node Slurm
# (launcher tests), iproute2 (test hosts in network namespaces, tc-shaped links), tcmalloc and
# jemalloc (the case key `allocator`), OpenJDK 17 (javac and the JNI headers: the cpu_bigdl backend
# hosts BigDL's JVM; the only JDK in bookworm).
# Then the PyPI wheels of the framework backends into deps/pypi (below).
# Idempotent and quick when everything is already there (no `apt-get update` then).
set -eu
PACKAGES="build-essential cmake ninja-build pkg-config git python3 python3-pip python3-jsonschema \
  libdnnl-dev ocl-icd-opencl-dev opencl-headers libopenblas-dev libtorch-dev libyaml-cpp-dev libspdlog-dev libfmt-dev \
  libboost-dev libboost-filesystem-dev libcli11-dev nlohmann-json3-dev \
  libgtest-dev libopenmpi-dev openmpi-bin libgloo-dev gnuplot-nox zlib1g-dev iproute2 \
  clang libclang-rt-14-dev libtcmalloc-minimal4 libjemalloc2 \
  slurmctld slurmd slurm-client munge openjdk-17-jdk-headless"

missing=""
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "install-deps: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# --- The framework backends' libraries, from PyPI wheels --------------------------------------
# TensorFlow's C API (libtensorflow_cc.so.2), MXNet's (libmxnet.so) and current libtorch exist only
# as wheels. They go into the project's own folder deps/pypi with `pip install --target --no-deps`
# (never the system Python); CMake finds them there (cmake/FindPyPIFrameworks.cmake). torch is the
# CUDA build: libtorch_cpu.so needs only libcudart.so.13 and libcupti.so.13 of its CUDA wheels, so
# those two come instead of its ~4 GB of dependencies. Downloads ~880 MB, ~2.6 GB installed.
# Where PyPI cannot be reached, the reason is written to deps/pypi/<package>.failed, configure
# leaves that plugin out with it, and its cases are SKIPPED with it; everything else works.
# DLHOST_NO_PYPI=1 skips this part (the plugins are then left out, saying so).
PYPI_DIR="${DLHOST_PYPI_DIR:-deps/pypi}"
# One pip call per entry; wheels joined by '+' share a top-level folder (nvidia/) and go in one
# call, since `pip --target --upgrade` replaces a top-level folder a second call also writes.
WHEELS="tensorflow-cpu==2.21.0 mxnet==1.9.1 torch==2.15.0 nvidia-cuda-runtime==13.2.75+nvidia-cuda-cupti==13.2.75"
if [ "${DLHOST_NO_PYPI:-0}" = 1 ]; then
  echo "install-deps: DLHOST_NO_PYPI=1, framework wheels not installed"
  exit 0
fi
mkdir -p "$PYPI_DIR"
# pip_why <log>: why pip failed, in its words: a network or certificate failure where there is one
# (pip then ends with a misleading "No matching distribution"), else its last line (no such
# version, disk full).
pip_why() {
  grep -m 1 -E 'Could not fetch URL|CERTIFICATE_VERIFY_FAILED|NewConnectionError|Network is unreachable|Temporary failure in name resolution|No space left' "$1" ||
    grep -v '^[[:space:]]*$' "$1" | tail -n 1
}
# pip_group <folder> <where option> <group>: installs one '+'-joined group with `pip install
# <where option> <folder>`; on failure writes <group's first package>.failed with pip's reason.
pip_group() {
  folder=$1 where=$2 group=$3
  w=$(echo "$group" | tr + ' ')
  name=${group%%==*}
  echo "install-deps: pip install $where $folder --no-deps $w"
  # shellcheck disable=SC2086  # $w is a list of requirement words
  if python3 -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
      --upgrade "$where" "$folder" $w > "$PYPI_DIR/$name.log" 2>&1; then
    rm -f "$PYPI_DIR/$name.failed" "$PYPI_DIR/$name.log"
  else
    # One line, cut to 300 characters: it becomes the SKIPPED reason of the cases.
    why=$(pip_why "$PYPI_DIR/$name.log")
    echo "pip could not install $w: $why" | cut -c 1-300 > "$PYPI_DIR/$name.failed"
    echo "install-deps: WARNING: $(cat "$PYPI_DIR/$name.failed"); its backend is left out"
  fi
}
# installed <folder with the dist-infos> <group>: true when every wheel of the group is there.
installed() {
  for one in $(echo "$2" | tr + ' '); do
    dist=$(echo "${one%%==*}" | tr - _)-${one#*==}.dist-info
    [ -d "$1/$dist" ] || return 1
  done
}
for group in $WHEELS; do
  installed "$PYPI_DIR" "$group" || pip_group "$PYPI_DIR" --target "$group"
done

# --- oneDNN 3.x for the cpu_onednn3 backend (plugins/cpu_onednn) -------------------------------
# oneDNN's wheels carry the library, headers and CMake package as wheel *data* (lib/, include/),
# which `pip --target` drops; so each goes with `pip install --prefix` into a folder of its own,
# deps/pypi/onednn-<version>/{lib,include}: two oneDNN 3 builds would share libdnnl.so.3's name.
# oneDNN 3.2, GNU OpenMP (the runtime Debian's oneDNN 2.6 uses), no other dependency: ~39 MB
# download, 164 MB installed.
ONEDNN_PREFIXES="onednn-3.2:onednn-cpu-gomp==2023.2.0+onednn-devel-cpu-gomp==2023.2.0"
for entry in $ONEDNN_PREFIXES; do
  folder="$PYPI_DIR/${entry%%:*}" group=${entry#*:}
  site=$(echo "$folder"/lib/python3*/*-packages)
  installed "$site" "$group" || pip_group "$folder" --prefix "$group"
  # Debian's own python3 puts `--prefix P` under P/local/ (its posix_local scheme: P/local/lib,
  # P/local/include, .../dist-packages); a python3 of its own (pyenv, a venv) does not. The build
  # looks in P/lib and P/include: move Debian's tree up.
  if [ -d "$folder/local" ]; then
    cp -a "$folder/local/." "$folder/" && rm -rf "$folder/local"
  fi
done

# --- BigDL on Spark for the cpu_bigdl backend (plugins/cpu_bigdl) -------------------------------
# BigDL DLlib 2.4.0 for Spark 3.1 (a jar with its dependencies) and bigdl-core 2.4.0.dev0 (BigDL's
# native MKL, which the dllib jar leaves out) share the top-level folder bigdl/: one pip call into
# deps/pypi/bigdl-2.4.0 (pure file copies). Spark's own jars come out of the pyspark==3.1.3 sdist
# (no wheel on PyPI; nothing of it is built or installed) into deps/pypi/spark-3.1.3/jars, its
# Scala 2.12.10 library and reflect jars replaced by 2.12.15's from pyspark==3.3.4's sdist: 2.12.10
# breaks on Java 17 in LambdaDeserializer ("too many arguments"; issue 42). The JVM runs with the
# jars on its class path; no Python is involved. ~611 MB downloaded (64 + 52 MB of BigDL, 214 +
# 282 MB of the two pyspark sdists, 2 jars of the second kept), ~340 MB on disk, 17 s here.
BIGDL_GROUP="bigdl-dllib-spark3==2.4.0+bigdl-core==2.4.0.dev0"
installed "$PYPI_DIR/bigdl-2.4.0" "$BIGDL_GROUP" || pip_group "$PYPI_DIR/bigdl-2.4.0" --target "$BIGDL_GROUP"
# spark_jars <folder>: Spark 3.1.3's jars in <folder>/jars with Scala 2.12.15; on failure,
# pyspark.failed says why (as pip_group does).
spark_jars() {
  dir=$1
  tmp=$(mktemp -d)
  echo "install-deps: pip download --no-deps pyspark==3.1.3, pyspark==3.3.4 (Spark's jars)"
  if python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" \
       pyspark==3.1.3 > "$PYPI_DIR/pyspark.log" 2>&1 &&
     python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" \
       pyspark==3.3.4 >> "$PYPI_DIR/pyspark.log" 2>&1 &&
     rm -rf "$dir" && mkdir -p "$dir/jars" &&
     tar -xzf "$tmp/pyspark-3.1.3.tar.gz" -C "$dir/jars" --strip-components=3 \
       pyspark-3.1.3/deps/jars >> "$PYPI_DIR/pyspark.log" 2>&1 &&
     rm "$dir/jars/scala-library-2.12.10.jar" "$dir/jars/scala-reflect-2.12.10.jar" &&
     tar -xzf "$tmp/pyspark-3.3.4.tar.gz" -C "$dir/jars" --strip-components=3 \
       pyspark-3.3.4/deps/jars/scala-library-2.12.15.jar \
       pyspark-3.3.4/deps/jars/scala-reflect-2.12.15.jar >> "$PYPI_DIR/pyspark.log" 2>&1; then
    rm -f "$PYPI_DIR/pyspark.failed" "$PYPI_DIR/pyspark.log"
  else
    why=$(pip_why "$PYPI_DIR/pyspark.log")
    echo "pip could not download pyspark 3.1.3/3.3.4 (Spark's jars): $why" | cut -c 1-300 > "$PYPI_DIR/pyspark.failed"
    echo "install-deps: WARNING: $(cat "$PYPI_DIR/pyspark.failed"); cpu_bigdl is left out"
    rm -rf "$dir"
  fi
  rm -rf "$tmp"
}
[ -f "$PYPI_DIR/spark-3.1.3/jars/scala-library-2.12.15.jar" ] || spark_jars "$PYPI_DIR/spark-3.1.3"
