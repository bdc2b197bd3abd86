# rank_faults.sh — sourced by the data-parallel tests (data_parallel_e2e.sh,
# comm_gloo/comm_gloo_e2e.sh): a 2-rank case whose rank 1 crashes, one whose rank 1 hangs, one
# whose rank 1 fails with an error, one whose rank 1 never reaches the comm's init (hangs in
# compile), then a good case, over a given comm and launcher. The crash must end its case with a
# failure, not a TIMEOUT (with CRASH_NAMED=strict: CRASHED naming rank 1 and SIGSEGV), the hang
# TIMEOUT naming rank 1 and the phase it stopped in, the error FAILED well before the case's
# timeout (a failed rank must not leave the other waiting; strict: naming rank 1 and its
# reason), the start-up hang FAILED after its startup_timeout naming what each rank waited in,
# not at the case's timeout; the good case OK, and no rank may outlive its case.
# Defines check_rank_faults; POSIX sh + python3; needs `fail`.
#
# Why not always strict: a comm that notices a dead peer at once (gloo) makes the surviving rank
# fail too, and which of the two failures the host reports is a race in the host (see
# comm_gloo_e2e.sh).

# check_rank_faults DLHOST FIXTURE_BACKEND_DIR WORK_DIR COMM LAUNCHER CRASH_NAMED
check_rank_faults() {
  dl="$1" fixtures="$2" dir="$3" comm="$4" launcher="$5" named="$6"
  cat > "$dir/faults.yaml" <<YAML
name: rank_faults
defaults: {network: lenet, batch: 8, comm: $comm, launcher: $launcher, ranks: 2, warmup: 0,
           iterations: 3, threads: 1, timeout: 4}
cases:
  - {backend: faulty, tags: [segv], options: {faulty: {fault: segv, fault_rank: "1"}}}
  - {backend: faulty, tags: [hang], options: {faulty: {fault: hang, fault_rank: "1"}}}
  - {backend: faulty, tags: [error], timeout: 60, options: {faulty: {fault: error, fault_rank: "1"}}}
  - {backend: faulty, tags: [stall], timeout: 60, startup_timeout: 10,
     options: {faulty: {fault: hang_compile, fault_rank: "1"}}}
  - {backend: cpu_onednn, tags: [good]}
YAML
  "$dl" --plugin-path "$fixtures" run "$dir/faults.yaml" -o "$dir/faults.jsonl" \
    > "$dir/faults.txt" 2> "$dir/faults.err" || true
  cat "$dir/faults.txt"
  /usr/bin/python3 - "$dir/faults.jsonl" "$comm" "$named" <<'PY' || fail "rank faults over $comm"
import json, sys
recs = {tuple(r["params"]["tags"]): r for r in map(json.loads, open(sys.argv[1]))}
seg, hang, good = recs[("segv",)], recs[("hang",)], recs[("good",)]
if sys.argv[3] == "strict":
    assert seg["status"] == "CRASHED" and "rank 1" in seg["reason"] and "SIGSEGV" in seg["reason"], seg["reason"]
else:
    assert seg["status"] not in ("OK", "TIMEOUT"), (seg["status"], seg["reason"])
    print(f"crash of rank 1 reported as {seg['status']}: {seg['reason']}")
assert hang["status"] == "TIMEOUT" and "rank 1 stopped in forward of step 0" in hang["reason"], hang["reason"]
err, stall = recs[("error",)], recs[("stall",)]
print(f"error of rank 1: {err['status']} after {err['duration_s']:.1f} s: {err['reason']}")
assert err["status"] == "FAILED" and err["duration_s"] < 30, (err["status"], err["duration_s"])
if sys.argv[3] == "strict":
    assert "rank 1" in err["reason"] and "fixture error from forward" in err["reason"], err["reason"]
print(f"start-up hang of rank 1: {stall['status']} after {stall['duration_s']:.1f} s: {stall['reason']}")
assert stall["status"] == "FAILED" and "start-up stalled" in stall["reason"], stall["reason"]
assert "rank 1 started but had not reached the comm's init" in stall["reason"], stall["reason"]
assert "rank 0 waited in the comm's init (comm " + sys.argv[2] + ")" in stall["reason"], stall["reason"]
assert stall["duration_s"] < 40, stall["duration_s"]
assert good["status"] == "OK", good["reason"]
assert good["distributed"]["comm"] == sys.argv[2], good["distributed"]
PY
  sleep 0.5
  # Every rank's command line carries the job, whose suite path is this test's own.
  if pgrep -f "$dir/faults.yaml" > /dev/null; then fail "a rank outlived its case"; fi
}
