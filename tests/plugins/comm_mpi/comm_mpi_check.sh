# comm_mpi_check.sh — sourced by the comm-bench tests (comm_mpi_bench.sh, slurm/slurm_comm_bench.sh):
# checks that a `dlhost comm-bench` run really ran on every rank and got every value right.
# Defines fail, skip and check_run; POSIX sh + python3.

fail() { echo "FAILED: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# check_run TEXT JSON WORLD LAUNCHER ROWS_PER_OP: rank 0's table in TEXT and its JSON must say
# WORLD ranks (distinct pids) started by LAUNCHER, every row of all_reduce, broadcast and
# all_gather present (ROWS_PER_OP each), #wrong 0 for the plugin and its baseline, and
# busbw > 0 when WORLD > 1.
check_run() {
  text="$1" js="$2" world="$3" launcher="$4" rows="$5"
  grep -q "^# $world ranks\{0,1\} on 1 host (launcher $launcher)" "$text" ||
    fail "$text: the header does not list $world ranks from launcher $launcher"
  grep -q "^# Out of bounds values : 0 OK" "$text" || fail "$text: footer is not '0 OK'"
  [ -s "$js" ] || fail "$js was not written"
  python3 - "$js" "$world" "$launcher" "$rows" << 'PY' || fail "$js: see above"
import json, sys
path, world, launcher, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
d = json.load(open(path))
problems = []
def need(ok, what):
    if not ok: problems.append(what)
need(d["status"] == "OK", "status %s" % d["status"])
need(d["world_size"] == world, "world_size %s, expected %d" % (d["world_size"], world))
need(d["launcher"] == launcher, "launcher %s, expected %s" % (d["launcher"], launcher))
need([r["rank"] for r in d["ranks"]] == list(range(world)), "ranks %s" % d["ranks"])
need(len({r["pid"] for r in d["ranks"]}) == world, "ranks do not have distinct pids: %s" % d["ranks"])
need(d["out_of_bounds"] == {"count": 0, "okay": True}, "out_of_bounds %s" % d["out_of_bounds"])
need(d["baseline"] is not None and d["baseline"]["name"] == "mpi_raw", "no mpi_raw baseline")
for op in ("all_reduce", "broadcast", "all_gather"):
    n = sum(1 for r in d["results"] if r["op"] == op)
    need(n == rows, "%d %s rows, expected %d" % (n, op, rows))
for r in d["results"]:
    where = "%s %d B" % (r["op"], r["size"])
    need(r["wrong"] == 0 and r["baseline"]["wrong"] == 0, where + ": wrong values")
    need(r["time_us"] > 0 and r["baseline"]["time_us"] > 0 and r["ratio"] > 0, where + ": no time")
    if world > 1:
        need(r["busbw_gbs"] > 0 and r["baseline"]["busbw_gbs"] > 0, where + ": busbw 0")
for p in problems: print(path + ": " + p)
sys.exit(1 if problems else 0)
PY
}
