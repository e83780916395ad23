#!/usr/bin/env bash
# Restart time, side by side with redis-server in the same run: each server
# holds one sorted set of N members (default 1M and 5M; SIZES="..." for
# others), written to disk in its own format, is stopped and started again
# on that file; the time from the start to the first PING answered PONG
# (Redis answers -LOADING until the data is in) is its restart time.
# Two formats: the RDB file (appendonly no, `dir`/`dbfilename` after
# SAVE) and the AOF with the RDB preamble (appendonly yes,
# aof-use-rdb-preamble yes, after BGREWRITEAOF: a base RDB in
# appendonlydir/). With TYPES="zset board" (default) Rostrum is also
# measured with a leaderboard of N entries (redis-server, which has no
# such type, keeps its sorted set). Each restart is checked: the key holds
# N members again.
#
#   benches/restart_probe.sh
#   SIZES=1000000 TYPES=zset FORMATS=rdb benches/restart_probe.sh
#
# Wall-clock timings: on a loaded machine they are noisy (the load average
# is printed first).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The commands that fill key `board` with $1 members, in RESP, for
# `redis-cli --pipe`: ZADD in batches of 1,000 (type zset) or one
# LB.SUBMIT per member (type board), random scores below 10M (the same
# for every run: seeded).
gen_load() {
    local n=$1 type=$2
    awk -v n="$n" -v type="$type" 'BEGIN {
        srand(1)
        if (type == "board") {
            for (i = 0; i < n; i++) {
                m = "m" i; s = int(rand() * 10000000) ""
                printf "*4\r\n$9\r\nLB.SUBMIT\r\n$5\r\nboard\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
                    length(m), m, length(s), s
            }
            exit
        }
        for (i = 0; i < n; i += 1000) {
            k = (n - i < 1000) ? n - i : 1000
            printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * k
            for (j = i; j < i + k; j++) {
                m = "m" j; s = int(rand() * 10000000) ""
                printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(s), s, length(m), m
            }
        }
    }'
}

read -r -a sizes <<<"${SIZES:-1000000 5000000}"
read -r -a types <<<"${TYPES:-zset board}"
read -r -a formats <<<"${FORMATS:-rdb aof}"

# Starts server $1 (redis|rostrum) in folder $2 with persistence format $3;
# sets srv_port and srv_pid (not waiting for it).
start_format() {
    local aof=no
    [[ $3 == aof ]] && aof=yes
    launch "$1" "$2" "$2/server.log" --save '' --appendonly "$aof" \
        --aof-use-rdb-preamble yes --appendfsync everysec
}

# Milliseconds until the server on $1 (process $2) answers PING with PONG
# (polled every 5 ms, at most 10 minutes), counted from $3 (ns), and the
# CPU seconds (user + system, every thread) the process had used by then:
# less noisy than the wall time on a loaded machine.
time_to_pong() {
    local port=$1 pid=$2 t0=$3
    for _ in $(seq 1 120000); do
        kill -0 "$pid" 2>/dev/null || { echo "error: server exited" >&2; return 1; }
        if [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]]; then
            printf '%s\t%s\n' $((($(date +%s%N) - t0) / 1000000)) "$(cpu_seconds "$pid")"
            return 0
        fi
        sleep 0.005
    done
    echo "error: not ready after 10 minutes" >&2
    return 1
}

# Stops process $1 (SIGTERM) and waits for it.
stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# The size of a server's files in folder $1, MB.
files_mb() {
    du -sk --exclude=server.log "$1" | awk '{ printf "%.1f", $1 / 1024 }'
}

echo "load: $(uptime | sed 's/.*load average/load average/')"
printf 'members\ttype\tformat\tserver\trestart_ms\tcpu_s\tfiles_MB\tmembers_after\n'
for n in "${sizes[@]}"; do
  for format in "${formats[@]}"; do
    for type in "${types[@]}"; do
      for side in redis rostrum; do
        # Redis has no leaderboard: its side is the sorted set, once.
        t=zset
        [[ $side == rostrum ]] && t=$type
        if [[ $side == redis && $type != "${types[0]}" ]]; then continue; fi
        dir="$work/$side-$n-$format-$t"
        mkdir -p "$dir"
        start_format "$side" "$dir" "$format"
        wait_ready "$srv_port" "$srv_pid" ||
            { echo "error: $side did not start" >&2; cat "$dir/server.log" >&2; exit 1; }
        [[ -f "$work/load-$n-$t" ]] || gen_load "$n" "$t" >"$work/load-$n-$t"
        redis-cli -p "$srv_port" --pipe <"$work/load-$n-$t" >/dev/null
        if [[ $format == rdb ]]; then
            redis-cli -p "$srv_port" SAVE >/dev/null
        else
            # The load itself may have started a rewrite (the AOF passed
            # auto-aof-rewrite-min-size: Rostrum's LB.SUBMITs are logged
            # with their SUBSCORE and AT, 104 bytes each, so 1M members
            # pass 64 MB). BGREWRITEAOF is then refused ("already in
            # progress") and the running rewrite's base ends with what was
            # loaded after its start as commands: wait for it, then
            # rewrite everything into the RDB preamble.
            settle "$srv_port"
            reply=$(redis-cli -p "$srv_port" BGREWRITEAOF)
            [[ $reply == *started* ]] ||
                { echo "error: BGREWRITEAOF: $reply" >&2; exit 1; }
            settle "$srv_port"
        fi
        stop "$srv_pid"
        sync
        mb=$(files_mb "$dir")
        t0=$(date +%s%N)
        start_format "$side" "$dir" "$format"
        ms=$(time_to_pong "$srv_port" "$srv_pid" "$t0")
        if [[ $t == board ]]; then
            after=$(redis-cli -p "$srv_port" LB.COUNT board 2>/dev/null || echo "?")
        else
            after=$(redis-cli -p "$srv_port" ZCARD board)
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$t" "$format" "$side" "$ms" "$mb" "$after"
        stop "$srv_pid"
        rm -rf "$dir"
      done
    done
  done
done
