# Shared by the scripts that count a server's instructions per request
# under valgrind's callgrind (ab_instructions.sh, hash_list_instructions.sh,
# replication_cost.sh); source it after lib.sh (it uses `work`, `pids`,
# `free_port`). Checks valgrind and callgrind_control, and defines
# `callgrind_start`, `callgrind_stop`, `count_instructions`, `count_rows`
# and `gen_board`.
for tool in valgrind callgrind_control; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not in PATH" >&2; exit 1; }
done

# callgrind_start BIN LOG -> $port, $pid, $is_redis: BIN under callgrind
# (its dumps in $work/cg.PID.*) on a free loopback port, in memory (a
# redis-server binary, told by its name, is given --save ''), its output
# in LOG; waits up to 60 s for it to answer. Rostrum gets $ROSTRUM_ARGS
# (lib.sh's `rostrum_args`), e.g. "--worker-threads 2"; valgrind gets
# $CALLGRIND_OPTS (e.g. "--cache-sim=yes --instr-atstart=no").
callgrind_start() {
    local bin=$1 log=$2
    local -a extra=()
    is_redis=0
    [[ $(basename "$bin") == redis-server* ]] && is_redis=1
    if ((is_redis)); then
        extra=(--save '' --appendonly no)
    else
        extra=("${rostrum_args[@]}")
    fi
    port=$(free_port)
    local -a opts
    read -r -a opts <<<"${CALLGRIND_OPTS:-}"
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "${opts[@]}" \
        "$bin" --port "$port" --bind 127.0.0.1 --loglevel warning "${extra[@]}" \
        >"$log" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 1 120); do
        redis-cli -p "$port" ping >/dev/null 2>&1 && break
        sleep 0.5
    done
}

# Shuts down the server on $port (process $pid) and waits for it.
callgrind_stop() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

# The counters of the dump just written by process $1: instructions first,
# then (with --cache-sim=yes) the other events of its `events:` line.
last_dump() {
    local f
    f=$(ls -t "$work"/cg."$1".* | head -1)
    awk '/^(summary|totals):/ { $1 = ""; print substr($0, 2); exit }' "$f"
}

# count_instructions PID COMMAND... -> $instructions, $counters: runs
# COMMAND (its output dropped) between two dumps of process PID's
# counters, so the second dump holds what the server did for that command
# alone ($counters: every event of it, see last_dump).
count_instructions() {
    local pid=$1
    shift
    callgrind_control -d before "$pid" >/dev/null 2>&1
    "$@" >/dev/null
    callgrind_control -d after "$pid" >/dev/null 2>&1
    sleep 0.3
    counters=$(last_dump "$pid")
    instructions=${counters%% *}
}

# count_rows KEY: each entry of `tests` ("title|command", or
# "title|command|the recipe on redis-server, where it differs") sent by
# redis-benchmark (-n $requests, -c 10, -r ${rand_range:-100000}) at -P 1
# and -P 16 to the server callgrind_start started; ir[KEY|title -P p] = its
# instructions, and, when the caller declared the array `cnt`,
# cnt[KEY|title -P p] = all its counters.
count_rows() {
    local key=$1 p t title line recipe
    local -a cmd
    for p in 1 16; do
        for t in "${tests[@]}"; do
            IFS='|' read -r title line recipe <<<"$t"
            ((is_redis)) && [[ -n $recipe ]] && line=$recipe
            # XADD's `*` goes to redis-benchmark as is, not as a file glob.
            set -f
            read -r -a cmd <<<"$line"
            set +f
            count_instructions "$pid" \
                redis-benchmark -p "$port" -n "$requests" -c 10 -r "${rand_range:-100000}" \
                -P "$p" "${cmd[@]}"
            ir["$key|$title -P $p"]=$instructions
            if declare -p cnt >/dev/null 2>&1; then
                cnt["$key|$title -P $p"]=$counters
            fi
        done
    done
}

# print_rows_table WIDTH TITLE: the table of `ir` (filled by count_rows
# for each binary index of `bins`), instructions per request of each row at
# -P 1 and -P 16 for every binary, and the last binary's over the first's.
print_rows_table() {
    local width=$1 title=$2 last p t row i
    last=$((${#bins[@]} - 1))
    printf "%-${width}s" "$title"
    for i in "${!bins[@]}"; do printf ' %14s' "$(basename "${bins[$i]}")"; done
    printf ' %8s\n' "last/1st"
    for p in 1 16; do
        for t in "${tests[@]}"; do
            row="${t%%|*} -P $p"
            printf "%-${width}s" "$row"
            for i in "${!bins[@]}"; do
                awk -v v="${ir["$i|$row"]}" -v q="$requests" 'BEGIN { printf " %14.0f", v / q }'
            done
            awk -v a="${ir["0|$row"]}" -v b="${ir["$last|$row"]}" 'BEGIN { printf " %8.3f\n", (a > 0 ? b / a : 0) }'
        done
    done
}

# RESP for ZADDs of 100 members each to `board`, 100,000 members in all.
gen_board() {
    awk 'BEGIN {
        for (k = 0; k < 1000; k++) {
            printf "*202\r\n$4\r\nZADD\r\n$5\r\nboard\r\n"
            for (i = 0; i < 100; i++) {
                id = k * 100 + i; m = sprintf("m:%012d", id); s = (id * 7919) % 1000003
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }'
}
