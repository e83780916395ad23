#!/usr/bin/env bash
# What one replica costs its primary per write, measured in ways a loaded
# machine does not blur: the primary's instructions per request (valgrind's
# callgrind, repeatable within about 1%) and its CPU time per request
# (user + system from /proc, without valgrind), with no replica and with
# one attached, for redis-server (a redis-server replica) and one or two
# Rostrum builds (a replica of the same build).
#
# Usage: benches/replication_cost.sh BIN [BIN2] [-n REQUESTS] [-N CPU_REQUESTS]
#   defaults: -n 10000 (per row under callgrind) -N 200000 (per CPU row)
# Each row: redis-benchmark -c 50 on a board of 100,000 members, ZADD and
# ZINCRBY, -P 1 and -P 16.
set -euo pipefail
[[ $# -ge 1 ]] || { sed -n '2,12p' "$0"; exit 2; }
bins=("$(realpath "$1")")
shift
if [[ $# -ge 1 && $1 != -* ]]; then
    bins+=("$(realpath "$1")")
    shift
fi
requests=10000
cpu_requests=200000
while getopts "n:N:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        N) cpu_requests=$OPTARG ;;
        *) sed -n '2,12p' "$0"; exit 2 ;;
    esac
done
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

gen_board >"$work/board"

tests=("ZADD|ZADD board __rand_int__ m:__rand_int__" "ZINCRBY|ZINCRBY board 1 m:__rand_int__")

# serve WRAP BIN DIR -> $port $pid: a server (BIN "redis" for redis-server),
# in memory, optionally under the command in WRAP.
serve() {
    local wrap=$1 bin=$2 dir=$3
    mkdir -p "$dir"
    port=$(free_port)
    local -a w=()
    [[ -n $wrap ]] && read -r -a w <<<"$wrap"
    if [[ $bin == redis ]]; then
        (cd "$dir" && exec "${w[@]}" redis-server --port "$port" --bind 127.0.0.1 --save '' \
            --appendonly no --repl-diskless-sync-delay 0) >"$dir/log" 2>&1 &
    else
        (cd "$dir" && exec "${w[@]}" "$bin" --port "$port" --bind 127.0.0.1 --save '' \
            --repl-diskless-sync-delay 0 --loglevel warning) >"$dir/log" 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 240); do
        [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]] && return 0
        sleep 0.25
    done
    echo "error: $bin did not start" >&2
    cat "$dir/log" >&2
    exit 1
}

repl_field() {
    redis-cli -p "$1" INFO replication | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

synced() {
    for _ in $(seq 1 2400); do
        if [[ "$(repl_field "$2" master_link_status)" == up &&
            "$(repl_field "$1" master_repl_offset)" == "$(repl_field "$2" slave_repl_offset)" ]]; then
            return 0
        fi
        sleep 0.05
    done
    echo "error: the replica did not catch up" >&2
    exit 1
}

bench() { # port pipeline n command...
    local port=$1 p=$2 n=$3
    shift 3
    redis-benchmark -p "$port" -c 50 -n "$n" -r 100000 -P "$p" --csv "$@" 2>/dev/null |
        tail -1 | awk -F'"' '{print $4}'
}

kinds=(redis "${bins[@]}")
declare -A ir cpu rate
k=0
for bin in "${kinds[@]}"; do
    k=$((k + 1))
    # Instructions: the primary under callgrind, the replica native.
    echo "  $bin: callgrind..." >&2
    serve "valgrind --tool=callgrind --callgrind-out-file=$work/cg.%p" "$bin" "$work/cg$k-p"
    primary=$port
    primary_pid=$pid
    redis-cli -p "$primary" --pipe <"$work/board" >/dev/null
    for n in 0 1; do
        if [[ $n == 1 ]]; then
            serve "" "$bin" "$work/cg$k-r"
            replica=$port
            redis-cli -p "$replica" REPLICAOF 127.0.0.1 "$primary" >/dev/null
            synced "$primary" "$replica"
        fi
        for p in 1 16; do
            for t in "${tests[@]}"; do
                read -r -a cmd <<<"${t#*|}"
                count_instructions "$primary_pid" bench "$primary" "$p" "$requests" "${cmd[@]}"
                ir[$k,$n,${t%%|*},$p]=$instructions
            done
        done
    done
    redis-cli -p "$replica" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    redis-cli -p "$primary" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$primary_pid" 2>/dev/null || true
    # CPU time per request, native.
    echo "  $bin: CPU time..." >&2
    serve "" "$bin" "$work/cpu$k-p"
    primary=$port
    primary_pid=$pid
    redis-cli -p "$primary" --pipe <"$work/board" >/dev/null
    for n in 0 1; do
        if [[ $n == 1 ]]; then
            serve "" "$bin" "$work/cpu$k-r"
            replica=$port
            replica_pid=$pid
            redis-cli -p "$replica" REPLICAOF 127.0.0.1 "$primary" >/dev/null
            synced "$primary" "$replica"
        fi
        for p in 1 16; do
            for t in "${tests[@]}"; do
                read -r -a cmd <<<"${t#*|}"
                c0=$(cpu_seconds "$primary_pid")
                r0=0
                [[ $n == 1 ]] && r0=$(cpu_seconds "$replica_pid")
                rate[$k,$n,${t%%|*},$p]=$(bench "$primary" "$p" "$cpu_requests" "${cmd[@]}")
                [[ $n == 1 ]] && synced "$primary" "$replica"
                c1=$(cpu_seconds "$primary_pid")
                r1=0
                [[ $n == 1 ]] && r1=$(cpu_seconds "$replica_pid")
                cpu[$k,$n,${t%%|*},$p]="$(echo "$c1 - $c0" | bc -l) $(echo "$r1 - $r0" | bc -l)"
            done
        done
    done
    redis-cli -p "$replica" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    redis-cli -p "$primary" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
done

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in $(seq 1 "${#kinds[@]}"); do
    echo
    echo "${kinds[$((k - 1))]}"
    printf '%-16s %10s %10s %6s %11s %11s %6s %10s %8s %8s\n' "" "instr/0" "instr/1" "1/0" \
        "cpu us/0" "cpu us/1" "1/0" "replica us" "rps/0" "rps/1"
    for t in "${tests[@]}"; do
        c=${t%%|*}
        for p in 1 16; do
            read -r a0 _ <<<"${cpu[$k,0,$c,$p]}"
            read -r a1 r1 <<<"${cpu[$k,1,$c,$p]}"
            awk -v t="$c -P $p" -v i0="${ir[$k,0,$c,$p]}" -v i1="${ir[$k,1,$c,$p]}" \
                -v q="$requests" -v Q="$cpu_requests" -v a0="$a0" -v a1="$a1" -v r1="$r1" \
                -v s0="${rate[$k,0,$c,$p]}" -v s1="${rate[$k,1,$c,$p]}" 'BEGIN {
                printf "%-16s %10.0f %10.0f %6.2f %11.2f %11.2f %6.2f %10.2f %8.0f %8.0f\n", t,
                    i0 / q, i1 / q, (i0 > 0 ? i1 / i0 : 0), a0 * 1e6 / Q, a1 * 1e6 / Q,
                    (a0 > 0 ? a1 / a0 : 0), r1 * 1e6 / Q, s0, s1 }'
        done
    done
done
echo "(instr: the primary's instructions per request under callgrind, -n $requests;"
echo " cpu us: its CPU time per request, replica us: the replica's, -n $cpu_requests;"
echo " /0: no replica, /1: one replica; rps: requests/s of the CPU runs, noisy)"
