#!/bin/sh
# owned_loop_e2e.sh — ABI 1.5's DLHOST_EXT_STEP_LOOP from the host's side (issue 42), with no JVM:
# a backend whose tool owns its loop (the fixture owned_loop: cpu_reference whose run_steps drives
# the same calls itself) trains a case without a comm in one call, on resident inputs and with a
# fresh upload every step (the host's feed), and must give cpu_reference's losses exactly, with
# one step time per timed step by the backend's clock and the record saying so.
# Usage: owned_loop_e2e.sh DLHOST FIXTURE_PLUGIN_DIR WORK_DIR
set -eu
DLHOST="$1"; FIXTURES="$2"; WORK="$3"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "owned_loop_e2e: FAILED: $*"; exit 1; }

cat > "$WORK/owned.yaml" <<'YAML'
name: owned_loop_e2e
defaults: {network: lenet, batch: 8, warmup: 2, iterations: 4, threads: 1, timeout: 120}
cases:
  - {backend: cpu_reference, input: resident}
  - {backend: owned_loop, input: resident}
  - {backend: cpu_reference, input: upload}
  - {backend: owned_loop, input: upload}
YAML
"$DLHOST" --plugin-path "$FIXTURES" run "$WORK/owned.yaml" -o "$WORK/owned.jsonl" \
  > "$WORK/run.txt" 2>&1 || { cat "$WORK/run.txt"; fail "run of the suite"; }
/usr/bin/python3 - "$WORK/owned.jsonl" <<'PY' || fail "the owned loop's records"
import json, sys
recs = {(r["params"]["backend"], r["params"]["input"]): r for r in map(json.loads, open(sys.argv[1]))}
for inp in ("resident", "upload"):
    ref, own = recs[("cpu_reference", inp)], recs[("owned_loop", inp)]
    assert ref["status"] == own["status"] == "OK", (ref.get("reason"), own.get("reason"))
    assert ref["timing"]["timer"] == "host_clock", ref["timing"]["timer"]
    t = own["timing"]
    assert t["timer"] == "backend_clock", t["timer"]
    assert "fixture" in t["clock"], t["clock"]
    assert ("fed every step" in t["loop"]) == (inp == "upload"), t["loop"]
    assert len(t["samples"]["step"]) == 4 and all(s > 0 for s in t["samples"]["step"]), t["samples"]
    assert t["forward"]["median"] is None, t["forward"]  # the tool does not split the phases
    assert sum(t["samples"]["step"]) <= t["owned_loop_ms"], t
    # The same calls in the same order: the same losses, bit for bit.
    assert own["loss"]["values"] == ref["loss"]["values"], (own["loss"], ref["loss"])
    print(f"owned_loop, input {inp}: losses {own['loss']['values']} as cpu_reference's")
PY
echo "owned_loop_e2e: PASSED"
