#!/usr/bin/env bash
# AOF start-up load time, redis-server and a release Rostrum side by side on
# the same file (issue 5: Rostrum should load at least 1.5x as fast).
#
# The file is written first: a 1,000,000-member board (`board`, members
# `m:<12-digit id>`) as ZADDs of 1,000 members, then until SIZE is reached
# a leaderboard mix: ZINCRBY and ZADD on the board (integer and fractional
# scores), SETBIT on vote bitmaps, SET ... PXAT locks, ZADD on daily boards,
# and MULTI/EXEC blocks of a vote (SETBIT + ZINCRBY), as a server writes
# them (one SELECT at the top). With -w zincrby the rest is only
# `ZINCRBY board 1 m:<id>` (what redis-benchmark's ZINCRBY test writes).
#
# Usage: benches/aof_load.sh [-s MB] [-w mix|zincrby] [-k FILE]
#   -s MB    size of the file in megabytes (default 1000)
#   -w MIX   the commands after the board: mix (default) or zincrby
#   -k FILE  load FILE instead of writing one (it is not removed)
# Environment: ROSTRUM_BIN to use a given binary instead of building one.
#
# Each server is timed from its start until it answers PING (both refuse
# commands while loading); each also logs its own load time. Run it on an
# otherwise idle machine; it needs twice the file's size in memory at most.
set -euo pipefail

size_mb=1000
mix=mix
given=""
while getopts "s:w:k:h" opt; do
    case "$opt" in
        s) size_mb=$OPTARG ;;
        w) mix=$OPTARG ;;
        k) given=$OPTARG ;;
        *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

[[ "$mix" == mix || "$mix" == zincrby ]] || { echo "error: -w takes mix or zincrby" >&2; exit 2; }

# Writes the file: $1 megabytes of mix $2 to stdout.
write_aof() {
    awk -v target="$(($1 * 1000000))" -v mix="$2" '
        function cmd2(a, b) { return sprintf("*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(a), a, length(b), b) }
        function cmd4(a, b, c, d) {
            return sprintf("*4\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
                length(a), a, length(b), b, length(c), c, length(d), d)
        }
        function cmd5(a, b, c, d, e) {
            return sprintf("*5\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
                length(a), a, length(b), b, length(c), c, length(d), d, length(e), e)
        }
        function member() { return sprintf("m:%012d", int(rand() * 1000000)) }
        function emit(s) { printf "%s", s; bytes += length(s) }
        BEGIN {
            srand(5)
            emit(cmd2("SELECT", "0"))
            for (first = 0; first < 1000000; first += 1000) {
                s = sprintf("*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * 1000)
                for (i = 0; i < 1000; i++) {
                    id = first + i; sc = (id * 7919) % 1000003; m = sprintf("m:%012d", id)
                    s = s sprintf("$%d\r\n%d\r\n$%d\r\n%s\r\n", length(sc ""), sc, length(m), m)
                }
                emit(s)
            }
            while (bytes < target) {
                r = mix == "zincrby" ? 0 : int(rand() * 100)
                if (r < 55) {
                    emit(cmd4("ZINCRBY", "board", mix == "zincrby" ? "1" : int(rand() * 100) + 1 "", member()))
                } else if (r < 65) {
                    emit(cmd4("ZADD", "board", int(rand() * 100000000) "", member()))
                } else if (r < 75) {
                    emit(cmd4("ZADD", "board", sprintf("%.10f", rand() * 2000000), member()))
                } else if (r < 85) {
                    emit(cmd4("SETBIT", "vote:topic:" int(rand() * 10), int(rand() * 1000000) "", "1"))
                } else if (r < 90) {
                    emit(cmd5("SET", "lock:user:" int(rand() * 1000000), "1", "PXAT", "4102444800000"))
                } else if (r < 95) {
                    emit(cmd4("ZADD", "step_rank:2025041" int(rand() * 10), int(rand() * 30000) "",
                        "user:" int(rand() * 1000000)))
                } else {
                    t = int(rand() * 10)
                    emit("*1\r\n$5\r\nMULTI\r\n" \
                        cmd4("SETBIT", "vote:topic:" t, int(rand() * 1000000) "", "1") \
                        cmd4("ZINCRBY", "topic_rank", "1", "topic_" t) \
                        "*1\r\n$4\r\nEXEC\r\n")
                }
            }
        }'
}

if [[ -n "$given" ]]; then
    aof=$given
else
    aof="$work/appendonly.aof"
    echo "writing a ${size_mb} MB AOF ($mix)..." >&2
    write_aof "$size_mb" "$mix" > "$aof"
fi
bytes=$(stat -c %s "$aof")

# load NAME -> prints the seconds from start to PONG. Each server gets its
# own folder holding a hard link to the file (redis-server moves it into its
# appendonlydir; neither writes to it).
load() {
    local name=$1 dir="$work/$1" port t0 t1 pid
    rm -rf "$dir"
    mkdir -p "$dir"
    ln "$aof" "$dir/appendonly.aof" 2>/dev/null || cp "$aof" "$dir/appendonly.aof"
    port=$(free_port)
    t0=$(date +%s.%N)
    if [[ "$name" == redis ]]; then
        redis-server --port "$port" --bind 127.0.0.1 --save '' --dir "$dir" --appendonly yes \
            --appendfsync no --auto-aof-rewrite-percentage 0 --logfile "$dir/log" &
    else
        (cd "$dir" && exec "$rostrum_bin" --port "$port" --bind 127.0.0.1 --dir "$dir" \
            --appendonly yes --appendfsync no --config auto-aof-rewrite-percentage=0) >"$dir/log" 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    until [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]]; do
        kill -0 "$pid" 2>/dev/null || { echo "error: $name exited" >&2; tail "$dir/log" >&2; exit 1; }
        sleep 0.02
    done
    t1=$(date +%s.%N)
    echo "$name: $(redis-cli -p "$port" DBSIZE) keys; its log:" \
        "$(grep -ao 'DB loaded from append only file.*' "$dir/log" | tail -1)" >&2
    redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    echo "$t1 - $t0" | bc -l
}

redis_secs=$(load redis)
rostrum_secs=$(load rostrum)
printf '\n%-10s %14s %10s %10s\n' "load" "AOF bytes" "seconds" "MB/s"
for name in redis rostrum; do
    secs=${name}_secs
    printf '%-10s %14d %10.2f %10.1f\n' "$name" "$bytes" "${!secs}" "$(echo "$bytes / ${!secs} / 1000000" | bc -l)"
done
printf 'rostrum / redis speed: %.2fx\n' "$(echo "$redis_secs / $rostrum_secs" | bc -l)"
