#!/bin/sh
# netns_e2e.sh — multi-rank cases on test hosts: `interconnect:` runs each rank in its own Linux
# network namespace, joined to a bridge by a tc-shaped veth link (host/launch/test_hosts.h).
#   interconnect: a 2-host LeNet case over an emulated 1 GbE link must end OK with its ranks seen
#     running inside the two namespaces and the record naming the link; a 2-host case of the
#     store_check comm must end OK (its ranks read each other's key through the store, which
#     they reach on the parent's bridge address, not loopback); a 100 Mbit/s link must hold the
#     all-reduce to at least the time its bytes need on the wire (the shaping is real); a link
#     latency is SKIPPED naming netem where the kernel lacks it, else emulated (OK).
#   projection: `dlhost project` for 2 and 4 ranks over 1gbe beside the same cases measured on
#     test hosts, from `dlhost comm-bench --interconnect 1gbe` fits of 2 and 4 ranks taken as
#     measured: every case ran, every rank count is projected and compared, the figures add up
#     (errors printed, not bounded: accuracy is bench/link_projection.sh's to measure).
#   cut_link: a test host's link cut (`ip link set down`) in the middle of a case ends it within
#     its timeout naming the rank and the host, the next case runs, and no process, namespace or
#     link is left behind. Then a start-up where rank 1 never reaches the comm (the faulty
#     fixture hangs in compile) ends after its startup_timeout, long before the case's timeout,
#     FAILED naming each rank, its test host and what it waited for.
# Usage: netns_e2e.sh MODE DLHOST FIXTURE_COMM_DIR WORK_DIR
# Exit 77 (skipped, reason printed) without root, iproute2, mpirun or network namespaces.
set -eu
MODE="$1"; DLHOST="$2"; FIXTURES="$3"; WORK="$4"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "netns_e2e $MODE: FAILED: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "test hosts (network namespaces) need root"
command -v mpirun > /dev/null || skip "mpirun not installed"
PATH="$PATH:/usr/sbin:/sbin"
command -v ip > /dev/null || skip "iproute2's ip not installed"
command -v tc > /dev/null || skip "iproute2's tc not installed"

# Whatever happens to this script, nothing of the dlhost it started stays: its processes, and the
# namespaces and links named after its pid (dlhost removes them itself unless it is SIGKILLed).
DL_PID=""
cleanup() {
  [ -n "$DL_PID" ] || return 0
  kill "$DL_PID" 2> /dev/null && sleep 1
  kill -9 "$DL_PID" 2> /dev/null || true
  for ns in $(ip netns list 2> /dev/null | sed -n "s/^\(dlhn${DL_PID}h[0-9]*\).*/\1/p"); do
    for p in $(ip netns pids "$ns"); do kill -9 "$p" 2> /dev/null || true; done
    ip netns delete "$ns" || true
  done
  ip link delete "dlhn${DL_PID}b" 2> /dev/null || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Prints the namespaces (h0 h1 ...) in which a case worker of $DL_PID runs, as "h0 h1".
workers_in_hosts() {
  for ns in $(ip netns list 2> /dev/null | sed -n "s/^dlhn${DL_PID}\(h[0-9]*\).*/\1/p"); do
    for p in $(ip netns pids "dlhn${DL_PID}$ns" 2> /dev/null); do
      if cat "/proc/$p/cmdline" 2> /dev/null | tr "\0" " " | grep -q case-worker; then
        echo "$ns"
        break
      fi
    done
  done | sort -u | tr '\n' ' '
}

if [ "$MODE" = interconnect ]; then
  cat > "$WORK/links.yaml" << 'YAML'
name: links
defaults: {network: lenet, batch: 8, backend: cpu_onednn, comm: mpi, ranks: 2, threads: 1,
           warmup: 1, iterations: 4, timeout: 60}
cases:
  - {interconnect: 1gbe, tags: [gbe]}
  - {interconnect: 1gbe, comm: store_check, tags: [store]}
  - {interconnect: custom, link_gbit: 0.1, tags: [slow]}
  - {interconnect: custom, link_latency_us: 200, iterations: 2, tags: [latency]}
YAML
  "$DLHOST" --plugin-path "$FIXTURES" run "$WORK/links.yaml" -o "$WORK/links.jsonl" \
    > "$WORK/links.txt" 2> "$WORK/links.err" &
  DL_PID=$!
  seen=""
  while kill -0 "$DL_PID" 2> /dev/null; do
    now=$(workers_in_hosts)
    [ ${#now} -gt ${#seen} ] && seen="$now"
    sleep 0.1
  done
  set +e
  wait "$DL_PID"
  rc=$?
  set -e
  cat "$WORK/links.txt"
  [ $rc -eq 0 ] || { tail -n 40 "$WORK/links.err"; fail "dlhost run exited with $rc"; }
  echo "case workers seen running in test hosts: $seen"
  set +e
  /usr/bin/python3 - "$WORK/links.jsonl" << 'PY'
import json, sys
recs = {r["params"]["tags"][0]: r for r in map(json.loads, open(sys.argv[1]))}
gbe = recs["gbe"]
if gbe["status"] == "SKIPPED":
    print("SKIPPED:", gbe["reason"])
    sys.exit(77)
for tag in ("gbe", "store", "slow"):
    r = recs[tag]
    assert r["status"] == "OK", (tag, r["status"], r["reason"], r.get("stderr_tail"))
    link = r["interconnect"]
    assert len(link["hosts"]) == 2 and r["distributed"]["ranks"] == 2, link
    assert link["parent_address"].startswith("10.213."), link
assert recs["gbe"]["interconnect"]["profile"] == "1gbe"
assert recs["gbe"]["interconnect"]["link_gbit"] == 1
assert "tbf rate 1000000kbit" in recs["gbe"]["interconnect"]["shaping"], recs["gbe"]["interconnect"]
# 100 Mbit/s: each rank sends at least its gradient's bytes over its link every step.
slow = recs["slow"]["distributed"]
wire_ms = slow["allreduce_bytes_per_step"] * 8 / 0.1e9 * 1e3
got = slow["allreduce"]["median"]
print(f"100 Mbit/s link: all-reduce median {got:.1f} ms, wire time of the gradient {wire_ms:.1f} ms")
assert got >= 0.9 * wire_ms, (got, wire_ms)
lat = recs["latency"]
if lat["status"] == "SKIPPED":
    assert "netem" in lat["reason"], lat["reason"]
    print("latency case SKIPPED:", lat["reason"])
else:
    assert lat["status"] == "OK" and "netem delay 100us" in lat["interconnect"]["shaping"], lat
PY
  prc=$?
  set -e
  [ $prc -ne 77 ] || exit 77  # the record's own skip reason, printed above
  [ $prc -eq 0 ] || fail "records"
  "$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/links.jsonl" --cases 4 ||
    fail "the records do not follow docs/results-schema.json"
  case "$seen" in
    *h0*h1*) ;;
    *) fail "the ranks were not seen running inside both test hosts (seen: '$seen')" ;;
  esac
elif [ "$MODE" = projection ]; then
  # `dlhost project` against ranks on test hosts: LeNet profiled on 1 rank, then run on 2 and 4
  # test hosts (4 oversubscribe the cores) over an emulated 1 GbE link; comm-bench's in-place
  # all-reduce measured over that link on 2 and 4 test hosts and fitted; the projection printed
  # beside each measured row with its error.
  cat > "$WORK/proj.yaml" << 'YAML'
name: projection
defaults: {network: lenet, backend: cpu_onednn, threads: 1, warmup: 2, iterations: 6, timeout: 120}
cases:
  - {batch: 64, fused_step: off, tags: [one]}
  - {batch: 128, ranks: 2, comm: mpi, interconnect: 1gbe, tags: [two]}
  - {batch: 256, ranks: 4, comm: mpi, interconnect: 1gbe, tags: [four]}
YAML
  "$DLHOST" run "$WORK/proj.yaml" -o "$WORK/proj.jsonl" > "$WORK/proj.txt" 2>&1 &
  DL_PID=$!
  set +e
  wait "$DL_PID"
  rc=$?
  set -e
  cat "$WORK/proj.txt"
  [ $rc -eq 0 ] || fail "dlhost run exited with $rc"
  why=$(/usr/bin/python3 -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
print(next((r["reason"] for r in rs if r["status"] == "SKIPPED"), ""))' "$WORK/proj.jsonl")
  [ -z "$why" ] || skip "$why"
  # The all-reduce over the same link, as the runner issues it (in place), on 2 and 4 test hosts:
  # the projection takes each fit as measured for its rank count.
  for n in 2 4; do
    "$DLHOST" comm-bench --comm mpi --baseline none --ops all_reduce --in-place -b 512K -e 8M -f 2 \
      -n 5 -w 2 --interconnect 1gbe --ranks $n --timeout 120 --json "$WORK/bench$n.json" \
      > "$WORK/bench$n.txt" 2>&1 || { tail -n 20 "$WORK/bench$n.txt"; fail "comm-bench over 1gbe, $n ranks"; }
  done
  cat "$WORK/bench4.txt"
  "$DLHOST" project "$WORK/proj.jsonl" --comm-bench "$WORK/bench2.json" \
    --comm-bench "$WORK/bench4.json" --ranks 2,4 --interconnect 1gbe --compare "$WORK/proj.jsonl" \
    --json "$WORK/project.json" > "$WORK/project.txt" 2>&1 || { cat "$WORK/project.txt"; fail "dlhost project"; }
  cat "$WORK/project.txt"
  /usr/bin/python3 - "$WORK/project.json" "$WORK/bench2.json" "$WORK/bench4.json" << 'PY' || fail "projection"
import json, math, sys
for n, path in ((2, sys.argv[2]), (4, sys.argv[3])):
    link = json.load(open(path))["interconnect"]
    assert link["profile"] == "1gbe" and len(link["hosts"]) == n, link
proj = json.load(open(sys.argv[1]))
for l in proj["links"]:
    assert l["source"].startswith("as measured on %d ranks over 1gbe" % l["ranks"]), l
comps = proj["comparisons"]
assert sorted(c["ranks"] for c in comps) == [2, 4], comps
for c in comps:
    print("%d test hosts over 1gbe%s: measured %.1f ms (exposed comm %.1f), projected %.1f ms "
          "(error %+.1f%%), from the measured compute %.1f ms (error %+.1f%%)" % (c["ranks"],
          " (oversubscribed)" if c["oversubscribed"] else "", c["measured_step_ms"],
          c["measured_exposed_ms"], c["projected_step_ms"], c["error_percent"],
          c["projected_step_ms_from_measured_compute"], c["error_percent_from_measured_compute"]))
    # The projection's arithmetic, from the figures it printed. Its accuracy is not asserted: it
    # rests on measured compute and link times, which a loaded machine (a build beside the test:
    # +27.6% where the model alone was +2.6%) or oversubscribed ranks move at will, so a bound
    # here fails by the machine's mood; bench/link_projection.sh measures it (docs/project.md).
    for k in ("measured_step_ms", "projected_step_ms", "measured_compute_ms",
              "projected_step_ms_from_measured_compute", "error_percent",
              "error_percent_from_measured_compute", "measured_exposed_ms"):
        assert math.isfinite(c[k]), (k, c)
    assert c["measured_step_ms"] > 0 and c["measured_compute_ms"] > 0, c
    def error(projected):
        return (projected - c["measured_step_ms"]) / c["measured_step_ms"] * 100
    assert math.isclose(c["error_percent"], error(c["projected_step_ms"]), rel_tol=1e-9, abs_tol=1e-9), c
    assert math.isclose(c["error_percent_from_measured_compute"],
                        error(c["projected_step_ms_from_measured_compute"]), rel_tol=1e-9, abs_tol=1e-9), c
    # A projected step is its compute plus whatever communication is not hidden.
    assert c["projected_step_ms_from_measured_compute"] >= c["measured_compute_ms"] * (1 - 1e-12), c
# Every rank count asked for is projected, each step its compute plus its exposed communication.
projs = proj["projections"]
assert sorted(p["ranks"] for p in projs) == [2, 4], projs
for p in projs:
    assert p["compute_ms"] > 0 and p["comm_ms"] > 0, p
    assert math.isclose(p["step_ms_no_overlap"], p["compute_ms"] + p["comm_ms"], rel_tol=1e-9), p
    assert math.isclose(p["step_ms_overlap"], p["compute_ms"] + p["exposed_ms_overlap"], rel_tol=1e-9), p
    assert 0 <= p["exposed_ms_overlap"] <= p["comm_ms"] * (1 + 1e-12), p
PY
elif [ "$MODE" = cut_link ]; then
  # The first case would run for its whole timeout; its host h1 loses its link once both ranks
  # run. The second must still run.
  cat > "$WORK/cut.yaml" << 'YAML'
name: cut
defaults: {network: lenet, batch: 8, backend: cpu_onednn, comm: mpi, ranks: 2, threads: 1,
           interconnect: 1gbe, warmup: 1}
cases:
  - {iterations: 100000, timeout: 15, tags: [cut]}
  - {iterations: 2, timeout: 60, tags: [after]}
  - {backend: faulty, iterations: 2, timeout: 60, startup_timeout: 10, tags: [stall],
     options: {faulty: {fault: hang_compile, fault_rank: "1"}}}
YAML
  "$DLHOST" --plugin-path "$FIXTURES" --plugin-path "$(dirname "$FIXTURES")/fixture_backends" \
    run "$WORK/cut.yaml" -o "$WORK/cut.jsonl" \
    > "$WORK/cut.txt" 2> "$WORK/cut.err" &
  DL_PID=$!
  start=$(date +%s)
  cut=""
  while kill -0 "$DL_PID" 2> /dev/null; do
    # Mid-case: both ranks run in their hosts and h1's link has carried more than the weights'
    # broadcast and two steps' gradients (LeNet: 1.7 MB each).
    link="/sys/class/net/dlhn${DL_PID}v1/statistics/tx_bytes"
    if [ -z "$cut" ] && [ "$(cat "$link" 2> /dev/null || echo 0)" -gt 8000000 ] &&
      [ "$(workers_in_hosts)" = "h0 h1 " ]; then
      ip link set "dlhn${DL_PID}v1" down && cut=$(($(date +%s) - start))
      echo "cut the link of test host h1 at ${cut} s"
    fi
    [ $(($(date +%s) - start)) -lt 150 ] || fail "dlhost run still running after 150 s"
    sleep 0.1
  done
  set +e
  wait "$DL_PID"
  rc=$?
  set -e
  cat "$WORK/cut.txt"
  # Where test hosts cannot be made, dlhost records the case SKIPPED with the reason.
  why=$(/usr/bin/python3 -c 'import json, sys
r = json.loads(open(sys.argv[1]).readline())
print(r["reason"] if r["status"] == "SKIPPED" else "")' "$WORK/cut.jsonl" 2> /dev/null || true)
  [ -z "$why" ] || skip "$why"
  [ -n "$cut" ] || { tail -n 40 "$WORK/cut.err"; fail "the ranks never ran in both test hosts"; }
  [ $rc -eq 0 ] || [ $rc -eq 1 ] || { tail -n 40 "$WORK/cut.err"; fail "dlhost run exited with $rc"; }
  /usr/bin/python3 - "$WORK/cut.jsonl" "$DL_PID" << 'PY' || fail "records"
import json, sys
recs = {r["params"]["tags"][0]: r for r in map(json.loads, open(sys.argv[1]))}
cut, after, stall, pid = recs["cut"], recs["after"], recs["stall"], sys.argv[2]
print(f"cut case: {cut['status']} after {cut['duration_s']:.1f} s: {cut['reason']}")
assert cut["status"] in ("TIMEOUT", "FAILED", "CRASHED"), cut["status"]
# Stopped at 1.1 x timeout + 5 s at the latest, killed after 5 s more if the launcher lingers.
assert cut["duration_s"] <= 1.1 * 15 + 5 + 5 + 2, cut["duration_s"]
assert "rank 1" in cut["reason"], cut["reason"]
assert f"test host dlhn{pid}h1 at " in cut["reason"] and "lost its link" in cut["reason"], cut["reason"]
assert after["status"] == "OK", (after["status"], after["reason"])
print(f"stalled start-up: {stall['status']} after {stall['duration_s']:.1f} s: {stall['reason']}")
assert stall["status"] == "FAILED" and "start-up stalled" in stall["reason"], stall["reason"]
assert stall["duration_s"] < 40, stall["duration_s"]
why = stall["reason"]
assert f"rank 0 (test host dlhn{pid}h0 at " in why and "waited in the comm's init (comm mpi)" in why, why
assert f"rank 1 (test host dlhn{pid}h1 at " in why and "had not reached the comm's init" in why, why
PY
  "$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/cut.jsonl" --cases 3 ||
    fail "the records do not follow docs/results-schema.json"
  sleep 0.5
  if pgrep -f "$WORK/cut.yaml" > /dev/null; then fail "a rank outlived its case"; fi
else
  fail "unknown mode $MODE"
fi
# dlhost removed what it made: no namespace nor link of its pid is left.
if ip netns list 2> /dev/null | grep -q "^dlhn${DL_PID}h"; then fail "a test host's namespace is left"; fi
if ip -o link show | grep -q ": dlhn${DL_PID}"; then fail "a test host's link is left"; fi
echo "netns_e2e $MODE: OK"
