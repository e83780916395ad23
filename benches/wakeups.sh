#!/usr/bin/env bash
# Counts, not times, of one pipelined row on both servers: redis-benchmark's
# context switches (each a wake-up of the client) and the server's
# involuntary ones (preempted, mostly right after a reply's write woke the
# client), per request. Counts stay meaningful on a loaded machine.
#
# Usage: benches/wakeups.sh [-n REQUESTS] [-P PIPELINE] [-c CLIENTS]
#   defaults: -n 400000 -P 16 -c 50; the row: HSET of 100,000 10-field
#   profiles (-r 100000), as in benches/hash_list_benchmark.sh.
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS as for the other benches; needs
# `perf`.
set -euo pipefail

requests=400000
pipeline=16
clients=50
while getopts "n:P:c:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        P) pipeline=$OPTARG ;;
        c) clients=$OPTARG ;;
        *) sed -n '2,11p' "$0"; exit 2 ;;
    esac
done
command -v perf >/dev/null || { echo "error: perf is not in PATH" >&2; exit 1; }

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
start_both
gen_profiles 0 100000 >"$work/profiles.resp"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe <"$work/profiles.resp" >/dev/null
done

# The thread that serves clients: Redis's main thread, Rostrum's worker.
serving_thread() {
    local t
    for t in /proc/"$1"/task/*; do
        case $(cat "$t/comm") in redis-server | tokio-rt-worker) echo "$t" ;; esac
    done | tail -1
}
involuntary() { awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$1/status"; }

# Prints "client switches/req<TAB>server involuntary switches/req".
count() {
    local port=$1 thread=$2 s0 s1 cs
    s0=$(involuntary "$thread")
    perf stat -x, -e context-switches -o "$work/perf.out" -- redis-benchmark -p "$port" \
        -n "$requests" -c "$clients" -P "$pipeline" -r 100000 HSET profile:__rand_int__ \
        name p country SE avatar a level 7 xp 123 wins 4 losses 2 created 1700000000 \
        seen 1750000000 visits 9 >/dev/null 2>&1
    s1=$(involuntary "$thread")
    cs=$(awk -F, '$3 == "context-switches" { print $1 }' "$work/perf.out")
    awk -v c="$cs" -v a="$s0" -v b="$s1" -v n="$requests" \
        'BEGIN { printf "%.4f\t%.4f\n", c / n, (b - a) / n }'
}

echo "HSET -r 100000 -n $requests -c $clients -P $pipeline, per request:" >&2
printf '%-8s %16s %20s\n' server "client switches" "server involuntary"
for side in redis rostrum; do
    port_var=${side}_port pid_var=${side}_pid
    IFS=$'\t' read -r c s < <(count "${!port_var}" "$(serving_thread "${!pid_var}")")
    printf '%-8s %16s %20s\n' "$side" "$c" "$s"
done
