#!/usr/bin/env python3
# make_fixtures.py — writes the report tests' fixture files from two real dlhost records (an OK
# single-process case and an OK 2-rank case, in templates.jsonl) with chosen times, so every
# table cell the tests check is known. Run it from this folder; the outputs are committed.
import copy, json

ok_template, dist_template = [json.loads(l) for l in open("templates.jsonl")]

def summary(xs):
    xs = sorted(xs)
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    mean = sum(xs) / n
    return {"mean": mean, "median": med, "min": xs[0], "max": xs[-1], "p5": xs[0], "p95": xs[-1],
            "stddev": (sum((x - mean) ** 2 for x in xs) / max(n - 1, 1)) ** 0.5}

def record(case_id, network, backend, batch, threads, step, fwd, bwd, upd, cpu="AMD EPYC",
           cores=2, onednn="oneDNN 2.6.3 (cpu_runtime=OMP)", revision="8d9dd34"):
    r = copy.deepcopy(ok_template)
    r["case_id"] = case_id
    r["params"].update(network=network, backend=backend, batch=batch, threads=threads)
    r["backend"]["name"] = backend
    r["network"]["name"] = network
    r["network"]["batch"] = batch
    r["resolved"].update(batch=batch, threads_requested=threads, threads_used=threads)
    t = r["timing"]
    t["iterations"] = len(step)
    for phase, xs in (("step", step), ("forward", fwd), ("backward", bwd), ("update", upd)):
        t[phase] = summary(xs)
        t["samples"][phase] = xs
    med = t["step"]["median"]
    t["samples_per_second"] = batch * 1000 / med
    t["train_gflops_per_second_est"] = 3 * r["network"]["forward_flops_per_sample"] * batch / med / 1e6
    r["environment"].update(cpu_model=cpu, cores=cores, git_revision=revision)
    r["environment"]["libraries"]["cpu_onednn"] = onednn
    return r

def not_ok(case_id, network, backend, batch, threads, st, reason):
    r = {k: ok_template[k] for k in ("schema_version", "suite", "started_at", "params",
                                       "params_hash", "duration_s", "environment")}
    r = copy.deepcopy(r)
    r.update(case_id=case_id, status=st, reason=reason)
    r["params"].update(network=network, backend=backend, batch=batch, threads=threads)
    return r

def dist(case_id, ranks, step, speedup=None):
    r = copy.deepcopy(dist_template)
    r["case_id"] = case_id
    r["params"]["ranks"] = ranks
    d = r["distributed"]
    d["ranks"] = ranks
    d["global_batch"] = 16
    d["per_rank_batch"] = 16 // ranks
    r["timing"]["step"] = summary(step)
    r["timing"]["samples"]["step"] = step
    d["compute"] = summary([s * 0.7 for s in step])
    d["allreduce"] = summary([s * 0.25 for s in step])
    d["exposed_comm"] = summary([s * 0.2 for s in step])
    r["environment"]["git_revision"] = "8d9dd34"
    if speedup is None:
        d.pop("vs_1_rank", None)
    else:
        d["vs_1_rank"] = {"baseline_case": "lenet.mpi.ranks=1", "speedup": speedup,
                          "efficiency": speedup / ranks}
    return r

records = [
    record("lenet.cpu_onednn.b64.t1", "lenet", "cpu_onednn", 64, 1, [12.0, 10.0, 11.0],
           [3.0, 3.0, 3.0], [6.0, 6.0, 6.0], [1.0, 1.0, 1.0]),
    record("lenet.cpu_onednn.b64.t2", "lenet", "cpu_onednn", 64, 2, [6.0, 5.5, 6.5],
           [1.5, 1.5, 1.5], [3.0, 3.0, 3.0], [0.5, 0.5, 0.5]),
    record("lenet.cpu_onednn.b128.t1", "lenet", "cpu_onednn", 128, 1, [20.0, 21.0, 19.0],
           [6.0, 6.0, 6.0], [12.0, 12.0, 12.0], [2.0, 2.0, 2.0]),
    record("fcnr.cpu_onednn.b64.t1", "fcnr", "cpu_onednn", 64, 1, [150.5, 151.0, 150.0],
           [50.0, 50.0, 50.0], [90.0, 90.0, 90.0], [10.0, 10.0, 10.0]),
    not_ok("fcnr.cpu_onednn.b64.t2", "fcnr", "cpu_onednn", 64, 2, "SKIPPED",
           "needs 2 threads; this machine has 1"),
    not_ok("lenet.cpu_reference.b64.t1", "lenet", "cpu_reference", 64, 1, "FAILED",
           "loss is not finite after step 2"),
    not_ok("alexnet.cpu_onednn.b64.t1", "alexnet", "cpu_onednn", 64, 1, "CRASHED",
           "killed by signal 11 (SIGSEGV)"),
    not_ok("resnet50.cpu_onednn.b64.t1", "resnet50", "cpu_onednn", 64, 1, "TIMEOUT",
           "no result within 600 s"),
    dist("lenet.mpi.ranks=1", 1, [8.0, 8.0, 8.0]),
    dist("lenet.mpi.ranks=2", 2, [5.0, 5.0, 5.0], speedup=1.6),
    record("lenet.cpu_onednn.b64.t1", "lenet", "cpu_onednn", 64, 1, [8.0, 8.5, 7.5],
           [2.0, 2.0, 2.0], [4.0, 4.0, 4.0], [1.0, 1.0, 1.0], cpu="Intel Xeon", cores=4,
           onednn="oneDNN 3.1 (cpu_runtime=OMP)"),
]
with open("results.jsonl", "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
    f.write('{"schema_version": 1, "case_id": "torn')  # a run killed mid-write

# compare: base and new of one case each way, and a case in one file only.
base = [record("same.b64.t1", "lenet", "cpu_onednn", 64, 1, [10.0 + i * 0.1 for i in range(10)],
               [3.0] * 10, [6.0] * 10, [1.0] * 10),
        record("slower.b64.t1", "lenet", "cpu_onednn", 64, 1, [10.0 + i * 0.1 for i in range(10)],
               [3.0] * 10, [6.0] * 10, [1.0] * 10),
        record("gone.b64.t1", "lenet", "cpu_onednn", 64, 1, [10.0, 10.1, 10.2], [3.0] * 3,
               [6.0] * 3, [1.0] * 3)]
new = [record("same.b64.t1", "lenet", "cpu_onednn", 64, 1, [10.05 + i * 0.1 for i in range(10)],
              [3.0] * 10, [6.0] * 10, [1.0] * 10, revision="feedbee"),
       record("slower.b64.t1", "lenet", "cpu_onednn", 64, 1, [12.0 + i * 0.1 for i in range(10)],
              [3.0] * 10, [6.0] * 10, [1.0] * 10, revision="feedbee"),
       record("added.b64.t1", "lenet", "cpu_onednn", 64, 1, [10.0, 10.1, 10.2], [3.0] * 3,
              [6.0] * 3, [1.0] * 3, revision="feedbee")]
for name, rs in (("base.jsonl", base), ("new.jsonl", new)):
    with open(name, "w") as f:
        for r in rs:
            f.write(json.dumps(r) + "\n")
with open("invalid_middle.jsonl", "w") as f:
    f.write(json.dumps(base[0]) + "\n{not json\n" + json.dumps(base[1]) + "\n")

# tools_mixed.jsonl: the tools table of a run that mixes what it compares (issue 40): precisions,
# a tool's options, fused and unfused steps, synthetic and real data, one case repeated (a TIMEOUT
# among its OK records), and a record taken beside other load. CPU, 1 thread.
def tool(case_id, network, backend, batch, ms, precision="fp32", data="synthetic", options=None,
         fused=False, warnings=()):
    r = record(case_id, network, backend, batch, 1, [ms, ms, ms], [ms * 0.3] * 3, [ms * 0.6] * 3,
               [ms * 0.1] * 3)
    r["params"].update(precision=precision, data=data, evaluate=data != "synthetic")
    if options:
        r["params"]["options"] = options
    r["resolved"]["precision"] = precision
    r["timing"]["timer"] = "host_clock"
    r["timing"]["fused_step"] = fused
    r["warnings"] = [{"code": w, "message": w + " during the case"} for w in warnings]
    r["environment"]["libraries"] = {backend: backend + " 1.0"}
    r["backend"]["device"]["library"] = backend + " 1.0"
    return r

def tool_not_ok(case_id, network, backend, batch, st, reason, data="synthetic"):
    r = not_ok(case_id, network, backend, batch, 1, st, reason)
    r["params"].update(precision="fp32", data=data, evaluate=data != "synthetic")
    r["environment"]["libraries"] = {backend: backend + " 1.0"}
    return r

mixed = [
    tool("lenet.cpu_tensorflow.b16.t1", "lenet", "cpu_tensorflow", 16, 30.0),
    tool("lenet.cpu_tensorflow.b16.t1.options=cpu_tensorflow.mode=xla", "lenet", "cpu_tensorflow",
         16, 25.0, options={"cpu_tensorflow": {"mode": "xla"}}, warnings=["warmup_short"]),
    tool("lenet.cpu_onednn.b16.t1", "lenet", "cpu_onednn", 16, 20.0),
    tool("lenet.cpu_onednn.b16.t1.precision=bf16", "lenet", "cpu_onednn", 16, 14.0,
         precision="bf16"),
    tool("lenet.cpu_onednn.b16.t1", "lenet", "cpu_onednn", 16, 22.0),
    tool_not_ok("lenet.cpu_onednn.b16.t1", "lenet", "cpu_onednn", 16, "TIMEOUT",
                "did not stop at its timeout of 120 s"),
    tool("lenet.cpu_onednn.b16.t1", "lenet", "cpu_onednn", 16, 19.0),
    tool("lenet.cpu_mxnet.b16.t1", "lenet", "cpu_mxnet", 16, 28.0, fused=True),
    tool("fcnr.cpu_onednn.b1024.t1", "fcnr", "cpu_onednn", 1024, 662.9),
    tool("fcnr.cpu_tensorflow.b1024.t1", "fcnr", "cpu_tensorflow", 1024, 700.0,
         warnings=["other_load", "spread"]),
    tool_not_ok("fcnr.cpu_onednn.b1024.t1.data=real.evaluate=true", "fcnr", "cpu_onednn", 1024,
                "SKIPPED", "data: real needs DLHOST_DATA", data="real"),
]
with open("tools_mixed.jsonl", "w") as f:
    for r in mixed:
        f.write(json.dumps(r) + "\n")

# tools_departures.jsonl: backends that say where they are knowingly faster than their framework's
# own users get it (resolved.departures, ABI 1.5): cpu_tensorflow's fused batch norm on ResNet-56
# at 1 and 2 threads (one declaration, one mark), cpu_mxnet's global pool, a declaration full of
# Markdown's specials, and figures without any. CPU.
def declared(r, *departures):
    r["resolved"]["departures"] = list(departures)
    return r

BN = "batch norm: FusedBatchNormV3, which Keras's layer does not use: 2.0 s against 5.4 s a step"
POOL = "global average pool: mean, not Gluon's GlobalAvgPool2D: about 5.3 s of Gluon's 13 s step"
HOSTILE = "<b>x</b> | *y* [z](javascript:q) `w` # 1. & ^ ~"
departures = []
for threads in (1, 2):
    t = "t%d" % threads
    def fw(backend, network, batch, ms):
        return tool("%s.%s.b%d.%s" % (network, backend, batch, t), network, backend, batch, ms)
    for r in (fw("cpu_tensorflow", "resnet56", 128, 900.0), fw("cpu_mxnet", "resnet56", 128, 950.0),
              fw("cpu_onednn", "resnet56", 128, 800.0), fw("cpu_tensorflow", "lenet", 64, 15.0),
              fw("cpu_mxnet", "lenet", 64, 20.0)):
        r["params"]["threads"] = threads
        r["resolved"].update(threads_requested=threads, threads_used=threads)
        if r["network"]["name"] == "resnet56":
            if r["backend"]["name"] == "cpu_tensorflow":
                declared(r, BN)
            elif r["backend"]["name"] == "cpu_mxnet":
                declared(r, POOL, HOSTILE) if threads == 2 else declared(r, POOL)
        departures.append(r)
with open("tools_departures.jsonl", "w") as f:
    for r in departures:
        f.write(json.dumps(r) + "\n")
