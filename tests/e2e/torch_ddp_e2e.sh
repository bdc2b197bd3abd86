#!/bin/sh
# torch_ddp_e2e.sh — a tool's own distributed runtime (issue 41): `comm: torch_ddp`, PyTorch's
# DistributedDataParallel (c10d's Reducer over ProcessGroupGloo) inside cpu_libtorch2, on 2 ranks
# that dlhost launches itself. Synchronous DDP over 2 ranks on half the batch each trains like 1
# rank on the whole batch without a comm: fcnr and lenet (no batch norm), the loss of every step
# and the final weights within a relative 1e-4. The record names the runtime and its mode (sync)
# and carries the runtime's own communication time per step. A wrong pairing (cpu_onednn with
# torch_ddp, and Debian's libtorch 1.13 where it is built) is SKIPPED with the reason. A rank that
# dies mid-run ends its case within the case's limits, and no rank outlives it.
# Usage: torch_ddp_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_libtorch2 is not built here.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK/params"
fail() { echo "torch_ddp_e2e: FAILED: $*"; exit 1; }

plugins=$("$DLHOST" plugins 2>/dev/null || true)
if ! echo "$plugins" | grep -q '^cpu_libtorch2 '; then
  echo "SKIPPED: cpu_libtorch2 (the PyPI torch wheel) is not built here"; exit 77
fi

cat > "$WORK/equiv.yaml" <<'YAML'
name: torch_ddp_equiv
defaults: {backend: cpu_libtorch2, launcher: local, warmup: 1, iterations: 5, threads: 1,
           timeout: 300}
cases:
  - {network: fcnr, batch: 32, lr: 0.2, comm: none, ranks: 1}
  - {network: fcnr, batch: 32, lr: 0.2, comm: torch_ddp, ranks: [1, 2]}
  - {network: lenet, batch: 16, lr: 0.1, comm: none, ranks: 1}
  - {network: lenet, batch: 16, lr: 0.1, comm: torch_ddp, ranks: [1, 2]}
  - {network: fcnr, batch: 32, lr: 0.2, comm: torch_ddp, ranks: 2, backend: cpu_onednn}
YAML
DLHOST_DUMP_PARAMS_DIR="$WORK/params" "$DLHOST" run "$WORK/equiv.yaml" -o "$WORK/equiv.jsonl" \
  > "$WORK/equiv.txt" 2>&1 || { cat "$WORK/equiv.txt"; fail "run of the suite"; }
cat "$WORK/equiv.txt"
/usr/bin/python3 - "$WORK" <<'PY' || fail "torch_ddp did not train like 1 rank"
import json, struct, sys
work = sys.argv[1]
recs = [json.loads(l) for l in open(f"{work}/equiv.jsonl")]
def weights(case):
    data = open(f"{work}/params/{case}.params", "rb").read()
    return struct.unpack(f"{len(data) // 4}f", data)
def find(net, comm, ranks, backend="cpu_libtorch2"):
    (r,) = [r for r in recs if r["params"]["network"] == net and r["params"]["comm"] == comm
            and r["params"]["ranks"] == ranks and r["params"]["backend"] == backend]
    return r
wrong = find("fcnr", "torch_ddp", 2, "cpu_onednn")
assert wrong["status"] == "SKIPPED", (wrong["status"], wrong["reason"])
assert "torch_ddp" in wrong["reason"] and "cpu_onednn" in wrong["reason"] \
    and "does not own it" in wrong["reason"], wrong["reason"]
print(f"cpu_onednn + torch_ddp: SKIPPED: {wrong['reason']}")
for net in ("fcnr", "lenet"):
    base = find(net, "none", 1)
    assert base["status"] == "OK", base["reason"]
    for ranks in (1, 2):
        r = find(net, "torch_ddp", ranks)
        assert r["status"] == "OK", (r["case_id"], r["reason"])
        d = r["distributed"]
        assert d["runtime"] == "torch_ddp" and d["mode"] == "sync" and d["comm"] == "torch_ddp", d
        assert d["ranks"] == ranks and d["per_rank_batch"] * ranks == d["global_batch"], d
        assert "ProcessGroupGloo" in d["runtime_library"], d
        # The runtime's own communication time, one per timed step, never a made-up zero.
        assert "comm_time" in d and len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
        assert d["allreduce"]["median"] is not None and d["allreduce"]["min"] >= 0, d["allreduce"]
        a, b = r["loss"]["values"], base["loss"]["values"]
        assert len(a) == len(b) == 5, (a, b)
        loss_diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        w2, w1 = weights(r["case_id"]), weights(base["case_id"])
        assert len(w2) == len(w1) > 0
        w_diff = max(abs(x - y) for x, y in zip(w2, w1)) / max(abs(x) for x in w1)
        print(f"{net} torch_ddp x{ranks}: losses within {loss_diff:.2e}, weights within {w_diff:.2e}"
              f" of 1 rank; step {r['timing']['step']['median']:.2f} ms"
              f" (1 rank without comm {base['timing']['step']['median']:.2f} ms),"
              f" comm {d['allreduce']['median']:.2f} ms")
        assert loss_diff < 1e-4, f"{net} x{ranks}: losses differ from 1 rank by {loss_diff:.2e}"
        assert w_diff < 1e-4, f"{net} x{ranks}: weights differ from 1 rank by {w_diff:.2e}"
PY

# Debian's libtorch 1.13 (cpu_libtorch), where built: SKIPPED with its reason.
if echo "$plugins" | grep -q '^cpu_libtorch '; then
  cat > "$WORK/old.yaml" <<'YAML'
name: torch_ddp_old
defaults: {backend: cpu_libtorch, comm: torch_ddp, network: fcnr, launcher: local, ranks: 2,
           warmup: 0, iterations: 1, threads: 1, timeout: 60}
cases:
  - {batch: 32}
YAML
  "$DLHOST" run "$WORK/old.yaml" -o "$WORK/old.jsonl" > /dev/null 2>&1 || true
  /usr/bin/python3 - "$WORK/old.jsonl" <<'PY' || fail "cpu_libtorch + torch_ddp was not SKIPPED with its reason"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert recs, "no record"
for r in recs:
    assert r["status"] == "SKIPPED" and "libtorch 1." in r["reason"], (r["status"], r["reason"])
print(f"cpu_libtorch + torch_ddp: SKIPPED: {recs[0]['reason']}")
PY
fi
# A rank killed mid-run (SIGKILL to rank 1, found by its own environment and this test's suite
# path) ends the case well within its timeout, as a failure naming the rank, and leaves no rank.
cat > "$WORK/kill.yaml" <<'YAML'
name: torch_ddp_kill
defaults: {backend: cpu_libtorch2, comm: torch_ddp, network: lenet, batch: 16, launcher: local,
           ranks: 2, warmup: 0, iterations: 100000, threads: 1, timeout: 120}
cases:
  - {lr: 0.1}
YAML
"$DLHOST" run "$WORK/kill.yaml" -o "$WORK/kill.jsonl" > "$WORK/kill.txt" 2>&1 &
run=$!
victim=""
for _ in $(seq 1 600); do
  victim=$(/usr/bin/python3 - "$WORK/kill.yaml" <<'PY'
import os, sys
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        continue
    if sys.argv[1] in cmd and b"DLHOST_RANK=1" in env:
        print(pid)
        break
PY
)
  # Killed mid-training: start-up (loading libtorch, compile, the c10d rendezvous) takes a few
  # seconds here; after that every second is steps.
  if [ -n "$victim" ]; then sleep 8; break; fi
  sleep 0.2
done
[ -n "$victim" ] || { kill "$run" 2> /dev/null; fail "rank 1 of the kill case never started"; }
kill -9 "$victim" 2> /dev/null || true
wait "$run" || true
cat "$WORK/kill.txt"
/usr/bin/python3 - "$WORK/kill.jsonl" <<'PY' || fail "a killed torch_ddp rank did not end its case"
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
print(f"rank 1 killed: {r['status']} after {r['duration_s']:.1f} s: {r['reason']}")
assert r["status"] not in ("OK", "TIMEOUT", "SKIPPED"), (r["status"], r["reason"])
assert "rank 1" in r["reason"] or "rank 0" in r["reason"], r["reason"]
assert r["duration_s"] < 120, r["duration_s"]
PY
sleep 0.5
left=$(/usr/bin/python3 -c "
import os, sys
n = 0
for pid in filter(str.isdigit, os.listdir('/proc')):
    if int(pid) == os.getpid(): continue  # this check's own command line names the file
    try: n += sys.argv[1] in open(f'/proc/{pid}/cmdline', 'rb').read().decode(errors='replace')
    except OSError: pass
print(n)" "$WORK/kill.yaml")
[ "$left" -eq 0 ] || fail "$left process(es) of the killed case outlived it"
echo "torch_ddp_e2e: OK"
