#!/usr/bin/env bash
# Instructions per evicting SET (valgrind's callgrind): what one SET of a
# new key costs the server when it must evict to stay under `maxmemory`
# (allkeys-lru), for one or more binaries side by side (redis-server
# among them, by its name, to compare with Redis).
#
# Usage: benches/evict_instructions.sh BIN... [-n REQUESTS] [-P "16 1"]
#   default -n 4000 per pipeline depth (valgrind runs a server ~50x slower)
#
# Each binary runs under callgrind on a free port: 60,000 small strings
# (`fill:<n>`), then `maxmemory` 2 MB under what they use, then 3,000
# SETs of new keys with 100-byte values to reach the steady state, then
# the measured REQUESTS (redis-benchmark -c 10 -r 100000 -P depth SET
# new:__rand_int__:__rand_int__ <100 bytes>); the counters are dumped
# around them. A row: instructions per request (with and without the
# re-reads below) and evictions per request. Every instruction the server ran in that time
# counts, timers included: Rostrum's re-read of the allocator's statistics
# every 100 ms (~440,000 instructions) comes every few thousand requests
# under valgrind, every ~10,000 or more natively; "less re-reads" is the
# figure without it (jemalloc's `epoch_ctl`).
set -euo pipefail
bins=()
while [[ $# -gt 0 && $1 != -* ]]; do
    bins+=("$(realpath -s "$1")")
    shift
done
[[ ${#bins[@]} -ge 1 ]] || { sed -n '2,20p' "$0"; exit 2; }
requests=4000
pipelines="16 1"
while getopts "n:P:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
command -v callgrind_annotate >/dev/null || { echo "error: callgrind_annotate is not in PATH" >&2; exit 1; }
# lib.sh: the Redis tools checked, `work`, `pids` (stopped on exit) and
# `free_port`; it takes a binary from ROSTRUM_BIN (not used here).
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

value=$(printf '_%.0s' $(seq 1 100))
stat() {
    redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}

printf '%-20s %4s %12s %14s %10s\n' binary P "instr/req" "less re-reads" "evict/req"
for bin in "${bins[@]}"; do
    for p in $pipelines; do
        callgrind_start "$bin" "$work/server.log"
        redis-cli -p "$port" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
        redis-benchmark -p "$port" -n 60000 -c 8 -P 32 -r 100000000 \
            SET "fill:__rand_int__" x >/dev/null 2>&1
        used=$(stat "$port" memory used_memory)
        redis-cli -p "$port" CONFIG SET maxmemory $((used - 2000000)) >/dev/null
        redis-benchmark -p "$port" -n 3000 -c 10 -r 100000 -P "$p" \
            SET new:__rand_int__:__rand_int__ "$value" >/dev/null
        e0=$(stat "$port" stats evicted_keys)
        callgrind_control -d before "$pid" >/dev/null 2>&1
        redis-benchmark -p "$port" -n "$requests" -c 10 -r 100000 -P "$p" \
            SET new:__rand_int__:__rand_int__ "$value" >/dev/null
        callgrind_control -d after "$pid" >/dev/null 2>&1
        sleep 0.5
        e1=$(stat "$port" stats evicted_keys)
        f=$(ls -t "$work"/cg."$pid".* | head -1)
        ir=$(last_dump "$pid")
        reread=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null |
            awk '!seen && /:epoch_ctl / { gsub(",", "", $1); print $1; seen = 1 }')
        awk -v b="$(basename "$bin")" -v p="$p" -v ir="$ir" -v rr="${reread:-0}" \
            -v q="$requests" -v e=$((e1 - e0)) 'BEGIN {
            printf "%-20s %4d %12.0f %14.0f %10.2f\n", b, p, ir / q, (ir - rr) / q, e / q }'
        callgrind_stop
    done
done
