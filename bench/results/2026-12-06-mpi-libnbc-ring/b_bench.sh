#!/bin/sh
# B: mpi's in-place all-reduce on 2 ranks over 1gbe test hosts: libnbc's own choice (ignore =
# binomial here), ring, Rabenseifner; mpi_raw (blocking MPI_Allreduce, coll/tuned) as each mpi
# run's baseline; gloo. Alternating, order rotating with the round.
D=/work/wt/h40-mx/build/host/dlhost
OUT=${OUT:-/tmp/h40mx/b}
LINK=${LINK:-"--interconnect 1gbe"}
ROUNDS=${ROUNDS:-3}
SWEEP=${SWEEP:-"-b 1M -e 64M -f 4 -n 5 -w 2"}
mkdir -p $OUT
uptime
VARIANTS="ignore ring rabenseifner gloo"
r=1
while [ $r -le $ROUNDS ]; do
  set -- $VARIANTS
  k=1; while [ $k -lt $r ]; do v=$1; shift; set -- "$@" $v; k=$((k+1)); done
  for v in "$@"; do
    echo "== round $r $v $(cat /proc/loadavg)"
    if [ $v = gloo ]; then
      env -u OMPI_MCA_coll_libnbc_iallreduce_algorithm $D comm-bench --comm gloo --baseline none --ops all_reduce --in-place $LINK --ranks 2 $SWEEP --json $OUT/r$r-$v.json > $OUT/r$r-$v.txt 2>&1
    else
      OMPI_MCA_coll_libnbc_iallreduce_algorithm=$v $D comm-bench --comm mpi --ops all_reduce --in-place $LINK --ranks 2 $SWEEP --json $OUT/r$r-$v.json > $OUT/r$r-$v.txt 2>&1
    fi
    echo "rc $?"; grep -E "^ +[0-9]+ " $OUT/r$r-$v.txt | awk '{print "   ", $1, $7, $8, $9, $10, $12, $13, $14}'
  done
  r=$((r+1))
done
uptime
