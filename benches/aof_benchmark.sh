#!/usr/bin/env bash
# The AOF's cost, side by side: redis-server and a release Rostrum each load
# a board of MEMBERS members, then redis-benchmark runs ZINCRBY on it at
# -P 1 and -P 16 with the AOF off and with appendfsync no, everysec and
# always (same policy for both servers in each row). Then each server is
# restarted on the AOF it wrote and the start-up load rate is printed.
#
# Usage: benches/aof_benchmark.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS]
#   defaults: -m 1000000 -n 200000 -c 50
# Environment: ROSTRUM_BIN (a built binary), ROSTRUM_ARGS (extra server
# arguments), as in benches/lib.sh.
set -euo pipefail

members=1000000
requests=200000
clients=50
while getopts "m:n:c:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        *) sed -n '2,11p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

# Waits until the server on $1 answers PING with PONG (a loading server
# answers an error), at most 60 s.
wait_loaded() {
    for _ in $(seq 1 6000); do
        [[ "$(redis-cli -p "$1" ping 2>/dev/null)" == "PONG" ]] && return 0
        sleep 0.01
    done
    echo "server on port $1 did not start" >&2; exit 1
}

# The board, as ZADDs of 1,000 members (`m:<12-digit id>`, integer scores).
awk -v n="$members" '
    BEGIN {
        for (first = 0; first < n; first += 1000) {
            count = (n - first < 1000) ? n - first : 1000
            printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * count
            for (i = 0; i < count; i++) {
                id = first + i; s = (id * 7919) % 1000003; m = sprintf("m:%012d", id)
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }' > "$work/load"

# start NAME POLICY DIR -> sets $port; POLICY "off" runs without the AOF.
start() {
    local name=$1 policy=$2 dir=$3
    mkdir -p "$dir"
    port=$(free_port)
    local aof=(--appendonly no)
    [[ "$policy" != off ]] && aof=(--appendonly yes --appendfsync "$policy")
    if [[ "$name" == redis ]]; then
        redis-server --port "$port" --bind 127.0.0.1 --save '' --dir "$dir" \
            --aof-use-rdb-preamble no "${aof[@]}" >/dev/null 2>&1 &
    else
        "$rostrum_bin" --port "$port" --loglevel warning --dir "$dir" "${aof[@]}" "${rostrum_args[@]}" >/dev/null 2>&1 &
    fi
    pids+=($!)
    wait_loaded "$port"
}

stop() { redis-cli -p "$1" shutdown >/dev/null 2>&1 || true; sleep 0.5; }

rps() { # port pipeline
    redis-benchmark -p "$1" -c "$clients" -n "$requests" -r "$members" -P "$2" --csv \
        ZINCRBY board 1 m:__rand_int__ 2>/dev/null | tail -1 | awk -F'"' '{print $4}'
}

printf '%-22s %12s %12s %7s\n' "ZINCRBY, appendfsync" "redis rps" "rostrum rps" "ratio"
for policy in off no everysec always; do
    for p in 1 16; do
        declare -A r=()
        for name in redis rostrum; do
            dir="$work/$name-$policy-$p"
            start "$name" "$policy" "$dir"
            redis-cli -p "$port" --pipe < "$work/load" >/dev/null
            r[$name]=$(rps "$port" "$p")
            stop "$port"
            [[ "$policy-$p" == "always-16" ]] || rm -rf "$dir"
        done
        printf '%-22s %12.0f %12.0f %7.2f\n' "$policy -P $p" "${r[redis]}" "${r[rostrum]}" \
            "$(echo "${r[rostrum]} / ${r[redis]}" | bc -l)"
    done
done

# Start-up: each server restarted on the AOF it wrote in the last row.
echo
printf '%-10s %14s %10s %10s\n' "load" "AOF bytes" "seconds" "MB/s"
for name in redis rostrum; do
    dir="$work/$name-always-16"
    bytes=$(find "$dir" -type f -name '*.aof*' ! -name '*.manifest' -printf '%s\n' | awk '{s += $1} END {print s}')
    t0=$(date +%s.%N)
    start "$name" everysec "$dir"
    t1=$(date +%s.%N)
    stop "$port"
    secs=$(echo "$t1 - $t0" | bc -l)
    printf '%-10s %14d %10.2f %10.1f\n' "$name" "$bytes" "$secs" "$(echo "$bytes / $secs / 1000000" | bc -l)"
done
