#!/usr/bin/env bash
# What one lone command (-P 1) costs each server, per request: CPU time
# (user, system) of the whole process, context switches of its threads
# (voluntary, involuntary), and, with -s, system calls by kind (strace -c
# over a second, shorter run: strace slows the server, so its run is not
# timed). Counts stay meaningful on a loaded machine; CPU times less so
# (take medians of several runs).
#
# Usage: benches/p1_cost.sh [-n REQUESTS] [-c CLIENTS] [-r RUNS] [-s]
#   defaults: -n 200000 -c 50 -r 3; rows HGET of 10-field profiles, XADD of
#   a 3-field event, GET of a 3-byte value.
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS as for the other benches.
set -euo pipefail

requests=200000
clients=50
runs=3
strace_too=0
while getopts "n:c:r:sh" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        r) runs=$OPTARG ;;
        s) strace_too=1 ;;
        *) sed -n '2,12p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
start_both
gen_profiles 0 100000 >"$work/profiles.resp"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe <"$work/profiles.resp" >/dev/null
    redis-cli -p "$port" SET key:__rand_int__ abc >/dev/null
done

commands=(
    "HGET|HGET profile:__rand_int__ xp"
    "XADD|XADD events * user u__rand_int__ post p__rand_int__ kind like"
    "GET|GET key:__rand_int__"
)

# Sums over the process's threads: utime stime (ticks) voluntary
# involuntary switches.
snapshot() {
    local t
    for t in /proc/"$1"/task/*; do
        awk '{ printf "%d %d ", $14, $15 }' "$t/stat"
        awk '/^voluntary_ctxt_switches/ { v = $2 } /^nonvoluntary_ctxt_switches/ { n = $2 }
            END { print v, n }' "$t/status"
    done | awk '{ u += $1; s += $2; v += $3; n += $4 } END { print u, s, v, n }'
}

bench() {
    # XADD's `*` goes to redis-benchmark as is, not as a file glob.
    set -f
    # shellcheck disable=SC2086 # the command is split into its words
    redis-benchmark -p "$1" -n "$2" -c "$clients" -r 100000 -P 1 $3 >/dev/null 2>&1
    set +f
}

hz=$(getconf CLK_TCK)
printf '%-5s %-8s %8s %8s %8s %8s %8s\n' cmd server "user us" "sys us" "cpu us" "vol cs" "invol cs"
for entry in "${commands[@]}"; do
    title=${entry%%|*}
    command=${entry#*|}
    for side in redis rostrum; do
        port_var=${side}_port pid_var=${side}_pid
        for _ in $(seq 1 "$runs"); do
            read -r u0 s0 v0 n0 < <(snapshot "${!pid_var}")
            bench "${!port_var}" "$requests" "$command"
            read -r u1 s1 v1 n1 < <(snapshot "${!pid_var}")
            awk -v t="$title" -v side="$side" -v hz="$hz" -v n="$requests" \
                -v u="$((u1 - u0))" -v s="$((s1 - s0))" -v v="$((v1 - v0))" -v i="$((n1 - n0))" \
                'BEGIN { printf "%-5s %-8s %8.2f %8.2f %8.2f %8.4f %8.4f\n", t, side,
                    u * 1e6 / hz / n, s * 1e6 / hz / n, (u + s) * 1e6 / hz / n, v / n, i / n }'
        done
        if ((strace_too)); then
            sreq=$((requests / 10))
            strace -f -c -p "${!pid_var}" -o "$work/strace.out" &
            spid=$!
            sleep 1
            bench "${!port_var}" "$sreq" "$command"
            kill -INT "$spid"
            wait "$spid" 2>/dev/null || true
            echo "  syscalls per request ($title, $side, -n $sreq):"
            awk -v n="$sreq" '$1 ~ /^[0-9.]+$/ && NF >= 5 {
                name = $NF; calls = $4; printf "    %-16s %8.3f\n", name, calls / n }' "$work/strace.out" | sort -k2 -rn | head -12 || true
        fi
    done
done
