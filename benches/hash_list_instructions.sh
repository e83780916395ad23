#!/usr/bin/env bash
# Instructions per request (valgrind's callgrind) of the hash_list_benchmark
# rows, for any number of servers: Rostrum builds and redis-server side by
# side. On a shared 2-core machine requests/s at -P 16 mostly measures the
# server's CPU per request, and instruction counts repeat within about 1%
# where requests/s move by 10-30%, so this is the steadier comparison.
#
# Usage: benches/hash_list_instructions.sh BIN [BIN...] [-n REQUESTS]
#   e.g. benches/hash_list_instructions.sh /usr/bin/redis-server target/release/rostrum
#   default -n 10000 (per row and pipeline depth). The last column is the
#   last binary's count over the first's.
#
# Each binary runs under callgrind on a free port (a redis-server binary is
# given --save ''), 100,000 10-field profiles and a list `recent` of 1,000
# are loaded, then redis-benchmark (-c 10, -r 100000, -P 1 and -P 16) sends
# each row; the counters are dumped before and after, so a row is the
# server's instructions for that row's requests alone, divided by their number.
set -euo pipefail
bins=()
requests=10000
while [[ $# -gt 0 ]]; do
    case "$1" in
        -n) requests=$2; shift 2 ;;
        -h) sed -n '2,18p' "$0"; exit 0 ;;
        *) bins+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done
[[ ${#bins[@]} -ge 1 ]] || { sed -n '2,18p' "$0"; exit 2; }
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

gen_profiles 0 100000 >"$work/profiles.resp"
gen_list recent 1000 >"$work/recent.resp"

tests=(
    "HSET (10-field profile)|HSET profile:__rand_int__ name p country SE avatar a level 7 xp 123 wins 4 losses 2 created 1700000000 seen 1750000000 visits 9"
    "HGET|HGET profile:__rand_int__ xp"
    "HGETALL (10 fields)|HGETALL profile:__rand_int__"
    "HINCRBY|HINCRBY profile:__rand_int__ visits 1"
    "LPUSH|LPUSH queue job:__rand_int__"
    "RPOP|RPOP queue"
    "LRANGE 0 99 (of 1,000)|LRANGE recent 0 99"
)

declare -A ir
for i in "${!bins[@]}"; do
    bin=${bins[$i]}
    callgrind_start "$bin" "$work/$i.log"
    echo "$bin: loading 100,000 profiles and a list of 1,000..." >&2
    redis-cli -p "$port" --pipe <"$work/profiles.resp" >/dev/null
    redis-cli -p "$port" --pipe <"$work/recent.resp" >/dev/null
    count_rows "$i"
    callgrind_stop
done

print_rows_table 30 "instructions per request"
