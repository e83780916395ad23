#!/usr/bin/env bash
# Replication's cost, side by side: a redis-server primary with 0, 1 and 2
# redis-server replicas, and a Rostrum primary with 0, 1 and 2 Rostrum
# replicas, in the same run. For each: the primary's ZINCRBY and ZADD
# throughput on a board of MEMBERS members at -P 1 and -P 16
# (redis-benchmark, or loadgen under LOADGEN=light), and the primary's
# CPU time per request (user + system); with replicas, the replication lag under the
# ZINCRBY -P 16 load (a probe writes a value on the primary and polls
# the first replica until it reads it: p50 / p99 over the run). Then the
# full-sync time of a board of SYNC members: a fresh replica's REPLICAOF
# until its link is up and its offset is its primary's.
#
# Usage: benches/replication_benchmark.sh [-m MEMBERS] [-n REQUESTS]
#        [-c CLIENTS] [-s SYNC] [-f]
#   defaults: -m 100000 -n 200000 -c 50 -s 10000000 (the issue's figure)
#   -f: the full-sync row only (no throughput or lag runs)
# Environment: ROSTRUM_BIN (a built binary), ROSTRUM_ARGS (extra server
# arguments), LOADGEN (redis-benchmark or light), as in benches/lib.sh.
# Needs python3 with redis-py (the probe).
set -euo pipefail

members=100000
requests=200000
clients=50
sync_members=10000000
sync_only=0
while getopts "m:n:c:s:fh" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        s) sync_members=$OPTARG ;;
        f) sync_only=1 ;;
        *) sed -n '2,19p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

# start KIND DIR -> sets $port and $pid; a server of KIND (redis or
# rostrum) in memory, with full syncs starting at once.
start() {
    local kind=$1 dir=$2
    mkdir -p "$dir"
    port=$(free_port)
    if [[ "$kind" == redis ]]; then
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --repl-diskless-sync-delay 0 --dir "$dir" --logfile "$dir/log" &
    else
        (cd "$dir" && exec "$rostrum_bin" --port "$port" --bind 127.0.0.1 --save '' \
            --repl-diskless-sync-delay 0 --loglevel warning "${rostrum_args[@]}") \
            >"$dir/log" 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    wait_ready "$port" "$pid" || { echo "error: $kind did not start" >&2; cat "$dir/log" >&2; exit 1; }
}

repl_field() {
    redis-cli -p "$1" INFO replication | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# Waits until the replica on $2 is up and at the offset of the primary on $1.
wait_synced() {
    local p=$1 r=$2
    for _ in $(seq 1 12000); do
        if [[ "$(repl_field "$r" master_link_status)" == up &&
            "$(repl_field "$p" master_repl_offset)" == "$(repl_field "$r" slave_repl_offset)" ]]; then
            return 0
        fi
        sleep 0.05
    done
    echo "error: replica on $r did not catch up with $p" >&2
    exit 1
}

# Prints "rps cpu": the rate of the command on port $1 at pipeline $2, and
# the CPU time (user + system) of process $3 per request in us.
rps() { # port pipeline pid command...
    local port=$1 p=$2 pid=$3 c0 c1
    shift 3
    c0=$(cpu_seconds "$pid")
    "${loadgen[@]}" -p "$port" -c "$clients" -n "$requests" -r "$members" -P "$p" --csv \
        "$@" 2>/dev/null | tail -1 | awk -F'"' '{printf "%s ", $4}'
    c1=$(cpu_seconds "$pid")
    awk -v a="$c0" -v b="$c1" -v n="$requests" 'BEGIN { printf "%.2f\n", (b - a) * 1e6 / n }'
}

# The lag probe: until $3 exists, SET a counter on the primary ($1) and
# poll the replica ($2) until it reads it; prints "p50 p99" in ms.
probe() {
    python3 - "$1" "$2" "$3" <<'EOF'
import os, sys, time, redis
p = redis.Redis(port=int(sys.argv[1])); r = redis.Redis(port=int(sys.argv[2]))
lags, i = [], 0
while not os.path.exists(sys.argv[3]) or len(lags) < 5:
    i += 1
    t = time.perf_counter()
    p.set("lag:probe", i)
    while r.get("lag:probe") != str(i).encode():
        pass
    lags.append((time.perf_counter() - t) * 1000)
    time.sleep(0.01)
lags.sort()
print("%.2f %.2f" % (lags[len(lags) // 2], lags[min(len(lags) - 1, int(len(lags) * 0.99))]))
EOF
}

gen_zset "$members" board >"$work/board"
declare -A rate cpu lag
kinds=(redis rostrum)
[[ $sync_only == 1 ]] && kinds=()
for kind in "${kinds[@]}"; do
    for n in 0 1 2; do
        echo "  $kind, $n replica(s)..." >&2
        start "$kind" "$work/$kind-$n-p"
        primary=$port
        primary_pid=$pid
        replicas=()
        for i in $(seq 1 "$n"); do
            start "$kind" "$work/$kind-$n-r$i"
            replicas+=("$port")
            redis-cli -p "$port" REPLICAOF 127.0.0.1 "$primary" >/dev/null
        done
        redis-cli -p "$primary" --pipe <"$work/board" >/dev/null
        for r in "${replicas[@]}"; do wait_synced "$primary" "$r"; done
        for p in 1 16; do
            if [[ $n -gt 0 && $p == 16 ]]; then
                rm -f "$work/stop"
                probe "$primary" "${replicas[0]}" "$work/stop" >"$work/lag" &
                probe_pid=$!
                pids+=("$probe_pid")
            fi
            read -r "rate[$kind,$n,ZINCRBY,$p]" "cpu[$kind,$n,ZINCRBY,$p]" \
                < <(rps "$primary" "$p" "$primary_pid" ZINCRBY board 1 m:__rand_int__)
            read -r "rate[$kind,$n,ZADD,$p]" "cpu[$kind,$n,ZADD,$p]" \
                < <(rps "$primary" "$p" "$primary_pid" ZADD board __rand_int__ m:__rand_int__)
            if [[ $n -gt 0 && $p == 16 ]]; then
                touch "$work/stop"
                wait "$probe_pid" || true
                lag[$kind,$n]=$(cat "$work/lag")
            fi
        done
        for r in "${replicas[@]}"; do wait_synced "$primary" "$r"; done
        for r in "${replicas[@]}" "$primary"; do redis-cli -p "$r" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
        sleep 0.3
    done
done

if [[ $sync_only == 0 ]]; then
printf '\n%-22s %11s %11s %7s %9s %9s %9s %9s\n' "primary, replicas" "redis rps" "rostrum rps" ratio \
    "redis/0" "rost./0" "redis us" "rost. us"
for cmd in ZINCRBY ZADD; do
    for p in 1 16; do
        for n in 0 1 2; do
            a=${rate[redis,$n,$cmd,$p]:-0}
            b=${rate[rostrum,$n,$cmd,$p]:-0}
            a0=${rate[redis,0,$cmd,$p]:-0}
            b0=${rate[rostrum,0,$cmd,$p]:-0}
            awk -v t="$cmd -P $p, $n" -v a="$a" -v b="$b" -v a0="$a0" -v b0="$b0" \
                -v ua="${cpu[redis,$n,$cmd,$p]:-0}" -v ub="${cpu[rostrum,$n,$cmd,$p]:-0}" 'BEGIN {
                printf "%-22s %11.0f %11.0f %7.2f %9.2f %9.2f %9.2f %9.2f\n", t, a, b,
                    (a > 0 ? b / a : 0), (a0 > 0 ? a / a0 : 0), (b0 > 0 ? b / b0 : 0), ua, ub }'
        done
    done
done
echo "(ratio: rostrum / redis; redis/0, rost./0: the rate over its own with no replica;"
echo " us: the primary's CPU time per request, user + system; client: $loadgen_name)"

printf '\n%-22s %16s %16s\n' "lag, -P 16 load" "redis p50/p99 ms" "rostrum p50/p99"
for n in 1 2; do
    printf '%-22s %16s %16s\n' "$n replica(s)" "${lag[redis,$n]// //}" "${lag[rostrum,$n]// //}"
done
fi

# Full sync of a board of $sync_members members.
gen_zset "$sync_members" board >"$work/big"
printf '\n%-22s %10s %10s\n' "full sync, $sync_members" "redis s" "rostrum s"
declare -A took
for kind in redis rostrum; do
    start "$kind" "$work/$kind-sync-p"
    primary=$port
    redis-cli -p "$primary" --pipe <"$work/big" >/dev/null
    start "$kind" "$work/$kind-sync-r"
    t0=$(date +%s.%N)
    redis-cli -p "$port" REPLICAOF 127.0.0.1 "$primary" >/dev/null
    wait_synced "$primary" "$port"
    t1=$(date +%s.%N)
    took[$kind]=$(echo "$t1 - $t0" | bc -l)
    for r in "$port" "$primary"; do redis-cli -p "$r" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; done
done
printf '%-22s %10.2f %10.2f\n' "REPLICAOF to in sync" "${took[redis]}" "${took[rostrum]}"
