# tool_runtime_checks.sh — sourced by the end-to-end tests of the tools' own distributed runtimes
# (torch_ddp_e2e.sh, tf_collective_e2e.sh, tf_ps_e2e.sh, mxnet_kvstore_e2e.sh): a synchronous
# runtime on 2 ranks trains like 1 rank
# (trains_like_one_rank, with tool_runtime_equiv.py); a rank killed mid-run (SIGKILL, found by
# its own environment and the suite's path) ends its case well within the case's timeout, as a
# failure naming a rank, and leaves no process of the case (kill_rank_mid_run, no_process_left).
# POSIX sh + python3; needs `fail`.

# plugin_or_skip DLHOST NAME WHY: exit 77 (ctest's skip) unless `dlhost plugins` lists NAME.
plugin_or_skip() {
  if ! "$1" plugins 2>/dev/null | grep -q "^$2 "; then
    echo "SKIPPED: $2 ($3) is not built here"; exit 77
  fi
}

# trains_like_one_rank DLHOST WORK RUNTIME BACKEND LIBRARY_WORD [EXTRA_CASES [RUNTIME_KEYS]]
# WORK/equiv.yaml: fcnr (batch 32) and lenet (batch 16) on BACKEND without a comm on 1 rank and
# with RUNTIME on 1 and 2 ranks, fcnr on cpu_onednn with RUNTIME (SKIPPED), and EXTRA_CASES
# (YAML lines of `cases`); RUNTIME_KEYS (e.g. "options: {cpu_tensorflow: {ps_mode: sync}}") is
# added to BACKEND's RUNTIME cases; run with the final weights dumped, then tool_runtime_equiv.py.
trains_like_one_rank() {
  dl="$1" work="$2" runtime="$3" backend="$4" word="$5" extra="${6:-}" keys="${7:+, $7}"
  mkdir -p "$work/params"
  cat > "$work/equiv.yaml" <<YAML
name: ${runtime}_equiv
defaults: {backend: $backend, launcher: local, warmup: 1, iterations: 5, threads: 1,
           timeout: 300}
cases:
  - {network: fcnr, batch: 32, lr: 0.2, comm: none, ranks: 1}
  - {network: fcnr, batch: 32, lr: 0.2, comm: $runtime, ranks: [1, 2]$keys}
  - {network: lenet, batch: 16, lr: 0.1, comm: none, ranks: 1}
  - {network: lenet, batch: 16, lr: 0.1, comm: $runtime, ranks: [1, 2]$keys}
  - {network: fcnr, batch: 32, lr: 0.2, comm: $runtime, ranks: 2, backend: cpu_onednn}
$extra
YAML
  DLHOST_DUMP_PARAMS_DIR="$work/params" "$dl" run "$work/equiv.yaml" -o "$work/equiv.jsonl" \
    > "$work/equiv.txt" 2>&1 || { cat "$work/equiv.txt"; fail "run of the suite"; }
  cat "$work/equiv.txt"
  /usr/bin/python3 "$TOOL_RUNTIME_CHECKS_DIR/tool_runtime_equiv.py" "$work" "$runtime" "$backend" \
    "$word" || fail "$runtime did not train like 1 rank"
}

TOOL_RUNTIME_CHECKS_DIR="$(dirname "$0")"

# no_process_left SUITE WHAT: no process's command line names SUITE (after its cases ended).
no_process_left() {
  left=$(/usr/bin/python3 -c "
import os, sys
n = 0
for pid in filter(str.isdigit, os.listdir('/proc')):
    if int(pid) == os.getpid(): continue  # this check's own command line names the file
    try: n += sys.argv[1] in open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace')
    except OSError: pass
print(n)" "$1")
  [ "$left" -eq 0 ] || fail "$left process(es) of $2 outlived it"
}

# kill_rank_mid_run DLHOST WORK BACKEND RUNTIME WHO SETTLE_S STRICT [LR [CASE_KEYS]]
# Runs WORK/kill.yaml (lenet on BACKEND with RUNTIME, 2 ranks, endless steps at learning rate LR,
# 0.1 by default, CASE_KEYS added to the case, e.g. "options: {...}", timeout 120 s) to
# kill.yaml.jsonl / .txt, SIGKILLs WHO (a rank's number, or an extra role's name: its process 0)
# SETTLE_S seconds after it appears (start-up done, steps running), and checks the record: not
# OK, TIMEOUT or SKIPPED, within the timeout, naming a rank or the role; with STRICT=strict,
# CRASHED naming WHO ("rank 1", "role ps 0") and the signal.
kill_rank_mid_run() {
  dl="$1" suite="$2/kill.yaml" rank="$5" settle="$6" limit=120 strict="$7" lr="${8:-0.1}"
  keys="${9:+, $9}"
  cat > "$suite" <<YAML
name: ${4}_kill
defaults: {backend: $3, comm: $4, network: lenet, batch: 16, launcher: local, ranks: 2,
           warmup: 0, iterations: 100000, threads: 1, timeout: $limit}
cases:
  - {lr: $lr$keys}
YAML
  "$dl" run "$suite" -o "$suite.jsonl" > "$suite.txt" 2>&1 &
  run=$!
  victim=""
  for _ in $(seq 1 600); do
    victim=$(/usr/bin/python3 - "$suite" "$rank" <<'PY'
import os, sys
who = sys.argv[2]
want = (f"DLHOST_RANK={who}" if who.isdigit() else f"DLHOST_ROLE={who}").encode()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    if sys.argv[1] in cmd and want in env and (who.isdigit() or "runtime-role" in cmd):
        print(pid)
        break
PY
)
    if [ -n "$victim" ]; then sleep "$settle"; break; fi
    sleep 0.2
  done
  [ -n "$victim" ] || { kill "$run" 2> /dev/null; fail "$rank of $suite never started"; }
  kill -9 "$victim" 2> /dev/null || true
  wait "$run" || true
  cat "$suite.txt"
  /usr/bin/python3 - "$suite.jsonl" "$rank" "$limit" "$strict" <<'PY' || fail "a killed rank did not end its case"
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
who, limit, strict = sys.argv[2], float(sys.argv[3]), sys.argv[4] == "strict"
name = f"rank {who}" if who.isdigit() else f"role {who} 0"
print(f"{name} killed: {r['status']} after {r['duration_s']:.1f} s: {r['reason']}")
assert r["status"] not in ("OK", "TIMEOUT", "SKIPPED"), (r["status"], r["reason"])
assert name in r["reason"] or "rank 0" in r["reason"], r["reason"]
if strict:
    assert r["status"] == "CRASHED" and name in r["reason"], (r["status"], r["reason"])
    assert "SIGKILL" in r["reason"], r["reason"]
assert r["duration_s"] < limit, r["duration_s"]
PY
  sleep 0.5
  no_process_left "$suite" "the killed case"
}
