#!/bin/sh
# transformers_e2e.sh — the tiny Transformers of suites/transformers.yaml through the dlhost
# executable (issue 33): gpt2_tiny and bert_tiny at 1 thread on cpu_reference, cpu_onednn (oneDNN
# 2.6) and each backend built here of cpu_onednn3 (oneDNN 3.2), cpu_libtorch (1.13, 2.x),
# cpu_tensorflow and cpu_mxnet, 8 AdamW steps each. Checks: every case OK; the loss falls (the last step below 90% of the first:
# the resident batch is learned); each backend's losses agree with the reference's step by step
# (same graph, weights, data and AdamW: only rounding may differ); the records validate against
# docs/results-schema.json (AdamW's optimizer block).
# Usage: transformers_e2e.sh DLHOST SOURCE_DIR WORK_DIR
set -eu
DLHOST="$1"; SRC="$2"; WORK="$3"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "transformers_e2e: FAILED: $*"; exit 1; }

cases=""
for net in gpt2_tiny bert_tiny; do
  for backend in cpu_reference cpu_libtorch cpu_libtorch2 cpu_onednn cpu_onednn3 cpu_tensorflow \
                 cpu_mxnet; do
    cases="$cases --case $net.$backend.b8.t1"
  done
done
# shellcheck disable=SC2086  # one word per --case and id
"$DLHOST" run "$SRC/suites/transformers.yaml" $cases --set warmup=0 --set iterations=8 \
  -o "$WORK/tiny.jsonl" > "$WORK/run.txt" 2> "$WORK/run.err" \
  || { cat "$WORK/run.txt"; tail -n 30 "$WORK/run.err"; fail "dlhost run"; }
cat "$WORK/run.txt"
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/tiny.jsonl" --cases 14 \
  || fail "results do not validate (docs/results-schema.json)"
/usr/bin/python3 - "$WORK/tiny.jsonl" <<'PY' || fail "records (above)"
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1])]
by = {(r["params"]["network"], r["params"]["backend"]): r for r in recs}
for net in ("gpt2_tiny", "bert_tiny"):
    ref = by[(net, "cpu_reference")]
    assert ref["status"] == "OK", (net, ref["status"], ref.get("reason"))
    ran = []
    for backend in ("cpu_reference", "cpu_onednn", "cpu_onednn3", "cpu_libtorch", "cpu_libtorch2",
                    "cpu_tensorflow", "cpu_mxnet"):
        r = by.get((net, backend))
        if r is None or (r["status"] == "SKIPPED" and "not installed" in (r.get("reason") or "")):
            continue  # that backend is not built here
        assert r["status"] == "OK", (net, backend, r["status"], r.get("reason"))
        losses = r["loss"]["values"]
        assert losses[-1] < 0.9 * losses[0], (net, backend, losses)
        for step, (a, b) in enumerate(zip(losses, ref["loss"]["values"])):
            assert abs(a - b) <= 1e-3 * abs(b), (net, backend, step, a, b)
        ran.append(f"{backend} {losses[0]:.3f} -> {losses[-1]:.3f}")
    assert any(b.startswith("cpu_onednn ") for b in ran), ran
    print(f"{net}: " + "; ".join(ran))
PY
echo "transformers_e2e: passed"
