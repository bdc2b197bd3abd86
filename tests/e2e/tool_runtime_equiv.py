#!/usr/bin/env python3
"""tool_runtime_equiv.py — the check shared by the tools' own runtimes' e2e tests
(torch_ddp_e2e.sh, tf_collective_e2e.sh): a synchronous runtime on 1 and 2 ranks (half the batch
each) trains like 1 rank on the whole batch without a comm, on fcnr and lenet (no batch norm): the
loss of every step and the final weights (DLHOST_DUMP_PARAMS_DIR) within a relative 1e-4. The
record names the runtime and its mode (sync) and carries the runtime's own communication time, one
per timed step; cpu_onednn with the runtime is SKIPPED naming both.
Usage: tool_runtime_equiv.py WORK_DIR RUNTIME BACKEND LIBRARY_WORD (WORK_DIR/equiv.jsonl, params/)."""
import json
import sys

import hosts_records

work, runtime, backend, library_word = sys.argv[1:5]
recs = [json.loads(l) for l in open(f"{work}/equiv.jsonl")]


def weights(case):
    return hosts_records.weights(work, case)


def find(net, comm, ranks, on=backend):
    (r,) = [r for r in recs if r["params"]["network"] == net and r["params"]["comm"] == comm
            and r["params"]["ranks"] == ranks and r["params"]["backend"] == on]
    return r


wrong = find("fcnr", runtime, 2, "cpu_onednn")
assert wrong["status"] == "SKIPPED", (wrong["status"], wrong["reason"])
assert runtime in wrong["reason"] and "cpu_onednn" in wrong["reason"] \
    and "does not own it" in wrong["reason"], wrong["reason"]
print(f"cpu_onednn + {runtime}: SKIPPED: {wrong['reason']}")
for net in ("fcnr", "lenet"):
    base = find(net, "none", 1)
    assert base["status"] == "OK", base["reason"]
    for ranks in (1, 2):
        r = find(net, runtime, ranks)
        assert r["status"] == "OK", (r["case_id"], r["reason"])
        d = r["distributed"]
        assert d["runtime"] == runtime and d["mode"] == "sync" and d["comm"] == runtime, d
        assert d["ranks"] == ranks and d["per_rank_batch"] * ranks == d["global_batch"], d
        assert library_word in d["runtime_library"], d
        # The runtime's own communication time, one per timed step, never a made-up zero.
        assert "comm_time" in d and \
            len(d["samples"]["allreduce"]) == len(r["timing"]["samples"]["step"]), d
        assert d["allreduce"]["median"] is not None and d["allreduce"]["min"] >= 0, d["allreduce"]
        a, b = r["loss"]["values"], base["loss"]["values"]
        assert len(a) == len(b) == 5, (a, b)
        loss_diff = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        w2, w1 = weights(r["case_id"]), weights(base["case_id"])
        assert len(w2) == len(w1) > 0
        w_diff = max(abs(x - y) for x, y in zip(w2, w1)) / max(abs(x) for x in w1)
        print(f"{net} {runtime} x{ranks}: losses within {loss_diff:.2e}, weights within "
              f"{w_diff:.2e} of 1 rank; step {r['timing']['step']['median']:.2f} ms"
              f" (1 rank without comm {base['timing']['step']['median']:.2f} ms),"
              f" comm {d['allreduce']['median']:.2f} ms")
        assert loss_diff < 1e-4, f"{net} x{ranks}: losses differ from 1 rank by {loss_diff:.2e}"
        assert w_diff < 1e-4, f"{net} x{ranks}: weights differ from 1 rank by {w_diff:.2e}"
