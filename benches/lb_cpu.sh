#!/usr/bin/env bash
# Server CPU time (utime + stime, from /proc) per LB.SUBMIT request on a
# board of MEMBERS entries, against the Redis recipe's ZADD GT with a packed
# score (benches/lb_benchmark.sh's first row), for redis-server and one or
# more Rostrum binaries started side by side and measured in turns, so
# machine load hits them alike. Each measurement submits a score above every
# earlier one (1000001 + its turn), so the random members it names move to
# the top of the board as in lb_benchmark.sh's first run, not only in the
# first turn. Prints the median of the runs in µs a request, each run's
# figure in brackets, and every Rostrum's median over redis-server's.
# The instructions of the same rows: benches/lb_instructions.sh.
#
#   bash benches/lb_cpu.sh [-r RUNS] [-n REQUESTS] [-m MEMBERS] [-P "1 16"] [ROSTRUM_BIN ...]
#
# Defaults: 5 runs, 200000 requests (half at -P 1), 1000000 members, -c 50,
# LOADGEN=light (set LOADGEN=redis-benchmark for redis-benchmark). With no
# binary, the release build of this checkout.
set -euo pipefail
runs=5
requests=200000
members=1000000
pipelines="1 16"
while getopts "r:n:m:P:" opt; do
    case $opt in
        r) runs=$OPTARG ;;
        n) requests=$OPTARG ;;
        m) members=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        *) sed -n '2,17p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
bins=("$@")
if ((${#bins[@]} > 0)); then
    ROSTRUM_BIN=${bins[0]}
    export ROSTRUM_BIN
fi
export LOADGEN=${LOADGEN:-light}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
((${#bins[@]} > 0)) || bins=("$rostrum_bin")

echo "generating a board of $members entries..." >&2
gen_lb_board "$members" zset >"$work/zset.resp"
gen_lb_board "$members" lb >"$work/lb.resp"

names=(redis)
ports=()
spids=()
echo "loading redis-server..." >&2
start_loaded redis "$work/zset.resp" redis-server
i=0
for b in "${bins[@]}"; do
    echo "loading $b..." >&2
    names+=("r$i:$(basename "$b")")
    start_loaded "r$i" "$work/lb.resp" "$(realpath "$b")" --loglevel warning
    i=$((i + 1))
done
rm -f "$work/zset.resp" "$work/lb.resp"

# `measure` (lib.sh) reads these.
clients=50
rand_range=$members
declare -A us
turn=0
for ((run = 0; run < runs; run++)); do
    for p in $pipelines; do
        score=$((1000001 + turn))
        turn=$((turn + 1))
        saved=$requests
        ((p == 1)) && requests=$((requests / 2))
        for s in "${!ports[@]}"; do
            if ((s == 0)); then
                line="ZADD board GT $score.99470705 m:__rand_int__"
            else
                line="LB.SUBMIT lb m:__rand_int__ $score"
            fi
            r=$(measure "${ports[$s]}" "$p" "$line" "${spids[$s]}")
            us["SUBMIT -P $p|$s"]+="$(cut -f3 <<<"$r") "
        done
        requests=$saved
    done
done

echo "server CPU µs per request, median of $runs ($loadgen_name -c $clients, board of $members;"
echo "redis: ZADD GT with a packed score, rostrum: LB.SUBMIT; x = over redis)"
printf "%-14s" "row"
for nm in "${names[@]}"; do printf " %34s" "$nm"; done
echo
for p in $pipelines; do
    row="SUBMIT -P $p"
    printf "%-14s" "$row"
    base=$(median <<<"${us["$row|0"]}")
    for s in "${!ports[@]}"; do
        m=$(median <<<"${us["$row|$s"]}")
        x=""
        ((s > 0)) && x=$(awk -v a="$m" -v b="$base" 'BEGIN { printf " %.2fx", a / b }')
        printf " %34s" "$m$x [${us["$row|$s"]% }]"
    done
    echo
done
