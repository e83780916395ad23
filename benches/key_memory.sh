#!/usr/bin/env bash
# Memory per key of many small values, redis-server beside a release
# Rostrum: the keyspace's own cost shows here, since the values are small.
# Loads PROFILES 10-field hashes (the profiles of hash_list_benchmark.sh,
# whose memory part this is, without its throughput rows) and STRINGS short
# strings (`SET key:<12-digit id> <id>`, in database 1), and prints the
# growth of INFO used_memory and used_memory_rss over the empty server: per
# profile field (as hash_list_benchmark.sh does) and per string key.
#
# Usage: benches/key_memory.sh [-p PROFILES] [-s STRINGS]
#   defaults: -p 1000000 -s 1000000
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR (see benches/lib.sh).
set -euo pipefail
profiles=1000000
strings=1000000
while getopts "p:s:h" opt; do
    case "$opt" in
        p) profiles=$OPTARG ;;
        s) strings=$OPTARG ;;
        *) sed -n '2,12p' "$0"; exit 2 ;;
    esac
done
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
start_both

echo "measuring memory: $profiles profiles, $strings strings..." >&2
gen_profiles 0 "$profiles" >"$work/profiles.resp"
redis_hash=$(load_and_measure "$redis_port" "$work/profiles.resp" $((profiles * 10)))
rostrum_hash=$(load_and_measure "$rostrum_port" "$work/profiles.resp" $((profiles * 10)))
rm -f "$work/profiles.resp"
# Into database 1, beside the profiles: a FLUSHALL would leave Rostrum's
# emptied tables allocated, for the strings to reuse.
awk -v n="$strings" 'BEGIN {
    printf "*2\r\n$6\r\nSELECT\r\n$1\r\n1\r\n"
    for (id = 0; id < n; id++) {
        k = sprintf("key:%012d", id)
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%d\r\n", length(k), k, length(id ""), id
    }
}' >"$work/strings.resp"
redis_str=$(load_and_measure "$redis_port" "$work/strings.resp" "$strings")
rostrum_str=$(load_and_measure "$rostrum_port" "$work/strings.resp" "$strings")
rm -f "$work/strings.resp"
for port in "$redis_port" "$rostrum_port"; do
    got=$(redis-cli -p "$port" -n 1 DBSIZE)
    [[ "$got" == "$strings" ]] || { echo "error: port $port holds $got keys, not $strings" >&2; exit 1; }
done

printf '\nmemory (bytes; growth of INFO memory over the empty server)\n'
printf '%-34s %14s %14s\n' "" used_memory used_memory_rss
printf 'redis, per profile field\t%s\nrostrum, per profile field\t%s\nredis, per string key\t%s\nrostrum, per string key\t%s\n' \
    "$redis_hash" "$rostrum_hash" "$redis_str" "$rostrum_str" |
    awk -F'\t' '{ printf "%-34s %14s %14s\n", $1, $2, $3 }'
