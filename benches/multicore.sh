#!/usr/bin/env bash
# One hot board on any machine, measured the same way (issue 20): the server
# pinned to some cores and redis-benchmark (--threads; loadgen under
# LOADGEN=light) to the others with
# taskset, Rostrum at several worker counts side by side with redis-server
# 7.0 and, when valkey-server is on PATH, Valkey with --io-threads. Each
# server gets the same board `lb` of BOARD members (`m:%012d`, loaded by one
# script per 100,000 members, as ../shared/multicore/run.sh loads it), then
# the rows run against it:
#   ZINCRBY lb -P 1 and -P 16      (writes to one hot board)
#   ZADD lb2 -P 1 and -P 16        (writes to one growing hot board)
#   ZREVRANK lb -P 16, GET -P 16   (reads: must not lose)
# Prints CSV lines as the kit's run.sh does (server,row,P,rps,p50_ms,p99_ms,
# cpu_us_per_req; the server's CPU time, user + system, per request, which
# stays meaningful when the client is the bottleneck), then the table of
# issue 20: requests/s per row and server, and CPU us per request.
#
# Usage: benches/multicore.sh [-s SERVER_CORES] [-b CLIENT_CORES]
#                             [-w "WORKER COUNTS"] [-c CLIENTS] [-n REQUESTS]
#                             [-m BOARD] [-r ROWS] [-x SERVERS] [-R ROUNDS]
#   -s  cores for the server, a taskset list (default: the first half)
#   -b  cores for redis-benchmark (default: the others; with one core, the same)
#   -w  Rostrum's worker-threads to measure (default "1 2 4 7", those not
#       above the server's cores)
#   -c  clients (default 50), -n requests at -P 1 (default 200000; 4x at
#       -P 16), -m board members (default 1000000)
#   -r  first words of the rows to keep, e.g. "ZINCRBY ZADD" (default all)
#   -x  servers: any of redis valkey rostrum (default all; valkey only when
#       valkey-server is on PATH)
#   -R  rounds (default 1): every server runs every row once a round, the
#       servers in turn, each round starting one server later than the last
#       (round 2 of redis, w=1, w=2 runs w=1, w=2, redis), so that none is
#       always measured first or last on a machine whose speed drifts; the
#       table gives each cell's median over the rounds
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS, CARGO_TARGET_DIR, LOADGEN, LOADGEN_BIN (as
# benches/lib.sh: LOADGEN=light drives the rows with benches/clients/loadgen.rs,
# same options and CSV, at 0.3-0.6 of redis-benchmark's CPU a request, so
# the client takes less of cores it shares with the server; the default
# stays redis-benchmark); CLIENT_THREADS (the client's --threads; default
# the client's cores, at most 8);
# VALKEY_BIN (default: valkey-server on PATH); S, C, BOARD, ROWS as the
# kit's run.sh reads them (server cores 0..S-1, clients, board, rows).
#
# On a 2-core machine the default is server on core 0 and client on core 1;
# worker counts above the server's cores run anyway when asked for with -w
# (the threads then share the server's cores). `-s 0-1 -b 0-1` lets server
# and client share both cores, as benches/zset_leaderboard.sh runs them.
#
# How Rostrum's workers share one hot board (README, "The writers of a hot
# board"): a connection that keeps pipelining writes to a shard another
# worker writes too sends its batches to the shard's home worker, which
# runs them one after another, and keeps its socket on its own worker; one
# placed on the home moves off it. So at w=2 one worker runs the board's
# commands and the other reads and writes the sockets (INFO stats
# rostrum_hot_shard_guests, rostrum_hot_shard_moves); LOADGEN_SPREAD=1
# makes loadgen print how evenly the connections were served.
set -euo pipefail

ncores=$(nproc)
half=$((ncores / 2))
[[ $half -ge 1 ]] || half=1
# The kit's environment (../shared/multicore/run.sh) gives the defaults.
server_cores=${S:+0-$((S - 1))}
client_cores=""
workers=""
clients=${C:-50}
requests=200000
board=${BOARD:-1000000}
rows_kept=${ROWS:-}
servers="redis valkey rostrum"
rounds=1
while getopts "s:b:w:c:n:m:r:x:R:h" opt; do
    case "$opt" in
        s) server_cores=$OPTARG ;;
        b) client_cores=$OPTARG ;;
        w) workers=$OPTARG ;;
        c) clients=$OPTARG ;;
        n) requests=$OPTARG ;;
        m) board=$OPTARG ;;
        r) rows_kept=$OPTARG ;;
        x) servers=$OPTARG ;;
        R) rounds=$OPTARG ;;
        *) sed -n '2,47p' "$0"; exit 2 ;;
    esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: -R wants a positive count" >&2; exit 2; }
if [[ -z "$server_cores" ]]; then
    server_cores="0-$((half - 1))"
fi
if [[ -z "$client_cores" ]]; then
    if [[ $ncores -gt 1 ]]; then client_cores="$half-$((ncores - 1))"; else client_cores=0; fi
fi
# Cores in a taskset list ("0-3,6" is 5).
count_cores() {
    local n=0 part
    for part in ${1//,/ }; do
        if [[ $part == *-* ]]; then n=$((n + ${part#*-} - ${part%-*} + 1)); else n=$((n + 1)); fi
    done
    echo "$n"
}
nserver=$(count_cores "$server_cores")
nclient=$(count_cores "$client_cores")
client_threads=${CLIENT_THREADS:-$((nclient > 8 ? 8 : nclient))}
if [[ -z "$workers" ]]; then
    for w in 1 2 4 7; do
        [[ $w -le $nserver || $w -eq 1 ]] && workers="$workers $w"
    done
    workers=${workers# }
fi

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
command -v taskset >/dev/null || { echo "error: taskset is not in PATH" >&2; exit 1; }
valkey_bin=${VALKEY_BIN:-$(command -v valkey-server || true)}

echo "host: $ncores cores; server cores $server_cores ($nserver), $loadgen_name cores" \
    "$client_cores (--threads $client_threads); -c $clients; board $board; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# Starts server $1 (redis | valkey | rostrum:W) pinned to the server cores;
# sets port and pid.
start_pinned() {
    local name=$1
    port=$(free_port)
    case $name in
        redis)
            taskset -c "$server_cores" redis-server --port "$port" --bind 127.0.0.1 --save '' \
                --appendonly no --daemonize no --dir "$work" --logfile "$work/redis.log" &
            ;;
        valkey)
            taskset -c "$server_cores" "$valkey_bin" --port "$port" --bind 127.0.0.1 --save '' \
                --appendonly no --daemonize no --dir "$work" --logfile "$work/valkey.log" \
                --io-threads "$nserver" &
            ;;
        rostrum:*)
            (cd "$work" && exec taskset -c "$server_cores" "$rostrum_bin" --port "$port" \
                --bind 127.0.0.1 --loglevel warning --worker-threads "${name#rostrum:}" \
                "${rostrum_args[@]}") >"$work/rostrum.log" 2>&1 &
            ;;
    esac
    pid=$!
    pids+=("$pid")
    wait_ready "$port" "$pid" || { echo "error: $name did not start" >&2; return 1; }
}

stop_server() {
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# The board `lb`, loaded by a script per 100,000 members (the kit's loader).
LOAD='local n=tonumber(ARGV[1]) local b=tonumber(ARGV[2]) local s=tonumber(ARGV[3])
for i=s,math.min(s+b-1,n) do redis.call("ZADD", KEYS[1], (i*7919)%10000000, string.format("m:%012d", i)) end return 0'
load_board() {
    local st
    for ((st = 1; st <= board; st += 100000)); do
        redis-cli -p "$port" EVAL "$LOAD" 1 lb "$board" 100000 "$st" >/dev/null
    done
    [[ "$(redis-cli -p "$port" ZCARD lb)" == "$board" ]] ||
        { echo "error: the board did not load" >&2; return 1; }
}

# title|pipeline|command
all_rows=(
    "ZINCRBY lb|1|ZINCRBY lb 1 m:__rand_int__"
    "ZINCRBY lb|16|ZINCRBY lb 1 m:__rand_int__"
    "ZADD lb2 (growing)|1|ZADD lb2 __rand_int__ m:__rand_int__"
    "ZADD lb2 (growing)|16|ZADD lb2 __rand_int__ m:__rand_int__"
    "ZREVRANK lb|16|ZREVRANK lb m:__rand_int__"
    "GET|16|GET k:__rand_int__"
)
bench_rows=()
for entry in "${all_rows[@]}"; do
    title=${entry%%|*}
    word=${title%% *}
    if [[ -z "$rows_kept" || " $rows_kept " == *" $word "* ]]; then bench_rows+=("$entry"); fi
done

# Runs every row against the server on $port (process $pid) as $1; appends
# "label<TAB>title -P p<TAB>rps<TAB>cpu" to results and prints CSV.
declare -a results=()
run_server_rows() {
    local label=$1 entry title rest p command n c0 c1 line rps p50 p99 cpu
    redis-cli -p "$port" SET k:000000000001 v >/dev/null
    for entry in "${bench_rows[@]}"; do
        title=${entry%%|*}
        rest=${entry#*|}
        p=${rest%%|*}
        command=${rest#*|}
        n=$requests
        [[ $p -gt 1 ]] && n=$((requests * 4))
        echo "  $label -P $p $title..." >&2
        c0=$(cpu_seconds "$pid")
        # shellcheck disable=SC2086 # the command is split into its words
        line=$(taskset -c "$client_cores" "${loadgen[@]}" -p "$port" -c "$clients" -P "$p" -n "$n" \
            -r "$board" --threads "$client_threads" --csv $command 2>"$work/bench.err" |
            sed -n 2p) || line=""
        c1=$(cpu_seconds "$pid")
        rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
        p50=$(echo "$line" | cut -d, -f5 | tr -d '"')
        p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
        cpu=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) * 1e6 / n }')
        echo "$label,$command,$p,${rps:--},${p50:--},${p99:--},$cpu"
        results+=("$label	$title -P $p	${rps:--}	$cpu")
    done
}

# Every server to measure, in the order of the table.
names=()
for s in $servers; do
    case $s in
        redis) names+=(redis) ;;
        valkey) [[ -n "$valkey_bin" ]] && names+=(valkey) ;;
        rostrum) for w in $workers; do names+=("rostrum:$w"); done ;;
        *) echo "error: unknown server $s" >&2; exit 2 ;;
    esac
done
label_of() {
    case $1 in
        redis) echo "Redis 7.0" ;;
        valkey) echo "Valkey io-threads $nserver" ;;
        rostrum:*) echo "Rostrum w=${1#rostrum:}" ;;
    esac
}
labels=()
for name in "${names[@]}"; do labels+=("$(label_of "$name")"); done

echo "server,row,P,rps,p50_ms,p99_ms,cpu_us_per_req"
for ((round = 0; round < rounds; round++)); do
    [[ $rounds -gt 1 ]] && echo "round $((round + 1)) of $rounds" >&2
    for ((i = 0; i < ${#names[@]}; i++)); do
        name=${names[$(((i + round) % ${#names[@]}))]}
        label=$(label_of "$name")
        start_pinned "$name" || continue
        echo "loading $board members into $label (port $port)..." >&2
        load_board
        run_server_rows "$label"
        stop_server
    done
done

# The table: one line per row, requests/s then CPU us per request per
# server (medians of the rounds).
printf '\n| one hot board |'
for l in "${labels[@]}"; do printf ' %s |' "$l"; done
printf '\n|---|'
for _ in "${labels[@]}"; do printf -- '---|'; done
printf '\n'
for entry in "${bench_rows[@]}"; do
    title=${entry%%|*}
    rest=${entry#*|}
    row="$title -P ${rest%%|*}"
    printf '| %s |' "$row"
    for l in "${labels[@]}"; do
        cells=$(printf '%s\n' "${results[@]}" | awk -F'\t' -v l="$l" -v r="$row" '$1 == l && $2 == r')
        rps=$(echo "$cells" | cut -f3 | grep -v '^-$' | median)
        cpu=$(echo "$cells" | cut -f4 | grep -v '^-$' | median)
        awk -v rps="$rps" -v cpu="$cpu" 'BEGIN {
            r = (rps == "-") ? "-" : (rps >= 1e6 ? sprintf("%.2fM", rps / 1e6) : sprintf("%.0fk", rps / 1e3))
            printf " %s (%s us) |", r, (cpu == "-") ? "-" : sprintf("%.2f", cpu) }'
    done
    printf '\n'
done
echo "(requests/s; in brackets the server's CPU time per request, user + system; medians of $rounds round(s))"
