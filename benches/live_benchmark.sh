#!/usr/bin/env bash
# Live boards against the polling recipe (issue 18): W clients kept fresh
# within 100 ms about a board's top 10 while writers change it.
#   push: Rostrum, W connections LB.WATCH live 10 (INTERVAL 100 ms)
#   poll: redis-server, W connections ZREVRANGE live 0 9 WITHSCORES every 100 ms
# Both take the same writes (redis-benchmark: LB.INCR / ZINCRBY on 1,000
# members). Reports, per row, the server's CPU time (user + system, from
# /proc) per second of the run, and the messages or replies the clients got.
#
#   benches/live_benchmark.sh [-w WATCHERS] [-s SECONDS] [-n WRITES]
#   ROSTRUM=target/release/rostrum (default) or target/debug/rostrum for a smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
W=1000; SECS=10; WRITES=200000
while getopts "w:s:n:" o; do
  case $o in w) W=$OPTARG;; s) SECS=$OPTARG;; n) WRITES=$OPTARG;; *) exit 2;; esac
done
ROSTRUM=${ROSTRUM:-target/release/rostrum}
[ -x "$ROSTRUM" ] || { echo "build $ROSTRUM first (cargo build --release)"; exit 1; }
ulimit -n $((W + 1000)) 2>/dev/null || true
tmp=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

run_row() { # name server-pid port mode write-cmd...
  local name=$1 pid=$2 port=$3 mode=$4; shift 4
  python3 benches/clients/live_watchers.py --port "$port" --mode "$mode" \
    --clients "$W" --secs "$SECS" > "$tmp/clients" &
  local cpid=$!
  sleep 1 # the clients connect
  local t0; t0=$(cpu_ticks "$pid")
  local s0; s0=$(date +%s.%N)
  # Writers for the rest of the window (redis-benchmark stops at -n).
  timeout $((SECS - 1)) redis-benchmark -p "$port" -c 4 -n "$WRITES" -r 1000 -q "$@" >/dev/null 2>&1 || true
  wait "$cpid"
  local t1; t1=$(cpu_ticks "$pid")
  local s1; s1=$(date +%s.%N)
  local cpu; cpu=$(echo "($t1 - $t0) / $hz" | bc -l)
  local wall; wall=$(echo "$s1 - $s0" | bc -l)
  printf "%-34s server CPU %.2f s in %.1f s (%.0f%% of a core); %s\n" \
    "$name" "$cpu" "$wall" "$(echo "100 * $cpu / $wall" | bc -l)" "$(cat "$tmp/clients")"
}

RPORT=$((20000 + RANDOM % 10000)); PPORT=$((RPORT + 1))
"$ROSTRUM" --port "$RPORT" --config appendonly=no >/dev/null 2>&1 &
rpid=$!
redis-server --port "$PPORT" --save '' --appendonly no >/dev/null 2>&1 &
ppid=$!
sleep 1
redis-cli -p "$RPORT" LB.CREATE live POLICY INCR >/dev/null
echo "watchers/pollers: $W, window ${SECS}s, writes up to $WRITES"
run_row "push: Rostrum LB.WATCH (100 ms)" "$rpid" "$RPORT" watch LB.INCR live m:__rand_int__ 1
run_row "poll: redis-server ZREVRANGE/100ms" "$ppid" "$PPORT" poll ZINCRBY live 1 m:__rand_int__
