#!/usr/bin/env python3
"""mx_ops.py: where the two sides of the cpu_mxnet fairness pair (dlhost's cpu_mxnet and MXNet
1.9.1 Gluon hybridized in its own Python) spend a training step, operator by operator, with three
tools, both sides alternating, which first rotating with the round:

  --tool perf      CPU time by function: `perf record -e cpu-clock` (samples only while a thread
                   of the process runs, so a loaded machine inflates nothing but the wait) over
                   the whole run of each side, oneDNN's JIT kernels named through its perf map
                   (DNNL_JIT_PROFILE=2); CPU ms per step = samples x period / steps (warm-up
                   included, so one-off work shows as its own functions: JIT generation, Python
                   import, dlhost's lowering). Nothing in the run is changed.
  --tool profiler  MXNet's own profiler (MXNET_PROFILER_AUTOSTART=1, Chrome trace at exit), engine
                   bulking off (MXNET_EXEC_BULK_EXEC_TRAIN=0 and the CachedOp's bulk sizes 1, else
                   a bulked segment hides its operators) on both sides: per operator the calls
                   per step and the wall time of one call on the engine's worker (the median
                   call: a descheduled call on a loaded machine moves it little), times the calls
                   per step; and the per-step wall and process CPU of the run.
  --tool dnnl      oneDNN's own log (DNNL_VERBOSE=1; dlhost's case run with -v): per primitive
                   and implementation (jit or the reference kernel) the calls per step and the
                   wall time of the median call times the calls.

Both sides run exactly as bench/fairness.py runs them (its suite, `dlhost run --set` case keys,
the peer's environment from `dlhost case-env`, omp_wait_policy=passive; the commands are
fairness.py's run_dlhost / run_peer's). Check the calls column
against the network before reading a row (ResNet-50: 53 Convolution and 53 BatchNorm a step).

    python3 bench/probe/mx_ops.py --build build --venvs /work/wt/h40-truth/build resnet50 16 \
        --threads 2 --tool perf --rounds 2
"""
import argparse
import collections
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fairness  # noqa: E402

PERF_HZ = 499


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def perf_table(data):
    """{(dso, symbol): samples} from a perf.data file."""
    p = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-q",
                        "--sort", "dso,sym", "-F", "sample,dso,sym", "-t", "\x1f"],
                       capture_output=True, text=True)
    out = collections.Counter()
    for line in p.stdout.splitlines():
        parts = [x.strip() for x in line.split("\x1f")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        sym = parts[2][4:] if parts[2][:4] in ("[.] ", "[k] ") else parts[2]
        if sym.startswith("0x"):  # code no exported symbol covers (the wheel has no .symtab)
            sym = "[unnamed code]"
        out[(os.path.basename(parts[1]), sym)] += int(parts[0])
    return out


def trace_ops(path):
    """{op: [durations in µs]} from MXNet's profile.json ('X' events or 'B'/'E' pairs)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    ops = collections.defaultdict(list)
    open_ = {}
    for e in events:
        if e.get("cat") != "operator":
            continue
        if e.get("ph") == "X":
            ops[e["name"]].append(e.get("dur", 0))
        elif e.get("ph") == "B":
            open_[(e["name"], e.get("tid"))] = e["ts"]
        elif e.get("ph") == "E":
            t0 = open_.pop((e["name"], e.get("tid")), None)
            if t0 is not None:
                ops[e["name"]].append(e["ts"] - t0)
    return ops


def dnnl_table(text):
    """{'kind,implementation,propagation': [ms of each call]} from oneDNN's verbose lines."""
    out = collections.defaultdict(list)
    for line in text.splitlines():
        i = line.find("dnnl_verbose,exec,cpu,")
        if i < 0:
            continue
        f = line[i:].strip().split(",")
        try:
            out[",".join(f[3:6])].append(float(f[-1]))
        except ValueError:
            continue
    return out


def commands(a, f, side):
    """(command, environment, folder) of one side, as bench/fairness.py runs it (run_dlhost /
    run_peer), with dlhost's case verbose where the tool reads the libraries' own output."""
    if side == "dlhost":
        case = f"{a.network}.cpu_mxnet.b{a.batch}.t{a.threads}"
        cmd = [f.dlhost, "run", f.suite, "--case", case, "-v" if a.tool == "dnnl" else "--quiet",
               "--set", f"warmup={a.warmup}", "--set", f"iterations={a.iterations}",
               "-o", f.records]
        for kv in fairness.settings(f.a):
            cmd += ["--set", kv]
        return cmd, fairness.base_env(), os.getcwd()
    env, _ = fairness.case_env(f.dlhost, "cpu_mxnet", a.threads, fairness.settings(f.a))
    py = os.path.join(f.a.venvs, fairness.PAIRS["cpu_mxnet"][1])
    cmd = [py, os.path.join(fairness.PEERS, "mxnet_peer.py"), a.network, "--batch", str(a.batch),
           "--threads", str(a.threads), "--warmup", str(a.warmup), "--iterations",
           str(a.iterations)]
    return cmd, dict(env, DLHOST=f.dlhost), fairness.PEERS


def step_median(side, f, a, stdout):
    """The run's wall-clock step median: the record's (dlhost) or the peer's JSON line."""
    if side == "dlhost":
        case = f"{a.network}.cpu_mxnet.b{a.batch}.t{a.threads}"
        with open(f.records) as fh:
            recs = [r for r in map(json.loads, fh) if r.get("case_id") == case]
        rec = recs[-1] if recs else None  # the last one: this run's
        if rec is None or rec.get("status") != "OK":
            return None, (rec or {}).get("reason", "no record")
        return rec["timing"]["step"]["median"], None
    line = next((x for x in reversed(stdout.splitlines()) if x.startswith("{")), None)
    if line is None:
        return None, "no JSON line"
    return json.loads(line)["step_ms_median"], None


def run_side(a, side, work):
    """One run of one side under the tool; returns its figures."""
    ns = argparse.Namespace(
        build=os.path.abspath(a.build), venvs=os.path.abspath(a.venvs or a.build), output=work,
        pairs=["cpu_mxnet"], networks=[(a.network, a.batch)], threads=[a.threads],
        warmup=a.warmup, iterations=a.iterations, allocator="auto", wait_policy="passive",
        timeout=3600)
    f = fairness.Fairness(ns)
    f.write_suite()
    cmd, env, cwd = commands(a, f, side)
    data = os.path.join(work, "perf.data")
    if a.tool == "perf":
        env["DNNL_JIT_PROFILE"] = "2"  # oneDNN's JIT kernels named in /tmp/perf-PID.map
        cmd = ["perf", "record", "-q", "-F", str(PERF_HZ), "-e", "cpu-clock", "-o", data,
               "--"] + cmd
    elif a.tool == "profiler":
        env.update(MXNET_PROFILER_AUTOSTART="1", MXNET_EXEC_BULK_EXEC_TRAIN="0",
                   MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD="1",
                   MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD="1")
        cwd = work  # profile.json lands in the working folder
    elif a.tool == "dnnl":
        env.update(DNNL_VERBOSE="1", MKLDNN_VERBOSE="1")
    load0, cpu0, t0 = os.getloadavg()[0], child_cpu(), time.time()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    step, why = step_median(side, f, a, p.stdout)
    if step is None:
        sys.exit(f"mx_ops.py: {side}: exit {p.returncode}: {why}: {p.stderr[-1500:]}")
    out = {"side": side, "step_ms_median": step,
           "process_cpu_s": round(child_cpu() - cpu0, 2), "run_wall_s": round(time.time() - t0, 1),
           "load_before": load0, "load_after": os.getloadavg()[0]}
    steps = a.warmup + a.iterations
    if a.tool == "perf":
        table = perf_table(data)
        ms = 1e3 / PERF_HZ
        out["ops"] = {f"{dso}:{sym}": round(n * ms / steps, 2) for (dso, sym), n in table.items()
                      if n * ms / steps >= 0.5}
        out["sampled_cpu_s"] = round(sum(table.values()) / PERF_HZ, 2)
    elif a.tool == "profiler":
        trace = os.path.join(work, "profile.json")
        if not os.path.exists(trace):
            sys.exit(f"mx_ops.py: {side}: no profile.json in {work}")
        out["ops"] = {op: {"calls_per_step": round(len(d) / steps, 2),
                           "ms_per_step": round(statistics.median(d) * len(d) / steps / 1e3, 2),
                           "sum_ms_per_step": round(sum(d) / steps / 1e3, 2)}
                      for op, d in trace_ops(trace).items()}
    else:
        table = dnnl_table(p.stdout + "\n" + p.stderr)
        if not table:
            sys.exit(f"mx_ops.py: {side}: no dnnl_verbose lines in its output")
        out["ops"] = {k: {"calls_per_step": round(len(d) / steps, 2),
                          "ms_per_step": round(statistics.median(d) * len(d) / steps, 2),
                          "sum_ms_per_step": round(sum(d) / steps, 2)}
                      for k, d in table.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--tool", choices=("perf", "profiler", "dnnl"), default="perf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(fairness.ROOT, "build"))
    ap.add_argument("--venvs", default=None)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--jsonl", default=None, help="append each run's figures here")
    a = ap.parse_args()
    if a.tool == "perf" and shutil.which("perf") is None:
        sys.exit("mx_ops.py: perf is not installed")
    runs = {"dlhost": [], "peer": []}
    for rnd in range(a.rounds):
        for side in (("dlhost", "peer") if rnd % 2 == 0 else ("peer", "dlhost")):
            work = tempfile.mkdtemp(prefix=f"mx_ops_{side}_")
            r = run_side(a, side, work)
            r.update(round=rnd + 1, tool=a.tool, network=a.network, batch=a.batch,
                     threads=a.threads, warmup=a.warmup, iterations=a.iterations,
                     at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            runs[side].append(r)
            print(f"round {rnd + 1} {side:6s}: step median {r['step_ms_median']:.1f} ms, process "
                  f"CPU {r['process_cpu_s']:.1f} s in {r['run_wall_s']:.0f} s, load "
                  f"{r['load_before']:.2f} -> {r['load_after']:.2f}", flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps(r) + "\n")
            shutil.rmtree(work, ignore_errors=True)

    def med(side, op, key=None):
        vals = []
        for r in runs[side]:
            v = r["ops"].get(op)
            vals.append(0.0 if v is None else (v[key] if key else v))
        return statistics.median(vals)

    names = set().union(*(r["ops"] for s in runs.values() for r in s))
    if a.tool == "perf":
        rows = sorted(names, key=lambda n: -abs(med("dlhost", n) - med("peer", n)))
        print(f"# perf cpu-clock, CPU ms per step (medians over {a.rounds} runs of "
              f"{a.warmup}+{a.iterations} steps), sorted by |dlhost - gluon|")
        print(f"{'dlhost':>9s} {'gluon':>9s} {'diff':>9s}  function")
        for n in rows[:a.top]:
            d, g = med("dlhost", n), med("peer", n)
            print(f"{d:9.1f} {g:9.1f} {d - g:9.1f}  {n[:150]}")
        for side in runs:
            print(f"# {side}: sampled CPU s per run "
                  f"{[r['sampled_cpu_s'] for r in runs[side]]}")
    else:
        rows = sorted(names, key=lambda n: -abs(med("dlhost", n, "ms_per_step") -
                                                med("peer", n, "ms_per_step")))
        what = ("MXNet profiler, bulking off: wall ms per step on the engine" if a.tool ==
                "profiler" else "oneDNN verbose: wall ms per step per primitive implementation")
        print(f"# {what} (median call x calls per step; medians over {a.rounds} runs), sorted "
              f"by |dlhost - gluon|")
        print(f"{'dlhost':>9s} {'calls':>6s} {'gluon':>9s} {'calls':>6s} {'diff':>9s}  "
              f"{'operator' if a.tool == 'profiler' else 'primitive'}")
        for n in rows[:a.top]:
            d, g = med("dlhost", n, "ms_per_step"), med("peer", n, "ms_per_step")
            print(f"{d:9.1f} {med('dlhost', n, 'calls_per_step'):6.1f} {g:9.1f} "
                  f"{med('peer', n, 'calls_per_step'):6.1f} {d - g:9.1f}  {n}")
        for side in runs:
            tot = statistics.median(sum(v["ms_per_step"] for v in r["ops"].values())
                                    for r in runs[side])
            print(f"# {side}: all of them {tot:.1f} ms per step")


if __name__ == "__main__":
    main()
