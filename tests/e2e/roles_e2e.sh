#!/bin/sh
# roles_e2e.sh — a case's extra roles (launch/roles.h; issue 44, for the tools' own runtimes of
# issue 41): a process of another role than the ranks, started beside them through the test hook
# DLHOST_TEST_EXTRA_ROLE, that is killed ends the case CRASHED naming the role, one that exits
# non-zero ends it FAILED naming the role and its code, and one that runs on is ended with the
# case (nothing left behind). Two ranks of the faulty fixture over the store_check comm,
# `launcher: local`; the failing cases' ranks hang (`fault: hang`), so only the role can end them
# before their timeout.
# Usage: roles_e2e.sh DLHOST FIXTURE_BACKEND_DIR FIXTURE_COMM_DIR WORK_DIR
set -eu
DLHOST="$1"; BACKENDS="$2"; COMMS="$3"; WORK="$4"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/process_checks.sh"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "roles_e2e: FAILED: $*"; exit 1; }

suite() {  # suite NAME FAULT: one 2-rank case
  cat > "$WORK/$1.yaml" <<YAML
name: roles_$1
defaults: {network: lenet, batch: 4, warmup: 0, iterations: 2, threads: 1, timeout: 120,
           backend: faulty, comm: store_check, ranks: 2, launcher: local}
cases:
  - {tags: [$1], options: {faulty: {fault: $2}}}
YAML
}
run() {  # run NAME ROLE: the run's exit code in $rc, its record in NAME.jsonl
  set +e
  DLHOST_TEST_EXTRA_ROLE="$2" "$DLHOST" --plugin-path "$BACKENDS" --plugin-path "$COMMS" \
    run "$WORK/$1.yaml" -o "$WORK/$1.jsonl" > "$WORK/$1.out" 2> "$WORK/$1.err"
  rc=$?
  set -e
}
field() {  # field NAME KEY
  /usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())[sys.argv[2]])' \
    "$WORK/$1.jsonl" "$2"
}

# A parameter server killed while the ranks wait on it: the case ends at once, CRASHED, named.
suite killed hang
run killed "ps=echo \$\$ > $WORK/killed.pid; kill -9 \$\$"
[ $rc -eq 1 ] || { cat "$WORK/killed.out" "$WORK/killed.err"; fail "killed: exit code $rc, expected 1"; }
[ "$(field killed status)" = CRASHED ] || fail "killed: status $(field killed status)"
reason=$(field killed reason)
case "$reason" in
  "role ps 0 (pid $(cat "$WORK/killed.pid")) was killed by SIGKILL while the ranks ran; dlhost ended the case") ;;
  *) fail "killed: reason '$reason'" ;;
esac
# Ended by the role's death, not at the case's timeout (120 s) that its hung ranks would reach.
/usr/bin/python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); sys.exit(r["duration_s"] >= r["params"]["timeout"])' \
  "$WORK/killed.jsonl" || fail "killed: the case ran to its timeout ($(field killed duration_s) s)"

# A scheduler that exits with an error: FAILED, with its code.
suite failed hang
run failed "scheduler=exit 3"
[ $rc -eq 1 ] || { cat "$WORK/failed.out" "$WORK/failed.err"; fail "failed: exit code $rc, expected 1"; }
[ "$(field failed status)" = FAILED ] || fail "failed: status $(field failed status)"
field failed reason | grep -q "^role scheduler 0 (pid [0-9]*) exited with code 3 while the ranks ran" \
  || fail "failed: reason '$(field failed reason)'"

# A server that runs on (as a parameter server does) while the ranks train: the case passes and
# the server and its own child are ended with it.
suite runs none
run runs "server=sleep 300 & echo \$! > $WORK/child.pid; echo \$\$ > $WORK/server.pid; wait"
[ $rc -eq 0 ] || { cat "$WORK/runs.out" "$WORK/runs.err"; fail "runs: exit code $rc, expected 0"; }
[ "$(field runs status)" = OK ] || fail "runs: status $(field runs status): $(field runs reason)"
for p in server child; do
  pid=$(cat "$WORK/$p.pid")
  gone_within_5s "$pid" || fail "runs: the role's $p (pid $pid) was left running"
done
echo "roles_e2e: OK"
