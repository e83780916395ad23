#!/usr/bin/env bash
# Live boards pushed over WebSockets against the polling recipe (issue 18):
# W watchers kept fresh about a board's top 10 while it takes R score
# changes a second.
#   push: Rostrum, W WebSockets on /ws/boards/live?n=10 (interval 100 ms)
#   poll: redis-server, W connections ZREVRANGE live 0 9 WITHSCORES every
#         100 ms (the same freshness bound)
# The client (benches/clients/live_ws.rs, built as an example) writes
# (LB.INCR / ZINCRBY on 1,000 members, plus a marker member bumped every
# 10 ms whose send times it keeps), counts what the watchers get, the delay
# from a marker's submit to the first push or poll reply showing it, and
# the server's CPU time (user + system, /proc) over the window.
#
#   benches/live_ws_benchmark.sh [-w WATCHERS] [-r WRITES_PER_S] [-s SECONDS] [-t CLIENT_THREADS]
#   (defaults: 10,000 watchers, 50,000 writes/s, 10 s, 1 client thread)
# Each server runs the writes alone first (no watchers), then with the
# watchers; the summary gives the poll / push ratio of server CPU, whole
# and of the watchers alone (row minus writes alone).
# The client must keep up for the rows to compare: the summary says when
# it did not (writes short of the rate, the window stretched, its 10 ms
# ticks late, or its CPU near its threads).
set -euo pipefail
cd "$(dirname "$0")/.."
W=10000; RATE=50000; SECS=10; THREADS=1
while getopts "w:r:s:t:" o; do
  case $o in w) W=$OPTARG;; r) RATE=$OPTARG;; s) SECS=$OPTARG;; t) THREADS=$OPTARG;; *) exit 2;; esac
done
ROSTRUM=${ROSTRUM:-target/release/rostrum}
[ -x "$ROSTRUM" ] || { echo "build $ROSTRUM first (cargo build --release)"; exit 1; }
# LIVE_WS=path: a client built already (else cargo builds the example).
if [ -n "${LIVE_WS:-}" ]; then
  CLIENT=$LIVE_WS
else
  cargo build --release --example live_ws -q
  CLIENT=target/release/examples/live_ws
fi
# Each watcher is a socket in the client and one in the server.
ulimit -n $((2 * W + 1000)) 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
echo "open files limit: $(ulimit -n) (needs about $((W + 100)) per process)"
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

RPORT=$((20000 + RANDOM % 10000)); HPORT=$((RPORT + 1)); PPORT=$((RPORT + 2))
# maxclients: Rostrum's and redis-server's default (10,000) counts the
# writers too.
"$ROSTRUM" --port "$RPORT" --config appendonly=no --config "http-port=$HPORT" \
  --config maxclients=$((W + 100)) >/dev/null 2>&1 &
rpid=$!; pids+=("$rpid")
redis-server --port "$PPORT" --save '' --appendonly no --maxclients $((W + 100)) >/dev/null 2>&1 &
ppid=$!; pids+=("$ppid")
# Up to 20 s for both to answer (a loaded machine starts them slowly).
for _ in $(seq 200); do
  redis-cli -p "$RPORT" ping >/dev/null 2>&1 && redis-cli -p "$PPORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done
echo "load before: $(uptime)"
echo "watchers: $W, writes: $RATE/s, window: ${SECS}s, client threads: $THREADS"
run() { # row client-mode port pid watchers [extra]
  local row=$1 mode=$2 port=$3 pid=$4 w=$5; shift 5
  "$CLIENT" "$mode" --port "$port" --pid "$pid" --watchers "$w" --rate "$RATE" \
    --secs "$SECS" --threads "$THREADS" "$@" | tee "$tmp/$row"
}
# The writes alone first (what the board costs without watchers), then
# with the watchers.
run push0 push "$RPORT" "$rpid" 0 --http "$HPORT"
run push push "$RPORT" "$rpid" "$W" --http "$HPORT"
run poll0 poll "$PPORT" "$ppid" 0
run poll poll "$PPORT" "$ppid" "$W"
echo "load after: $(uptime)"
field() { sed -n "s/.*[ ^]$2=\([^ ]*\).*/\1/p;s/^$2=\([^ ]*\).*/\1/p" "$tmp/$1" | head -1; }
per_s() { echo "$(field "$1" server_cpu_s) / $(field "$1" window_s)" | bc -l; }
printf "\n%-46s %10s %8s %8s %11s %10s %11s %7s\n" "row" "msgs/s" "p50 ms" "p99 ms" "server CPU" "writes/s" "client CPU" "lag ms"
for row in push0 push poll0 poll; do
  case $row in
    push0) name="Rostrum, writes alone";;
    push) name="push: Rostrum, $W WebSockets (100 ms)";;
    poll0) name="redis-server, writes alone";;
    poll) name="poll: redis-server, $W x ZREVRANGE/100ms";;
  esac
  printf "%-46s %10s %8s %8s %7.3f s/s %10s %7.2f s/s %7s\n" "$name" "$(field $row messages_per_s)" \
    "$(field $row delay_p50_ms)" "$(field $row delay_p99_ms)" "$(per_s $row)" \
    "$(field $row writes_per_s)" "$(echo "$(field $row client_cpu_s) / $(field $row window_s)" | bc -l)" \
    "$(field $row lag_p99_ms)"
done
pc=$(per_s push); qc=$(per_s poll); pc0=$(per_s push0); qc0=$(per_s poll0)
printf "\nserver CPU, poll / push: %.1fx (the issue asks for at least 10x)\n" \
  "$(echo "if ($pc > 0) $qc / $pc else 0" | bc -l)"
printf "server CPU of the watchers alone (row minus writes alone), poll / push: %.1fx\n" \
  "$(echo "d = $pc - $pc0; if (d > 0) ($qc - $qc0) / d else 0" | bc -l)"
for row in push0 push poll0 poll; do
  ok=$(echo "$(field $row writes_per_s) >= 0.9 * $RATE && $(field $row window_s) <= 1.2 * $SECS && $(field $row lag_p99_ms) <= 5 && $(field $row client_cpu_s) / $(field $row window_s) <= 0.9 * $THREADS" | bc -l)
  [ "$ok" = 1 ] || echo "WARNING: $row row: the client did not keep up (writes $(field $row writes_per_s)/s of $RATE, window $(field $row window_s) s of $SECS, tick lag p99 $(field $row lag_p99_ms) ms, client CPU $(field $row client_cpu_s) s): its figures are not comparable; fewer watchers, a quieter machine or -t"
done
printf "freshness (p99 delay from submit to the watcher): push %s ms, poll %s ms\n" \
  "$(field push delay_p99_ms)" "$(field poll delay_p99_ms)"
