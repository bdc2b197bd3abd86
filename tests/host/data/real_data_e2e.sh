#!/bin/sh
# real_data_e2e.sh — real data end to end through the dlhost executable, on small learnable sets
# written by make_data in the real formats (MNIST idx gzip and plain, CIFAR-10 binary, PTB text):
# LeNet (MNIST) trains 2 epochs and its loss falls; the test accuracy is recorded (cpu_onednn and
# cpu_reference, through ABI 1.3's tensor read); AlexNet-R (CIFAR-10) and the LSTM (PTB) run with
# the data wait in the phase split and a test accuracy / perplexity; records validate against
# docs/results-schema.json. Then what goes wrong: a missing data directory and `data: real`
# without DLHOST_DATA are SKIPPED with the path; a corrupt CIFAR-10 file FAILS its case naming the
# file while the other case's result stays; a synthetic-only network on real data is refused at
# its FILE:LINE. Usage: real_data_e2e.sh DLHOST MAKE_DATA SOURCE_DIR WORK_DIR
set -eu
DLHOST="$1"; MAKE_DATA="$2"; SRC="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "real_data_e2e: FAILED: $*"; exit 1; }
D="$WORK/data"
"$MAKE_DATA" "$D" 2048 512 256 256 20000 || fail "make_data"

cat > "$WORK/real.yaml" << YAML
name: real_data_e2e
defaults: {warmup: 2, iterations: 6, threads: 2, data: $D, evaluate: true}
cases:
  - {network: lenet, backend: cpu_onednn, batch: 64, epochs: 2}
  - {network: lenet, backend: cpu_reference, batch: 64, iterations: 4}
  - {network: alexnet_r, backend: cpu_onednn, batch: 32}
  - {network: lstm_ptb, backend: cpu_onednn, batch: 16, options: {networks_paper: {steps: 8}}}
YAML
"$DLHOST" run "$WORK/real.yaml" -o "$WORK/real.jsonl" > "$WORK/real.txt" 2>&1 ||
  { cat "$WORK/real.txt"; fail "the real-data run"; }
grep -q "data wait .*test accuracy" "$WORK/real.txt" || fail "the console line lacks data wait / accuracy"
"$SRC/tests/e2e/validate_results.py" "$SRC/docs/results-schema.json" "$WORK/real.jsonl" --cases 4 ||
  fail "records do not validate"
python3 - "$WORK/real.jsonl" << 'PY' || fail "real-data records"
import json, math, sys
recs = {json.loads(l)["case_id"].split(".")[0] + "." + json.loads(l)["backend"]["name"]: json.loads(l)
        for l in open(sys.argv[1])}
for cid, r in recs.items():
    assert r["status"] == "OK", (cid, r["status"], r["reason"])
    t = r["timing"]
    assert t["input"] == "data" and len(t["samples"]["data"]) == t["iterations"], cid
    assert r["data"]["batches"] == t["iterations"] + r["params"]["warmup"], (cid, r["data"])
    e = r["evaluation"]
    assert e["status"] == "OK" and math.isfinite(e["mean_loss"]), (cid, e)
lenet = recs["lenet.cpu_onednn"]
v = lenet["loss"]["values"]
assert lenet["data"]["epochs"] == 2 and lenet["timing"]["iterations"] == 2 * 32 - 2, lenet["data"]
first, last = sum(v[:5]) / 5, sum(v[-5:]) / 5
assert last < 0.5 * first, ("LeNet's loss did not fall", first, last)
assert lenet["evaluation"]["accuracy"] > 0.5 and lenet["evaluation"]["samples"] == 512, lenet["evaluation"]
assert recs["lenet.cpu_reference"]["evaluation"]["accuracy"] >= 0, "cpu_reference gave no accuracy"
assert "accuracy" in recs["alexnet_r.cpu_onednn"]["evaluation"]
p = recs["lstm_ptb.cpu_onednn"]["evaluation"]["perplexity"]
assert 1 < p < 10001, p
print("real data: LeNet loss %.3f -> %.3f, test accuracy %.3f; LSTM perplexity %.0f"
      % (first, last, lenet["evaluation"]["accuracy"], p))
PY

# Data absent: SKIPPED with the path and the reason, at load time and in the record.
cat > "$WORK/absent.yaml" << YAML
name: absent
defaults: {warmup: 1, iterations: 1, threads: 1}
cases:
  - {network: lenet, backend: cpu_onednn, batch: 8, data: $WORK/nowhere}
  - {network: resnet56, backend: cpu_onednn, batch: 8, data: real}
YAML
env -u DLHOST_DATA "$DLHOST" run "$WORK/absent.yaml" -o "$WORK/absent.jsonl" > "$WORK/absent.txt" 2>&1 ||
  { cat "$WORK/absent.txt"; fail "a run with absent data must not fail"; }
grep -q "SKIPPED.*$WORK/nowhere: does not exist" "$WORK/absent.txt" || { cat "$WORK/absent.txt"; fail "missing directory not named"; }
grep -q "SKIPPED.*DLHOST_DATA" "$WORK/absent.txt" || { cat "$WORK/absent.txt"; fail "unset DLHOST_DATA not named"; }
mkdir -p "$WORK/half/cifar-10-batches-bin"
cp "$D"/cifar-10-batches-bin/data_batch_1.bin "$WORK/half/cifar-10-batches-bin/"
DLHOST_DATA="$WORK/half" "$DLHOST" validate "$WORK/absent.yaml" > "$WORK/half.txt" 2>&1 || true
DLHOST_DATA="$WORK/half" "$DLHOST" run "$WORK/absent.yaml" --dry-run > "$WORK/half.txt" 2>&1 ||
  fail "dry run with half a data set"
grep -q "data_batch_2.bin: missing" "$WORK/half.txt" || { cat "$WORK/half.txt"; fail "the missing file is not named"; }

# A corrupt file fails its case with the file named; the case before it keeps its result.
cp -r "$D" "$WORK/bad"
head -c 1000 "$D/cifar-10-batches-bin/data_batch_3.bin" > "$WORK/bad/cifar-10-batches-bin/data_batch_3.bin"
cat > "$WORK/corrupt.yaml" << YAML
name: corrupt
defaults: {warmup: 1, iterations: 2, threads: 1, data: $WORK/bad}
cases:
  - {network: lenet, backend: cpu_onednn, batch: 8}
  - {network: alexnet_r, backend: cpu_onednn, batch: 8}
YAML
"$DLHOST" run "$WORK/corrupt.yaml" -o "$WORK/corrupt.jsonl" > "$WORK/corrupt.txt" 2>&1 || true
grep -q "lenet.* OK " "$WORK/corrupt.txt" || { cat "$WORK/corrupt.txt"; fail "the good case was lost"; }
grep -q "alexnet_r.*FAILED.*data_batch_3.bin" "$WORK/corrupt.txt" ||
  { cat "$WORK/corrupt.txt"; fail "the corrupt file is not named in a FAILED case"; }

# A network without a real data set: one error at the case's line, exit 2.
printf 'name: mismatch\ncases:\n  - {network: fcn5, backend: cpu_onednn, data: %s}\n' "$D" > "$WORK/mismatch.yaml"
rc=0; "$DLHOST" validate "$WORK/mismatch.yaml" > "$WORK/mismatch.txt" 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { cat "$WORK/mismatch.txt"; fail "mismatch exit $rc, expected 2"; }
grep -q "mismatch.yaml:3:.*fcn5.*synthetic data only" "$WORK/mismatch.txt" ||
  { cat "$WORK/mismatch.txt"; fail "mismatch error lacks FILE:LINE or the reason"; }
echo "real_data_e2e: OK"
