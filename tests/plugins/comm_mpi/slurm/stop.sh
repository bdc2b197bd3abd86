#!/bin/sh
# stop.sh — stops the daemons start.sh started under DIR (slurmd, slurmctld, munged), by their
# pid files only, waiting up to 5 s for each before SIGKILL. Safe to run twice.
# Usage: stop.sh DIR
DIR="$1"
for name in slurmd slurmctld munged; do
  pidfile="$DIR/$name.pid"
  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2> /dev/null
  i=0
  while kill -0 "$pid" 2> /dev/null && [ $i -lt 50 ]; do
    sleep 0.1
    i=$((i + 1))
  done
  kill -9 "$pid" 2> /dev/null
  rm -f "$pidfile"
done
exit 0
