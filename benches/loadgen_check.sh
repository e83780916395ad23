#!/usr/bin/env bash
# Checks benches/clients/loadgen.rs (LOADGEN=light) against redis-benchmark
# on both servers: for each row and pipeline depth, each client runs on
# redis-server and on Rostrum, ROUNDS times taking turns, and the table
# prints, per server and client: the calls INFO commandstats counted for the
# row's command (both clients must reach REQUESTS), the client's CPU time
# (user + system) per request, the server's, requests/s and cli% (medians of
# the rounds). CPU per request holds on a loaded machine; requests/s do not.
#
# Usage: benches/loadgen_check.sh [-n REQUESTS] [-c CLIENTS] [-P "1 16"] [-R ROUNDS]
#   defaults: -n 200000 -c 50 -P "1 16" -R 3
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR (see benches/lib.sh).
#
# Rows (-r 100000): SET and GET of `key:<12 digits>`, HGET of 100,000
# 10-field profiles, LRANGE 0 99 of a 1,000-element list, ZREVRANGE 0 9
# WITHSCORES of a 100,000-member sorted set, XADD of a 3-field event.
set -euo pipefail
requests=200000
clients=50
pipelines="1 16"
rounds=3
while getopts "n:c:P:R:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        R) rounds=$OPTARG ;;
        *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done
# shellcheck source=benches/lib.sh
LOADGEN=light source "$(dirname "$0")/lib.sh"
light=("${loadgen[@]}")
# XADD's `*` goes to the clients as is, not as a file glob.
set -f
start_both

echo "loading 100000 profiles, a list of 1000 and a sorted set of 100000 into both..." >&2
gen_profiles 0 100000 >"$work/profiles.resp"
gen_list recent 1000 >"$work/recent.resp"
gen_zset 100000 board >"$work/board.resp"
for port in "$redis_port" "$rostrum_port"; do
    for f in profiles recent board; do
        redis-cli -p "$port" --pipe <"$work/$f.resp" >/dev/null
    done
done

rand_range=100000
rows=(
    "SET key:__rand_int__ xxx"
    "GET key:__rand_int__"
    "HGET profile:__rand_int__ xp"
    "LRANGE recent 0 99"
    "ZREVRANGE board 0 9 WITHSCORES"
    "XADD events * user u__rand_int__ post p__rand_int__ kind like"
)

# Runs client $2 ("rb" or "light") with command $4 at pipeline $3 on port
# $1 (server process $5); prints "calls<TAB>client us/req<TAB>server
# us/req<TAB>rps<TAB>cli%", calls being commandstats' count for the
# command's first word over the run.
run_once() {
    local port=$1 client=$2 pipeline=$3 command=$4 pid=$5 name c0 c1 t0 t1 times calls
    local -a cmd=(redis-benchmark)
    [[ $client == light ]] && cmd=("${light[@]}")
    name=$(awk '{ print tolower($1) }' <<<"$command")
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    c0=$(cpu_seconds "$pid")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # the command is split into its words
    times=$({ TIMEFORMAT='%U %S'; time "${cmd[@]}" -p "$port" -n "$requests" -c "$clients" \
        -r "$rand_range" -P "$pipeline" --csv $command >"$work/bench.out" 2>"$work/bench.err"; } 2>&1) || {
        echo "  $client on port $port failed:" >&2
        sed 's/^/    /' "$work/bench.err" >&2
        exit 1
    }
    t1=$(date +%s.%N)
    c1=$(cpu_seconds "$pid")
    calls=$(redis-cli -p "$port" INFO commandstats | tr -d '\r' |
        awk -F'[:=,]' -v c="cmdstat_$name" '$1 == c { print $3 }')
    awk -F, -v c0="$c0" -v c1="$c1" -v n="$requests" -v busy="$times" -v t0="$t0" -v t1="$t1" \
        -v calls="${calls:-0}" 'NR == 2 {
        gsub(/"/, "", $2); split(busy, b, " ")
        printf "%s\t%.2f\t%.2f\t%.0f\t%.0f\n", calls, (b[1] + b[2]) * 1e6 / n, (c1 - c0) * 1e6 / n,
            $2, (b[1] + b[2]) * 100 / (t1 - t0) }' "$work/bench.out"
}

printf '%-44s %-7s %-5s %8s %8s %8s %9s %5s\n' row server client calls "cli us" "srv us" rps "cli%"
bad=0
for p in $pipelines; do
    for command in "${rows[@]}"; do
        echo "  -P $p $command..." >&2
        for side in redis rostrum; do
            port_var=${side}_port pid_var=${side}_pid
            out_rb=() out_light=()
            for _ in $(seq 1 "$rounds"); do
                out_rb+=("$(run_once "${!port_var}" rb "$p" "$command" "${!pid_var}")")
                out_light+=("$(run_once "${!port_var}" light "$p" "$command" "${!pid_var}")")
            done
            for client in rb light; do
                declare -n outs="out_$client"
                line=""
                for col in 1 2 3 4 5; do
                    line+="$(printf '%s\n' "${outs[@]}" | cut -f"$col" | median)	"
                done
                unset -n outs
                # Every round's calls must be REQUESTS, not only the median's.
                for o in "${outs[@]}"; do
                    [[ "${o%%$'\t'*}" == "$requests" ]] || bad=1
                done
                printf '%s\t%s\t%s\t%s\n' "$command -P $p" "$side" "$client" "$line" |
                    awk -F'\t' '{ printf "%-44s %-7s %-5s %8s %8s %8s %9s %5s\n",
                        substr($1, 1, 44), $2, $3, $4, $5, $6, $7, $8 }'
            done
        done
    done
done
echo "(calls: INFO commandstats for the command, median of $rounds rounds; cli us / srv us:"
echo " client / server CPU time, user + system, per request; rb = redis-benchmark,"
echo " light = LOADGEN=light's loadgen; load average: $(cut -d' ' -f1-3 /proc/loadavg))"
[[ $bad == 0 ]] || { echo "error: a client's calls differ from $requests" >&2; exit 1; }
