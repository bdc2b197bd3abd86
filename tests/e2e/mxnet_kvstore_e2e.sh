#!/bin/sh
# mxnet_kvstore_e2e.sh — a tool's own distributed runtime with extra roles (issue 41):
# `comm: mxnet_kvstore`, MXNet's kvstore dist_sync over ps-lite inside cpu_mxnet. dlhost starts
# the 2 workers (its ranks) and the runtime's extra roles, a parameter server and the scheduler,
# each as `dlhost runtime-role` with the ports dlhost picked. Synchronous: 2 workers on half the
# batch each train like 1 rank on the whole batch without a comm (fcnr and lenet, no batch norm:
# the loss of every step within a relative 1e-4). The record names the runtime, its mode (sync),
# the kvstore's push/pull time per step and where each role ran. A parameter server killed
# mid-run ends its case within its limits, named, with no process of it left. `kvstore:
# dist_async` (the servers update with each push) is recorded as async and checked only to train.
# Usage: mxnet_kvstore_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_mxnet is not built here.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "mxnet_kvstore_e2e: FAILED: $*"; exit 1; }

. "$(dirname "$0")/tool_runtime_checks.sh"

plugin_or_skip "$DLHOST" cpu_mxnet "the PyPI mxnet wheel"

cat > "$WORK/equiv.yaml" <<'YAML'
name: mxnet_kvstore_equiv
defaults: {backend: cpu_mxnet, launcher: local, warmup: 1, iterations: 4, threads: 1,
           timeout: 300}
cases:
  - {network: fcnr, batch: 32, lr: 0.2, comm: none, ranks: 1}
  - {network: fcnr, batch: 32, lr: 0.2, comm: mxnet_kvstore, ranks: 2}
  - {network: lenet, batch: 16, lr: 0.1, comm: none, ranks: 1}
  - {network: lenet, batch: 16, lr: 0.1, comm: mxnet_kvstore, ranks: 2}
  - {network: lenet, batch: 16, lr: 0.01, comm: mxnet_kvstore, ranks: 2, iterations: 8,
     options: {cpu_mxnet: {kvstore: dist_async}}, tags: [async]}
YAML
"$DLHOST" run "$WORK/equiv.yaml" -o "$WORK/equiv.jsonl" > "$WORK/equiv.txt" 2>&1 ||
  { cat "$WORK/equiv.txt"; fail "run of the suite"; }
cat "$WORK/equiv.txt"
/usr/bin/python3 - "$WORK" <<'PY' || fail "mxnet_kvstore did not train like 1 rank"
import json, sys
work = sys.argv[1]
recs = [json.loads(l) for l in open(f"{work}/equiv.jsonl")]
def find(net, comm, ranks, backend="cpu_mxnet"):
    (r,) = [r for r in recs if r["params"]["network"] == net and r["params"]["comm"] == comm
            and r["params"]["ranks"] == ranks and r["params"]["backend"] == backend
            and "async" not in r["params"].get("tags", [])]
    return r
# dist_async: recorded as async, checked only to train (the loss falls).
(asy,) = [r for r in recs if "async" in r["params"].get("tags", [])]
assert asy["status"] == "OK", (asy["reason"], asy.get("stderr_tail"))
assert asy["distributed"]["mode"] == "async" and "dist_async" in asy["distributed"]["runtime_library"], asy["distributed"]
losses = asy["loss"]["values"]
print(f"lenet mxnet_kvstore dist_async x2: losses {[round(x, 4) for x in losses]}")
assert losses[-1] < losses[0], losses
for net in ("fcnr", "lenet"):
    base = find(net, "none", 1)
    assert base["status"] == "OK", base["reason"]
    r = find(net, "mxnet_kvstore", 2)
    assert r["status"] == "OK", (r["case_id"], r["reason"], r.get("stderr_tail"))
    d = r["distributed"]
    assert d["runtime"] == "mxnet_kvstore" and d["mode"] == "sync", d
    assert "dist_sync" in d["runtime_library"], d
    assert "comm_time" in d and len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
    assert d["allreduce"]["min"] > 0, d["allreduce"]
    roles = {(x["role"], x["index"]): x for x in r["runtime_roles"]}
    assert set(roles) == {("ps", 0), ("scheduler", 0)}, r["runtime_roles"]
    assert all(x["host"] == "this machine" and x["listens"].startswith("127.0.0.1:")
               for x in roles.values()), r["runtime_roles"]
    a, b = r["loss"]["values"], base["loss"]["values"]
    assert len(a) == len(b) == 4, (a, b)
    diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    print(f"{net} mxnet_kvstore x2: losses within {diff:.2e} of 1 rank; step "
          f"{r['timing']['step']['median']:.2f} ms (1 rank without comm "
          f"{base['timing']['step']['median']:.2f} ms), push/pull {d['allreduce']['median']:.2f} ms")
    assert diff < 1e-4, f"{net}: losses differ from 1 rank by {diff:.2e}: {a} vs {b}"
PY

# Another backend with mxnet_kvstore (cpu_onednn, where built): SKIPPED with the reason.
if echo "$plugins" | grep -q '^cpu_onednn '; then
  cat > "$WORK/wrong.yaml" <<'YAML'
name: mxnet_kvstore_wrong
defaults: {backend: cpu_onednn, comm: mxnet_kvstore, network: fcnr, launcher: local, ranks: 2,
           warmup: 0, iterations: 1, threads: 1, timeout: 60}
cases:
  - {batch: 32}
YAML
  "$DLHOST" run "$WORK/wrong.yaml" -o "$WORK/wrong.jsonl" > /dev/null 2>&1 || true
  /usr/bin/python3 - "$WORK/wrong.jsonl" <<'PY' || fail "cpu_onednn + mxnet_kvstore was not SKIPPED with its reason"
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
assert r["status"] == "SKIPPED" and "does not own it" in r["reason"], (r["status"], r["reason"])
print(f"cpu_onednn + mxnet_kvstore: SKIPPED: {r['reason']}")
PY
fi

# On test hosts (root, mpirun, iproute2): the workers on their hosts, each role process on a test
# host of its own, listening on that host's address; the record says where each ran.
PATH="$PATH:/usr/sbin:/sbin"
if [ "$(id -u)" -eq 0 ] && command -v mpirun > /dev/null && command -v ip > /dev/null &&
   command -v tc > /dev/null; then
  cat > "$WORK/hosts.yaml" <<'YAML'
name: mxnet_kvstore_hosts
defaults: {backend: cpu_mxnet, comm: mxnet_kvstore, network: lenet, batch: 16, lr: 0.1, ranks: 2,
           warmup: 1, iterations: 2, threads: 1, timeout: 300, interconnect: 10gbe}
cases:
  - {tags: [hosts]}
YAML
  "$DLHOST" run "$WORK/hosts.yaml" -o "$WORK/hosts.jsonl" > "$WORK/hosts.txt" 2>&1 || true
  /usr/bin/python3 - "$WORK/hosts.jsonl" <<'PY' || { cat "$WORK/hosts.txt"; fail "roles on test hosts"; }
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
if r["status"] == "SKIPPED" and "interconnect" in r["reason"]:
    print(f"test hosts: SKIPPED here: {r['reason']}")
    sys.exit(0)
assert r["status"] == "OK", (r["status"], r["reason"], r.get("stderr_tail"))
hosts = r["interconnect"]["hosts"]
rank_hosts = {h["address"] for h in hosts if h.get("first_rank") is not None and h["first_rank"] < 2}
places = r["runtime_roles"]
assert len(places) == 2, places
seen = set()
for p in places:
    address = p["listens"].rsplit(":", 1)[0]
    assert p["host"].startswith("test host ") and p["host"].endswith(" at " + address), p
    assert address not in rank_hosts and address not in seen, (p, rank_hosts)
    seen.add(address)
print(f"test hosts: OK; roles ran on {[p['host'] for p in places]}")
PY
else
  echo "test hosts: not checked here (they need root, mpirun and iproute2)"
fi

# The parameter server killed mid-run (SIGKILL, found by its role variable and this test's suite
# path) 10 s after it started (the workers load MXNet, compile and meet the scheduler first): the
# case ends well within its timeout, CRASHED, naming the role; nothing of it is left.
kill_rank_mid_run "$DLHOST" "$WORK" cpu_mxnet mxnet_kvstore ps 10 strict
echo "mxnet_kvstore_e2e: OK"
