#!/bin/sh
# link_projection.sh — issue 17's table: LeNet, FCN-R and ResNet-56 measured on 2 (and 4) ranks
# over loopback and over test hosts with emulated 10 GbE and 1 GbE links, each row beside
# `dlhost project`'s prediction from that link's own comm-bench fit (the in-place all-reduce the
# runner issues, measured over the same link on the same rank count). A measurement, not a test:
# root (test hosts), minutes. Per-rank batches are fixed (LeNet 64, FCN-R 256, ResNet-56 32), so
# one 1-rank profile serves every rank count.
#
# Usage: bench/link_projection.sh DLHOST OUT_DIR [RANKS]   (RANKS: "2" or "2 4", default "2 4")
#   ITERATIONS=N (default 5) timed steps per case.
# Writes OUT_DIR/results.jsonl, bench-LINK-N.json, project-LINK.{txt,json}, table.md.
set -eu
DLHOST="$1"; OUT="$2"; RANKS="${3:-2 4}"
ITERATIONS="${ITERATIONS:-5}"
mkdir -p "$OUT"
LINKS="loopback 10gbe 1gbe"
echo "load before: $(uptime)" | tee "$OUT/load.txt"

{
  echo "name: link_projection"
  echo "description: 1-rank profiles and multi-rank runs over loopback, 10gbe and 1gbe test hosts"
  echo "defaults: {backend: cpu_onednn, threads: 1, comm: mpi, warmup: 2, iterations: $ITERATIONS, timeout: 150}"
  echo "cases:"
  for nb in lenet:64 fcnr:256 resnet56:32; do
    echo "  - {network: ${nb%%:*}, batch: ${nb#*:}, ranks: 1, fused_step: off}"
  done
  # Every 2-rank row before the 4-rank ones (those oversubscribe the 2 cores).
  for n in $RANKS; do
    for nb in lenet:64 fcnr:256 resnet56:32; do
      net=${nb%%:*}; b=${nb#*:}
      for link in $LINKS; do
        over=""; [ "$n" -le 2 ] || over=", oversubscribe: true"
        echo "  - {network: $net, batch: $((b * n)), ranks: $n, interconnect: $link$over}"
      done
    done
  done
} > "$OUT/suite.yaml"
"$DLHOST" run "$OUT/suite.yaml" -o "$OUT/results.jsonl" > "$OUT/run.txt" 2>&1 ||
  echo "dlhost run exited with $? (see $OUT/run.txt)"

for link in $LINKS; do
  files=""
  for n in $RANKS; do
    "$DLHOST" comm-bench --comm mpi --baseline none --ops all_reduce --in-place -b 1M -e 32M \
      -f 2 -n 5 -w 2 --interconnect "$link" --ranks "$n" --timeout 150 \
      --json "$OUT/bench-$link-$n.json" \
      > "$OUT/bench-$link-$n.txt" 2>&1 || echo "comm-bench $link $n ranks exited with $?"
    files="$files --comm-bench $OUT/bench-$link-$n.json"
  done
  # shellcheck disable=SC2086
  "$DLHOST" project "$OUT/results.jsonl" $files --interconnect "$link" \
    --ranks "$(echo $RANKS | tr ' ' ,)" --compare "$OUT/results.jsonl" \
    --json "$OUT/project-$link.json" > "$OUT/project-$link.txt" 2>&1 ||
    echo "dlhost project $link exited with $? (see $OUT/project-$link.txt)"
done
echo "load after: $(uptime)" | tee -a "$OUT/load.txt"

/usr/bin/python3 - "$OUT" $LINKS > "$OUT/table.md" << 'PY'
import json, sys
out, links = sys.argv[1], sys.argv[2:]
recs = {r["case_id"]: r for r in map(json.loads, open(f"{out}/results.jsonl"))}
names = {"lenet": "LeNet", "fcnr": "FCN-R", "resnet56": "ResNet-56"}
print("| network (batch/rank) | link | ranks | measured step ms | compute ms | exposed comm ms "
      "| efficiency | projected step ms | error | projected from its compute, ms | error |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
rows = []
for link in links:
    try:
        proj = json.load(open(f"{out}/project-{link}.json"))
    except (OSError, ValueError):
        continue
    for c in proj.get("comparisons", []):
        m = recs[c["measured_case"]]
        d = m["distributed"]
        rows.append((c["network"], links.index(link), c["ranks"], c, d, link))
for net, _, n, c, d, link in sorted(rows, key=lambda r: (list(names).index(r[0]), r[2], r[1])):
    eff = c["measured_compute_ms"] / c["measured_step_ms"]
    print(f"| {names.get(net, net)} ({d['per_rank_batch']}) | {link} | {n}"
          f"{' (oversubscribed)' if c['oversubscribed'] else ''} | {c['measured_step_ms']:.1f} "
          f"| {c['measured_compute_ms']:.1f} | {c['measured_exposed_ms']:.1f} | {eff:.2f} "
          f"| {c['projected_step_ms']:.1f} | {c['error_percent']:+.1f}% "
          f"| {c['projected_step_ms_from_measured_compute']:.1f} "
          f"| {c['error_percent_from_measured_compute']:+.1f}% |")
for r in recs.values():
    if r["status"] != "OK":
        print(f"\n{r['case_id']}: {r['status']}: {r.get('reason', '')}")
PY
cat "$OUT/table.md"
