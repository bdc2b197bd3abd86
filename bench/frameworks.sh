#!/bin/sh
# frameworks.sh — time per mini-batch of cpu_onednn and cpu_libtorch (dlhost's harness, the
# cases of suites/frameworks_cpu.yaml) and of the Debian PyTorch 1.13 peer (bench/peers/
# torch_peer.py, its own timer), alternating the three tools network by network for ROUNDS passes
# so that a busy phase of a shared machine does not fall on one tool. Every tool gets the same
# environment: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (they halve OpenBLAS's
# sgemm on the development machines; README.md, "Machine notes"), OMP/MKL/OPENBLAS_NUM_THREADS = THREADS, OMP_WAIT_POLICY=PASSIVE (a shared machine:
# bench/README.md). One JSON line per run in OUT; a summary of medians at the end.
# Usage: bench/frameworks.sh OUT THREADS ROUNDS NETWORK:BATCH...   (after scripts/build.sh)
set -eu
cd "$(dirname "$0")/.."
OUT="$1"; THREADS="$2"; ROUNDS="$3"; shift 3
: > "$OUT"
run_env() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$THREADS" \
    MKL_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_WAIT_POLICY=PASSIVE "$@"
}
dlhost_case() {  # network batch backend
  tmp="$(mktemp)"
  run_env build/host/dlhost run suites/frameworks_cpu.yaml --case "$1.$3.b$2.t$THREADS" \
    --set warmup=2 --set iterations=8 -o "$tmp" > /dev/null 2>&1 || true
  /usr/bin/python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print(json.dumps({"tool": sys.argv[2], "network": sys.argv[3], "status": r["status"], "median_ms": r["timing"]["step"]["median"] if r["status"] == "OK" else None, "loss": [r["loss"]["warmup_first"], r["loss"]["last"]] if r["status"] == "OK" else None, "load": open("/proc/loadavg").read().split()[0]}))' "$tmp" "$3" "$1" >> "$OUT"
  rm -f "$tmp"
}
peer_case() {  # network batch
  run_env /usr/bin/python3 bench/peers/torch_peer.py "$1" --batch "$2" --threads "$THREADS" \
    --warmup 2 --iterations 8 2>/dev/null | tail -n 1 | /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(json.dumps({"tool": "pt113", "network": sys.argv[1], "status": "OK", "median_ms": r["step_ms_median"], "load": open("/proc/loadavg").read().split()[0]}))' "$1" >> "$OUT"
}
round=0
while [ "$round" -lt "$ROUNDS" ]; do
  for spec in "$@"; do
    net="${spec%%:*}"; batch="${spec##*:}"
    # the order rotates with the round
    case $((round % 3)) in
      0) dlhost_case "$net" "$batch" cpu_onednn; dlhost_case "$net" "$batch" cpu_libtorch; peer_case "$net" "$batch" ;;
      1) dlhost_case "$net" "$batch" cpu_libtorch; peer_case "$net" "$batch"; dlhost_case "$net" "$batch" cpu_onednn ;;
      2) peer_case "$net" "$batch"; dlhost_case "$net" "$batch" cpu_onednn; dlhost_case "$net" "$batch" cpu_libtorch ;;
    esac
  done
  round=$((round + 1))
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
nets = list(dict.fromkeys(r["network"] for r in rows))
print(f"{'network':12} {'onednn':>9} {'libtorch':>9} {'pt113':>9} {'onednn/libtorch':>16} {'libtorch/pt113':>15}  runs")
for n in nets:
    med = {}
    for tool in ("cpu_onednn", "cpu_libtorch", "pt113"):
        v = [r["median_ms"] for r in rows if r["network"] == n and r["tool"] == tool and r["median_ms"]]
        med[tool] = (statistics.median(v), len(v)) if v else (float("nan"), 0)
    o, l, p = (med[t][0] for t in ("cpu_onednn", "cpu_libtorch", "pt113"))
    print(f"{n:12} {o:9.1f} {l:9.1f} {p:9.1f} {o / l:16.2f} {l / p:15.2f}  {med['cpu_onednn'][1]}/{med['cpu_libtorch'][1]}/{med['pt113'][1]}")
PY
