#!/usr/bin/env bash
# The polls scenario's vote script (scenario 4), run with EVALSHA by
# redis-benchmark against redis-server and a release Rostrum side by side.
#
# Usage: benches/vote_script.sh [-n REQUESTS] [-c CLIENTS] [-r USERS]
#   defaults: -n 200000 -c 50 -r 1000000 (user ids drawn from 0..USERS-1,
#   so some votes are duplicates and refused)
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#
# Both servers listen on free ports on 127.0.0.1 and are stopped on exit.
# Run it on an otherwise idle machine: the servers and the benchmark share
# the CPU. A server without ZINCRBY gets the tally as INCRBY instead (noted).
set -euo pipefail

requests=200000
clients=50
users=1000000
while getopts "n:c:r:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        r) users=$OPTARG ;;
        *) sed -n '2,14p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

start_both

# Loads the script into the server on port $1; prints its SHA1.
load_script() {
    local port=$1 tally
    if [[ "$(redis-cli -p "$port" COMMAND INFO zincrby | head -1)" == zincrby ]]; then
        tally="redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])"
    else
        echo "  note: no ZINCRBY on port $port, the tally uses INCRBY" >&2
        tally="redis.call('INCRBY', KEYS[2] .. ':' .. ARGV[2], 1)"
    fi
    redis-cli -p "$port" SCRIPT LOAD "$(vote_script "$tally")"
}

# Runs the votes against port $1; prints the requests per second.
measure() {
    local port=$1 sha
    sha=$(load_script "$port")
    redis-benchmark -p "$port" -n "$requests" -c "$clients" -r "$users" --csv \
        EVALSHA "$sha" 2 vote:topic:7 topic_rank __rand_int__ topic_7 2>"$work/bench.err" |
        awk -F'","' 'NR > 1 && NF > 1 { gsub(/"/, "", $2); print $2 }'
    if grep -qiE 'error' "$work/bench.err"; then
        sed 's/^/    /' "$work/bench.err" >&2
    fi
    local accepted
    accepted=$(redis-cli -p "$port" BITCOUNT vote:topic:7)
    echo "  port $port: $accepted distinct voters recorded" >&2
}

echo "EVALSHA vote script: -n $requests -c $clients -r $users" >&2
redis_rps=$(measure "$redis_port")
rostrum_rps=$(measure "$rostrum_port")
printf '%-14s %14s %14s %8s\n' test "redis rps" "rostrum rps" ratio
awk -v r="$redis_rps" -v q="$rostrum_rps" 'BEGIN {
    ratio = (r > 0 && q != "") ? sprintf("%.2f", q / r) : "-"
    printf "%-14s %14s %14s %8s\n", "EVALSHA vote", r, q, ratio }'
