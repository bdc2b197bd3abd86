"""CPU seconds per training step, 1 thread, by the difference of two runs (warmup 1 + K1 and
warmup 1 + K2 timed steps): free of start-up and compile, and much less disturbed than wall time
by other processes on a loaded machine. Tools alternate, rounds rotate; medians.
The script exactly as run for this folder's cpu-time.jsonl, with that session's paths ("before" =
main's build at d07ef9c in /work/main/build, "after" = the branch's build):
    TOOLS=before,after,peer K2=4 python3 cpu_time_ab.py fcn5 64 cpu_libtorch2 2"""
import os, subprocess, sys, resource, statistics, json
net, batch, backend = sys.argv[1], sys.argv[2], sys.argv[3]
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
K1, K2 = 1, int(os.environ.get("K2", "4"))
suite = "/work/wt/h40-bench/build/bench-results/fairness-base/fairness-suite.yaml"
py = {"cpu_libtorch2": "/work/wt/h40-bench/build/bench-venv/bin/python",
      "cpu_libtorch": "/usr/bin/python3", "cpu_tensorflow": "/work/wt/h40-bench/build/bench-venv/bin/python",
      "cpu_mxnet": "/work/wt/h40-bench/build/bench-venv-mxnet/bin/python"}[backend]
script = {"cpu_mxnet": "mxnet_peer.py", "cpu_tensorflow": "tf_peer.py"}.get(backend, "torch_peer.py")
env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
           OMP_WAIT_POLICY="PASSIVE", DLHOST="/work/main/build/host/dlhost",
           LD_PRELOAD=os.environ.get("ALLOC", "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"))
for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"): env.pop(v, None)
if not env["LD_PRELOAD"]: env.pop("LD_PRELOAD")
tools = {"before": ["/work/main/build/host/dlhost"], "after": ["/work/wt/h40-bench/build/host/dlhost"], "peer": None}
def cpu(tool, k):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if tools[tool] is None:
        cmd = [py, "/work/wt/h40-bench/bench/peers/" + script, net, "--batch", batch, "--threads", "1", "--warmup", "1", "--iterations", str(k)]
    else:
        cmd = tools[tool] + ["run", suite, "--case", f"{net}.{backend}.b{batch}.t1", "--quiet", "--set", "warmup=1", "--set", f"iterations={k}", "-o", f"/tmp/h40b-cpuab-{tool}.jsonl"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/work/wt/h40-bench/bench/peers")
    if p.returncode: print(p.stderr[-500:])
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), r1.ru_minflt - r0.ru_minflt
only = os.environ.get("TOOLS", "before,after,peer").split(",")
res = {t: [] for t in only}; flt = {t: [] for t in only}
for r in range(rounds):
    order = only[r % len(only):] + only[:r % len(only)]
    for t in order:
        a, fa = cpu(t, K1); b, fb = cpu(t, K2)
        res[t].append((b - a) / (K2 - K1) * 1e3); flt[t].append((fb - fa) / (K2 - K1))
        print(f"round {r+1} {t}: {res[t][-1]:.1f} CPU ms/step, {flt[t][-1]:.0f} minor faults/step (load {os.getloadavg()[0]:.1f})", flush=True)
print(json.dumps({"network": net, "batch": batch, "backend": backend, "cpu_ms_per_step": {t: statistics.median(v) for t, v in res.items()},
                  "minor_faults_per_step": {t: statistics.median(v) for t, v in flt.items()}, "runs": res}))
