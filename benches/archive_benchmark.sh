#!/usr/bin/env bash
# ARCHIVE DISK (issue 17): memory and LB.RANK speed of a board whose
# closed periods are on disk.
#   1. RSS: a DAILY board with PERIODS closed periods of MEMBERS entries
#      each on DISK plus a current period of MEMBERS entries, against a
#      board holding only the current period (a second Rostrum): the ratio
#      must stay under 1.2. Periods are closed with LB.RESET (no waiting).
#   2. LB.RANK on a closed period (PERIOD -1, served from its file with a
#      warm page cache), one connection, no pipeline (redis-benchmark -c 1
#      -P 1, a random member `m:__rand_int__`); beside it LB.RANK on the
#      current period and ZREVRANK on redis-server's sorted set of the same
#      members, the recipe it replaces.
#
# Usage: benches/archive_benchmark.sh [-m MEMBERS] [-p PERIODS] [-n REQUESTS]
#   defaults: -m 1000000 -p 30 -n 100000
# Environment: ROSTRUM_BIN, CARGO_TARGET_DIR as in benches/lib.sh. The
# archive files (about 45 bytes an entry) go to a temporary folder.
set -euo pipefail

members=1000000
periods=30
requests=100000
while getopts "m:p:n:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        p) periods=$OPTARG ;;
        n) requests=$OPTARG ;;
        *) sed -n '2,18p' "$0"; exit 2 ;;
    esac
done
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
clients=1
rand_range=$members

# RESP for $members LB.SUBMIT (board $1) or ZADD (key $1) of m:<12 digits>.
gen() {
    awk -v n="$members" -v key="$1" -v cmd="$2" 'BEGIN {
        srand(7)
        for (i = 0; i < n; i++) {
            m = sprintf("m:%012d", i); s = int(rand() * 1000000)
            printf "*4\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(cmd), cmd, length(key), key
            if (cmd == "ZADD") printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            else printf "$%d\r\n%s\r\n$%d\r\n%d\r\n", length(m), m, length(s ""), s
        }
    }'
}

load() {
    redis-cli -p "$1" --pipe <"$2" >"$work/pipe.out" 2>&1 ||
        { echo "error: loading into port $1 failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
}

rss_kb() {
    awk '/^VmRSS/ { print $2 }' "/proc/$1/status"
}

start_both
gen b LB.SUBMIT >"$work/lb.resp"
gen z ZADD >"$work/zadd.resp"
load "$redis_port" "$work/zadd.resp"

# The board alone: a second Rostrum.
base_port=$(free_port)
mkdir -p "$work/base"
(cd "$work/base" && exec "$rostrum_bin" --port "$base_port" --bind 127.0.0.1 --loglevel warning \
    "${rostrum_args[@]}") >"$work/base.log" 2>&1 &
base_pid=$!
pids+=("$base_pid")
wait_ready "$base_port" "$base_pid" || { echo "error: rostrum did not start" >&2; exit 1; }
redis-cli -p "$base_port" LB.CREATE b RESET DAILY HISTORY "$periods" >/dev/null
load "$base_port" "$work/lb.resp"

cli() { redis-cli -p "$rostrum_port" "$@"; }
cli LB.CREATE b RESET DAILY HISTORY "$periods" ARCHIVE DISK >/dev/null
t0=$(date +%s.%N)
for p in $(seq 1 "$periods"); do
    load "$rostrum_port" "$work/lb.resp"
    cli LB.RESET b >/dev/null
    printf '\r  closed %d/%d periods' "$p" "$periods" >&2
done
t1=$(date +%s.%N)
echo >&2
load "$rostrum_port" "$work/lb.resp"
# Let the allocators give back what loading and writing left free.
cli MEMORY PURGE >/dev/null 2>&1 || true
redis-cli -p "$base_port" MEMORY PURGE >/dev/null 2>&1 || true
sleep 12
rss_all=$(rss_kb "$rostrum_pid")
rss_base=$(rss_kb "$base_pid")
disk_bytes=$(cli INFO leaderboards | tr -d '\r' | awk -F: '$1 == "lb_bytes_on_disk" { print $2 }')
on_disk=$(cli INFO leaderboards | tr -d '\r' | awk -F: '$1 == "lb_periods_on_disk" { print $2 }')

echo "ARCHIVE DISK: $periods closed periods + the current one, $members entries each"
awk -v a="$rss_all" -v b="$rss_base" -v d="$disk_bytes" -v n="$on_disk" -v m="$members" \
    -v t0="$t0" -v t1="$t1" -v p="$periods" 'BEGIN {
    printf "  RSS with the periods on disk   %8.1f MiB\n", a / 1024
    printf "  RSS of the current period only %8.1f MiB\n", b / 1024
    printf "  ratio                          %8.3f (must be < 1.2)\n", a / b
    printf "  on disk: %d periods, %.1f MiB, %.1f bytes an entry\n", n, d / 1048576, d / (n * m)
    printf "  load + close, per period: %.2f s (LB.SUBMIT of %d entries through --pipe, then the file written)\n", (t1 - t0) / p, m
}'

# Warm the page cache over every file of the period read, then measure.
cat "$work"/lb-archives/*.lba >/dev/null
measure "$rostrum_port" 1 "LB.RANK b m:__rand_int__ PERIOD -1" "$rostrum_pid" >/dev/null
echo "One connection, no pipeline, $requests requests (rps, p99 ms, server CPU us/request):"
printf '  LB.RANK PERIOD -1 (disk)   %s\n' "$(measure "$rostrum_port" 1 "LB.RANK b m:__rand_int__ PERIOD -1" "$rostrum_pid")"
printf '  LB.RANK current (memory)   %s\n' "$(measure "$rostrum_port" 1 "LB.RANK b m:__rand_int__" "$rostrum_pid")"
printf '  ZREVRANK (redis-server)    %s\n' "$(measure "$redis_port" 1 "ZREVRANK z m:__rand_int__" "$redis_pid")"
printf '  LB.TOP 10 PERIOD -1 (disk) %s\n' "$(measure "$rostrum_port" 1 "LB.TOP b 10 PERIOD -1" "$rostrum_pid")"
printf '  LB.SCORE PERIOD -1 (disk)  %s\n' "$(measure "$rostrum_port" 1 "LB.SCORE b m:__rand_int__ PERIOD -1" "$rostrum_pid")"
