"""hosts_records.py — imported by the test-host e2e scripts (torch_ddp_hosts_e2e.sh,
tf_hosts_e2e.sh): the run's records by their first tag, a case's dumped final weights (also
tool_runtime_equiv.py's), and ctest's skip (exit 77, reason printed) where the test hosts could
not be made here."""
import json
import struct
import sys


def records(work):
    return {r["params"]["tags"][0]: r for r in map(json.loads, open(f"{work}/hosts.jsonl"))}


def weights(work, case):
    data = open(f"{work}/params/{case}.params", "rb").read()
    return struct.unpack(f"{len(data) // 4}f", data)


def all_ok_or_skip(recs):
    """Every record OK; exit 77 where a test-host case was SKIPPED for want of test hosts (the
    1-rank case "one" needs none). dlhost words every such reason "interconnect LINK: WHY"
    (isolate/case_process.cpp), WHY being what the probe met: no root, no ip/tc, no namespace, no
    veth pair (a chroot, as the fresh-machine check's, whose / is no mount point), no qdisc."""
    for tag, r in recs.items():
        if r["status"] == "SKIPPED" and r["reason"].startswith("interconnect ") and tag != "one":
            print(f"SKIPPED: {r['reason']}")
            sys.exit(77)
        assert r["status"] == "OK", (tag, r["status"], r["reason"], r.get("stderr_tail"))
