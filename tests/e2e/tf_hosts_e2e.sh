#!/bin/sh
# tf_hosts_e2e.sh — TensorFlow's own runtimes inside cpu_tensorflow (issue 41) with each worker on
# its own test host (a network namespace, host/launch/test_hosts.h) over an emulated 1 GbE link,
# launched by mpirun, as torch_ddp_hosts_e2e.sh runs DDP: `comm: tf_collective` (each rank's
# TensorFlow server on its test host's address) and `comm: tf_ps` with 2 ps tasks, each on a
# test host of its own (the workers' servers and the ps tasks listen where the host's cluster
# says). The synchronous ones (tf_collective; tf_ps with ps_mode sync) on 2 hosts train like 1
# rank on the whole batch (lenet: losses and final weights within 1e-4); tf_ps async runs OK and
# is recorded as async. Each record names the link and the hosts; tf_ps's where each ps ran.
# Usage: tf_hosts_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped, reason printed) without cpu_tensorflow, root, iproute2 or mpirun.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK/params"
fail() { echo "tf_hosts_e2e: FAILED: $*"; exit 1; }
skip() { echo "SKIPPED: $*"; exit 77; }

"$DLHOST" plugins 2> /dev/null | grep -q '^cpu_tensorflow ' ||
  skip "cpu_tensorflow (the PyPI tensorflow-cpu wheel) is not built here"
[ "$(id -u)" -eq 0 ] || skip "test hosts (network namespaces) need root"
command -v mpirun > /dev/null || skip "mpirun (the launcher that reaches test hosts) not installed"
PATH="$PATH:/usr/sbin:/sbin"
command -v ip > /dev/null || skip "iproute2's ip not installed"
command -v tc > /dev/null || skip "iproute2's tc not installed"

cat > "$WORK/hosts.yaml" << 'YAML'
name: tf_hosts
defaults: {backend: cpu_tensorflow, network: lenet, batch: 16, lr: 0.1, warmup: 1, iterations: 4,
           threads: 1, timeout: 300, launcher: mpirun}
cases:
  - {comm: none, ranks: 1, tags: [one]}
  - {comm: tf_collective, ranks: 2, interconnect: 1gbe, tags: [collective]}
  - {comm: tf_ps, ranks: 2, interconnect: 1gbe, tags: [ps_sync],
     options: {cpu_tensorflow: {ps_mode: sync, ps_tasks: 2}}}
  - {comm: tf_ps, ranks: 2, interconnect: 1gbe, lr: 0.05, momentum: 0, tags: [ps_async]}
YAML
DLHOST_DUMP_PARAMS_DIR="$WORK/params" timeout 900 "$DLHOST" run "$WORK/hosts.yaml" \
  -o "$WORK/hosts.jsonl" > "$WORK/hosts.txt" 2>&1 || { cat "$WORK/hosts.txt"; fail "the run"; }
cat "$WORK/hosts.txt"
rc=0
/usr/bin/python3 - "$WORK" << 'PY' || rc=$?
import json, struct, sys
work = sys.argv[1]
recs = {r["params"]["tags"][0]: r for r in map(json.loads, open(f"{work}/hosts.jsonl"))}
def weights(case):
    data = open(f"{work}/params/{case}.params", "rb").read()
    return struct.unpack(f"{len(data) // 4}f", data)
for tag, r in recs.items():
    if r["status"] == "SKIPPED" and "test hosts" in r["reason"] and tag != "one":
        print(f"SKIPPED: {r['reason']}")
        sys.exit(77)
    assert r["status"] == "OK", (tag, r["status"], r["reason"], r.get("stderr_tail"))
base = recs["one"]
for tag, runtime, mode, ps in (("collective", "tf_collective", "sync", 0),
                               ("ps_sync", "tf_ps", "sync", 2), ("ps_async", "tf_ps", "async", 1)):
    r = recs[tag]
    d, link = r["distributed"], r["interconnect"]
    assert d["runtime"] == runtime and d["mode"] == mode and d["ranks"] == 2, d
    assert link["profile"] == "1gbe", link
    rank_hosts = {h["address"] for h in link["hosts"]
                  if h.get("first_rank") is not None and h["first_rank"] < 2}
    assert len(rank_hosts) == 2, link["hosts"]
    places = r.get("runtime_roles", [])
    assert [(p["role"], p["index"]) for p in places] == [("ps", k) for k in range(ps)], places
    seen = set()
    for p in places:  # each ps on a test host of its own, not a worker's
        address = p["listens"].rsplit(":", 1)[0]
        assert p["host"].startswith("test host ") and p["host"].endswith(" at " + address), p
        assert address not in rank_hosts and address not in seen, (p, rank_hosts)
        seen.add(address)
    where = f"; ps on {[p['host'] for p in places]}" if places else ""
    summary = (f"{tag}: {runtime} {mode} on 2 test hosts over 1gbe{where}: step "
               f"{r['timing']['step']['median']:.2f} ms, comm {d['allreduce']['median']:.2f} ms")
    if mode == "async":
        print(summary)
        continue
    a, b = r["loss"]["values"], base["loss"]["values"]
    loss_diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    w2, w1 = weights(r["case_id"]), weights(base["case_id"])
    w_diff = max(abs(x - y) for x, y in zip(w2, w1)) / max(abs(x) for x in w1)
    print(f"{summary}; losses within {loss_diff:.2e}, weights within {w_diff:.2e} of 1 rank")
    assert len(a) == len(b) == 4 and loss_diff < 1e-4, (a, b)
    assert w_diff < 1e-4, w_diff
PY
[ "$rc" -ne 77 ] || exit 77
[ "$rc" -eq 0 ] || fail "TensorFlow's runtimes over test hosts"
echo "tf_hosts_e2e: OK"
