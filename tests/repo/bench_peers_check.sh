#!/bin/sh
# bench_peers_check.sh — bench/'s PyTorch and TensorFlow peers build the Transformers of
# networks_transformer with exactly dlhost's parameter counts (the full BERT-base and GPT-2 small
# and the tiny ones), and the tiny ones train (the loss falls over 6 steps on one batch). No
# timing. Runs every Python that has a peer's framework: Debian's /usr/bin/python3 (PyTorch
# 1.13) and bench/run.sh's venv BUILD/bench-venv (PyTorch 2, TensorFlow) when it exists;
# exit 77 (skipped) when none has one.
# Usage: bench_peers_check.sh DLHOST SOURCE_DIR BUILD_DIR
set -u
dlhost=$1 src=$2 build=$3
peers=$src/bench/peers
nets=gpt2_tiny,bert_tiny,gpt2,bert_base
export DLHOST="$dlhost" TF_CPP_MIN_LOG_LEVEL=3 OMP_NUM_THREADS=1
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE  # as bench/run.sh
ran=0 failed=0
check() {  # PYTHON MODULE SCRIPT
  if ! "$1" -c "import $2" >/dev/null 2>&1; then
    echo "bench_peers_check: $1 has no $2: its peer not checked"
    return
  fi
  ran=$((ran + 1))
  echo "bench_peers_check: $3 with $1"
  (cd "$peers" && timeout 300 "$1" "$3" --check "$nets" --threads 1) || failed=$((failed + 1))
}
for py in /usr/bin/python3 "$build/bench-venv/bin/python"; do
  [ -x "$py" ] || { echo "bench_peers_check: no $py"; continue; }
  check "$py" torch torch_peer.py
  check "$py" tensorflow tf_peer.py
done
if [ "$ran" -eq 0 ]; then
  echo "SKIP: no Python here has PyTorch or TensorFlow (apt install python3-torch, or bench/run.sh's venv)"
  exit 77
fi
[ "$failed" -eq 0 ] || { echo "bench_peers_check: $failed of $ran peer checks failed"; exit 1; }
echo "bench_peers_check: $ran peer checks passed"
