#!/usr/bin/env bash
# The cost of ACL checks: the leaderboard rows (ZADD, ZINCRBY, ZREVRANK,
# ZREVRANGE 0 9 WITHSCORES) run as the default user (no check: it may do
# everything) and as a user with 20 key patterns (19 that do not match,
# then `~board`, so every key walks them all; `+@all &*`), on redis-server
# and a release Rostrum side by side, the same users on both, in the same
# run. Two tables:
#   1. requests/s (redis-benchmark, -c CLIENTS, at each -P depth), each
#      server's ACL user / default user ratio, and Rostrum / Redis for the
#      ACL user;
#   2. server instructions per request under valgrind's callgrind (both
#      servers, -n IREQUESTS each), the ACL user / default user ratio:
#      unlike requests/s on a shared machine, these repeat within about 1%.
# Target: Rostrum's ACL user at most 3% slower than its default user.
#
# Usage: benches/acl_benchmark.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS] [-P "1 16"] [-i IREQUESTS]
#   defaults: -m 100000 -n 200000 -c 50 -P "1 16" -i 10000 (-i 0: no
#   instruction counts; they need valgrind and callgrind_control)
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#
# Both servers listen on free ports on 127.0.0.1 and are stopped on exit.
# Run it on an otherwise idle machine for table 1.
set -euo pipefail

members=100000
requests=200000
clients=50
pipelines="1 16"
irequests=10000
while getopts "m:n:c:P:i:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        i) irequests=$OPTARG ;;
        *) sed -n '2,24p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

# The ACL user: 19 patterns that never match, then the board's.
acl_rules=(on ">benchpw" "&*" "+@all")
for i in $(seq 1 19); do
    acl_rules+=("~svc$i:*")
done
acl_rules+=("~board")

commands=(
    "ZADD|ZADD board __rand_int__ m:__rand_int__"
    "ZINCRBY|ZINCRBY board 1 m:__rand_int__"
    "ZREVRANK|ZREVRANK board m:__rand_int__"
    "ZREVRANGE 0 9 WITHSCORES|ZREVRANGE board 0 9 WITHSCORES"
)

# ZADDs of up to 1000 members each, $members in all.
board() {
    awk -v n="$members" 'BEGIN {
        for (first = 0; first < n; first += 1000) {
            count = (n - first < 1000) ? n - first : 1000
            printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * count
            for (i = 0; i < count; i++) {
                id = first + i; s = (id * 7919) % 1000003; m = sprintf("m:%012d", id)
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }'
}

# Adds the ACL user to the server on port $1 and loads the board.
prepare() {
    local port=$1 got
    [[ "$(redis-cli -p "$port" ACL SETUSER bench reset "${acl_rules[@]}")" == OK ]] ||
        { echo "error: ACL SETUSER failed on port $port" >&2; exit 1; }
    board | redis-cli -p "$port" --pipe >/dev/null
    got=$(redis-cli -p "$port" ZCARD board)
    [[ "$got" == "$members" ]] || { echo "error: port $port has $got members" >&2; exit 1; }
}

# redis-benchmark's requests/s for command $3 on port $1 at pipeline $2 as
# user $4 (`default`: no AUTH).
rps() {
    local port=$1 pipeline=$2 command=$3 user=$4 auth=() out
    [[ $user == default ]] || auth=(--user "$user" -a benchpw)
    # shellcheck disable=SC2086 # the command is split into its words
    out=$(redis-benchmark -p "$port" "${auth[@]}" -n "$requests" -c "$clients" -r "$members" \
        -P "$pipeline" --csv $command 2>"$work/bench.err") || {
        echo "  redis-benchmark on port $port failed:" >&2
        sed 's/^/    /' "$work/bench.err" >&2
        echo 0
        return 0
    }
    printf '%s\n' "$out" | awk -F, 'NR == 2 { gsub(/"/, "", $2); print $2 }'
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
start_both
for port in "$redis_port" "$rostrum_port"; do
    prepare "$port"
done

echo "redis-benchmark -n $requests -c $clients -r $members" >&2
printf '\n%-31s %10s %10s %6s %10s %10s %6s %9s\n' "requests/s" "redis dflt" "redis acl" "acl/d" \
    "rost. dflt" "rost. acl" "acl/d" "rost/redis"
for p in $pipelines; do
    for entry in "${commands[@]}"; do
        title=${entry%%|*}
        command=${entry#*|}
        echo "  -P $p $title..." >&2
        # Interleaved, so that a change of load touches both users alike.
        rd=$(rps "$redis_port" "$p" "$command" default)
        ra=$(rps "$redis_port" "$p" "$command" bench)
        qd=$(rps "$rostrum_port" "$p" "$command" default)
        qa=$(rps "$rostrum_port" "$p" "$command" bench)
        awk -v t="$title -P $p" -v rd="$rd" -v ra="$ra" -v qd="$qd" -v qa="$qa" 'BEGIN {
            printf "%-31s %10.0f %10.0f %6.3f %10.0f %10.0f %6.3f %9.2f\n", t, rd, ra,
                (rd > 0 ? ra / rd : 0), qd, qa, (qd > 0 ? qa / qd : 0), (ra > 0 ? qa / ra : 0) }'
    done
done
echo "(acl/d: the user with 20 key patterns over the default user; rost/redis: the ACL user)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

[[ $irequests -gt 0 ]] || exit 0
for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || { echo "no $tool: no instruction counts" >&2; exit 0; }
done

# Instructions of the dump just written by process $1.
last_dump() {
    local f
    f=$(ls -t "$work"/cg."$1".* | head -1)
    awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

# Instructions per request on the server under callgrind (process $1, port
# $2) for command $4 at pipeline $3 as user $5.
instructions() {
    local pid=$1 port=$2 pipeline=$3 command=$4 user=$5 auth=() n
    [[ $user == default ]] || auth=(--user "$user" -a benchpw)
    callgrind_control -d before "$pid" >/dev/null 2>&1
    # shellcheck disable=SC2086 # the command is split into its words
    redis-benchmark -p "$port" "${auth[@]}" -n "$irequests" -c 10 -r "$members" -P "$pipeline" \
        $command >/dev/null 2>&1
    callgrind_control -d after "$pid" >/dev/null 2>&1
    sleep 0.3
    n=$(last_dump "$pid")
    awk -v n="$n" -v q="$irequests" 'BEGIN { printf "%.0f\n", n / q }'
}

declare -A ir
for server in redis rostrum; do
    port=$(free_port)
    if [[ $server == redis ]]; then
        valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" redis-server --port "$port" \
            --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$work" \
            >"$work/cg-$server.log" 2>&1 &
    else
        (cd "$work" && exec valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
            "$rostrum_bin" --port "$port" --bind 127.0.0.1 --loglevel warning \
            "${rostrum_args[@]}") >"$work/cg-$server.log" 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 240); do
        redis-cli -p "$port" PING >/dev/null 2>&1 && break
        sleep 0.5
    done
    echo "$server under callgrind: loading..." >&2
    prepare "$port"
    for p in $pipelines; do
        for entry in "${commands[@]}"; do
            title=${entry%%|*}
            command=${entry#*|}
            for user in default bench; do
                ir["$server|$user|$title -P $p"]=$(instructions "$pid" "$port" "$p" "$command" "$user")
            done
        done
    done
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
done

printf '\n%-31s %10s %10s %6s %10s %10s %6s\n' "instructions per request" "redis dflt" "redis acl" \
    "acl/d" "rost. dflt" "rost. acl" "acl/d"
for p in $pipelines; do
    for entry in "${commands[@]}"; do
        row="${entry%%|*} -P $p"
        awk -v t="$row" -v rd="${ir["redis|default|$row"]}" -v ra="${ir["redis|bench|$row"]}" \
            -v qd="${ir["rostrum|default|$row"]}" -v qa="${ir["rostrum|bench|$row"]}" 'BEGIN {
            printf "%-31s %10.0f %10.0f %6.3f %10.0f %10.0f %6.3f\n", t, rd, ra,
                (rd > 0 ? ra / rd : 0), qd, qa, (qd > 0 ? qa / qd : 0) }'
    done
done
echo "(callgrind, redis-benchmark -n $irequests -c 10; per request, including the connection's reads and writes)"
