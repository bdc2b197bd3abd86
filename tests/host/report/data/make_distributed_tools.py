#!/usr/bin/env python3
# make_distributed_tools.py — writes distributed_tools.jsonl, the fixture of the report's
# distributed tools table (issue 41), from the real 2-rank record in templates.jsonl with chosen
# times: dlhost's comms (cpu_onednn + mpi on 1 rank and over 10gbe/1gbe test hosts, + gloo with no
# 1-rank case), a tool's own runtime with a comm time (cpu_libtorch2 + torch_ddp, whose 2-rank
# records carry a vs_1_rank against the mpi case, as the runner's baseline ignores the comm), one
# without (cpu_tensorflow + tf_ps, async, comm_time_absent), the same runtime in its sync mode (a
# tool of its own, with a comm time: its rows and speedup apart), a runtime case SKIPPED, a weak-scaling
# pair, and a single-process record that is not a distributed case. Run it from this folder; the
# output is committed.
import copy, json, statistics

_, dist_template = [json.loads(l) for l in open("templates.jsonl")]

def figures(xs):
    xs = sorted(xs)
    return {"mean": statistics.mean(xs), "median": statistics.median(xs), "min": xs[0],
            "max": xs[-1], "p5": xs[0], "p95": xs[-1],
            "stddev": statistics.stdev(xs) if len(xs) > 1 else 0.0}

def case(case_id, backend, comm, ranks, link, step, compute, comm_ms=None, runtime=None,
         mode="sync", absent=None, scaling="strong", batch=16, network="lenet",
         comm_time="from the first bucket's start to the last one's end"):
    r = copy.deepcopy(dist_template)
    r["case_id"] = case_id
    r["params"].update(network=network, backend=backend, comm=comm, ranks=ranks, batch=batch,
                       scaling=scaling, threads=1, interconnect=link)
    r["backend"]["name"] = backend
    r["network"]["name"] = network
    r["environment"]["libraries"] = {backend: backend + " 1.0"}
    r["environment"]["git_revision"] = "8d9dd34"
    r["timing"]["step"] = figures([step] * 3)
    r["timing"]["samples"]["step"] = [step] * 3
    d = r["distributed"]
    d.update(ranks=ranks, comm=comm, scaling=scaling,
             global_batch=batch * ranks if scaling == "weak" else batch,
             per_rank_batch=batch if scaling == "weak" else batch // ranks,
             compute=figures([compute] * 3))
    d.pop("vs_1_rank", None)
    if runtime:
        for k in ("comm_library", "overlap", "bucket_mb", "buckets", "allreduce_bytes_per_step",
                  "exposed_comm"):
            d.pop(k, None)
        d.update(runtime=runtime, mode=mode, runtime_library=runtime + " library")
        if absent:
            d["comm_time_absent"] = absent
        else:
            d["comm_time"] = comm_time
    if comm_ms is None:
        d.pop("allreduce", None)
        d["samples"] = {"compute": [compute] * 3}
    else:
        d["allreduce"] = figures([comm_ms] * 3)
        d["samples"] = {"compute": [compute] * 3, "allreduce": [comm_ms] * 3}
    if link != "loopback":
        r["interconnect"] = {"profile": link, "hosts": ranks}
    return r

def skipped(case_id, backend, comm, ranks, link, reason):
    r = case(case_id, backend, comm, ranks, link, 1.0, 1.0)
    for k in ("backend", "network", "resolved", "timing", "distributed", "loss", "memory",
              "interconnect"):
        r.pop(k, None)
    r.update(status="SKIPPED", reason=reason)
    return r

single = case("lenet.cpu_onednn.b16.t1", "cpu_onednn", "none", 1, "loopback", 7.0, 7.0)
del single["distributed"]
records = [
    single,
    case("lenet.mpi.ranks=1", "cpu_onednn", "mpi", 1, "loopback", 8.0, 7.0, comm_ms=0.5),
    case("lenet.mpi.ranks=2.10gbe", "cpu_onednn", "mpi", 2, "10gbe", 5.0, 3.5, comm_ms=2.0),
    case("lenet.mpi.ranks=2.1gbe", "cpu_onednn", "mpi", 2, "1gbe", 6.25, 3.5, comm_ms=4.0),
    case("lenet.ddp.ranks=2.1gbe", "cpu_libtorch2", "torch_ddp", 2, "1gbe", 12.5, 11.0,
         comm_ms=9.0, runtime="torch_ddp"),
    case("lenet.ddp.ranks=1", "cpu_libtorch2", "torch_ddp", 1, "loopback", 10.0, 9.8,
         comm_ms=0.2, runtime="torch_ddp"),
    case("lenet.ddp.ranks=2.10gbe", "cpu_libtorch2", "torch_ddp", 2, "10gbe", 7.5, 7.0,
         comm_ms=3.0, runtime="torch_ddp"),
    case("lenet.tf_ps.ranks=1", "cpu_tensorflow", "tf_ps", 1, "loopback", 20.0, 20.0,
         runtime="tf_ps", mode="async", absent="push and pull wait inside the session's run"),
    case("lenet.tf_ps.ranks=2.1gbe", "cpu_tensorflow", "tf_ps", 2, "1gbe", 12.5, 12.5,
         runtime="tf_ps", mode="async", absent="push and pull wait inside the session's run"),
    case("lenet.tf_ps_sync.ranks=1", "cpu_tensorflow", "tf_ps", 1, "loopback", 16.0, 10.0,
         comm_ms=6.0, runtime="tf_ps", comm_time="pull plus push and the wait for the token"),
    case("lenet.tf_ps_sync.ranks=2.1gbe", "cpu_tensorflow", "tf_ps", 2, "1gbe", 10.0, 6.0,
         comm_ms=4.0, runtime="tf_ps", comm_time="pull plus push and the wait for the token"),
    skipped("lenet.kvstore.ranks=2.10gbe", "cpu_mxnet", "mxnet_kvstore", 2, "10gbe",
            "comm 'mxnet_kvstore' is not installed here"),
    case("lenet.gloo.ranks=2.1gbe", "cpu_onednn", "gloo", 2, "1gbe", 7.0, 3.5, comm_ms=5.0),
    case("fcnr.mpi.weak.ranks=1", "cpu_onednn", "mpi", 1, "loopback", 100.0, 99.0, comm_ms=1.0,
         scaling="weak", network="fcnr", batch=8),
    case("fcnr.mpi.weak.ranks=2", "cpu_onednn", "mpi", 2, "10gbe", 125.0, 100.0, comm_ms=30.0,
         scaling="weak", network="fcnr", batch=8),
]
# The runner's own baseline for the torch_ddp cases was the mpi 1-rank case (comm is launch-only).
for r in records:
    if r["case_id"].startswith("lenet.ddp.ranks=2"):
        r["distributed"]["vs_1_rank"] = {"baseline_case": "lenet.mpi.ranks=1",
                                         "speedup": 8.0 / r["timing"]["step"]["median"],
                                         "efficiency": 4.0 / r["timing"]["step"]["median"]}
with open("distributed_tools.jsonl", "w") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
