#!/usr/bin/env bash
# maxmemory benchmark: redis-server and a release Rostrum side by side,
# both with the same `maxmemory` and `maxmemory-policy allkeys-lru`, held
# at the limit: each gets a board of MEMBERS members, then random 200-byte
# strings until it evicts; then redis-benchmark runs the leaderboard rows
# (ZADD, ZINCRBY, ZREVRANK, ZREVRANGE 0 9) at every depth, then a SET of
# new keys at every depth, every one of which makes the server evict (and
# in the end evicts the board too). One table prints requests/s for both,
# the ratio, p99 latency and server CPU per request; then used_memory
# against the limit, evicted_keys and the board's size after its rows for
# each server.
#
# Usage: benches/maxmemory_benchmark.sh [-M MAXMEMORY] [-m MEMBERS]
#                                       [-n REQUESTS] [-c CLIENTS] [-P "1 16"]
#                                       [-R ROUNDS]
#   defaults: -M 64mb -m 100000 -n 200000 -c 50 -P "1 16" -R 1
#   -R: runs of each row, the servers taking turns; the table gives medians
#       (each round's SETs write keys of their own, so every round evicts)
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
rounds=1
while getopts "M:m:n:c:P:R:h" opt; do
    case "$opt" in
        M) maxmemory=$OPTARG ;;
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        R) rounds=$OPTARG ;;
        *) sed -n '2,24p' "$0"; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: -R wants a positive count" >&2; exit 2; }

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
)
# The board rows at every depth first: the evicting SETs that follow
# push out every key they do not touch, the idle board included.
run_rows
all_rows=("${rows[@]}")
cards=()
for port in "$redis_port" "$rostrum_port"; do
    cards+=("$(redis-cli -p "$port" ZCARD board)")
done
# Each depth's and each round's SETs get keys of their own (`01a:...`,
# `16c:...`, as long as `new:...`): the client draws the same numbers on
# every run, so a later run's SETs would otherwise overwrite the keys an
# earlier one added, and evict almost nothing.
depths=$pipelines
for depth in $depths; do
    pipelines=$depth
    commands=("SET new key (evicts)|SET $(printf '%02d' "$depth")__round__:__rand_int__:__rand_int__ ____________________________________________________________________________________________________")
    run_rows
    all_rows+=("${rows[@]}")
done
rows=("${all_rows[@]}")
pipelines=$depths
print_rows

echo
i=0
for side in redis rostrum; do
    card=${cards[i]}
    i=$((i + 1))
    port_var="${side}_port"
    port=${!port_var}
    used=$(info_field "$port" used_memory)
    max=$(info_field "$port" maxmemory)
    evicted=$(redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" { print $2 }')
    awk -v s="$side" -v u="$used" -v m="$max" -v e="$evicted" -v c="$card" 'BEGIN {
        printf "%-8s used_memory %d = %.3f x maxmemory %d; evicted_keys %d; board %d members after its rows\n", s, u, u / m, m, e, c }'
done
