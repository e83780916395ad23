#!/usr/bin/env bash
# Server CPU time (utime + stime, from /proc) per ZADD / ZINCRBY request on
# a sorted set, for redis-server and one or more Rostrum binaries started
# side by side and measured in turns, so machine load hits them alike:
# ZADD and ZINCRBY of existing members of a 100k-member set (`board`, as
# benches/replication_benchmark.sh builds it) and of a 1M-member one
# (`big`), and ZADD growing a set (`grow`, new members mostly), each at
# -P 1 and -P 16 (-c 50). Prints the median of the runs in µs a request.
#
#   bash benches/zadd_cpu.sh [-r RUNS] [-n REQUESTS] [ROSTRUM_BIN ...]
#
# With no binary, the release build of this checkout.
set -euo pipefail
runs=5
requests=200000
while getopts "r:n:" opt; do
    case $opt in
        r) runs=$OPTARG ;;
        n) requests=$OPTARG ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bins=("$@")
if ((${#bins[@]} > 0)); then
    ROSTRUM_BIN=${bins[0]}
    export ROSTRUM_BIN
fi
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
((${#bins[@]} > 0)) || bins=("$rostrum_bin")

gen_zset 100000 board >"$work/board"
gen_zset 1000000 big >"$work/big"

names=(redis)
ports=()
spids=()
start_loaded redis "$work/board $work/big" redis-server
i=0
for b in "${bins[@]}"; do
    names+=("r$i:$(basename "$b")")
    start_loaded "r$i" "$work/board $work/big" "$(realpath "$b")" --loglevel warning
    i=$((i + 1))
done

rows=(
    "ZADD 100k|-r 100000|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY 100k|-r 100000|ZINCRBY board 1 m:__rand_int__"
    "ZADD 1M|-r 1000000|ZADD big __rand_int__ m:__rand_int__"
    "ZINCRBY 1M|-r 1000000|ZINCRBY big 1 m:__rand_int__"
    "ZADD grow|-r 100000000|ZADD grow __rand_int__ n:__rand_int__"
)
declare -A us
for ((run = 0; run < runs; run++)); do
    for row in "${rows[@]}"; do
        IFS='|' read -r title range line <<<"$row"
        for p in 1 16; do
            n=$requests
            ((p == 1)) && n=$((requests / 2))
            for s in "${!ports[@]}"; do
                before=$(cpu_seconds "${spids[$s]}")
                # shellcheck disable=SC2086
                redis-benchmark -p "${ports[$s]}" -c 50 -n "$n" $range -P "$p" $line >/dev/null 2>&1
                after=$(cpu_seconds "${spids[$s]}")
                us["$title -P $p|$s"]+="$(awk -v a="$after" -v b="$before" -v n="$n" \
                    'BEGIN { printf "%.3f ", (a - b) * 1e6 / n }')"
            done
        done
    done
done
printf "%-18s" "µs/request (median of $runs)"
for nm in "${names[@]}"; do printf " %22s" "$nm"; done
echo
for row in "${rows[@]}"; do
    IFS='|' read -r title _ _ <<<"$row"
    for p in 1 16; do
        printf "%-18s" "$title -P $p"
        for s in "${!ports[@]}"; do
            printf " %22s" "$(median <<<"${us["$title -P $p|$s"]}") [${us["$title -P $p|$s"]% }]"
        done
        echo
    done
done
