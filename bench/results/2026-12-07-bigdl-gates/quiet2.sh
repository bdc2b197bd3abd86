#!/bin/bash
# Quiet window 2: after cpu_bigdl's autoencoder; the distributed tools table again (all tools),
# the tools table's autoencoder rows, and cpu_libtorch's 2-thread autoencoder against its peer.
set -u
cd /work/main
R=/tmp/q/out2; mkdir -p $R
E="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
step() { echo "== $(date -u +%H:%M:%S) $*; $(cat /proc/loadavg)" | tee -a $R/log.txt; }
for i in 3 4; do
  step "distributed tools run $i"
  $E build/host/dlhost run /tmp/dt2/suite.yaml --set iterations=10 --set warmup=2 \
    -o $R/dt-results-$i.jsonl > $R/dt-run-$i.log 2>&1; echo "rc $?" | tee -a $R/log.txt
done
step "tools table: autoencoder rows"
$E build/host/dlhost run suites/frameworks_cpu.yaml --set 'network=[autoencoder]' \
  -o $R/tools-autoencoder.jsonl > $R/tools-autoencoder.log 2>&1; echo "rc $?" | tee -a $R/log.txt
step "cpu_libtorch autoencoder b100 t2: dlhost's defaults and the peer under the same environment, alternating"
cat > $R/ae.yaml <<'YAML'
name: ae_t2
defaults: {network: autoencoder, batch: 100, backend: cpu_libtorch, threads: 2, warmup: 2, iterations: 20}
cases:
  - {tags: [default]}
  - {omp_wait_policy: passive, tags: [passive]}
YAML
envj=$($E build/host/dlhost case-env --set backend=cpu_libtorch --set threads=2)
penv=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(' '.join(f'{k}={v}' for k,v in d['set'].items()))" "$envj")
for r in 1 2 3; do
  $E build/host/dlhost run $R/ae.yaml -q -o $R/ae-dlhost.jsonl > /dev/null 2>&1
  echo "round $r peer default: $($E env $penv /usr/bin/python3 bench/peers/torch_peer.py autoencoder --batch 100 --threads 2 --warmup 2 --iterations 20 2>&1 | tail -1)" | tee -a $R/ae-peer.txt
  echo "round $r peer passive: $($E env $penv OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/torch_peer.py autoencoder --batch 100 --threads 2 --warmup 2 --iterations 20 2>&1 | tail -1)" | tee -a $R/ae-peer.txt
done
step done
