#!/usr/bin/env bash
# Streams: redis-server and a release Rostrum side by side, as a real-time
# board's event log uses them (scenario 3). One table prints requests/s for
# both, the ratio, p99 latency and each server's CPU time per request; then
# memory per entry of a stream of ENTRIES 3-field events (INFO used_memory
# and used_memory_rss, growth over the empty server).
#
# Usage: benches/stream_benchmark.sh [-m ENTRIES] [-n REQUESTS] [-c CLIENTS] [-P "1 16"]
#   defaults: -m 1000000 -n 200000 -c 50 -P "1 16"
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR (see benches/lib.sh).
#
# Rows: XADD of a 3-field event (`*` id); XREADGROUP COUNT 100 (a consumer
# re-reading its 100 pending entries, as a restarted consumer does: no new
# entries are needed per request, so the row runs at any -n); XACK of 100
# ids of a second group, `acker` (none pending after the first call: the
# cost of looking 100 ids up); XRANGE of 100 entries out of 100,000.
# redis-benchmark sends one command per request, so XREADGROUP and XACK
# are separate rows.
set -euo pipefail
entries=1000000
requests=200000
clients=50
pipelines="1 16"
while getopts "m:n:c:P:h" opt; do
    case "$opt" in
        m) entries=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        *) sed -n '2,18p' "$0"; exit 2 ;;
    esac
done
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# XADD's `*` goes to redis-benchmark as is, not as a file glob.
set -f
start_both

# RESP for $2 XADDs of 3-field events to stream $1, with ids 1-1, 1-2, ...
gen_events() {
    awk -v key="$1" -v n="$2" 'BEGIN {
        for (i = 1; i <= n; i++) {
            id = "1-" i; u = "u" (i % 100000); p = "post:" (i % 5000)
            printf "*9\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$4\r\nuser\r\n$%d\r\n%s\r\n", length(key), key, length(id), id, length(u), u
            printf "$4\r\npost\r\n$%d\r\n%s\r\n$4\r\nkind\r\n$4\r\nlike\r\n", length(p), p
        }
    }'
}

echo "loading a stream of 100000 events and a group with 100 pending into both..." >&2
gen_events log 100000 >"$work/log.resp"
acks=$(awk 'BEGIN { for (i = 1; i <= 100; i++) printf " 1-%d", i }')
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe <"$work/log.resp" >/dev/null
    redis-cli -p "$port" XGROUP CREATE log g 0 >/dev/null
    redis-cli -p "$port" XREADGROUP GROUP g reader COUNT 100 STREAMS log '>' >/dev/null
    # XACK's group: its 100 pending entries are acknowledged by the first
    # call; later calls look each id up in an emptied pending list.
    redis-cli -p "$port" XGROUP CREATE log acker 0 >/dev/null
    redis-cli -p "$port" XREADGROUP GROUP acker a COUNT 100 STREAMS log '>' >/dev/null
done
rm -f "$work/log.resp"

rand_range=100000
commands=(
    "XADD (3-field event)|XADD events * user u__rand_int__ post p__rand_int__ kind like"
    "XREADGROUP COUNT 100 (pending)|XREADGROUP GROUP g reader COUNT 100 STREAMS log 0"
    "XACK (100 ids)|XACK log acker$acks"
    "XRANGE COUNT 100|XRANGE log - + COUNT 100"
)
echo "redis-benchmark -n $requests -c $clients -r $rand_range" >&2
run_rows
print_rows

echo "measuring memory: a stream of $entries 3-field events..." >&2
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" FLUSHALL >/dev/null
done
gen_events mem "$entries" >"$work/mem.resp"
redis_entry=$(load_and_measure "$redis_port" "$work/mem.resp" "$entries")
rostrum_entry=$(load_and_measure "$rostrum_port" "$work/mem.resp" "$entries")
rm -f "$work/mem.resp"
for port in "$redis_port" "$rostrum_port"; do
    got=$(redis-cli -p "$port" XLEN mem)
    [[ "$got" == "$entries" ]] || { echo "error: port $port holds $got entries, not $entries" >&2; exit 1; }
done

printf '\nmemory (bytes; growth of INFO memory over the empty server)\n'
printf '%-34s %14s %14s\n' "" used_memory used_memory_rss
printf 'redis, per stream entry\t%s\nrostrum, per stream entry\t%s\n' "$redis_entry" "$rostrum_entry" |
    awk -F'\t' '{ printf "%-34s %14s %14s\n", $1, $2, $3 }'
