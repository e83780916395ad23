#!/usr/bin/env bash
# The AOF's cost, side by side: redis-server and a release Rostrum each load
# a board of MEMBERS members, then redis-benchmark runs ZINCRBY on it at
# -P 1 and -P 16 with the AOF off and with appendfsync no, everysec and
# always (same policy for both servers in each row). Then each server is
# restarted on the AOF it wrote and the start-up load rate is printed.
#
# With -s, instead: scripts and transactions under `appendonly yes`
# (everysec), one EVAL of N ZADDs and one MULTI/EXEC of N queued ZADDs
# (redis-cli --pipe) for N = 10,000, 50,000, 100,000 and 200,000: the
# wall-clock seconds and the server's CPU seconds of each, redis-server and
# Rostrum side by side, and their ratio (Rostrum's time over Redis's; the
# effects are logged as one MULTI/EXEC block, in time linear in N).
#
# Usage: benches/aof_benchmark.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS] [-s]
#   defaults: -m 1000000 -n 200000 -c 50
# Environment: ROSTRUM_BIN (a built binary), ROSTRUM_ARGS (extra server
# arguments), as in benches/lib.sh.
set -euo pipefail

members=1000000
requests=200000
clients=50
scripts=no
while getopts "m:n:c:sh" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        s) scripts=yes ;;
        *) sed -n '2,18p' "$0"; exit 2 ;;
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
[[ "$scripts" == yes ]] || awk -v n="$members" '
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

# -s: one EVAL and one MULTI/EXEC of N writes each under the AOF.
if [[ "$scripts" == yes ]]; then
    # seconds_of CMD...: wall-clock seconds of a command.
    seconds_of() {
        local t0 t1
        t0=$(date +%s.%N)
        "$@" >/dev/null
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc -l
    }
    printf '%-24s %9s %9s %7s %11s %11s %7s\n' "appendonly yes" "redis s" "rostrum s" \
        "ratio" "redis cpu" "rostrum cpu" "ratio"
    for n in 10000 50000 100000 200000; do
        awk -v n="$n" 'BEGIN {
            printf "*1\r\n$5\r\nMULTI\r\n"
            for (i = 0; i < n; i++) {
                m = "m" i
                printf "*4\r\n$4\r\nZADD\r\n$5\r\nmulti\r\n$%d\r\n%d\r\n$%d\r\n%s\r\n",
                    length(i ""), i, length(m), m
            }
            printf "*1\r\n$4\r\nEXEC\r\n"
        }' > "$work/multi-$n"
        script="for i = 1, $n do redis.call('zadd', 'script', i, 'm' .. i) end return 1"
        for what in EVAL MULTI; do
            declare -A wall=() cpu=()
            for name in redis rostrum; do
                dir="$work/$name-$what-$n"
                start "$name" everysec "$dir"
                pid=${pids[-1]}
                c0=$(cpu_seconds "$pid")
                if [[ "$what" == EVAL ]]; then
                    wall[$name]=$(seconds_of redis-cli -p "$port" EVAL "$script" 0)
                else
                    wall[$name]=$(seconds_of redis-cli -p "$port" --pipe < "$work/multi-$n")
                fi
                cpu[$name]=$(echo "$(cpu_seconds "$pid") - $c0" | bc -l)
                stop "$port"
                rm -rf "$dir"
            done
            printf '%-24s %9.2f %9.2f %7.2f %11.2f %11.2f %7.2f\n' "$what of $n ZADD" \
                "${wall[redis]}" "${wall[rostrum]}" "$(echo "${wall[rostrum]} / ${wall[redis]}" | bc -l)" \
                "${cpu[redis]}" "${cpu[rostrum]}" \
                "$(echo "${cpu[rostrum]} / (${cpu[redis]} + 0.001)" | bc -l)"
        done
    done
    exit 0
fi

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
