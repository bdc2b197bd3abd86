#!/bin/sh
# start.sh — starts a private one-node Slurm on this machine for tests: a fresh munge key and
# munged (as the munge user), a slurm.conf from slurm.conf.in (this host's short name, CPUs=2,
# free ports), slurmctld, then slurmd, and waits until the node is idle. Everything lives under
# DIR; stop.sh DIR stops the daemons by their pid files. Needs root (slurmd runs the jobs) and no
# systemd.
# Usage: start.sh DIR
# Exit: 0 running (clients need SLURM_CONF=DIR/slurm.conf, also written to DIR/env);
#       77 not installed or cannot start here, with the reason on stdout (ctest SKIP).
set -u
DIR="$1"
HERE=$(cd "$(dirname "$0")" && pwd)
skip() {
  echo "SKIP: $1"
  for log in "$DIR/munged.log" "$DIR/slurmctld.log" "$DIR/slurmd.log"; do
    if [ -s "$log" ]; then echo "--- last lines of $log"; tail -n 8 "$log"; fi
  done
  "$HERE/stop.sh" "$DIR" > /dev/null 2>&1
  exit 77
}

for tool in munged mungekey slurmctld slurmd srun salloc sinfo; do
  command -v "$tool" > /dev/null 2>&1 ||
    skip "$tool is not installed (Debian packages: slurmctld slurmd slurm-client munge)"
done
[ "$(id -u)" = 0 ] || skip "a private slurmd must run as root"
id munge > /dev/null 2>&1 || skip "no munge user (is the munge package installed?)"
# slurmctld and every client look this machine's name up; where it does not resolve (a minimal
# container without /etc/hosts) each sinfo call waits out its own timeout, so say so and skip now.
HOST=$(hostname -s)
getent hosts "$HOST" > /dev/null 2>&1 ||
  skip "this machine's name '$HOST' does not resolve (add it to /etc/hosts); Slurm needs it"

rm -rf "$DIR"
mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool" || skip "cannot create $DIR"
chmod 755 "$DIR"
# munged refuses a key that other users could read, and sockets they could replace.
# Clients need to reach the socket: the folder is 755, the key inside it 600.
chown munge:munge "$DIR/munge" && chmod 755 "$DIR/munge"
mungekey --create --keyfile="$DIR/munge/munge.key" > /dev/null 2>&1 || skip "mungekey failed"
chown munge:munge "$DIR/munge/munge.key" && chmod 600 "$DIR/munge/munge.key"
SOCKET="$DIR/munge/munge.socket"
runuser -u munge -- munged --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
  --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
  --seed-file="$DIR/munge/munged.seed" > "$DIR/munged.log" 2>&1 ||
  { cat "$DIR/munge/munged.log" >> "$DIR/munged.log" 2>/dev/null; skip "munged did not start"; }
cp "$DIR/munge/munged.pid" "$DIR/munged.pid"

# Two free TCP ports, so that two test runs (or a real Slurm) on this machine do not collide.
port_free() { ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
CTLD_PORT=""
base=$((20000 + ($$ % 2000) * 2))
for try in 0 1 2 3 4 5 6 7 8 9; do
  p=$((base + try * 4000))
  if port_free "$p" && port_free "$((p + 1))"; then CTLD_PORT=$p; break; fi
done
[ -n "$CTLD_PORT" ] || skip "no free TCP port pair found for slurmctld/slurmd"
sed -e "s|@HOST@|$HOST|g" -e "s|@DIR@|$DIR|g" -e "s|@CTLD_PORT@|$CTLD_PORT|g" \
  -e "s|@SLURMD_PORT@|$((CTLD_PORT + 1))|g" -e "s|@MUNGE_SOCKET@|$SOCKET|g" -e "s|@CPUS@|2|g" \
  "$HERE/slurm.conf.in" > "$DIR/slurm.conf"
export SLURM_CONF="$DIR/slurm.conf"
echo "SLURM_CONF=$SLURM_CONF" > "$DIR/env"

slurmctld -f "$SLURM_CONF" > "$DIR/slurmctld.out" 2>&1 || skip "slurmctld did not start"
slurmd -f "$SLURM_CONF" > "$DIR/slurmd.out" 2>&1 || skip "slurmd did not start"
# Bounded by the clock, not by a count of tries: one sinfo that cannot reach slurmctld can block
# for many seconds, so each call has its own short timeout too.
deadline=$(($(date +%s) + 30))
while [ "$(date +%s)" -lt "$deadline" ]; do
  state=$(timeout 3 sinfo -h -o %T 2> /dev/null | head -n 1)
  [ "$state" = idle ] && { echo "slurm: node $HOST idle (slurmctld port $CTLD_PORT, conf $SLURM_CONF)"; exit 0; }
  sleep 0.5
done
skip "the Slurm node did not become idle within 30 s (state '${state:-none}')"
