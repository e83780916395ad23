#!/usr/bin/env bash
# Two Rostrum builds compared by instructions per request (valgrind's
# callgrind), for changes that must not make the hot path slower. Unlike
# requests/s on a shared or virtual machine, which move by 10-30% between
# runs of a few hundred thousand requests, instruction counts repeat within
# about 1%, so a few percent of added work per command shows.
#
# Usage: benches/ab_instructions.sh BASE_BIN NEW_BIN [-n REQUESTS]
#   default -n 10000 (per command and pipeline depth; valgrind runs the
#   server about 50x slower)
#
# Each binary runs under callgrind on a free port; a board of 100,000
# members and 100,000 10-field profiles (as in hash_list_benchmark.sh) are
# loaded, then redis-benchmark (-c 10, -P 1 and -P 16) sends
# each command; the counters are dumped after each one, so a row is the
# server's instructions for that command's requests alone (including its
# reads, writes and waits), divided by their number.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,17p' "$0"; exit 2; }
base_bin=$(realpath "$1")
new_bin=$(realpath "$2")
shift 2
requests=10000
while getopts "n:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        *) sed -n '2,17p' "$0"; exit 2 ;;
    esac
done
for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not in PATH" >&2; exit 1; }
done
# lib.sh: the Redis tools checked, `work`, `pids` (stopped on exit),
# `free_port` and `gen_profiles`; it takes the binary from ROSTRUM_BIN.
ROSTRUM_BIN=$base_bin
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

# ZADDs of 100 members each, 100,000 members in all.
board() {
    awk 'BEGIN {
        for (k = 0; k < 1000; k++) {
            printf "*202\r\n$4\r\nZADD\r\n$5\r\nboard\r\n"
            for (i = 0; i < 100; i++) {
                id = k * 100 + i; m = sprintf("m:%012d", id); s = (id * 7919) % 1000003
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }'
}

tests=(
    "ZADD|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY|ZINCRBY board 1 m:__rand_int__"
    "ZSCORE|ZSCORE board m:__rand_int__"
    "ZREVRANK|ZREVRANK board m:__rand_int__"
    "ZREVRANGE 0 9 WITHSCORES|ZREVRANGE board 0 9 WITHSCORES"
    "ZREVRANGE 0 99 WITHSCORES|ZREVRANGE board 0 99 WITHSCORES"
    "SET|SET key:__rand_int__ xxx"
    "GET|GET key:__rand_int__"
    "INCR|INCR counter:__rand_int__"
    "HSET (10-field profile)|HSET profile:__rand_int__ name p country SE avatar a level 7 xp 123 wins 4 losses 2 created 1700000000 seen 1750000000 visits 9"
    "HGET|HGET profile:__rand_int__ xp"
    "HGETALL (10 fields)|HGETALL profile:__rand_int__"
    "HINCRBY|HINCRBY profile:__rand_int__ visits 1"
    "LPUSH|LPUSH queue job:__rand_int__"
    "RPOP|RPOP queue"
    "PING|PING"
)

# Instructions of the dump just written by process $1.
last_dump() {
    local f
    f=$(ls -t "$work"/cg."$1".* | head -1)
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

declare -A ir
for which in base new; do
    bin=$base_bin
    [[ $which == new ]] && bin=$new_bin
    port=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
        "$bin" --port "$port" --bind 127.0.0.1 --loglevel warning \
        >"$work/$which.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 120); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.5
    done
    echo "$which: loading the board and 100,000 profiles..." >&2
    board | redis-cli -p "$port" --pipe >/dev/null
    gen_profiles 0 100000 | redis-cli -p "$port" --pipe >/dev/null
    for p in 1 16; do
        for t in "${tests[@]}"; do
            title=${t%%|*}
            read -r -a cmd <<<"${t#*|}"
            callgrind_control -d before "$pid" >/dev/null 2>&1
            redis-benchmark -p "$port" -n "$requests" -c 10 -r 100000 -P "$p" "${cmd[@]}" >/dev/null
            callgrind_control -d after "$pid" >/dev/null 2>&1
            sleep 0.3
            ir["$which|$title -P $p"]=$(last_dump "$pid")
        done
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
done

printf '%-34s %12s %12s %7s\n' "instructions per request" base new "new/base"
for p in 1 16; do
    for t in "${tests[@]}"; do
        row="${t%%|*} -P $p"
        b=${ir["base|$row"]}
        n=${ir["new|$row"]}
        awk -v r="$row" -v b="$b" -v n="$n" -v q="$requests" \
            'BEGIN { printf "%-34s %12.0f %12.0f %7.3f\n", r, b / q, n / q, (b > 0 ? n / b : 0) }'
    done
done
