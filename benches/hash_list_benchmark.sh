#!/usr/bin/env bash
# Hashes and lists: redis-server and a release Rostrum side by side, as a
# leaderboard app uses them beside its boards (player profiles of 10 fields,
# a queue, a recent-results list). One table prints requests/s for both, the
# ratio, p99 latency and each server's CPU time per request; then memory per
# field of PROFILES profiles and per element of a list of ELEMENTS elements
# (INFO used_memory and used_memory_rss, growth over the empty server).
#
# Usage: benches/hash_list_benchmark.sh [-p PROFILES] [-e ELEMENTS] [-n REQUESTS]
#                                       [-c CLIENTS] [-P "1 16"] [-R ROUNDS]
#   defaults: -p 1000000 -e 1000000 -n 200000 -c 50 -P "1 16" -R 1
#   -R: runs of each row, the servers taking turns; the table gives medians
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR, LOADGEN, LOADGEN_BIN,
# SERVER_CPUS and CLIENT_CPUS (pinning; see benches/lib.sh).
#
# Profiles are `profile:<12-digit id>` (redis-benchmark's __rand_int__ form)
# with fields name, country, avatar, level, xp, wins, losses, created, seen,
# visits; the throughput rows use 100,000 of them and a list `recent` of
# 1,000 elements for LRANGE 0 99.
set -euo pipefail
profiles=1000000
elements=1000000
requests=200000
clients=50
pipelines="1 16"
rounds=1
while getopts "p:e:n:c:P:R:h" opt; do
    case "$opt" in
        p) profiles=$OPTARG ;;
        e) elements=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        R) rounds=$OPTARG ;;
        *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: -R wants a positive count" >&2; exit 2; }
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
start_both

echo "loading 100000 profiles and a list of 1000 into both..." >&2
gen_profiles 0 100000 >"$work/profiles.resp"
gen_list recent 1000 >"$work/recent.resp"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe <"$work/profiles.resp" >/dev/null
    redis-cli -p "$port" --pipe <"$work/recent.resp" >/dev/null
done

rand_range=100000
commands=(
    "HSET (10-field profile)|HSET profile:__rand_int__ name p country SE avatar a level 7 xp 123 wins 4 losses 2 created 1700000000 seen 1750000000 visits 9"
    "HGET|HGET profile:__rand_int__ xp"
    "HGETALL (10 fields)|HGETALL profile:__rand_int__"
    "HINCRBY|HINCRBY profile:__rand_int__ visits 1"
    "LPUSH|LPUSH queue job:__rand_int__"
    "RPOP|RPOP queue"
    "LRANGE 0 99 (of 1,000)|LRANGE recent 0 99"
)
echo "redis-benchmark -n $requests -c $clients -r $rand_range" >&2
run_rows
print_rows

echo "measuring memory: $profiles profiles, a list of $elements..." >&2
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" FLUSHALL >/dev/null
done
gen_profiles 0 "$profiles" >"$work/profiles.resp"
redis_hash=$(load_and_measure "$redis_port" "$work/profiles.resp" $((profiles * 10)))
rostrum_hash=$(load_and_measure "$rostrum_port" "$work/profiles.resp" $((profiles * 10)))
rm -f "$work/profiles.resp"
gen_list biglist "$elements" >"$work/list.resp"
redis_list=$(load_and_measure "$redis_port" "$work/list.resp" "$elements")
rostrum_list=$(load_and_measure "$rostrum_port" "$work/list.resp" "$elements")
rm -f "$work/list.resp"
for port in "$redis_port" "$rostrum_port"; do
    got=$(redis-cli -p "$port" LLEN biglist)
    [[ "$got" == "$elements" ]] || { echo "error: port $port holds $got elements, not $elements" >&2; exit 1; }
done

printf '\nmemory (bytes; growth of INFO memory over the empty server)\n'
printf '%-34s %14s %14s\n' "" used_memory used_memory_rss
printf 'redis, per profile field\t%s\nrostrum, per profile field\t%s\nredis, per list element\t%s\nrostrum, per list element\t%s\n' \
    "$redis_hash" "$rostrum_hash" "$redis_list" "$rostrum_list" |
    awk -F'\t' '{ printf "%-34s %14s %14s\n", $1, $2, $3 }'
