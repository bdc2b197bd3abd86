#!/bin/sh
# torch_ddp_hosts_e2e.sh — `comm: torch_ddp` (PyTorch's DDP inside cpu_libtorch2, issue 41) with
# each rank on its own test host (a network namespace, host/launch/test_hosts.h) over an emulated
# 1 GbE link, launched by mpirun: each rank's c10d TCPStore and Gloo device use the rank's own
# address (the namespace's; every test host shares this machine's name, so the name would not
# do). Synchronous DDP on 2 hosts trains like 1 rank on the whole batch (lenet: losses and final
# weights within 1e-4), the record names the link and the ranks' hosts, and DDP's bucket size is
# the case's bucket_mb (bucket_cap_mb), recorded: 25 by default, 1 where the case sets it. The
# `gloo` comm picks its address the same way and runs over the same test hosts (before, every
# rank resolved the shared machine name to loopback and dialled itself).
# Usage: torch_ddp_hosts_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped, reason printed) without cpu_libtorch2, root, iproute2 or mpirun.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK/params"
fail() { echo "torch_ddp_hosts_e2e: FAILED: $*"; exit 1; }

. "$(dirname "$0")/tool_runtime_checks.sh"
plugin_or_skip "$DLHOST" cpu_libtorch2 "the PyPI torch wheel"
test_hosts_or_skip

cat > "$WORK/hosts.yaml" << 'YAML'
name: torch_ddp_hosts
optional: {comm: [gloo]}
defaults: {backend: cpu_libtorch2, network: lenet, batch: 16, lr: 0.1, warmup: 1, iterations: 4,
           threads: 1, timeout: 300, launcher: mpirun}
cases:
  - {comm: none, ranks: 1, tags: [one]}
  - {comm: torch_ddp, ranks: 2, interconnect: 1gbe, tags: [hosts]}
  - {comm: torch_ddp, ranks: 2, interconnect: 1gbe, bucket_mb: 1, tags: [small_buckets]}
  - {comm: gloo, backend: cpu_onednn, ranks: 2, interconnect: 1gbe, tags: [gloo]}
YAML
DLHOST_DUMP_PARAMS_DIR="$WORK/params" timeout 900 "$DLHOST" run "$WORK/hosts.yaml" \
  -o "$WORK/hosts.jsonl" > "$WORK/hosts.txt" 2>&1 || { cat "$WORK/hosts.txt"; fail "the run"; }
cat "$WORK/hosts.txt"
rc=0
/usr/bin/python3 - "$WORK" "$(dirname "$0")" << 'PY' || rc=$?
import sys
sys.path.insert(0, sys.argv[2])
import hosts_records  # noqa: E402
work = sys.argv[1]
recs = hosts_records.records(work)
def weights(case):
    return hosts_records.weights(work, case)
gloo = recs.pop("gloo")
hosts_records.all_ok_or_skip(recs)
if gloo["status"] == "SKIPPED" and "gloo" in gloo["reason"]:
    print(f"gloo: SKIPPED: {gloo['reason']}")
else:
    assert gloo["status"] == "OK", (gloo["status"], gloo["reason"])
    assert len(gloo["interconnect"]["hosts"]) == 2, gloo["interconnect"]
    print(f"gloo: 2 test hosts over 1gbe: OK, step {gloo['timing']['step']['median']:.2f} ms")
base = recs["one"]
for tag, bucket_mb in (("hosts", 25), ("small_buckets", 1)):
    r = recs[tag]
    d, link = r["distributed"], r["interconnect"]
    assert d["runtime"] == "torch_ddp" and d["mode"] == "sync" and d["ranks"] == 2, d
    assert d["bucket_mb"] == bucket_mb, (tag, d.get("bucket_mb"))
    assert link["profile"] == "1gbe", link
    a, b = r["loss"]["values"], base["loss"]["values"]
    loss_diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    w2, w1 = weights(r["case_id"]), weights(base["case_id"])
    w_diff = max(abs(x - y) for x, y in zip(w2, w1)) / max(abs(x) for x in w1)
    print(f"{tag}: 2 test hosts over 1gbe, bucket_mb {d['bucket_mb']}: losses within "
          f"{loss_diff:.2e}, weights within {w_diff:.2e} of 1 rank; step "
          f"{r['timing']['step']['median']:.2f} ms, DDP comm {d['allreduce']['median']:.2f} ms")
    assert len(a) == len(b) == 4 and loss_diff < 1e-4, (a, b)
    assert w_diff < 1e-4, w_diff
PY
[ "$rc" -ne 77 ] || exit 77
[ "$rc" -eq 0 ] || fail "torch_ddp over test hosts"
