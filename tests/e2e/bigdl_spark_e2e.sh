#!/bin/sh
# bigdl_spark_e2e.sh — `comm: bigdl_spark` (issue 42): BigDL's DistriOptimizer on a Spark
# standalone cluster that dlhost starts: the master as the runtime's extra role (the scheduler,
# `dlhost runtime-role`), a Spark worker in each rank's process (its executor a JVM the worker
# starts), the driver in rank 0's. Checks:
#  1. LeNet (batch 64, 1 thread per executor) on 1 and 2 workers: OK, the loss falls, the steps
#     timed by DistriOptimizer's own clock (timing.timer backend_clock), the record carries
#     BigDL's compute ("computing time average") and communication (its AllReduceParameter's
#     times) per timed step from DistriOptimizer's Metrics, the master's place in runtime_roles;
#  2. a Spark worker's process (rank 1) killed mid-run ends its case CRASHED naming it, and the
#     master (role scheduler 0) killed mid-run ends its case named too; no process of either case
#     is left, the executors' JVMs included.
# Usage: bigdl_spark_e2e.sh DLHOST WORK_DIR
# Exit 77 (skipped) when cpu_bigdl is not built here (no JDK or no BigDL/Spark jars), saying why.
set -eu
DLHOST="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK/tmp"
fail() { echo "bigdl_spark_e2e: FAILED: $*"; exit 1; }

if ! "$DLHOST" plugins 2>/dev/null | grep -q '^cpu_bigdl '; then
  why=$(cat "$(dirname "$DLHOST")/../plugins/cpu_bigdl.left-out" 2>/dev/null || echo "not built")
  echo "SKIPPED: cpu_bigdl is not built here: $why"; exit 77
fi
# The workers' folders (their executors' working directories) under WORK: no_spark_left finds
# the executors by them.
export TMPDIR="$WORK/tmp"

# no_spark_left WHAT: no process runs in a Spark worker's folder of this test or names its files.
no_spark_left() {
  for _ in $(seq 1 50); do
    left=$(/usr/bin/python3 - "$WORK" <<'PY'
import os, sys
work = sys.argv[1]
n = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) == os.getpid(): continue
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        continue
    # The suite's files (WORK/...) name a case's processes; this test's own command names WORK.
    if cwd.startswith(work) or work + "/" in cmd:
        n.append(f"{pid}: {cmd[:120]}")
print("\n".join(n))
PY
)
    [ -z "$left" ] && return 0
    sleep 0.2
  done
  fail "process(es) of $1 outlived it (10 s after):
$left"
}

cat > "$WORK/spark.yaml" <<'YAML'
name: bigdl_spark_e2e
defaults: {backend: cpu_bigdl, comm: bigdl_spark, network: lenet, batch: 64, launcher: local,
           warmup: 2, iterations: 8, threads: 1, lr: 0.05, timeout: 300}
cases:
  - {ranks: [1, 2]}
YAML
"$DLHOST" run "$WORK/spark.yaml" -o "$WORK/spark.jsonl" > "$WORK/spark.txt" 2>&1 ||
  { cat "$WORK/spark.txt"; fail "run of the suite"; }
cat "$WORK/spark.txt"
/usr/bin/python3 - "$WORK/spark.jsonl" <<'PY' || fail "the records are not DistriOptimizer's"
import json, sys
recs = {r["params"]["ranks"]: r for r in map(json.loads, open(sys.argv[1]))}
assert set(recs) == {1, 2}, list(recs)
for ranks, r in sorted(recs.items()):
    assert r["status"] == "OK", (ranks, r["reason"], r.get("stderr_tail"))
    t, d = r["timing"], r["distributed"]
    assert t["timer"] == "backend_clock", t["timer"]
    assert "DistriOptimizer" in t["clock"] and "DistriOptimizer.optimize()" in t["loop"], t
    steps = t["samples"]["step"]
    assert len(steps) == 8 and all(s > 0 for s in steps), steps
    assert d["runtime"] == "bigdl_spark" and d["mode"] == "sync", d
    assert f"{ranks} workers" in d["runtime_library"], d["runtime_library"]
    assert "AllReduceParameter" in d["comm_time"] and "put gradient" in d["comm_time"], d
    comm, comp = d["samples"]["allreduce"], d["samples"]["compute"]
    assert len(comm) == len(comp) == 8, d["samples"]
    assert all(a > 0 for a in comm) and all(c > 0 for c in comp), d["samples"]
    # BigDL's split lies inside its own iteration time (averages over the executors of phases
    # of each executor's tasks, one after the other).
    assert all(a + c < s for a, c, s in zip(comm, comp, steps)), (comm, comp, steps)
    (master,) = r["runtime_roles"]
    assert master["role"] == "scheduler" and master["index"] == 0, r["runtime_roles"]
    loss = r["loss"]["values"]
    assert len(loss) == 8 and loss[-1] < loss[0], f"loss did not fall: {loss}"
    print(f"lenet b64 bigdl_spark x{ranks}: step {t['step']['median']:.1f} ms, compute "
          f"{d['compute']['median']:.1f} ms, communication {d['allreduce']['median']:.2f} ms, "
          f"loss {loss[0]:.4f} -> {loss[-1]:.4f}")
PY
no_spark_left "the 2-worker case"

# kill_mid_run WHO STATUS NAME: a long case, WHO (a rank's number or a role's name) SIGKILLed
# 3 s after the executors run; the record is STATUS naming NAME; nothing of the case is left.
kill_mid_run() {
  who="$1" want="$2" name="$3" suite="$WORK/kill_$1.yaml"
  cat > "$suite" <<YAML
name: bigdl_spark_kill_$who
defaults: {backend: cpu_bigdl, comm: bigdl_spark, network: lenet, batch: 16, launcher: local,
           ranks: 2, warmup: 0, iterations: 600, threads: 1, timeout: 240}
cases:
  - {lr: 0.05}
YAML
  "$DLHOST" run "$suite" -o "$suite.jsonl" > "$suite.txt" 2>&1 &
  run=$!
  victim=""
  for _ in $(seq 1 900); do
    victim=$(/usr/bin/python3 - "$suite" "$who" "$WORK/tmp" <<'PY'
import os, sys
suite, who, tmp = sys.argv[1:]
want = (f"DLHOST_RANK={who}" if who.isdigit() else f"DLHOST_ROLE={who}").encode()
procs = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        procs.append((pid, open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace"),
                      open(f"/proc/{pid}/environ", "rb").read().split(b"\0"),
                      os.readlink(f"/proc/{pid}/cwd")))
    except OSError:
        pass
# Steps run once both executors do (their working directories are under the workers' folders).
executors = [p for p in procs if "CoarseGrainedExecutorBackend" in p[1] and p[3].startswith(tmp)]
if len(executors) >= 2:
    for pid, cmd, env, _ in procs:
        if suite in cmd and want in env and (who.isdigit() or "runtime-role" in cmd):
            print(pid)
            break
PY
)
    if [ -n "$victim" ]; then sleep 3; break; fi
    sleep 0.2
  done
  [ -n "$victim" ] || { kill "$run" 2> /dev/null; cat "$suite.txt"; fail "$who never ran"; }
  kill -9 "$victim" 2> /dev/null || true
  wait "$run" || true
  cat "$suite.txt"
  /usr/bin/python3 - "$suite.jsonl" "$want" "$name" <<'PY' || fail "killing $who did not end its case, named"
import json, sys
(r,) = [json.loads(l) for l in open(sys.argv[1])]
want, name = sys.argv[2], sys.argv[3]
print(f"{name} killed: {r['status']} after {r['duration_s']:.1f} s: {r['reason']}")
assert r["status"] == want and name in r["reason"] and "SIGKILL" in r["reason"], r["reason"]
assert r["duration_s"] < 240, r["duration_s"]
PY
  no_spark_left "the case whose $name was killed"
}
kill_mid_run 1 CRASHED "rank 1"
kill_mid_run scheduler CRASHED "role scheduler 0"
echo "bigdl_spark_e2e: PASSED"
