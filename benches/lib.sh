# Shared by the benchmark scripts (source it; it sets `root`, `rostrum_bin`,
# `rostrum_args`, `work` and `pids`, and defines `free_port`, `wait_ready`,
# `cpu_seconds` and `start_both`): checks the Redis tools, builds or takes
# the Rostrum binary ($ROSTRUM_BIN), takes extra server arguments from $ROSTRUM_ARGS (e.g.
# "--config worker-threads=1"), makes a work folder, and on exit stops
# every process in `pids` and removes it.
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

# Starts redis-server and Rostrum on free loopback ports, both in memory
# (no AOF), logging into $work; sets redis_port, redis_pid, rostrum_port and
# rostrum_pid. Exits with their log when either does not answer PING.
start_both() {
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
        --daemonize no --dir "$work" --logfile "$work/redis.log" &
    redis_pid=$!
    pids+=("$redis_pid")
    wait_ready "$redis_port" "$redis_pid" ||
        { echo "error: redis-server did not start" >&2; cat "$work/redis.log" >&2; exit 1; }

    rostrum_port=$(free_port)
    (cd "$work" && exec "$rostrum_bin" --port "$rostrum_port" --bind 127.0.0.1 --loglevel warning \
        "${rostrum_args[@]}") >"$work/rostrum.log" 2>&1 &
    rostrum_pid=$!
    pids+=("$rostrum_pid")
    wait_ready "$rostrum_port" "$rostrum_pid" ||
        { echo "error: rostrum did not start" >&2; cat "$work/rostrum.log" >&2; exit 1; }
}
