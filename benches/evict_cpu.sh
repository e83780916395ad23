#!/usr/bin/env bash
# Server CPU time (utime + stime, from /proc) per SET of a new key that
# makes the server evict: redis-server and one or more Rostrum binaries,
# each with `maxmemory` MAXMEMORY and `maxmemory-policy allkeys-lru`,
# filled past the limit with 200-byte strings, then measured in turns so
# that machine load hits them alike (every turn sets keys of its own). Prints
# per depth the median of the runs in µs a request, each run's figure in
# brackets, every Rostrum's median over redis-server's, and the keys each
# server evicted a SET. The whole leaderboard load under the limit:
# benches/maxmemory_benchmark.sh; instructions: benches/evict_instructions.sh.
#
#   bash benches/evict_cpu.sh [-r RUNS] [-n REQUESTS] [-M MAXMEMORY] [-P "1 16"] [ROSTRUM_BIN ...]
#
# Defaults: 5 runs, 400000 requests (a quarter at -P 1), 64mb, -c 50,
# LOADGEN=light. With no binary, the release build of this checkout.
set -euo pipefail
runs=5
requests=400000
maxmemory=64mb
pipelines="1 16"
while getopts "r:n:M:P:" opt; do
    case $opt in
        r) runs=$OPTARG ;;
        n) requests=$OPTARG ;;
        M) maxmemory=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        *) sed -n '2,15p' "$0"; exit 2 ;;
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

names=(redis)
ports=()
spids=()
start_loaded redis "" redis-server
i=0
for b in "${bins[@]}"; do
    names+=("r$i:$(basename "$b")")
    start_loaded "r$i" "" "$(realpath "$b")" --loglevel warning
    i=$((i + 1))
done

# `measure` (lib.sh) reads these.
clients=50
rand_range=100000000
fill=$(printf 'x%.0s' $(seq 1 200))
for s in "${!ports[@]}"; do
    redis-cli -p "${ports[$s]}" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
    redis-cli -p "${ports[$s]}" CONFIG SET maxmemory "$maxmemory" >/dev/null
    echo "filling ${names[$s]} past $maxmemory..." >&2
    saved=$requests
    requests=400000
    measure "${ports[$s]}" 16 "SET fill:__rand_int__ $fill" "${spids[$s]}" >/dev/null
    requests=$saved
done

evicted() {
    redis-cli -p "$1" INFO stats | tr -d '\r' | awk -F: '$1 == "evicted_keys" { print $2 }'
}
declare -A us per
turn=0
for ((run = 0; run < runs; run++)); do
    for p in $pipelines; do
        turn=$((turn + 1))
        saved=$requests
        ((p == 1)) && requests=$((requests / 4))
        for s in "${!ports[@]}"; do
            e0=$(evicted "${ports[$s]}")
            r=$(measure "${ports[$s]}" "$p" "SET t$turn:__rand_int__:__rand_int__ $fill" "${spids[$s]}")
            e1=$(evicted "${ports[$s]}")
            us["$p|$s"]+="$(cut -f3 <<<"$r") "
            per["$p|$s"]+="$(awk -v a="$e0" -v b="$e1" -v n="$requests" 'BEGIN { printf "%.2f", (b - a) / n }') "
        done
        requests=$saved
    done
done

echo "server CPU µs per evicting SET, median of $runs ($loadgen_name -c $clients, maxmemory $maxmemory,"
echo "allkeys-lru; x = over redis; evicted keys a SET after the slash)"
printf "%-8s" "depth"
for nm in "${names[@]}"; do printf " %44s" "$nm"; done
echo
for p in $pipelines; do
    printf "%-8s" "-P $p"
    base=$(median <<<"${us["$p|0"]}")
    for s in "${!ports[@]}"; do
        m=$(median <<<"${us["$p|$s"]}")
        x=""
        ((s > 0)) && x=$(awk -v a="$m" -v b="$base" 'BEGIN { printf " %.2fx", a / b }')
        printf " %44s" "$m$x [${us["$p|$s"]% }] / $(median <<<"${per["$p|$s"]}")"
    done
    echo
done
