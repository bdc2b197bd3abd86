#!/bin/bash
# The quiet window's benchmarks (this session): issue 44's ab gate, issue 41/42's distributed tools
# table with bigdl_spark, issue 42's tools table with cpu_bigdl, issue 40's leftover fairness rows.
set -u
cd /work/main
R=/tmp/q/out; mkdir -p $R
E="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
step() { echo "== $(date -u +%H:%M:%S) $*; $(cat /proc/loadavg)" | tee -a $R/log.txt; }
part=${1:-all}
if [[ $part == all || $part == ab ]]; then
  for nb in "fcn5 64 20" "lenet 64 500" "alexnet_r 128 100" "resnet56 32 30"; do
    set -- $nb
    step "ab.py $1 $2 k$3"
    $E python3 bench/ab.py $1 $2 --a /work/wt/h40-mx/build/plugins --b build/plugins \
      --dlhost build/host/dlhost --rounds 5 --k $3 2>&1 | tee -a $R/ab.txt
  done
fi
if [[ $part == all || $part == dt ]]; then
  for i in 1 2; do
    step "distributed tools run $i"
    $E build/host/dlhost run /tmp/dt2/suite.yaml --set iterations=10 --set warmup=2 \
      -o $R/dt-results-$i.jsonl > $R/dt-run-$i.log 2>&1; echo "rc $?" | tee -a $R/log.txt
  done
fi
if [[ $part == all || $part == tools ]]; then
  step "tools table (frameworks_cpu narrowed)"
  $E build/host/dlhost run suites/frameworks_cpu.yaml \
    --set 'network=[fcn5, fcn8, fcnr, alexnet_r, lenet, autoencoder]' \
    -o $R/tools-results.jsonl > $R/tools-run.log 2>&1; echo "rc $?" | tee -a $R/log.txt
fi
if [[ $part == all || $part == fair ]]; then
  step "fairness: cpu_libtorch lenet t2"
  $E python3 bench/fairness.py --build build --venvs /work/wt/h40-truth/build --pairs cpu_libtorch \
    --networks lenet:64:40 --threads 2 --rounds 6 --warmup 2 --iterations 3 \
    --output $R/fair-lenet-t2 2>&1 | tee -a $R/fair.txt
  step "fairness: cpu_tensorflow spot rows"
  $E python3 bench/fairness.py --build build --venvs /work/wt/h40-truth/build --pairs cpu_tensorflow \
    --networks lenet:64:20,fcn5:64,resnet56:128 --threads 1,2 --rounds 2 --warmup 1 --iterations 3 \
    --output $R/fair-tf 2>&1 | tee -a $R/fair.txt
fi
step done
