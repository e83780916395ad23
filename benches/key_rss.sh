#!/usr/bin/env bash
# Resident memory per key of many small keys (issue 20), redis-server beside
# a release Rostrum: each set is loaded into a fresh pair of servers and the
# growth of the process's RSS (VmRSS, 2 s after the load) is divided by the
# keys loaded, with INFO used_memory's growth beside it.
#
#   str   2,000,000 `SET k:<n> v`
#   ttl   1,000,000 `SET t:<n> v EX 3600`
#   zset  1,000,000 `ZADD z:<n>` of 5 members (player1..5, scores 10..50)
#
# Usage: benches/key_rss.sh [-s "str ttl zset"]
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR (see benches/lib.sh).
# benches/mem_three_sets.sh measures the same sets with less ceremony.
set -euo pipefail
sets="str ttl zset"
while getopts "s:h" opt; do
    case "$opt" in
        s) sets=$OPTARG ;;
        *) sed -n '2,13p' "$0"; exit 2 ;;
    esac
done
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

gen() {
    case $1 in
        str) awk 'BEGIN { for (i = 0; i < 2000000; i++) { k = "k:" i
            printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", length(k), k } }' ;;
        ttl) awk 'BEGIN { for (i = 0; i < 1000000; i++) { k = "t:" i
            printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n$2\r\nEX\r\n$4\r\n3600\r\n", length(k), k } }' ;;
        zset) awk 'BEGIN { for (i = 0; i < 1000000; i++) { k = "z:" i
            printf "*12\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n", length(k), k
            for (j = 1; j <= 5; j++) { m = "player" j; s = j * 10
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s), s, length(m), m } } }' ;;
        *) echo "error: unknown set $1 (str, ttl or zset)" >&2; exit 2 ;;
    esac
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# Loads $3 into port $1 (process $2) and prints the RSS and used_memory
# growth per key ($4 keys), checking DBSIZE.
load_rss() {
    local port=$1 pid=$2 file=$3 n=$4 rss0 rss1 mem0 mem1 got
    rss0=$(rss_kb "$pid")
    mem0=$(info_field "$port" used_memory)
    redis-cli -p "$port" --pipe <"$file" >"$work/pipe.out" 2>&1 ||
        { echo "error: loading into port $port failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
    sleep 2
    rss1=$(rss_kb "$pid")
    mem1=$(info_field "$port" used_memory)
    got=$(redis-cli -p "$port" DBSIZE)
    [[ "$got" == "$n" ]] || { echo "error: port $port holds $got keys, not $n" >&2; exit 1; }
    awk -v a="$rss0" -v b="$rss1" -v c="$mem0" -v d="$mem1" -v n="$n" \
        'BEGIN { printf "%.1f\t%.1f\n", (b - a) * 1024 / n, (d - c) / n }'
}

rows=()
for set in $sets; do
    n=1000000
    [[ $set == str ]] && n=2000000
    echo "measuring $set: $n keys..." >&2
    gen "$set" >"$work/$set.resp"
    start_both
    redis=$(load_rss "$redis_port" "$redis_pid" "$work/$set.resp" "$n")
    rostrum=$(load_rss "$rostrum_port" "$rostrum_pid" "$work/$set.resp" "$n")
    kill "$redis_pid" "$rostrum_pid"
    wait "$redis_pid" "$rostrum_pid" 2>/dev/null || true
    rm -f "$work/$set.resp"
    rows+=("$set	$n	$redis	$rostrum")
done

printf '\nmemory per key (bytes; growth over the empty server)\n'
printf '%-6s %9s %11s %11s %7s %11s %11s\n' set keys "redis rss" "rostrum rss" ratio \
    "redis mem" "rostrum mem"
for row in "${rows[@]}"; do
    IFS=$'\t' read -r set n r_rss r_mem o_rss o_mem <<<"$row"
    awk -v s="$set" -v n="$n" -v rr="$r_rss" -v rm="$r_mem" -v orss="$o_rss" -v om="$o_mem" \
        'BEGIN { printf "%-6s %9d %11.1f %11.1f %6.2fx %11.1f %11.1f\n", s, n, rr, orss, orss / rr, rm, om }'
done
