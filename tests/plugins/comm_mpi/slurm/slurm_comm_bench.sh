#!/bin/sh
# slurm_comm_bench.sh — `dlhost comm-bench --comm mpi` under a real (private, one-node) Slurm:
# `srun --mpi=pmix -n 2 dlhost ...` (ranks from Slurm's variables, MPI wired up by PMIx) and
# `salloc -n 2 mpirun ...` (Open MPI launching inside the allocation). Each must run both ranks
# with every value right. SKIPs (exit 77) with the reason when Slurm is not installed or cannot
# start here. Then a 2-rank training case through `launcher: srun`, and one through mpirun inside
# `salloc`: each must end OK with both ranks in its record. Starts and stops its own daemons
# (start.sh / stop.sh); about 20 s.
# Usage: slurm_comm_bench.sh DLHOST WORK_DIR
set -u
DLHOST="$1"
WORK="$2"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../comm_mpi_check.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"
command -v mpirun > /dev/null 2>&1 || skip "mpirun is not installed"

# Slurm's daemons live in a short path: munge's socket path must fit in 108 bytes.
SLURM_DIR=$(mktemp -d /tmp/dlhost-slurm.XXXXXX)
trap '"$HERE/stop.sh" "$SLURM_DIR"; rm -rf "$SLURM_DIR"' EXIT
"$HERE/start.sh" "$SLURM_DIR"
rc=$?
[ $rc -eq 0 ] || exit $rc  # 77: skipped, the reason printed by start.sh
export SLURM_CONF="$SLURM_DIR/slurm.conf"
SWEEP="-b 1K -e 256K -f 8 -n 3 -w 1"  # 3 sizes per collective

timeout 60 srun --mpi=pmix -n 2 "$DLHOST" comm-bench --comm mpi $SWEEP --json srun.json \
  > srun.txt 2> srun.err
rc=$?
cat srun.txt srun.err
[ $rc -eq 0 ] || fail "srun --mpi=pmix -n 2 comm-bench exited $rc"
check_run srun.txt srun.json 2 slurm 3

timeout 60 salloc -n 2 mpirun --allow-run-as-root --mca btl self,vader \
  "$DLHOST" comm-bench --comm mpi $SWEEP --json salloc.json > salloc.txt 2> salloc.err
rc=$?
cat salloc.txt salloc.err
[ $rc -eq 0 ] || fail "salloc -n 2 mpirun comm-bench exited $rc"
check_run salloc.txt salloc.json 2 openmpi 3
# Training cases: dlhost launches the ranks itself, through srun, and through mpirun inside an
# allocation (mpirun then takes its hosts from Slurm).
cat > train.yaml <<'YAML'
name: slurm_train
defaults: {network: lenet, backend: cpu_onednn, comm: mpi, ranks: 2, batch: 16, threads: 1, warmup: 1, iterations: 3, timeout: 120}
cases:
  - {launcher: srun, tags: [srun]}
YAML
timeout 180 "$DLHOST" run train.yaml -o srun_train.jsonl > srun_train.txt 2>&1
rc=$?
cat srun_train.txt
[ $rc -eq 0 ] || fail "the launcher: srun case exited $rc"
sed 's/launcher: srun, tags: \[srun\]/launcher: mpirun, tags: [salloc]/' train.yaml > salloc_train.yaml
timeout 180 salloc -n 2 "$DLHOST" run salloc_train.yaml -o salloc_train.jsonl > salloc_train.txt 2>&1
rc=$?
cat salloc_train.txt
[ $rc -eq 0 ] || fail "the mpirun-inside-salloc case exited $rc"
for f in srun_train.jsonl:slurm salloc_train.jsonl:openmpi; do
  /usr/bin/python3 - "${f%%:*}" "${f##*:}" <<'PY' || fail "training case in $f"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert len(r) == 1 and r[0]["status"] == "OK", r[0]["reason"] if r else "no record"
d = r[0]["distributed"]
assert d["ranks"] == 2 and d["launcher"] == sys.argv[2], d
PY
done
echo "slurm_comm_bench: all checks passed"
