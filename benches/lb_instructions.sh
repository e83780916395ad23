#!/usr/bin/env bash
# Instructions per request (valgrind's callgrind) of LB.SUBMIT on a board of
# MEMBERS entries and of the Redis recipe it replaces, ZADD GT with a packed
# score (benches/lb_benchmark.sh's first row and board), at -P 1 and -P 16,
# for any number of servers (Rostrum builds and redis-server side by side;
# a redis-server binary gets the recipe). Callgrind runs with its cache
# simulation (D1 and LL as on this machine) from after the board's load,
# so a second table gives the data reads and writes that miss the last
# level cache per request: on a big board most of a write's time.
# The CPU time of the same rows: benches/lb_cpu.sh.
#
# Usage: benches/lb_instructions.sh BIN [BIN...] [-n REQUESTS] [-m MEMBERS]
#   e.g. benches/lb_instructions.sh /usr/bin/redis-server target/release/rostrum
#   defaults -n 5000 (per row and pipeline depth; -c 10, members drawn from
#   the whole board), -m 1000000. The last column is the last binary's
#   count over the first's. Loading 1M entries under valgrind takes a few
#   minutes a server.
set -euo pipefail
bins=()
requests=5000
members=1000000
while [[ $# -gt 0 ]]; do
    case "$1" in
        -n) requests=$2; shift 2 ;;
        -m) members=$2; shift 2 ;;
        -h) sed -n '2,18p' "$0"; exit 0 ;;
        *) bins+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done
[[ ${#bins[@]} -ge 1 ]] || { sed -n '2,18p' "$0"; exit 2; }
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
export CALLGRIND_OPTS="--cache-sim=yes --instr-atstart=no ${CALLGRIND_OPTS:-}"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

echo "generating a board of $members entries..." >&2
gen_lb_board "$members" zset >"$work/zset.resp"
gen_lb_board "$members" lb >"$work/lb.resp"

tests=(
    "SUBMIT|LB.SUBMIT lb m:__rand_int__ 1000001|ZADD board GT 1000001.99470705 m:__rand_int__"
)
# count_rows (callgrind_lib.sh) reads it.
rand_range=$members

declare -A ir cnt
for i in "${!bins[@]}"; do
    bin=${bins[$i]}
    callgrind_start "$bin" "$work/$i.log"
    echo "$bin: loading the board..." >&2
    if ((is_redis)); then
        redis-cli -p "$port" --pipe <"$work/zset.resp" >/dev/null
    else
        redis-cli -p "$port" --pipe <"$work/lb.resp" >/dev/null
    fi
    callgrind_control -i on "$pid" >/dev/null 2>&1
    count_rows "$i"
    callgrind_stop
done

print_rows_table 22 "instructions/request"
# Events of a --cache-sim dump: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw;
# misses_table TITLE FIRST: the sum of events FIRST and FIRST + 1 (reads
# and writes) per request of each row.
misses_table() {
    local title=$1 first=$2 p t row i
    printf '\n%-22s' "$title"
    for i in "${!bins[@]}"; do printf ' %14s' "$(basename "${bins[$i]}")"; done
    printf '\n'
    for p in 1 16; do
        for t in "${tests[@]}"; do
            row="${t%%|*} -P $p"
            printf '%-22s' "$row"
            for i in "${!bins[@]}"; do
                awk -v c="${cnt["$i|$row"]}" -v q="$requests" -v f="$first" \
                    'BEGIN { split(c, e, " "); printf " %14.2f", (e[f] + e[f + 1]) / q }'
            done
            printf '\n'
        done
    done
}
misses_table "LL data misses/req" 8
misses_table "D1 data misses/req" 5
