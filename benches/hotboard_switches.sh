#!/usr/bin/env bash
# One hot board at worker-threads 1 and 2, in counts a loaded machine does
# not move much (issue 20). For ZINCRBY on a board of BOARD members and
# ZADD on a growing board, at -P 1 and -P 16 (-c 50, redis-benchmark
# --threads 2), several short runs each, `perf stat -p` on the server gives
# per request: its CPU time (task-clock, all threads), context switches,
# futex calls (a worker waking or waiting for another: tokio's park /
# unpark, a parked lock) and sched_yield calls (a lock's spin giving way);
# prints every run, then the medians. redis-server runs the same rows the
# same way. Server and client share the machine's cores, as
# benches/zset_leaderboard.sh runs them.
#
# Usage: benches/hotboard_switches.sh [-w "1 2"] [-k RUNS] [-n REQUESTS]
#                                     [-m BOARD] [-x "redis rostrum"]
#   defaults: -w "1 2", -k 3 runs, -n 100000 at -P 1 (4x at -P 16),
#   -m 1000000 members
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS as for the other benches; several
# builds side by side: ROSTRUM_BINS="before=/path after=/path". Needs perf
# with the syscalls tracepoints (root, or perf_event_paranoid <= 1).
set -euo pipefail

workers="1 2"
runs=3
requests=100000
board=1000000
servers="redis rostrum"
while getopts "w:k:n:m:x:h" opt; do
    case "$opt" in
        w) workers=$OPTARG ;;
        k) runs=$OPTARG ;;
        n) requests=$OPTARG ;;
        m) board=$OPTARG ;;
        x) servers=$OPTARG ;;
        *) sed -n '2,21p' "$0"; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "error: perf is not in PATH" >&2; exit 1; }

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
bins=${ROSTRUM_BINS:-rostrum=$rostrum_bin}
events=task-clock,context-switches,syscalls:sys_enter_futex,syscalls:sys_enter_sched_yield

LOAD='local n=tonumber(ARGV[1]) local b=tonumber(ARGV[2]) local s=tonumber(ARGV[3])
for i=s,math.min(s+b-1,n) do redis.call("ZADD", KEYS[1], (i*7919)%10000000, string.format("m:%012d", i)) end return 0'

rows=(
    "ZINCRBY|1|ZINCRBY lb 1 m:__rand_int__"
    "ZINCRBY|16|ZINCRBY lb 1 m:__rand_int__"
    "ZADD|1|ZADD lb2 __rand_int__ m:__rand_int__"
    "ZADD|16|ZADD lb2 __rand_int__ m:__rand_int__"
)
header() {
    printf '%-24s %-13s %9s %8s %8s %8s %8s\n' server row rps cpu_us cs/req futex/req yield/req
}

results="$work/results"
: >"$results"
header
# measure_server LABEL PORT PID: loads the board, runs the rows.
measure_server() {
    local label=$1 port=$2 pid=$3 entry word rest p command n k st rps
    for ((st = 1; st <= board; st += 100000)); do
        redis-cli -p "$port" EVAL "$LOAD" 1 lb "$board" 100000 "$st" >/dev/null
    done
    for ((k = 0; k < runs; k++)); do
        for entry in "${rows[@]}"; do
            word=${entry%%|*}
            rest=${entry#*|}
            p=${rest%%|*}
            command=${rest#*|}
            n=$requests
            [[ $p -gt 1 ]] && n=$((requests * 4))
            # shellcheck disable=SC2086 # the command is split into its words
            perf stat -x, -e "$events" -p "$pid" -o "$work/perf.out" -- redis-benchmark \
                -p "$port" -c 50 -P "$p" -n "$n" -r "$board" --threads 2 --csv $command \
                >"$work/bench.out" 2>/dev/null
            rps=$(sed -n 2p "$work/bench.out" | cut -d, -f2 | tr -d '"')
            awk -F, -v l="$label" -v r="$word -P $p" -v n="$n" -v rps="${rps:-0}" '
                $3 == "task-clock" { cpu = $1 } $3 == "context-switches" { cs = $1 }
                $3 ~ /futex/ { fu = $1 } $3 ~ /sched_yield/ { y = $1 }
                END { printf "%-24s %-13s %9.0f %8.2f %8.4f %8.4f %8.4f\n", l, r, rps,
                      cpu * 1000 / n, cs / n, fu / n, y / n }' "$work/perf.out" |
                tee -a "$results"
        done
    done
}

for s in $servers; do
    case $s in
        redis)
            launch_ready redis "$work" "$work/redis.log" --save '' --appendonly no
            measure_server redis-7.0 "$redis_port" "$redis_pid"
            redis-cli -p "$redis_port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
            ;;
        rostrum)
            for b in $bins; do
                rostrum_bin=$(realpath "${b#*=}")
                for w in $workers; do
                    launch_ready rostrum "$work" "$work/rostrum.log" --worker-threads "$w"
                    measure_server "${b%%=*}:w=$w" "$rostrum_port" "$rostrum_pid"
                    redis-cli -p "$rostrum_port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
                done
            done
            ;;
    esac
done

echo
echo "medians of $runs runs:"
header
# Fields: label, row word, "-P", p, then rps, cpu, cs, futex, yield.
awk '{
    key = $1 SUBSEP $2 " -P " $4
    if (!(key in c)) order[++m] = key
    c[key]++
    for (j = 0; j < 5; j++) v[key, j, c[key]] = $(5 + j)
} END {
    for (o = 1; o <= m; o++) {
        key = order[o]; k = c[key]
        for (j = 0; j < 5; j++) {
            for (a = 1; a <= k; a++) x[a] = v[key, j, a]
            for (a = 1; a <= k; a++) for (b = a + 1; b <= k; b++) if (x[b] < x[a]) { t = x[a]; x[a] = x[b]; x[b] = t }
            med[j] = (k % 2) ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
        }
        split(key, kk, SUBSEP)
        printf "%-24s %-13s %9.0f %8.2f %8.4f %8.4f %8.4f\n", kk[1], kk[2], med[0], med[1], med[2], med[3], med[4]
    }
}' "$results"
