#!/bin/sh
# gpu_cudnn_e2e.sh — the gpu_cudnn backend end to end through the real executable, one mode per
# ctest:
#   no_device  (a machine without a usable GPU): `dlhost plugins` lists the plugin as not usable
#              with its reason, a suite's GPU case is SKIPPED with that same reason, and
#              `dlhost conform --backend gpu_cudnn` refuses naming it (exit 2). Exit 77 where a
#              GPU is present: then the other modes run instead.
#   conform    (GPU): `dlhost conform --backend gpu_cudnn` against cpu_reference passes.
#   train      (GPU): CNN, FCN, autoencoder, LSTM and the tiny Transformer networks (AdamW; fp32,
#              bf16, fp16) train a few steps on the device, every case OK and its loss lower at
#              the end than at the start (heuristic and exhaustive convolution algorithms both).
# Usage: gpu_cudnn_e2e.sh MODE DLHOST SOURCE_DIR WORK_DIR
set -eu
MODE="$1"
DLHOST="$2"
SRC="$3"
WORK="$4"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "gpu_cudnn_e2e $MODE: FAILED: $*"; exit 1; }

"$DLHOST" plugins --json > "$WORK/plugins.json"
reason=$(python3 - "$WORK/plugins.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["plugins"]:
    if p["name"] == "gpu_cudnn":
        print("" if p["usable"] else p["unusable_reason"])
        break
else:
    print("gpu_cudnn is not installed")
PY
)
[ "$reason" = "gpu_cudnn is not installed" ] && fail "$reason"

if [ "$MODE" = no_device ]; then
  if [ -z "$reason" ]; then
    echo "SKIPPED: a usable GPU is present, so the no-device path cannot be checked here"
    exit 77
  fi
  "$DLHOST" plugins > "$WORK/plugins.txt"
  grep -A1 "^gpu_cudnn " "$WORK/plugins.txt" | grep -qF "not usable here: $reason" ||
    fail "dlhost plugins does not show the reason: $reason"
  printf 'name: gpu_skip\ndefaults: {warmup: 1, iterations: 2}\ncases:\n  - {network: lenet, backend: gpu_cudnn, batch: 8}\n' \
    > "$WORK/suite.yaml"
  "$DLHOST" run "$WORK/suite.yaml" -o "$WORK/run.jsonl" > "$WORK/run.txt"
  python3 - "$WORK/run.jsonl" "$reason" <<'PY' || fail "the GPU case was not SKIPPED with the plugin's reason"
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert len(records) == 1, records
r = records[0]
print(r["case_id"], r["status"], r["reason"])
assert r["status"] == "SKIPPED" and sys.argv[2] in r["reason"], r
PY
  set +e
  "$DLHOST" conform --backend gpu_cudnn > "$WORK/conform.txt" 2>&1
  rc=$?
  set -e
  test $rc -eq 2 || fail "conform on an unusable backend exited $rc, expected 2"
  grep -qF "$reason" "$WORK/conform.txt" || fail "conform does not name the reason"
  echo "gpu_cudnn_e2e no_device: all checks passed ($reason)"
  exit 0
fi

if [ -n "$reason" ]; then
  echo "SKIPPED: no GPU here: $reason"
  exit 77
fi

case "$MODE" in
  conform)
    "$DLHOST" conform --backend gpu_cudnn --reference cpu_reference --json "$WORK/conform.json" \
      | tee "$WORK/conform.txt" || fail "conform reported failures"
    ;;
  train)
    cat > "$WORK/suite.yaml" <<'YAML'
name: gpu_train
defaults: {warmup: 2, iterations: 20, timeout: 600}
cases:
  - {network: lenet, backend: gpu_cudnn, batch: 64}
  - {network: lenet, backend: gpu_cudnn, batch: 32, options: {gpu_cudnn: {algo: exhaustive}}}
  - {network: autoencoder, backend: gpu_cudnn, batch: 100}
  - {network: fcnr, backend: gpu_cudnn, batch: 256}
  - {network: alexnet_r, backend: gpu_cudnn, batch: 128}
  - {network: resnet56, backend: gpu_cudnn, batch: 32}
  - {network: lstm_ptb, backend: gpu_cudnn, batch: 32}
  - {network: gpt2_tiny, backend: gpu_cudnn, batch: 8, precision: [fp32, bf16, fp16]}
  - {network: bert_tiny, backend: gpu_cudnn, batch: 8, precision: [fp32, bf16, fp16]}
YAML
    "$DLHOST" run "$WORK/suite.yaml" -o "$WORK/train.jsonl" | tee "$WORK/train.txt"
    python3 - "$WORK/train.jsonl" <<'PY' || fail "a case did not train"
import json, sys
ok = True
for line in open(sys.argv[1]):
    r = json.loads(line)
    loss = r.get("loss") or {}
    start, end = loss.get("warmup_first"), loss.get("last")
    good = r["status"] == "OK" and start is not None and end is not None and end < start
    print(f'{r["case_id"]}: {r["status"]} loss {start} -> {end} {"" if good else "FAILED"}')
    ok = ok and good
sys.exit(0 if ok else 1)
PY
    ;;
  *)
    fail "unknown mode $MODE"
    ;;
esac
echo "gpu_cudnn_e2e $MODE: all checks passed"
