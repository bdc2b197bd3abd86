#!/bin/sh
# comm_nccl_bench.sh — `dlhost comm-bench --comm nccl` on device buffers, checked like nccl-tests:
# every value right (#wrong 0, "0 OK"), a row per size and collective, and busbw = algbw x
# nccl-tests' factor (all-reduce 2(n-1)/n, broadcast 1, all-gather (n-1)/n).
#   MODE 1rank:  a world of 1 on one GPU (no launcher).
#   MODE 2ranks: two ranks under mpirun, one per GPU; needs 2 devices.
# Skips (exit 77) with the reason where the GPUs are missing (`dlhost plugins` says why nccl is
# not usable) or fewer than the mode needs.
# Usage: comm_nccl_bench.sh DLHOST WORK_DIR MODE [EXTRA comm-bench ARGS...]
set -u
DLHOST="$1"
WORK="$2"
MODE="$3"
shift 3
fail() { echo "FAILED: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || fail "cannot enter $WORK"
SWEEP="-b 8 -e 32M -f 4 -n 20 -w 5"  # 12 sizes per collective, 8 B to 32 MiB

"$DLHOST" plugins --json > plugins.json 2>&1 || fail "dlhost plugins --json: $(cat plugins.json)"
why=$(python3 -c '
import json, sys
doc = json.load(open("plugins.json"))
items = doc if isinstance(doc, list) else doc.get("plugins", [])
p = [p for p in items if p.get("name") == "nccl" and p.get("kind") == "comm"]
print("nccl is not built" if not p else ("" if p[0]["usable"] else p[0].get("unusable_reason", "?")))
') || fail "cannot read plugins.json"
[ -z "$why" ] || skip "nccl is not usable here: $why"
gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
echo "GPUs: ${gpus:-unknown}"
# A comm-bench that allocates device buffers through a backend is told which one.
if "$DLHOST" comm-bench --help 2>&1 | grep -q -- "--backend"; then
  set -- --backend gpu_cudnn "$@"
fi

check() {  # check JSON WORLD
  python3 - "$1" "$2" << 'PY'
import json, sys
d = json.load(open(sys.argv[1])); world = int(sys.argv[2])
problems = []
def need(ok, what):
    if not ok: problems.append(what)
need(d["status"] == "OK", "status %s" % d["status"])
need(d["world_size"] == world, "world_size %s, expected %d" % (d["world_size"], world))
need(d["out_of_bounds"] == {"count": 0, "okay": True}, "out_of_bounds %s" % d["out_of_bounds"])
factor = {"all_reduce": 2.0 * (world - 1) / world, "broadcast": 1.0,
          "all_gather": (world - 1) / world}
for op in factor:
    rows = [r for r in d["results"] if r["op"] == op]
    need(len(rows) == 12, "%d %s rows, expected 12" % (len(rows), op))
    for r in rows:
        where = "%s %d B" % (op, r["size"])
        need(r["wrong"] == 0, where + ": %d wrong values" % r["wrong"])
        need(r["time_us"] > 0 and r["algbw_gbs"] > 0, where + ": no time")
        need(abs(r["busbw_gbs"] - r["algbw_gbs"] * factor[op]) <= 1e-9 + 1e-6 * r["algbw_gbs"],
             where + ": busbw %g is not algbw %g x %g" % (r["busbw_gbs"], r["algbw_gbs"], factor[op]))
big = [r for r in d["results"] if r["size"] == max(x["size"] for x in d["results"])]
for r in big:
    print("  %-10s %10d B  %9.1f us  algbw %8.2f GB/s  busbw %8.2f GB/s" %
          (r["op"], r["size"], r["time_us"], r["algbw_gbs"], r["busbw_gbs"]))
for p in problems: print(sys.argv[1] + ": " + p)
sys.exit(1 if problems else 0)
PY
}

case "$MODE" in
  1rank)
    env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMI_SIZE -u PMIX_RANK \
      "$DLHOST" comm-bench --comm nccl $SWEEP --json out.json "$@" > out.txt 2> err.txt
    rc=$?
    cat out.txt err.txt
    [ $rc -eq 0 ] || fail "1-rank comm-bench --comm nccl exited $rc"
    grep -q "NCCL 2\." out.txt || fail "the header does not name NCCL's version"
    check out.json 1 || fail "out.json: see above"
    ;;
  2ranks)
    [ "${gpus:-0}" -ge 2 ] || skip "2 ranks need 2 GPUs, one per rank; this machine has ${gpus:-0}"
    command -v mpirun > /dev/null 2>&1 || skip "mpirun is not installed"
    mpirun --allow-run-as-root -np 2 "$DLHOST" comm-bench --comm nccl $SWEEP --json out.json "$@" \
      > out.txt 2> err.txt
    rc=$?
    cat out.txt err.txt
    [ $rc -eq 0 ] || fail "2-rank comm-bench --comm nccl exited $rc"
    grep -q "^# 2 ranks" out.txt || fail "the header does not list 2 ranks (did mpirun start them?)"
    check out.json 2 || fail "out.json: see above"
    ;;
  *)
    fail "unknown mode '$MODE' (1rank, 2ranks)"
    ;;
esac
echo "comm_nccl_bench $MODE: all checks passed"
