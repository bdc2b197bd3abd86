#!/bin/sh
# comm_nccl_e2e.sh — the `nccl` comm plugin on a machine without a usable GPU, end to end through
# the dlhost executable: `dlhost plugins` (text and JSON) lists it as not usable with the reason
# ("no device: ..."), a suite case with `comm: nccl` is recorded SKIPPED with that reason (and the
# run exits 0), `dlhost comm-bench --comm nccl` refuses with the reason, and the multi-GPU section
# of suites/paper_repro.yaml loads and its cases are SKIPPED with a reason. Where a GPU is usable
# this path cannot be shown: it skips (exit 77) and the GPU tests take over.
# Usage: comm_nccl_e2e.sh DLHOST SOURCE_DIR WORK_DIR
set -u
DLHOST="$1"
SRC="$2"
WORK="$3"
fail() { echo "comm_nccl_e2e: FAILED: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"

"$DLHOST" plugins --json > plugins.json 2> plugins.err || fail "dlhost plugins --json: $(cat plugins.err)"
reason=$(python3 - plugins.json << 'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
items = doc if isinstance(doc, list) else doc.get("plugins", [])
nccl = [p for p in items if p.get("name") == "nccl" and p.get("kind") == "comm"]
if not nccl:
    sys.exit("nccl is not listed among %s" % [p.get("name") for p in items])
p = nccl[0]
print("USABLE" if p["usable"] else p.get("unusable_reason", ""))
PY
) || fail "$reason"
[ "$reason" = "USABLE" ] && skip "a GPU is usable here: the no-device path cannot be shown (test_comm_nccl and comm_nccl_bench_* run the GPU path)"
case "$reason" in
  "no device: "*) ;;
  *) fail "the reason does not start with 'no device: ': '$reason'" ;;
esac
echo "nccl not usable here: $reason"

"$DLHOST" plugins > plugins.txt 2>&1 || fail "dlhost plugins exited non-zero"
grep -A3 "^nccl  *comm" plugins.txt | grep -q "not usable here: no device: " ||
  fail "dlhost plugins does not say why nccl is not usable: $(cat plugins.txt)"

# One case naming comm: nccl on a CPU backend: SKIPPED with the plugin's own reason.
cat > nccl_case.yaml << 'YAML'
name: nccl_case
cases:
  - {network: lenet, backend: cpu_onednn, comm: nccl, batch: 8, warmup: 0, iterations: 1}
YAML
"$DLHOST" run nccl_case.yaml -o nccl_case.jsonl > run.txt 2>&1 || fail "run exited $?: $(cat run.txt)"
cat run.txt
python3 - nccl_case.jsonl "$reason" << 'PY' || fail "the nccl case was not SKIPPED with the reason"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len(recs) == 1, "%d records" % len(recs)
r = recs[0]
want = "comm 'nccl' cannot run here: " + sys.argv[2]
assert r["status"] == "SKIPPED", "status %s (%s)" % (r["status"], r["reason"])
assert r["reason"] == want, "reason %r, expected %r" % (r["reason"], want)
PY

"$DLHOST" comm-bench --comm nccl -b 8 -e 64 > bench.txt 2>&1
rc=$?
[ $rc -ne 0 ] || fail "comm-bench --comm nccl exited 0 without a device"
grep -q "comm plugin 'nccl' is not usable here: no device: " bench.txt ||
  fail "comm-bench did not give the reason: $(cat bench.txt)"

# The paper's multi-GPU section: loads here, and FCN-R on 1, 2 and 4 ranks is SKIPPED with a
# reason, before any rank starts: gpu_cudnn is not built, or it sees no GPU (one per rank; the
# cores are not the limit of a GPU case).
"$DLHOST" run "$SRC/suites/paper_repro.yaml" --dry-run > dry.txt 2>&1 || fail "paper_repro: $(cat dry.txt)"
ids=$(grep -o '^fcnr\.gpu_cudnn\.[^ ]*comm=nccl[^ ]*' dry.txt | sort -u)
[ "$(echo "$ids" | grep -c 'ranks=[124]')" -eq 3 ] || fail "paper_repro lacks FCN-R over nccl on 1/2/4 ranks: $ids"
set --
for id in $ids; do set -- "$@" --case "$id"; done
"$DLHOST" run "$SRC/suites/paper_repro.yaml" "$@" -o paper.jsonl > paper.txt 2>&1 ||
  fail "paper_repro $*: $(cat paper.txt)"
cat paper.txt
python3 - paper.jsonl << 'PY' || fail "paper_repro's multi-GPU cases were not all SKIPPED with a reason"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert len({r["case_id"] for r in recs}) == 3, [r["case_id"] for r in recs]
import re
for r in recs:
    assert r["status"] == "SKIPPED" and r["reason"], (r["case_id"], r["status"], r["reason"])
    n = r["params"]["ranks"]
    gpus = re.match(r"needs (\d+) GPUs? \((\d+) ranks? on one node\); this machine has 0 GPUs "
                    r"visible to gpu_cudnn: .", r["reason"])
    assert gpus or "backend 'gpu_cudnn' is not" in r["reason"], (r["case_id"], r["reason"])
    assert not gpus or gpus.groups() == (str(n), str(n)), (r["case_id"], r["reason"])
    print(f"{r['case_id']}: SKIPPED: {r['reason']}")
PY
echo "comm_nccl_e2e: all checks passed"
