#!/usr/bin/env bash
# maxmemory benchmark: redis-server and a release Rostrum side by side,
# both with the same `maxmemory` and `maxmemory-policy allkeys-lru`, held
# at the limit: each gets a board of MEMBERS members, then random 200-byte
# strings until it evicts; then redis-benchmark runs the leaderboard rows
# (ZADD, ZINCRBY, ZREVRANK, ZREVRANGE 0 9) and a SET of new keys, every one
# of which makes the server evict. One table prints requests/s for both,
# the ratio, p99 latency and server CPU per request; then used_memory
# against the limit and evicted_keys for each server.
#
# Usage: benches/maxmemory_benchmark.sh [-M MAXMEMORY] [-m MEMBERS]
#                                       [-n REQUESTS] [-c CLIENTS] [-P "1 16"]
#   defaults: -M 64mb -m 100000 -n 200000 -c 50 -P "1 16"
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#   LOADGEN, LOADGEN_BIN  the rows' client (see benches/lib.sh)
#   SERVER_CPUS, CLIENT_CPUS  pin the servers and the rows' client to these
#                     cores (taskset lists; see benches/lib.sh)
#
# Both servers listen on free ports on 127.0.0.1 and are stopped on exit.
# Run it on an otherwise idle machine: the servers and the benchmark share
# the CPU.
set -euo pipefail

maxmemory=64mb
members=100000
requests=200000
clients=50
pipelines="1 16"
while getopts "M:m:n:c:P:h" opt; do
    case "$opt" in
        M) maxmemory=$OPTARG ;;
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        *) sed -n '2,21p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

start_both
rand_range=$members

# RESP for ZADDs of 1,000 members each into `board` ($1 members, ids in
# redis-benchmark's 12-digit __rand_int__ form).
gen_board() {
    awk -v n="$1" 'BEGIN {
        for (first = 0; first < n; first += 1000) {
            count = (n - first < 1000) ? n - first : 1000
            printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * count
            for (i = 0; i < count; i++) {
                id = first + i; s = (id * 7919) % 1000003
                m = sprintf("m:%012d", id)
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }'
}

echo "loading a board of $members members, then filling to maxmemory $maxmemory..." >&2
gen_board "$members" >"$work/board.resp"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
    redis-cli -p "$port" CONFIG SET maxmemory "$maxmemory" >/dev/null
    redis-cli -p "$port" --pipe <"$work/board.resp" >"$work/pipe.out" 2>&1 ||
        { echo "error: loading into port $port failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
    # Random strings until keys are evicted: the servers are at the limit.
    for _ in $(seq 1 50); do
        redis-benchmark -p "$port" -n 100000 -c 8 -P 32 -r 100000000 -d 200 \
            SET "fill:__rand_int__" __data__ >/dev/null 2>&1 || true
        evicted=$(redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" { print $2 }')
        [[ "${evicted:-0}" -gt 0 ]] && break
    done
    [[ "${evicted:-0}" -gt 0 ]] || { echo "error: port $port never evicted" >&2; exit 1; }
done
rm -f "$work/board.resp"

commands=(
    "ZADD board|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY board|ZINCRBY board 7 m:__rand_int__"
    "ZREVRANK board|ZREVRANK board m:__rand_int__"
    "ZREVRANGE board 0 9|ZREVRANGE board 0 9 WITHSCORES"
    "SET new key (evicts)|SET new:__rand_int__:__rand_int__ ____________________________________________________________________________________________________"
)
# Each depth's SETs get keys of their own (`n01:...`, `n16:...`, as long
# as `new:...`): loadgen draws the same numbers on every run, so the
# second depth's SETs would otherwise overwrite the keys the first one
# added, and evict almost nothing.
depths=$pipelines
all_rows=()
for depth in $depths; do
    pipelines=$depth
    commands[4]=${commands[4]//new:/$(printf 'n%02d:' "$depth")}
    run_rows
    all_rows+=("${rows[@]}")
    commands[4]=${commands[4]//$(printf 'n%02d:' "$depth")/new:}
done
rows=("${all_rows[@]}")
pipelines=$depths
print_rows

echo
for side in redis rostrum; do
    port_var="${side}_port"
    port=${!port_var}
    used=$(info_field "$port" used_memory)
    max=$(info_field "$port" maxmemory)
    evicted=$(redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" { print $2 }')
    card=$(redis-cli -p "$port" ZCARD board)
    awk -v s="$side" -v u="$used" -v m="$max" -v e="$evicted" -v c="$card" 'BEGIN {
        printf "%-8s used_memory %d = %.3f x maxmemory %d; evicted_keys %d; board %d members\n", s, u, u / m, m, e, c }'
done
