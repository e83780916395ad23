#!/usr/bin/env bash
# Instructions per request (valgrind's callgrind) of ZADD and ZINCRBY of
# existing members of a 100k-member and a 1M-member sorted set, and of
# ZADD growing a set, for any number of servers (Rostrum builds and
# redis-server side by side). The CPU time of the same rows:
# benches/zadd_cpu.sh.
#
# Usage: benches/zadd_instructions.sh BIN [BIN...] [-n REQUESTS]
#   e.g. benches/zadd_instructions.sh /usr/bin/redis-server target/release/rostrum
#   default -n 5000 (per row and pipeline depth; -c 10, -r 100000, so the
#   1M set's rows touch its first 100k members). The last column is the
#   last binary's count over the first's.
set -euo pipefail
bins=()
requests=5000
while [[ $# -gt 0 ]]; do
    case "$1" in
        -n) requests=$2; shift 2 ;;
        -h) sed -n '2,12p' "$0"; exit 0 ;;
        *) bins+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done
[[ ${#bins[@]} -ge 1 ]] || { sed -n '2,12p' "$0"; exit 2; }
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

gen_zset 100000 board >"$work/board"
gen_zset 1000000 big >"$work/big"

tests=(
    "ZADD 100k|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY 100k|ZINCRBY board 1 m:__rand_int__"
    "ZADD 1M|ZADD big __rand_int__ m:__rand_int__"
    "ZINCRBY 1M|ZINCRBY big 1 m:__rand_int__"
    "ZADD grow|ZADD grow __rand_int__ n:__rand_int__"
)

declare -A ir
for i in "${!bins[@]}"; do
    bin=${bins[$i]}
    callgrind_start "$bin" "$work/$i.log"
    echo "$bin: loading sets of 100k and 1M members..." >&2
    redis-cli -p "$port" --pipe <"$work/board" >/dev/null
    redis-cli -p "$port" --pipe <"$work/big" >/dev/null
    count_rows "$i"
    callgrind_stop
done

print_rows_table 22 "instructions/request"
