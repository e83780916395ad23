#!/usr/bin/env bash
# Two Rostrum builds compared by instructions per request (valgrind's
# callgrind), for changes that must not make the hot path slower. Unlike
# requests/s on a shared or virtual machine, which move by 10-30% between
# runs of a few hundred thousand requests, instruction counts repeat within
# about 1%, so a few percent of added work per command shows.
#
# Usage: benches/ab_instructions.sh BASE_BIN NEW_BIN [-n REQUESTS] [-f REGEX]
#   default -n 10000 (per command and pipeline depth; valgrind runs the
#   server about 50x slower); -f keeps the rows whose title matches REGEX
#   (e.g. -f '^(X|LB)' for the stream and leaderboard rows).
#
# Each binary runs under callgrind on a free port; a board of 100,000
# members, 100,000 10-field profiles (as in hash_list_benchmark.sh), a
# stream of 100,000 3-field events with a group whose consumer has 100
# pending (as in stream_benchmark.sh) and a leaderboard of 100,000 entries
# are loaded, then redis-benchmark (-c 10, -P 1 and -P 16) sends each
# command; the counters are dumped after each one, so a row is the
# server's instructions for that command's requests alone (including its
# reads, writes and waits), divided by their number.
#
# Either binary may be redis-server (its name says so): it then gets each
# LB row's Redis recipe (lb_benchmark.sh's, on a sorted set with packed
# scores) instead, so `ab_instructions.sh "$(command -v redis-server)"
# target/release/rostrum` gives Rostrum/Redis per row.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,27p' "$0"; exit 2; }
# -s: redis-server is a link to redis-check-rdb, and tells which it is
# by the name it was started under.
base_bin=$(realpath -s "$1")
new_bin=$(realpath -s "$2")
shift 2
requests=10000
filter=.
while getopts "n:f:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        f) filter=$OPTARG ;;
        *) sed -n '2,27p' "$0"; exit 2 ;;
    esac
done
# lib.sh: the Redis tools checked, `work`, `pids` (stopped on exit),
# `free_port` and `gen_profiles`; it takes the binary from ROSTRUM_BIN.
# callgrind_lib.sh: valgrind checked, the servers started under callgrind,
# the rows counted, and `gen_board`.
ROSTRUM_BIN=$base_bin
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

# RESP for 100,000 XADDs of 3-field events to `log`, ids 1-1, 1-2, ...
stream_log() {
    awk 'BEGIN {
        for (i = 1; i <= 100000; i++) {
            id = "1-" i; u = "u" (i % 100000); p = "post:" (i % 5000)
            printf "*9\r\n$4\r\nXADD\r\n$3\r\nlog\r\n$%d\r\n%s\r\n$4\r\nuser\r\n$%d\r\n%s\r\n", length(id), id, length(u), u
            printf "$4\r\npost\r\n$%d\r\n%s\r\n$4\r\nkind\r\n$4\r\nlike\r\n", length(p), p
        }
    }'
}

# The same 100,000 players as a leaderboard `lb` (Rostrum) or, for
# redis-server, the recipe's sorted set `rboard` with time packed into the
# score (lb_benchmark.sh's gen_board).
lb_board() {
    awk -v kind="$1" 'BEGIN {
        for (first = 0; first < 100000; first += 1000) {
            if (kind == "zset") printf "*2002\r\n$4\r\nZADD\r\n$6\r\nrboard\r\n"
            else printf "*3001\r\n$10\r\nLB.MSUBMIT\r\n"
            for (id = first; id < first + 1000; id++) {
                m = sprintf("m:%012d", id); s = (id * 7919) % 1000003
                t = 1700000000 + (id * 104729) % 50000000
                if (kind == "zset") {
                    v = sprintf("%.17g", s + (317242022400 - t) / 317242022400)
                    printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(v), v, length(m), m
                } else
                    printf "$2\r\nlb\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(m), m, length(s ""), s
            }
        }
    }'
}

acks=$(awk 'BEGIN { for (i = 1; i <= 100; i++) printf " 1-%d", i }')
# "title|command|the recipe on redis-server, where it differs"
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
    "XADD (3-field event)|XADD events * user u__rand_int__ post p__rand_int__ kind like"
    "XREADGROUP COUNT 100 (pending)|XREADGROUP GROUP g reader COUNT 100 STREAMS log 0"
    "XACK (100 ids)|XACK log acker$acks"
    "XRANGE COUNT 100|XRANGE log - + COUNT 100"
    "LB.SUBMIT|LB.SUBMIT lb m:__rand_int__ 1000001|ZADD rboard GT 1000001.99470705 m:__rand_int__"
    "LB.INCR|LB.INCR lb m:__rand_int__ 1|ZINCRBY rboard 1 m:__rand_int__"
    "LB.RANK|LB.RANK lb m:__rand_int__|ZREVRANK rboard m:__rand_int__"
    "LB.TOP 10|LB.TOP lb 10|ZREVRANGE rboard 0 9 WITHSCORES"
    "LB.TOP 100|LB.TOP lb 100|ZREVRANGE rboard 0 99 WITHSCORES"
)
kept=()
for t in "${tests[@]}"; do
    [[ ${t%%|*} =~ $filter ]] && kept+=("$t")
done
tests=("${kept[@]}")

declare -A ir
for which in base new; do
    bin=$base_bin
    [[ $which == new ]] && bin=$new_bin
    callgrind_start "$bin" "$work/$which.log"
    echo "$which: loading the board and 100,000 profiles..." >&2
    gen_board | redis-cli -p "$port" --pipe >/dev/null
    gen_profiles 0 100000 | redis-cli -p "$port" --pipe >/dev/null
    stream_log | redis-cli -p "$port" --pipe >/dev/null
    redis-cli -p "$port" XGROUP CREATE log g 0 >/dev/null
    redis-cli -p "$port" XREADGROUP GROUP g reader COUNT 100 STREAMS log '>' >/dev/null
    # XACK's group: its 100 pending entries are acknowledged by the first
    # call; later calls look each id up in an emptied pending list.
    redis-cli -p "$port" XGROUP CREATE log acker 0 >/dev/null
    redis-cli -p "$port" XREADGROUP GROUP acker a COUNT 100 STREAMS log '>' >/dev/null
    if ((is_redis)); then
        lb_board zset | redis-cli -p "$port" --pipe >/dev/null
    else
        lb_board lb | redis-cli -p "$port" --pipe >/dev/null
    fi
    count_rows "$which"
    callgrind_stop
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
