#!/usr/bin/env bash
# Leaderboard benchmark: redis-server and a release Rostrum side by side.
# Each gets the same board of MEMBERS members (`m:<id>`, integer scores),
# then redis-benchmark runs the leaderboard commands against it at every
# pipeline depth; one table prints requests/s for both, the ratio, p99
# latency and each server's CPU time per request (which stays meaningful
# when redis-benchmark itself is the bottleneck), followed by memory per
# member (INFO used_memory and used_memory_rss, measured as the growth over
# the empty server) for the big board and for many small boards.
#
# Usage: benches/zset_leaderboard.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS]
#                                    [-P "1 16"] [-k SMALL_BOARDS]
#   defaults: -m 1000000 -n 200000 -c 50 -P "1 16" -k 10000
#   (-k 0 skips the small boards: 100 members each, in their own keys)
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#
# Member ids are written with 12 digits (`m:000000012345`), the form
# redis-benchmark's __rand_int__ takes, so the random ZSCORE / ZREVRANK /
# ZINCRBY requests hit existing members. Both servers listen on free ports
# on 127.0.0.1 and are stopped on exit. Run it on an otherwise idle machine:
# the servers and the benchmark share the CPU.
set -euo pipefail

members=1000000
requests=200000
clients=50
pipelines="1 16"
small_boards=10000
while getopts "m:n:c:P:k:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        k) small_boards=$OPTARG ;;
        *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

start_both

# Writes RESP for ZADDs of 1,000 members each: the board `board` of $1
# members (ids 0..$1-1, score = a scrambled id), or with $2 > 0, $2 boards
# `small:<i>` of 100 members each.
gen_load() {
    awk -v n="$1" -v boards="$2" '
        function zadd(key, first, count,    i, id, m, s) {
            printf "*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n", 2 + 2 * count, length(key), key
            for (i = 0; i < count; i++) {
                id = first + i
                s = (id * 7919) % 1000003
                m = sprintf("m:%012d", id)
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
        BEGIN {
            if (boards > 0) {
                for (b = 0; b < boards; b++) zadd("small:" b, 0, 100)
            } else {
                for (first = 0; first < n; first += 1000)
                    zadd("board", first, (n - first < 1000) ? n - first : 1000)
            }
        }'
}

echo "generating a board of $members members..." >&2
gen_load "$members" 0 >"$work/board.resp"
echo "loading redis-server (port $redis_port) and rostrum (port $rostrum_port)..." >&2
redis_mem=$(load_and_measure "$redis_port" "$work/board.resp" "$members")
rostrum_mem=$(load_and_measure "$rostrum_port" "$work/board.resp" "$members")
rm -f "$work/board.resp"
for port in "$redis_port" "$rostrum_port"; do
    got=$(redis-cli -p "$port" ZCARD board)
    [[ "$got" == "$members" ]] || { echo "error: port $port has $got members, not $members" >&2; exit 1; }
done

# The commands, as redis-benchmark runs them (`title|command`).
commands=(
    "ZADD|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY|ZINCRBY board 1 m:__rand_int__"
    "ZSCORE|ZSCORE board m:__rand_int__"
    "ZREVRANK|ZREVRANK board m:__rand_int__"
    "ZREVRANGE 0 9 WITHSCORES|ZREVRANGE board 0 9 WITHSCORES"
    "ZREVRANGE 0 99 WITHSCORES|ZREVRANGE board 0 99 WITHSCORES"
)

rand_range=$members
echo "redis-benchmark -n $requests -c $clients -r $members" >&2
run_rows
print_rows
printf '\nmemory per member, board of %s (bytes; growth of INFO memory over the empty server)\n' "$members"
printf '%-14s %14s %14s\n' server used_memory used_memory_rss
printf 'redis-server\t%s\nrostrum\t%s\n' "$redis_mem" "$rostrum_mem" |
    awk -F'\t' '{ printf "%-14s %14s %14s\n", $1, $2, $3 }'

if [[ "$small_boards" -gt 0 ]]; then
    total=$((small_boards * 100))
    echo "loading $small_boards boards of 100 members..." >&2
    gen_load 0 "$small_boards" >"$work/small.resp"
    redis-cli -p "$redis_port" FLUSHALL >/dev/null
    redis-cli -p "$rostrum_port" FLUSHALL >/dev/null
    redis_small=$(load_and_measure "$redis_port" "$work/small.resp" "$total")
    rostrum_small=$(load_and_measure "$rostrum_port" "$work/small.resp" "$total")
    printf '\nmemory per member, %s boards of 100 members (bytes)\n' "$small_boards"
    printf '%-14s %14s %14s\n' server used_memory used_memory_rss
    printf 'redis-server\t%s\nrostrum\t%s\n' "$redis_small" "$rostrum_small" |
        awk -F'\t' '{ printf "%-14s %14s %14s\n", $1, $2, $3 }'
fi
