#!/bin/sh
# link_tcp.sh — raw TCP goodput between two test hosts over an emulated link, made as dlhost's
# test hosts are (host/launch/test_hosts.cpp: two network namespaces, each its eth0 end of a veth
# pair on a bridge, tbf on both ends of each pair), to tell the link's own rate from what a
# comm's all-reduce makes of it. A measurement, not a test; root only; removes what it made.
#
# Usage: bench/link_tcp.sh [RATE [BURST [LATENCY [SECONDS]]]]
#   RATE     tbf rate (tc syntax, e.g. 1gbit, 10gbit) or "none" (unshaped); default 1gbit
#   BURST    tbf burst in bytes; default what test_hosts.cpp sets: max(64 KiB, 2 ms of the rate)
#   LATENCY  tbf latency (its queue limit, as time at the rate); default 100ms, as dlhost
#   SECONDS  each transfer's length; default 4
# Prints, receiver side: one stream h0 -> h1; two streams at once h0 -> h1 and h1 -> h0 (what a
# 2-rank exchange asks of the link); the qdiscs' counters; the link's GSO size and TCP buffers.
set -eu
RATE="${1:-1gbit}"; BURST="${2:-}"; LATENCY="${3:-100ms}"; SECONDS_EACH="${4:-4}"
PATH="$PATH:/usr/sbin:/sbin"
[ "$(id -u)" -eq 0 ] || { echo "link_tcp.sh: needs root (network namespaces)"; exit 77; }
P="dltcp$$"; SUBNET="10.214.$(($$ % 250))"
cleanup() {
  for i in 0 1; do ip netns delete "${P}h$i" 2> /dev/null || true; ip link delete "${P}v$i" 2> /dev/null || true; done
  ip link delete "${P}b" 2> /dev/null || true
}
trap cleanup EXIT INT TERM

bits_per_s() {  # tc rate text -> bit/s
  python3 -c 'import re,sys; m=re.fullmatch(r"([0-9.]+)([kmg]?)bit",sys.argv[1]); print(int(float(m[1])*{"":1,"k":1e3,"m":1e6,"g":1e9}[m[2]]))' "$1"
}
if [ "$RATE" != none ] && [ -z "$BURST" ]; then
  BURST=$(python3 -c "print(max(65536, round($(bits_per_s "$RATE") / 8 * 0.002)))")
fi
shape() {  # [netns args] dev
  [ "$RATE" = none ] && return 0
  tc "$@" root tbf rate "$RATE" burst "$BURST" latency "$LATENCY"
}

ip link add "${P}b" type bridge
ip addr add "$SUBNET.1/24" dev "${P}b"
ip link set "${P}b" up
for i in 0 1; do
  ip netns add "${P}h$i"
  ip link add "${P}v$i" type veth peer name eth0 netns "${P}h$i"
  ip link set "${P}v$i" master "${P}b" up
  ip -n "${P}h$i" addr add "$SUBNET.$((i + 2))/24" dev eth0
  ip -n "${P}h$i" link set eth0 up
  ip -n "${P}h$i" link set lo up
  shape -n "${P}h$i" qdisc add dev eth0
  shape qdisc add dev "${P}v$i"
done

cat > "/tmp/${P}.py" << 'PY'
# A TCP sink (recv PORT SECONDS_MAX) or source (send HOST PORT SECONDS); the sink prints goodput.
import socket, sys, time
if sys.argv[1] == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", int(sys.argv[2]))); s.listen(1); s.settimeout(float(sys.argv[3]))
    c, _ = s.accept(); n = 0; t0 = None
    while True:
        b = c.recv(1 << 20)
        if not b: break
        if t0 is None: t0 = time.monotonic()
        n += len(b)
    dt = time.monotonic() - t0
    print(f"{sys.argv[4]}: {n / 1e6:.1f} MB in {dt:.2f} s = {n * 8 / dt / 1e6:.0f} Mbit/s")
else:
    c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
    buf = b"\0" * (1 << 20); end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end: c.sendall(buf)
    c.close()
PY
run_pair() {  # from to port label: a source in h<from>, a sink in h<to>
  ip netns exec "${P}h$2" python3 "/tmp/${P}.py" recv "$3" 30 "$4" &
  sleep 0.3
  ip netns exec "${P}h$1" python3 "/tmp/${P}.py" send "$SUBNET.$(($2 + 2))" "$3" "$SECONDS_EACH"
}
echo "# link: tbf rate $RATE burst $BURST latency $LATENCY on both ends of each veth pair"
echo "# one stream"
run_pair 0 1 5001 "h0 -> h1"; wait
echo "# two streams at once"
run_pair 0 1 5002 "h0 -> h1" & run_pair 1 0 5003 "h1 -> h0"; wait
echo "# qdiscs after the run (h0 eth0, bridge end v1)"
tc -n "${P}h0" -s qdisc show dev eth0
tc -s qdisc show dev "${P}v1"
echo "# h0 eth0: $(ip -d -n "${P}h0" link show eth0 | grep -o 'gso_max_size [0-9]*\|gso_max_segs [0-9]*\|tso_max_size [0-9]*' | tr '\n' ' ')"
echo "# tcp_rmem $(cat /proc/sys/net/ipv4/tcp_rmem | tr '\t' ' '); tcp_wmem $(cat /proc/sys/net/ipv4/tcp_wmem | tr '\t' ' '); rmem_max $(cat /proc/sys/net/core/rmem_max); wmem_max $(cat /proc/sys/net/core/wmem_max)"
rm -f "/tmp/${P}.py"
