#!/bin/sh
# comm_mpi_bench.sh — `dlhost comm-bench --comm mpi` end to end.
#   MODE 2ranks: under `mpirun -np 2` (shared memory): both ranks ran (header and JSON list 2
#                ranks with distinct pids), #wrong 0 everywhere, busbw > 0. SKIPs (exit 77) with
#                the reason when mpirun cannot start two ranks here; mpirun as root refuses and
#                exits 0, so a preflight checks that both ranks really printed.
#                Then `--interconnect loopback --ranks 2 --in-place`: dlhost starts the 2 ranks
#                itself; the same checks, and the JSON records the link and the in-place mode.
#   MODE 1rank:  no launcher: a world of 1; and usage errors exit 2 (launch options too).
# Usage: comm_mpi_bench.sh DLHOST WORK_DIR MODE
set -u
DLHOST="$1"
WORK="$2"
MODE="$3"
. "$(dirname "$0")/comm_mpi_check.sh"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"
SWEEP="-b 1K -e 4M -f 4 -n 5 -w 2"  # 7 sizes per collective

case "$MODE" in
  2ranks)
    command -v mpirun > /dev/null 2>&1 || skip "mpirun is not installed"
    MPIRUN="mpirun --allow-run-as-root -np 2 --mca btl self,vader"
    $MPIRUN sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"' > preflight.txt 2>&1
    if ! grep -q "^rank 1 of 2" preflight.txt || ! grep -q "^rank 0 of 2" preflight.txt; then
      cat preflight.txt
      skip "mpirun cannot start 2 ranks here (output above)"
    fi
    $MPIRUN "$DLHOST" comm-bench --comm mpi $SWEEP --json out.json > out.txt 2> err.txt
    rc=$?
    cat out.txt err.txt
    [ $rc -eq 0 ] || fail "2-rank comm-bench exited $rc"
    check_run out.txt out.json 2 openmpi 7
    # dlhost starting the ranks itself (--interconnect loopback: mpirun on this host, as `dlhost
    # run` launches a case), all-reduce in place as the runner issues it: checked the same way,
    # and the JSON says so.
    "$DLHOST" comm-bench --comm mpi $SWEEP --in-place --interconnect loopback --ranks 2 \
      --json inplace.json > inplace.txt 2> inplace.err
    rc=$?
    cat inplace.txt inplace.err
    [ $rc -eq 0 ] || fail "comm-bench --interconnect loopback exited $rc"
    check_run inplace.txt inplace.json 2 openmpi 7
    grep -q "all_reduce in place" inplace.txt || fail "the header does not say 'in place'"
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["in_place"] is True, d["config"]
assert d["interconnect"] == {"profile": "loopback", "ranks_per_host": 2}, d["interconnect"]' \
      inplace.json || fail "inplace.json: config.in_place / interconnect"
    ;;
  1rank)
    # No launcher variables, even when ctest itself runs under mpirun or srun.
    env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMI_SIZE -u PMIX_RANK \
      "$DLHOST" comm-bench --comm mpi $SWEEP --json out.json > out.txt 2> err.txt
    rc=$?
    cat out.txt err.txt
    [ $rc -eq 0 ] || fail "1-rank comm-bench exited $rc"
    check_run out.txt out.json 1 none 7
    "$DLHOST" comm-bench --comm no_such_comm > bad.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "unknown --comm exited $rc, expected 2"
    grep -q "no comm plugin 'no_such_comm'.*mpi" bad.txt || fail "unknown --comm: $(cat bad.txt)"
    "$DLHOST" comm-bench --comm mpi -b 4X > bad.txt 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "bad size exited $rc, expected 2"
    grep -q "'4X' is not a size" bad.txt || fail "bad size: $(cat bad.txt)"
    # Launch options: each wrong one named, exit 2, nothing started.
    for args in "--interconnect token-ring" "--interconnect 1gbe --link-gbit 2" \
      "--interconnect custom" "--interconnect loopback --ranks 1"; do
      # shellcheck disable=SC2086
      "$DLHOST" comm-bench --comm mpi $args > bad.txt 2>&1
      rc=$?
      [ $rc -eq 2 ] || fail "comm-bench $args exited $rc, expected 2: $(cat bad.txt)"
      grep -q -- "--interconnect\|--ranks\|--link-gbit" bad.txt || fail "$args: $(cat bad.txt)"
    done
    ;;
  *)
    fail "unknown mode '$MODE' (2ranks, 1rank)"
    ;;
esac
echo "comm_mpi_bench $MODE: all checks passed"
