# Shared by the benchmark scripts (source it; it sets `root`, `rostrum_bin`,
# `rostrum_args`, `work` and `pids`, and defines `free_port`, `wait_ready`,
# `cpu_seconds`, `launch`, `launch_ready`, `start_both`, `settle`,
# `info_field`, `load_and_measure`, `measure`, `run_rows`, `column_medians`,
# `print_rows`, `start_loaded`, `median`,
# `gen_zset`, `gen_lb_board`, `gen_profiles`, `gen_list` and
# `vote_script`): checks the
# Redis tools, builds or takes the Rostrum binary ($ROSTRUM_BIN), takes
# extra server arguments from $ROSTRUM_ARGS (e.g. "--config
# worker-threads=1"), takes `measure`'s client from $LOADGEN (and a built
# loadgen from $LOADGEN_BIN), pins the servers to $SERVER_CPUS and that
# client to $CLIENT_CPUS (taskset lists) when set, makes a work folder, and
# on exit stops every process in `pids` and removes it.
root=$(cd "$(dirname "$0")/.." && pwd)
for tool in redis-server redis-benchmark redis-cli awk; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not in PATH" >&2; exit 1; }
done

if [[ -n "${ROSTRUM_BIN:-}" ]]; then
    # Absolute: the scripts start the server from their work folder.
    rostrum_bin=$(realpath "$ROSTRUM_BIN")
else
    echo "building rostrum (release)..." >&2
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin rostrum
    rostrum_bin="${CARGO_TARGET_DIR:-$root/target}/release/rostrum"
fi
[[ -x "$rostrum_bin" ]] || { echo "error: no rostrum binary at $rostrum_bin" >&2; exit 1; }
read -r -a rostrum_args <<<"${ROSTRUM_ARGS:-}"

# `measure`'s client. `light` takes the same options and prints the same
# CSV as redis-benchmark at a fraction of its CPU a request, for the rows
# where redis-benchmark is the bottleneck (its cli% 90 or more).
case "${LOADGEN:-redis-benchmark}" in
    # (LOADGEN_BIN, a built loadgen, only matters to LOADGEN=light.)
    redis-benchmark) loadgen=(redis-benchmark) ;;
    light)
        if [[ -n "${LOADGEN_BIN:-}" ]]; then
            # One already built (a release build of the example takes the
            # library's LTO build with it).
            loadgen=("$(realpath "$LOADGEN_BIN")")
            [[ -x "${loadgen[0]}" ]] ||
                { echo "error: LOADGEN_BIN $LOADGEN_BIN is not an executable" >&2; exit 1; }
        else
            echo "building the loadgen client (release)..." >&2
            cargo build --release --quiet --manifest-path "$root/Cargo.toml" --example loadgen
            loadgen=("${CARGO_TARGET_DIR:-$root/target}/release/examples/loadgen")
        fi
        ;;
    *) echo "error: LOADGEN is redis-benchmark or light, not $LOADGEN" >&2; exit 1 ;;
esac
loadgen_name=${loadgen[0]##*/}

# Pinning, optional: SERVER_CPUS and CLIENT_CPUS are taskset lists ("0",
# "0-7"). `launch` and `start_loaded` start the servers on the first and
# `measure` runs its client on the second, so that neither takes the
# other's cores. Unpinned on the 2-core machine, the client shares the
# cores with the server, and its CPU counts in the -P 1 rates (README,
# "Replies held to the turn's end"). Unset: no pinning.
server_pin=()
client_pin=()
if [[ -n "${SERVER_CPUS:-}${CLIENT_CPUS:-}" ]]; then
    command -v taskset >/dev/null || { echo "error: taskset is not in PATH" >&2; exit 1; }
    [[ -n "${SERVER_CPUS:-}" ]] && server_pin=(taskset -c "$SERVER_CPUS")
    [[ -n "${CLIENT_CPUS:-}" ]] && client_pin=(taskset -c "$CLIENT_CPUS")
fi

work=$(mktemp -d -t rostrum-bench.XXXXXX)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on, below the kernel's ephemeral range (client
# sockets such as redis-benchmark's take ports from 32768 up, and a server
# could not bind one of those while a connection uses it).
free_port() {
    local port
    for _ in $(seq 1 100); do
        port=$((10000 + RANDOM % 22000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "error: no free port found" >&2
    return 1
}

# CPU time (user + system) process $1 has used so far, in seconds: the
# server's own cost of a run, which stays meaningful when the client is the
# bottleneck (redis-cli --pipe and redis-benchmark at -P 1 often are).
cpu_seconds() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$1/stat"
}

# Waits until the server on $1 (process $2) answers PING, at most 10 s.
wait_ready() {
    local port=$1 pid=$2
    for _ in $(seq 1 200); do
        kill -0 "$pid" 2>/dev/null || return 1
        [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]] && return 0
        sleep 0.05
    done
    return 1
}

# launch SIDE DIR LOG ARGS... -> srv_port, srv_pid: redis-server (SIDE
# redis) or Rostrum (SIDE rostrum, with $rostrum_args last) on a free
# loopback port, in folder DIR, logging to LOG, with ARGS after the port;
# not waiting for it.
launch() {
    local side=$1 dir=$2 log=$3
    shift 3
    srv_port=$(free_port)
    if [[ $side == redis ]]; then
        "${server_pin[@]}" redis-server --port "$srv_port" --bind 127.0.0.1 "$@" --dir "$dir" \
            --daemonize no --logfile "$log" &
    else
        (cd "$dir" && exec "${server_pin[@]}" "$rostrum_bin" --port "$srv_port" --bind 127.0.0.1 \
            --loglevel warning "$@" "${rostrum_args[@]}") >"$log" 2>&1 &
    fi
    srv_pid=$!
    pids+=("$srv_pid")
}

# launch_ready SIDE DIR LOG ARGS...: as `launch`, then sets ${SIDE}_port and
# ${SIDE}_pid; exits with its log when it does not answer PING.
launch_ready() {
    local side=$1 log=$3 name=rostrum
    [[ $side == redis ]] && name=redis-server
    launch "$@"
    wait_ready "$srv_port" "$srv_pid" ||
        { echo "error: $name did not start" >&2; cat "$log" >&2; exit 1; }
    printf -v "${side}_port" '%s' "$srv_port"
    printf -v "${side}_pid" '%s' "$srv_pid"
}

# Starts redis-server and Rostrum on free loopback ports, both in memory
# (no AOF), logging into $work; sets redis_port, redis_pid, rostrum_port and
# rostrum_pid. Exits with their log when either does not answer PING.
start_both() {
    launch_ready redis "$work" "$work/redis.log" --save '' --appendonly no
    launch_ready rostrum "$work" "$work/rostrum.log"
}

# start_loaded NAME FILES CMD...: starts CMD... (redis-server, or a Rostrum
# binary and its arguments) in memory on a free loopback port, in
# $work/NAME, loads each RESP file of FILES (space-separated) into it, and
# appends its port to `ports` and its PID to `spids` (and `pids`). For the
# scripts that compare several Rostrum binaries with redis-server.
start_loaded() {
    local name=$1 files=$2 port f
    shift 2
    port=$(free_port)
    mkdir -p "$work/$name"
    (cd "$work/$name" && exec "${server_pin[@]}" "$@" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        >"$work/$name/log" 2>&1) &
    pids+=("$!")
    spids+=("$!")
    ports+=("$port")
    wait_ready "$port" "$!" || { echo "error: $name did not start" >&2; exit 1; }
    for f in $files; do
        redis-cli -p "$port" --pipe <"$f" >/dev/null
    done
}

# The median of the numbers on standard input, one a line or several to a
# line ("-" when there are none; the mean of the middle two of an even
# count).
median() {
    tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Waits until the server on $1 has no snapshot running (BGSAVE or AOF
# rewrite), at most 10 minutes (a 10M-member rewrite on a loaded machine).
settle() {
    for _ in $(seq 1 3000); do
        local info
        info=$(redis-cli -p "$1" INFO persistence | tr -d '\r')
        if grep -q '^rdb_bgsave_in_progress:0' <<<"$info" &&
            grep -q '^aof_rewrite_in_progress:0' <<<"$info"; then
            return 0
        fi
        sleep 0.2
    done
    echo "error: a snapshot still runs on port $1 after 10 minutes" >&2
    return 1
}

# One INFO memory field of the server on port $1.
info_field() {
    redis-cli -p "$1" INFO memory | tr -d '\r' | awk -F: -v f="$2" '$1 == f { print $2 }'
}

# Loads with redis-cli --pipe into port $1 and returns the memory growth
# (used_memory, used_memory_rss) per member over the empty server.
load_and_measure() {
    local port=$1 file=$2 count=$3 mem0 rss0 mem1 rss1
    mem0=$(info_field "$port" used_memory)
    rss0=$(info_field "$port" used_memory_rss)
    redis-cli -p "$port" --pipe <"$file" >"$work/pipe.out" 2>&1 ||
        { echo "error: loading into port $port failed:" >&2; cat "$work/pipe.out" >&2; exit 1; }
    mem1=$(info_field "$port" used_memory)
    rss1=$(info_field "$port" used_memory_rss)
    awk -v a="$mem0" -v b="$mem1" -v c="$rss0" -v d="$rss1" -v n="$count" \
        'BEGIN { printf "%.1f\t%.1f\n", (b - a) / n, (d - c) / n }'
}

# Runs one command on port $1 (server process $4) at pipeline $2 with
# redis-benchmark, or loadgen under LOADGEN=light ($requests requests,
# $clients clients, __rand_int__ below $rand_range); prints "rps<TAB>p99
# ms<TAB>server CPU us per request<TAB>client busy %". The last is the
# client's own CPU time (user + system) over the run's wall time: at 90% or
# more, its one thread is the bottleneck and the row compares clients more
# than servers.
measure() {
    local port=$1 pipeline=$2 command=$3 pid=$4 out c0 c1 t0 t1 times
    c0=$(cpu_seconds "$pid")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086 # the command is split into its words
    times=$({ TIMEFORMAT='%U %S'; time "${client_pin[@]}" "${loadgen[@]}" -p "$port" -n "$requests" -c "$clients" \
        -r "$rand_range" -P "$pipeline" --csv $command >"$work/bench.out" 2>"$work/bench.err"; } 2>&1) || {
        echo "  $loadgen_name on port $port failed:" >&2
        sed 's/^/    /' "$work/bench.err" >&2
        printf -- '-\t-\t-\t-\n'
        return 0
    }
    t1=$(date +%s.%N)
    c1=$(cpu_seconds "$pid")
    out=$(cat "$work/bench.out")
    # CSV: "test","rps","avg","min","p50","p95","p99","max"
    printf '%s\n' "$out" | awk -F, -v c0="$c0" -v c1="$c1" -v n="$requests" \
        -v busy="$times" -v t0="$t0" -v t1="$t1" 'NR == 2 {
        gsub(/"/, "", $2); gsub(/"/, "", $7)
        split(busy, b, " ")
        printf "%s\t%s\t%.2f\t%.0f\n", $2, $7, (c1 - c0) * 1e6 / n, (b[1] + b[2]) * 100 / (t1 - t0) }'
}

# Measures every entry of `commands` ("title|command") at every depth of
# `pipelines` on both servers, into `rows`: `rounds` runs of each row
# (default 1), the two servers taking turns so that a burst of load on
# the machine falls on both, and the median of each column. A command's
# `__round__` becomes the round's letter (a, b, ...), the same on both
# servers: rows that must write new keys each round name them with it.
run_rows() {
    rows=()
    local p entry title command this i r q letters=abcdefghijklmnopqrstuvwxyz
    for p in $pipelines; do
        for entry in "${commands[@]}"; do
            title=${entry%%|*}
            command=${entry#*|}
            echo "  -P $p $title..." >&2
            : >"$work/redis.runs"
            : >"$work/rostrum.runs"
            for ((i = 0; i < ${rounds:-1}; i++)); do
                this=${command//__round__/${letters:i%26:1}}
                measure "$redis_port" "$p" "$this" "$redis_pid" >>"$work/redis.runs"
                measure "$rostrum_port" "$p" "$this" "$rostrum_pid" >>"$work/rostrum.runs"
            done
            r=$(column_medians "$work/redis.runs")
            q=$(column_medians "$work/rostrum.runs")
            rows+=("$title -P $p	$r	$q")
        done
    done
}

# The median of each tab-separated column of file $1 ("-", a failed run's
# figure, left out), tab-separated.
column_medians() {
    local col columns out=()
    columns=$(head -n 1 "$1" | awk -F'\t' '{ print NF }')
    for ((col = 1; col <= columns; col++)); do
        out+=("$(cut -f"$col" "$1" | grep -v '^-$' | median)")
    done
    (
        IFS=$'\t'
        printf '%s\n' "${out[*]}"
    )
}

# Prints the table of `rows` ("title<TAB>redis: rps p99 us cli<TAB>rostrum:
# ..."), as `measure` gives them, with the ratio Rostrum / Redis.
print_rows() {
    printf '\n%-31s %11s %11s %6s %9s %9s %9s %9s %5s %5s\n' command "redis rps" "rostrum rps" \
        ratio "redis p99" "rost. p99" "redis us" "rost. us" "cli%" "cli%"
    for row in "${rows[@]}"; do
        # Each side has 3 columns, or 4 with the client's busy share.
        printf '%s\n' "$row" | awk -F'\t' '{
            n = int((NF - 1) / 2); q = 2 + n
            rb = (n > 3) ? $5 : "-"; qb = (n > 3) ? $(q + 3) : "-"
            ratio = ($2 > 0 && $q != "-") ? sprintf("%.2f", $q / $2) : "-"
            printf "%-31s %11s %11s %6s %9s %9s %9s %9s %5s %5s\n", $1, $2, $q, ratio, $3, $(q + 1),
                $4, $(q + 2), rb, qb
        }'
    done
    [[ ${rounds:-1} -gt 1 ]] && echo "(each column the median of $rounds rounds, the servers taking turns)"
    echo "(p99 in ms; us = server CPU time, user + system, per request; cli% = $loadgen_name's"
    echo " CPU over wall time, redis then rostrum: at 90% or more the client is the bottleneck)"
}

# RESP for ZADDs of 1,000 members each (`m:<12-digit id>`, scores
# id * 7919 mod 1000003) making sorted set $2 (default `board`) of $1
# members: the board most benches load.
gen_zset() {
    awk -v n="$1" -v key="${2:-board}" 'BEGIN {
        for (first = 0; first < n; first += 1000) {
            count = (n - first < 1000) ? n - first : 1000
            printf "*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n", 2 + 2 * count, length(key), key
            for (i = 0; i < count; i++) {
                id = first + i; s = (id * 7919) % 1000003; m = sprintf("m:%012d", id)
                printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
            }
        }
    }'
}

# RESP for the leaderboard benches' board of $1 entries (`m:<12 digits>`,
# scores id * 7919 mod 1000003, plus the player `m:me`), 1,000 entries a
# command: $2 = zset (ZADD into `board`, time packed into the score as the
# scenarios' recipe does) or lb (LB.MSUBMIT into `lb`, at the server's time).
gen_lb_board() {
    awk -v n="$1" -v kind="$2" '
        function entry(id, m,    s, t) {
            s = (id * 7919) % 1000003
            t = 1700000000 + (id * 104729) % 50000000
            if (kind == "zset") {
                v = sprintf("%.17g", s + (317242022400 - t) / 317242022400)
                printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(v), v, length(m), m
            } else {
                printf "$2\r\nlb\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(m), m, length(s ""), s
            }
        }
        BEGIN {
            for (first = 0; first <= n; first += 1000) {
                count = (n + 1 - first < 1000) ? n + 1 - first : 1000
                if (kind == "zset")
                    printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * count
                else
                    printf "*%d\r\n$10\r\nLB.MSUBMIT\r\n", 1 + 3 * count
                for (i = 0; i < count; i++) {
                    id = first + i
                    entry(id, (id == n) ? "m:me" : sprintf("m:%012d", id))
                }
            }
        }'
}

# RESP for HSETs of $2 profiles from id $1 (10 fields each).
gen_profiles() {
    awk -v first="$1" -v n="$2" 'BEGIN {
        split("name country avatar level xp wins losses created seen visits", f, " ")
        for (id = first; id < first + n; id++) {
            k = sprintf("profile:%012d", id)
            v[1] = "player" id; v[2] = "SE"; v[3] = "https://cdn.example/a/" id ".png"
            v[4] = id % 90; v[5] = id * 37 % 1000003; v[6] = id % 977; v[7] = id % 613
            v[8] = 1700000000 + id; v[9] = 1750000000 + id; v[10] = id % 10007
            printf "*22\r\n$4\r\nHSET\r\n$%d\r\n%s\r\n", length(k), k
            for (i = 1; i <= 10; i++)
                printf "$%d\r\n%s\r\n$%d\r\n%s\r\n", length(f[i]), f[i], length(v[i] ""), v[i]
        }
    }'
}

# RESP for RPUSHes of $2 elements (`item:<n>`, 1,000 a command) to list $1.
gen_list() {
    awk -v key="$1" -v n="$2" 'BEGIN {
        for (first = 0; first < n; first += 1000) {
            c = (n - first < 1000) ? n - first : 1000
            printf "*%d\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n", 2 + c, length(key), key
            for (i = first; i < first + c; i++) {
                e = "item:" i
                printf "$%d\r\n%s\r\n", length(e), e
            }
        }
    }'
}

# Scenario 4's vote script as users write it, the tally line $1 (a
# `redis.call` on KEYS[2] and ARGV[2]). redis-benchmark's __rand_int__ is
# zero padded, hence tonumber() for the bit offset.
vote_script() {
    local tally=$1
    cat <<LUA
if redis.call('GETBIT', KEYS[1], tonumber(ARGV[1])) == 1 then
  return 0
end
redis.call('SETBIT', KEYS[1], tonumber(ARGV[1]), 1)
$tally
return 1
LUA
}
