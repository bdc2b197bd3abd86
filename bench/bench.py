#!/usr/bin/env python3
"""bench.py: dlhost's cpu_onednn against PyTorch (PyPI and Debian) and TensorFlow, in one run.

Driven by bench/run.sh (which installs the peers and builds the probes); see bench/README.md.
Standard library only, so any python3 runs it. For every (network, threads) case it runs dlhost
and each peer setup one after the other, rotating the order from case to case (and round to
round) so that slow phases of a shared machine spread over all tools; it measures the machine's
limits (sgemm, triad) and the host's own overhead (the bench_null backend), then prints one table
and writes bench.json plus the dlhost results (.jsonl) into the output folder.

Every command it starts runs without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE as inherited (they
halve OpenBLAS's sgemm on the development machines: 91 against 172-184 GFLOP/s a core; README.md,
"Machine notes"), dlhost and the peers alike. A peer's best setup runs under the environment
`dlhost case-env` gives the dlhost backend of its framework (case_env below: the allocator
preloaded, OpenBLAS's core, the thread and framework variables, OMP_WAIT_POLICY), the same one
dlhost's case worker applies to its own cases: no second copy of those settings lives here.
"""
import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "bench", "peers")
# In the order they run: the cases the issue asks about first, the longest last.
NETWORKS = ["fcn5", "fcn8", "fcnr", "lenet", "lstm32", "alexnet", "autoencoder", "alexnet_r",
            "resnet56", "lstm_ptb", "lstm64", "resnet50", "gpt2_tiny", "bert_tiny", "bert_base",
            "gpt2"]
# The Transformers (networks_transformer, AdamW) where the bench departs from the network's own
# CPU batch or sequence: the full models at 2 samples (suites/transformers.yaml's CPU cases) and
# GPT-2 at 128 tokens, so that one step takes seconds on two cores, not minutes.
TRANSFORMER_CASES = {"bert_base": {"batch": 2}, "gpt2": {"batch": 2, "seq": 128}}
# Fully connected stacks (inputs, widths...) for the bare-GEMM time of their step.
FC_STACKS = {"fcn5": [26752, 2048, 2048, 2048, 26752],
             "fcn8": [26752] + [2048] * 6 + [26752],
             "fcnr": [784, 2048, 4096, 1024, 10]}
DROPPED_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# dlhost's framework backends, each with the peer that runs the same library from Python.
FAIRNESS_PAIRS = [("cpu_tensorflow", "tf:best"), ("cpu_libtorch2", "torch:best"),
                  ("cpu_libtorch", "torch113:best")]
BACKENDS = ["cpu_onednn", "cpu_onednn3", "cpu_tensorflow", "cpu_libtorch2", "cpu_libtorch",
            "cpu_mxnet"]
# dlhost's own backend, a column per oneDNN build (cpu_onednn: Debian's 2.6, the column `dlhost`;
# cpu_onednn3: the PyPI 3.2 wheel): /fast, GF/s, %gemm, /bare and MB are taken with the fastest
# build of the row, named in the column `build`.
ONEDNN_BUILDS = {"dlhost": "cpu_onednn", "cpu_onednn3": "cpu_onednn3"}
SHORT = {"dlhost": "dlhost", "torch:best": "pt2", "torch:default": "pt2/d",
         "torch113:best": "pt113", "torch113:default": "pt113/d", "tf:best": "tf",
         "tf:default": "tf/d", "cpu_onednn3": "dnnl3", "cpu_tensorflow": "c_tf", "cpu_libtorch2": "c_pt2",
         "cpu_libtorch": "c_pt113", "cpu_mxnet": "c_mx"}
# A peer's framework -> the dlhost backend of that framework, whose case environment it gets.
PEER_BACKEND = {"torch": "cpu_libtorch2", "torch113": "cpu_libtorch", "tf": "cpu_tensorflow"}


def log(msg):
    print(msg, flush=True)


def base_env():
    env = dict(os.environ)
    for v in DROPPED_VARS:
        env.pop(v, None)
    return env


def case_env(dlhost, backend, threads, settings=()):
    """The environment a dlhost case of `backend` at `threads` runs under, from `dlhost case-env`
    (host/run/runtime_settings.cpp: allocator, OPENBLAS_CORETYPE, thread and framework variables,
    OMP_WAIT_POLICY), applied to base_env() as dlhost applies it: its `set` variables set, its
    `unset` ones removed. `settings` are further case keys ("allocator=tcmalloc",
    "omp_wait_policy=passive"), to be given to `dlhost run --set` as well so both sides match.
    Returns (env, allocator) with allocator case-env's {requested, name, library, skip_reason};
    exits naming the reason when case-env refuses (a bad key, or an allocator not installed)."""
    cmd = [dlhost, "case-env", "--set", f"backend={backend}", "--set", f"threads={threads}"]
    for kv in settings:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, env=base_env(), capture_output=True, text=True, timeout=60)
    if p.returncode not in (0, 3) or not p.stdout.strip():
        sys.exit(f"bench: {' '.join(cmd)} failed (exit {p.returncode}): {p.stderr.strip()}")
    out = json.loads(p.stdout)
    if p.returncode == 3:
        sys.exit(f"bench: {' '.join(cmd)}: {out['allocator']['skip_reason']}")
    env = base_env()
    env.update(out["set"])
    for v in out["unset"]:
        env.pop(v, None)
    return env, out["allocator"]


def wait_settings(network):
    """The case keys of a best setup's OpenMP wait: passive for the LSTMs, or everywhere on a
    shared machine (PASSIVE_ALL); given to case-env and to `dlhost run --set` alike."""
    return ["omp_wait_policy=passive"] if network.startswith("lstm") or PASSIVE_ALL else []


# OMP_WAIT_POLICY=PASSIVE for every tool's best setup: set by main() when the machine is shared
# (other processes keep the load above the cores: a spinning OpenMP thread then holds a core
# that its partner waits for, and 2 threads run several times slower than 1).
PASSIVE_ALL = False


def thread_env(env, threads, network):
    """The thread settings of the machine-limit probes (bench_limits): every library's variable,
    and the passive OpenMP wait that PyTorch's LSTM needs on 2 cores (measured at 2 threads: 723
    ms a step by default, 316 ms with PASSIVE), or everywhere on a shared machine. dlhost's cases
    and the peers' best setups get theirs from `dlhost case-env` (case_env)."""
    env = dict(env)
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[v] = str(threads)
    if network.startswith("lstm") or PASSIVE_ALL:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


def run_json(cmd, env, timeout, cwd=None):
    """Runs cmd; returns the last JSON line of stdout, or {'error': ...}."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            out = json.loads(line)
            out["wall_s"] = round(time.time() - t0, 1)
            return out
    tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {p.returncode}: " + " | ".join(tail)}


def loadavg():
    return os.getloadavg()[0]


def known_items(text, known, what, prog):
    """The comma-separated items of `text`; exits naming any not in `known`."""
    items = [x for x in text.split(",") if x]
    bad = [x for x in items if x not in known]
    if bad:
        sys.exit(f"{prog}: unknown {what} {bad}; known: {list(known)}")
    return items


def label(row):
    """A row's network, with the sequence where the bench sets one (gpt2/T128)."""
    return row["network"] + (f"/T{row['seq']}" if row.get("seq") else "")


class Bench:
    def __init__(self, a):
        self.a = a
        self.out = a.output
        os.makedirs(self.out, exist_ok=True)
        self.dlhost = os.path.join(a.build, "host", "dlhost")
        self.plugins = os.path.join(a.build, "bench", "plugins")
        self.limits_exe = os.path.join(a.build, "bench", "bench_limits")
        self.venv_python = os.path.join(a.build, "bench-venv", "bin", "python")
        self.results = os.path.join(self.out, "dlhost-results.jsonl")
        self.loads = []
        self.notes = []
        self.seq = {}  # network -> tokens per sample where the bench sets it (TRANSFORMER_CASES)
        self.allocators = {}  # column -> the allocator its runs got (case-env's, or the record's)

    # --- tools ------------------------------------------------------------------------------
    def tools(self):
        """[(column, command prefix, setup)] for every tool setup that can run here. dlhost's
        backends have no command (run_dlhost runs them): cpu_onednn is the column `dlhost`, a
        framework backend the column of its name."""
        tools = [("dlhost" if b == "cpu_onednn" else b, None, b) for b in self.a.backends]
        have_venv = os.path.exists(self.venv_python)
        probe = lambda py, mod: subprocess.run(  # noqa: E731
            [py, "-c", f"import {mod}; print({mod}.__version__)"], env=base_env(),
            capture_output=True, text=True, timeout=300)
        peers = []
        if have_venv:
            peers.append(("torch", self.venv_python, "torch_peer.py"))
        else:
            self.notes.append("no venv at build/bench-venv: PyPI PyTorch and TensorFlow skipped")
        if os.path.exists("/usr/bin/python3"):
            peers.append(("torch113", "/usr/bin/python3", "torch_peer.py"))
        if have_venv:
            peers.append(("tf", self.venv_python, "tf_peer.py"))
        self.versions = {}
        for name, py, script in peers:
            mod = "tensorflow" if name == "tf" else "torch"
            p = probe(py, mod)
            if p.returncode != 0:
                self.notes.append(f"{name}: {mod} does not import with {py}: skipped "
                                  f"({(p.stderr.strip().splitlines() or ['?'])[-1]})")
                continue
            self.versions[name] = p.stdout.strip().splitlines()[-1]
            setups = ["best"] if self.a.best_only else ["best", "default"]
            for setup in setups:
                tools.append((f"{name}:{setup}", [py, os.path.join(PEERS, script)], setup))
        return tools

    def peer_env(self, column, setup, threads, network):
        """A best setup: the case environment of the peer's dlhost backend (case_env); a default
        setup: the user's environment as it is (less the OpenBLAS variables)."""
        if setup != "best":
            return base_env()
        env, allocator = case_env(self.dlhost, PEER_BACKEND[column.split(":")[0]], threads,
                                  wait_settings(network))
        self.allocators[column] = allocator["name"]
        return env

    # --- limits -----------------------------------------------------------------------------
    def limits(self):
        res = {"threads": {}}
        for t in self.a.threads:
            cmd = [self.limits_exe, "--threads", str(t), "--sizes", self.a.sgemm_sizes,
                   "--reps", "3", "--triad-mb", "256"]
            env = thread_env(base_env(), t, "")
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
            entry = {"sgemm": [r for r in rows if r["kind"] == "sgemm"],
                     "triad_gbs": next((r["gbs"] for r in rows if r["kind"] == "triad"), None)}
            res["onednn_isa"] = next((r["onednn_isa"] for r in rows if r["kind"] == "isa"), "?")
            best = [max(r["onednn_gflops"], r["openblas_gflops"]) for r in entry["sgemm"]]
            entry["sgemm_best_gflops"] = max(best) if best else None
            res["threads"][str(t)] = entry
            log(f"  limits t={t}: " + ", ".join(
                f"sgemm n={r['n']}: oneDNN {r['onednn_gflops']} / OpenBLAS {r['openblas_gflops']}"
                " GFLOP/s" for r in entry["sgemm"]) + f"; triad {entry['triad_gbs']} GB/s")
        return res

    def step_gemms(self, network, batch, threads):
        """Bare-GEMM ms of one training step of an FC stack: forward, weight gradients, and
        data gradients for every layer but the first (nothing upstream learns)."""
        widths = FC_STACKS[network]
        shapes = []
        for i in range(len(widths) - 1):
            k, n = widths[i], widths[i + 1]
            shapes.append(f"{batch}:{n}:{k}")      # Y = X W^T
            shapes.append(f"{n}:{k}:{batch}")      # dW = dY^T X
            if i > 0:
                shapes.append(f"{batch}:{k}:{n}")  # dX = dY W
        cmd = [self.limits_exe, "--threads", str(threads), "--shapes", ",".join(shapes),
               "--reps", "3", "--triad-mb", "0"]
        p = subprocess.run(cmd, env=thread_env(base_env(), threads, ""), capture_output=True,
                           text=True, timeout=900)
        rows = [json.loads(x) for x in p.stdout.splitlines() if '"step_gemms"' in x]
        return rows[0] if rows else None

    # --- one case ---------------------------------------------------------------------------
    def run_dlhost(self, backend, network, batch, threads, env, settings=()):
        case = f"{network}.{backend}.b{batch}.t{threads}"
        if self.seq.get(network):  # the case id names the options the include entry sets
            case += f".options=networks_transformer.seq={self.seq[network]}"
        cmd = [self.dlhost, "--plugin-path", self.plugins, "run", self.suite, "--case", case,
               "--set", f"warmup={self.a.warmup}", "--set", f"iterations={self.a.iterations}",
               "-o", self.results]
        for kv in settings:  # the case keys its peers' case_env got (the worker applies them)
            cmd += ["--set", kv]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=self.a.timeout)
        rec = None
        with open(self.results) as f:
            for line in f:
                r = json.loads(line)
                if r.get("case_id") == case:
                    rec = r
        if p.returncode != 0 or rec is None or rec.get("status") != "OK":
            why = rec.get("reason") if rec else (p.stderr.strip().splitlines() or ["?"])[-1]
            return {"error": f"dlhost {case}: {why}"}
        tm = rec["timing"]
        self.allocators[backend] = ((rec.get("environment") or {}).get("allocator") or {}).get("name")
        return {"step_ms_median": tm["step"]["median"], "step_ms": tm["samples"]["step"],
                "peak_rss_bytes": rec["memory"]["peak_rss_bytes"],
                "gflops": tm["train_gflops_per_second_est"],
                "flops_per_step": 3 * rec["network"]["forward_flops_per_sample"] * batch,
                "loss_first": rec["loss"]["first"] if isinstance(rec.get("loss"), dict) else None,
                "implementation": rec["resolved"]["implementation"],
                "wall_s": round(time.time() - t0, 1)}

    def run_tool(self, tool, network, batch, threads):
        column, cmd, setup = tool
        if cmd is None:  # a dlhost backend; `setup` is its name
            return self.run_dlhost(setup, network, batch, threads, base_env(),
                                   wait_settings(network))
        full = cmd + [network, "--batch", str(batch), "--threads", str(threads),
                      "--warmup", str(self.a.warmup), "--iterations", str(self.a.iterations)]
        if self.seq.get(network):
            full += ["--seq", str(self.seq[network])]
        return run_json(full, self.peer_env(column, setup, threads, network), self.a.timeout,
                        cwd=PEERS)

    # --- the run ----------------------------------------------------------------------------
    def write_suite(self, batches):
        self.suite = os.path.join(self.out, "bench-suite.yaml")
        with open(self.suite, "w") as f:
            f.write("# Generated by bench/bench.py: every network at its paper CPU batch on\n"
                    "# cpu_onednn and on bench_null (host overhead); warmup/iterations via --set.\n"
                    "name: bench\nmatrix:\n")
            f.write(f"  network: [{', '.join(self.a.networks)}]\n")
            f.write(f"  backend: [{', '.join(self.a.backends)}, bench_null]\n")
            f.write(f"  threads: [{', '.join(map(str, self.a.threads))}]\n  include:\n")
            for n in self.a.networks:
                seq = batches[n].get("seq")
                options = f", options: {{networks_transformer: {{seq: {seq}}}}}" if seq else ""
                f.write(f"    - {{network: {n}, batch: {batches[n]['cpu_batch']}{options}}}\n")

    def main(self):
        a = self.a
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        log(f"bench: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset in every command it runs "
            f"(were: " + ", ".join(f"{v}={os.environ.get(v, '(unset)')}" for v in DROPPED_VARS)
            + ")")
        isa_flags = sorted(set(w for w in open("/proc/cpuinfo").read().split()
                               if w.startswith("avx512")))
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                    if ln.startswith("model name")), "?")
        log(f"bench: CPU {cpu}, {os.cpu_count()} cores, AVX-512: "
            f"{' '.join(isa_flags) if isa_flags else 'none (AVX2)'}; load {os.getloadavg()}")
        global PASSIVE_ALL
        PASSIVE_ALL = a.wait_policy == "passive" or (a.wait_policy == "auto" and
                                                     loadavg() > 0.75 * os.cpu_count())
        log("bench: OMP_WAIT_POLICY in the best setups: " +
            ("PASSIVE for every network (the machine is shared)" if PASSIVE_ALL else
             "PASSIVE for the LSTMs only"))
        nets = json.loads(subprocess.run([self.dlhost, "networks", "--json"], env=base_env(),
                                         capture_output=True, text=True, check=True).stdout)
        batches = {n["name"]: n for n in nets}
        for n, case in TRANSFORMER_CASES.items():
            if n in batches:
                batches[n]["cpu_batch"] = case["batch"]
                batches[n]["seq"] = case.get("seq")
        self.seq = {n: b.get("seq") for n, b in batches.items()}
        self.write_suite(batches)
        tools = self.tools()
        log("bench: tools: " + ", ".join(t[0] for t in tools) + "; versions " +
            json.dumps(self.versions))
        for n in self.notes:
            log("bench: NOTE " + n)
        log("bench: machine limits")
        limits = self.limits()
        log(f"bench: oneDNN dispatches {limits['onednn_isa']}")
        gemm_steps = {}
        # Host overhead: the null backend on every network, 1 thread.
        log("bench: host overhead (bench_null backend)")
        overhead = {}
        # bench_null lists no capabilities, so the host refuses it AdamW: the Transformers have
        # no host-overhead row (their steps are milliseconds to seconds of real work anyway).
        for n in (n for n in a.networks if batches[n]["optimizer"]["kind"] == "sgd"):
            r = self.run_dlhost("bench_null", n, batches[n]["cpu_batch"], a.threads[0],
                                base_env())
            if "error" not in r:
                ops = batches[n]["layers"]
                r["ops"] = ops
                r["us_per_op"] = r["step_ms_median"] * 1e3 / ops
            overhead[n] = r
        cases = {}
        index = 0
        for rnd in range(a.rounds):
            for n in a.networks:
                for t in a.threads:
                    key = f"{n}.t{t}"
                    # For FC stacks the step's bare GEMMs take a turn in the rotation too, so
                    # that they meet the same load as the tools they are compared with.
                    entries = tools + ([("bare-gemm", None, None)] if n in FC_STACKS else [])
                    order = entries[index % len(entries):] + entries[:index % len(entries)]
                    index += 1
                    for tool in order:
                        if tool[0] == "bare-gemm":
                            g = self.step_gemms(n, batches[n]["cpu_batch"], t)
                            gemm_steps.setdefault(key, []).append(g)
                            if g:
                                log(f"  [{rnd + 1}/{a.rounds}] {key:16s} {'bare GEMMs':16s} "
                                    f"{g['onednn_ms']:10.1f} ms oneDNN, {g['openblas_ms']:.1f} "
                                    f"ms OpenBLAS  (load {loadavg():.1f})")
                            continue
                        self.loads.append(loadavg())
                        r = self.run_tool(tool, n, batches[n]["cpu_batch"], t)
                        r["load"] = self.loads[-1]
                        cases.setdefault(key, {}).setdefault(tool[0], []).append(r)
                        ms = r.get("step_ms_median")
                        log(f"  [{rnd + 1}/{a.rounds}] {key:16s} {tool[0]:16s} "
                            + (f"{ms:10.1f} ms" if ms else "    error: " + r["error"])
                            + f"  (load {r['load']:.1f})")
                    self.save_state(batches, tools, cases, limits, gemm_steps, overhead)
        log("bench: machine limits again (the better of the two passes is the limit)")
        again = self.limits()
        for t, e in again["threads"].items():
            first = limits["threads"][t]
            first["sgemm_end"] = e["sgemm"]
            first["triad_gbs_end"] = e["triad_gbs"]
            first["sgemm_best_gflops"] = max(first["sgemm_best_gflops"] or 0,
                                             e["sgemm_best_gflops"] or 0)
            first["triad_gbs"] = max(first["triad_gbs"] or 0, e["triad_gbs"] or 0)
        report = self.summarize(batches, tools, cases, limits, gemm_steps, overhead)
        report.update({"started_at": started, "omp_passive_everywhere": PASSIVE_ALL, "cpu": cpu, "avx512": isa_flags,
                       "onednn_isa": limits["onednn_isa"], "versions": self.versions,
                       "notes": self.notes, "warmup": a.warmup, "iterations": a.iterations,
                       "rounds": a.rounds, "python": platform.python_version(),
                       "load_min": min(self.loads, default=None),
                       "load_median": statistics.median(self.loads) if self.loads else None,
                       "load_max": max(self.loads, default=None),
                       "dlhost_results": self.results,
                       "unset_variables": list(DROPPED_VARS),
                       "allocators": self.allocators})
        path = os.path.join(self.out, "bench.json")
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
        log(f"bench: wrote {path} and {self.results}")

    def save_state(self, *parts):
        """Everything measured so far: `bench.py --report-from` prints the table from it, so
        an interrupted run still yields the cases it finished."""
        names = ("batches", "tools", "cases", "limits", "gemm_steps", "overhead")
        state = dict(zip(names, parts), loads=self.loads, versions=self.versions,
                     notes=self.notes)
        with open(os.path.join(self.out, "state.json"), "w") as f:
            json.dump(state, f)

    def report_from(self, path):
        st = json.load(open(path))
        self.loads, self.versions, self.notes = st["loads"], st["versions"], st["notes"]
        self.seq = {n: b.get("seq") for n, b in st["batches"].items()}
        tools = [tuple(t) for t in st["tools"]]
        out = os.path.join(os.path.dirname(path), "bench.json")
        if os.path.exists(out):  # a finished run: its limits include the second pass
            st["limits"] = json.load(open(out))["limits"]
        summary = self.summarize(st["batches"], tools, st["cases"], st["limits"],
                                 st["gemm_steps"], st["overhead"])
        if os.path.exists(out):  # the run's own report, its rows recomputed
            report = json.load(open(out))
            report.update(summary)
            with open(out, "w") as f:
                json.dump(report, f, indent=1)

    # --- the table --------------------------------------------------------------------------
    def summarize(self, batches, tools, cases, limits, gemm_steps, overhead):
        cols = [t[0] for t in tools]
        rows, ratios = [], {}

        def med(runs):
            ok = [s for r in runs if "error" not in r for s in r["step_ms"]]
            return statistics.median(ok) if ok else None

        for key, by_tool in cases.items():
            n, t = key.rsplit(".t", 1)
            row = {"network": n, "batch": batches[n]["cpu_batch"], "threads": int(t)}
            if batches[n].get("seq"):
                row["seq"] = batches[n]["seq"]
            for c in cols:
                row[c + "_ms"] = med(by_tool.get(c, []))
                rss = [r["peak_rss_bytes"] for r in by_tool.get(c, []) if "error" not in r]
                row[c + "_peak_mb"] = round(max(rss) / 2**20) if rss else None
                errs = [r["error"] for r in by_tool.get(c, []) if "error" in r]
                if errs:
                    row[c + "_error"] = errs[0]
            builds = {c: row[c + "_ms"] for c in cols if c in ONEDNN_BUILDS and row[c + "_ms"]}
            best = min(builds, key=builds.get) if builds else None
            d = builds.get(best)
            if best:
                row["best_build"] = ONEDNN_BUILDS[best]
                row["best_build_ms"] = d
                row["best_build_peak_mb"] = row[best + "_peak_mb"]
            peers = {c: row[c + "_ms"] for c in cols if ":" in c and row[c + "_ms"]}
            # The fastest peer among the best setups: a default setup may use more cores than
            # the row's thread count (Debian's PyTorch leaves OpenBLAS at every core when only
            # torch.set_num_threads is called), so it is shown but not compared against.
            peers = {c: ms for c, ms in peers.items() if c.endswith(":best")}
            if peers:
                fastest = min(peers, key=peers.get)
                row["fastest_peer"] = fastest
                row["fastest_peer_ms"] = peers[fastest]
                row["fastest_peer_peak_mb"] = row[fastest + "_peak_mb"]
            if d:
                ok = [r for r in by_tool[best] if "error" not in r]
                flops = ok[0]["flops_per_step"]
                row["dlhost_gflops"] = round(flops / d / 1e6, 1)
                lim = limits["threads"].get(t, {}).get("sgemm_best_gflops")
                if lim:
                    row["gemm_limit_ms"] = round(flops / lim / 1e6, 1)
                    row["pct_of_gemm_limit"] = round(100 * row["gemm_limit_ms"] / d, 1)
                g = [x for x in gemm_steps.get(key, []) if x]
                if g:
                    row["bare_gemm_ms"] = min(min(x["onednn_ms"], x["openblas_ms"]) for x in g)
                    row["bare_gemm_onednn_ms"] = min(x["onednn_ms"] for x in g)
                    row["dlhost_over_bare_gemm"] = round(d / row["bare_gemm_ms"], 3)
                for c, ms in peers.items():
                    row["ratio_" + c] = round(d / ms, 3)
                if peers:
                    row["ratio_fastest"] = round(d / row["fastest_peer_ms"], 3)
                    ratios.setdefault(t, []).append(row["ratio_fastest"])
            rows.append(row)
        geo = {t: round(math.exp(sum(map(math.log, v)) / len(v)), 3) for t, v in ratios.items()}
        self.print_table(cols, rows, geo, limits, overhead)
        fairness = self.fairness(cols, rows)
        return {"columns": cols, "rows": rows, "geomean_ratio_fastest": geo, "limits": limits,
                "fc_step_gemms": gemm_steps, "host_overhead": overhead, "fairness": fairness}

    def fairness(self, cols, rows):
        """Each framework backend against the same framework used the usual way (its Python
        peer, best setup, same library version): backend ms / peer ms, and their geometric
        means. Within 1.1 is issue 26's target."""
        pairs = [(b, p) for b, p in FAIRNESS_PAIRS if b in cols and p in cols]
        if not pairs:
            return None
        out = {"pairs": pairs, "rows": [], "geomean": {}}
        log("")
        log("fairness: each framework backend / its framework's Python peer (best setup), "
            "median ms per mini-batch; <= 1.10 is the target")
        # Both sides' allocator: the peers' from case-env, dlhost's from its records
        # (environment.allocator; cpu_libtorch2's namespace gets the same one).
        log("  allocators: " + ", ".join(f"{c} {n}" for c, n in sorted(self.allocators.items())
                                         if n))
        hdr = f"{'network':12s} {'b':>5s} {'t':>2s} " + " ".join(
            f"{SHORT.get(b, b):>8s} {SHORT.get(p, p):>8s} {'ratio':>6s}" for b, p in pairs)
        log(hdr)
        log("-" * len(hdr))
        fmt = lambda v, w, p=1: (f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}")  # noqa: E731
        ratios = {}
        for r in rows:
            line = f"{label(r):12s} {r['batch']:5d} {r['threads']:2d} "
            entry = {"network": r["network"], "batch": r["batch"], "threads": r["threads"]}
            for b, p in pairs:
                bm, pm = r.get(b + "_ms"), r.get(p + "_ms")
                ratio = round(bm / pm, 3) if bm and pm else None
                entry[b + "_over_peer"] = ratio
                if ratio:
                    ratios.setdefault(b, []).append(ratio)
                line += fmt(bm, 8) + " " + fmt(pm, 8) + " " + fmt(ratio, 6, 2) + " "
            out["rows"].append(entry)
            log(line)
        for b, v in ratios.items():
            g = round(math.exp(sum(map(math.log, v)) / len(v)), 3)
            out["geomean"][b] = g
            log(f"geometric mean {b} / its peer: {g} over {len(v)} rows; worst "
                f"{max(v):.2f}, rows above 1.10: {sum(1 for x in v if x > 1.10)}")
        return out

    def print_table(self, cols, rows, geo, limits, overhead):
        short = SHORT
        hdr = (f"{'network':12s} {'b':>5s} {'t':>2s} " + " ".join(f"{short[c]:>8s}" for c in cols)
               + f" {'/fast':>6s} {'fastest':>8s} " + " ".join(
                   f"{'/' + short[c]:>7s}" for c in cols if c.endswith(":best"))
               + f" {'GF/s':>6s} {'%gemm':>6s} {'/bare':>6s} {'MB':>6s} {'peerMB':>6s}"
               + f" {'build':>11s}")
        log("")
        log(f"ISA: {limits['onednn_isa']} (oneDNN dispatch); load average during the cases: "
            f"min {min(self.loads, default=0):.2f}, median "
            f"{statistics.median(self.loads) if self.loads else 0:.2f}, "
            f"max {max(self.loads, default=0):.2f}; ms = median step time; dlhost = cpu_onednn "
            "(oneDNN 2.6), dnnl3 = cpu_onednn3 (oneDNN 3.2); /fast = the faster of them (build) / "
            "fastest peer best setup (defaults may use more cores than t); /pt2 etc. = dlhost / that peer's best setup; peer /d = default "
            "setup; %gemm = the step's FLOPs at the best sgemm rate / dlhost time; /bare = dlhost "
            "/ the step's own GEMMs timed bare (FC nets); MB = peak RSS")
        log(hdr)
        log("-" * len(hdr))
        fmt = lambda v, w, p=1: (f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}s}")  # noqa: E731
        for r in rows:
            line = f"{label(r):12s} {r['batch']:5d} {r['threads']:2d} "
            line += " ".join(fmt(r.get(c + "_ms"), 8) for c in cols)
            line += " " + fmt(r.get("ratio_fastest"), 6, 2)
            line += f" {short.get(r.get('fastest_peer', ''), '-'):>8s} "
            line += " ".join(fmt(r.get("ratio_" + c), 7, 2) for c in cols if c.endswith(":best"))
            line += " " + fmt(r.get("dlhost_gflops"), 6) + " " + fmt(r.get("pct_of_gemm_limit"), 6)
            line += " " + fmt(r.get("dlhost_over_bare_gemm"), 6, 2)
            line += " " + fmt(r.get("best_build_peak_mb"), 6, 0) + " " + fmt(
                r.get("fastest_peer_peak_mb"), 6, 0)
            line += f" {r.get('best_build', '-'):>11s}"
            log(line)
        for t, g in sorted(geo.items()):
            log(f"geometric mean dlhost / fastest peer, {t} thread(s): {g}")
        for k, v in limits["threads"].items():
            log(f"limits, {k} thread(s): sgemm best {v['sgemm_best_gflops']} GFLOP/s, "
                f"triad {v['triad_gbs']} GB/s")
        ok = {n: r for n, r in overhead.items() if "error" not in r}
        if ok:
            log("host overhead (bench_null, 1 thread): " + ", ".join(
                f"{n} {r['step_ms_median'] * 1e3:.1f} us/step = {r['us_per_op']:.2f} us/op"
                for n, r in ok.items()))
            lenet = next((r for r in rows if r["network"] == "lenet" and r.get("dlhost_ms")), None)
            if lenet and "lenet" in ok:
                log(f"host overhead share of LeNet's step (t={lenet['threads']}): "
                    f"{100 * ok['lenet']['step_ms_median'] / lenet['dlhost_ms']:.4f} %")
        for r in rows:
            for c in cols:
                if r.get(c + "_error"):
                    log(f"error {r['network']} t={r['threads']} {c}: {r[c + '_error']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--output", default=None, help="folder for bench.json and the .jsonl")
    ap.add_argument("--networks", default=",".join(NETWORKS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--backends", default=None,
                    help="dlhost backends measured beside the peers, comma-separated, of "
                    + ",".join(BACKENDS) + "; the framework backends also get the fairness "
                    "table (each against its framework's Python peer); default: every oneDNN "
                    "build of cpu_onednn in the build folder (cpu_onednn, cpu_onednn3)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1, help="passes over all cases")
    ap.add_argument("--best-only", action="store_true", help="skip the peers' default setups")
    ap.add_argument("--sgemm-sizes", default="2048,3072")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per tool run")
    ap.add_argument("--wait-policy", choices=["auto", "passive", "lstm"], default="auto",
                    help="OMP_WAIT_POLICY=PASSIVE in the best setups: for every network "
                    "(passive), for the LSTMs only (lstm), or everywhere when the load average "
                    "at start is above 0.75 x cores (auto)")
    ap.add_argument("--report-from", default=None,
                    help="print the table of an earlier (possibly interrupted) run's state.json")
    ap.add_argument("--quick", action="store_true",
                    help="1 warm-up + 3 steps, best setups only, sgemm 2048 only")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)  # the peers run in bench/peers: a relative path breaks
    if a.quick:
        a.warmup, a.iterations, a.best_only, a.sgemm_sizes = 1, 3, True, "2048"
    a.networks = known_items(a.networks, NETWORKS, "network(s)", "bench")
    a.threads = [int(t) for t in a.threads.split(",")]
    if a.backends is None:
        a.backends = ",".join(b for b in ONEDNN_BUILDS.values() if b == "cpu_onednn" or os.path.exists(
            os.path.join(a.build, "plugins", f"libdlhost_{b}.so")))
    a.backends = [b for b in a.backends.split(",") if b]
    bad = [b for b in a.backends if b not in BACKENDS]
    if bad or not a.backends:
        sys.exit(f"bench: unknown backend(s) {bad}; known: {BACKENDS}")
    if a.output is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        a.output = os.path.join(a.build, "bench-results", stamp)
    if a.report_from:
        a.output = os.path.dirname(os.path.abspath(a.report_from))
        Bench(a).report_from(a.report_from)
        return
    Bench(a).main()


if __name__ == "__main__":
    main()
