#!/usr/bin/env bash
# Syscalls per CONNECT tunnel of each node proxy in the gateway benchmark: runs a CONNECT-only
# `npm run bench:gateway` (one round) and attaches `strace -c -f` to every proxy process it starts
# (the gateways and proxy-chain), then prints each one's counts next to its accept4 count (one per
# tunnel; calls under 0.05 per tunnel are left out). strace slows the proxies severalfold: read
# the counts, not the throughput.
#   DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres bash loadtest/syscalls.sh
# BENCH_TARGETS (default full,bare) and BENCH_SECONDS (default 4) pass through to the bench.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v strace >/dev/null || { echo "needs strace (apt-get install strace)" >&2; exit 1; }
out=$(mktemp -d)
BENCH_TARGETS=${BENCH_TARGETS:-full,bare} BENCH_SCENARIOS=connect BENCH_ROUNDS=1 \
  BENCH_SECONDS=${BENCH_SECONDS:-4} npm run -s bench:gateway >"$out/bench.txt" 2>&1 &
bench=$!
descendants() { for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
attached=" "
while kill -0 "$bench" 2>/dev/null; do
  for pid in $(descendants "$bench"); do
    [[ $attached == *" $pid "* ]] && continue
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    case "$cmd" in
      *gateway/src/main.ts*) name="gateway ($(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^PROXYFLEET_GATEWAY_FEATURES=//p'))" ;;
      *bench-proxy-chain.ts*) name=proxy-chain ;;
      *) continue ;;
    esac
    attached+="$pid "
    echo "$name" >"$out/$pid.name"
    # (after its start-up: loading modules reads and stats hundreds of files)
    sleep 3
    strace -c -f -p "$pid" -o "$out/$pid.strace" 2>/dev/null &
  done
  sleep 0.5
done
kill $(jobs -p) 2>/dev/null
wait 2>/dev/null
for f in "$out"/*.strace; do
  pid=$(basename "$f" .strace)
  tunnels=$(awk '$NF == "accept4" { print $4 }' "$f")
  echo "== $(cat "$out/$pid.name"): ${tunnels:-0} tunnels accepted while traced; calls per tunnel:"
  awk -v n="${tunnels:-1}" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" && $4 / n >= 0.05 { printf "  %-12s %6.2f\n", $NF, $4 / n }' "$f"
done
rm -rf "$out"
