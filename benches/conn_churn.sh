#!/usr/bin/env bash
# What a connection costs each server, redis-server and Rostrum side by
# side: clients that connect for every request (PHP without persistent
# connections, CGI scripts, `redis-cli` in a shell loop), and clients that
# stay connected doing nothing.
#   - churn: `redis-benchmark -k 0` (connect, one GET, close; -c 50):
#     requests/s, and server CPU per connection (user and system, from
#     /proc), medians of -r rounds taken in turns.
#   - idle: N clients that each send one PING and then wait: growth of
#     RSS and of INFO used_memory per client.
#
# Usage: benches/conn_churn.sh [-n CONNECTIONS] [-i IDLE_CLIENTS] [-r ROUNDS]
#   defaults: -n 20000 -i 3000 -r 3
# Environment: ROSTRUM_BIN, ROSTRUM_ARGS as for the other benches; the
# idle part needs python3 and `ulimit -n` above IDLE_CLIENTS.
set -euo pipefail

connections=20000
idle=3000
rounds=3
while getopts "n:i:r:h" opt; do
    case "$opt" in
        n) connections=$OPTARG ;;
        i) idle=$OPTARG ;;
        r) rounds=$OPTARG ;;
        *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done
command -v python3 >/dev/null || { echo "error: python3 is not in PATH" >&2; exit 1; }
ulimit -n $((idle + 1024)) 2>/dev/null ||
    { echo "error: cannot raise the open files limit to $((idle + 1024))" >&2; exit 1; }

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
launch_ready redis "$work" "$work/redis.log" --save '' --appendonly no --maxclients $((idle + 100))
launch_ready rostrum "$work" "$work/rostrum.log" --maxclients $((idle + 100))
redis-cli -p "$redis_port" SET k v >/dev/null
redis-cli -p "$rostrum_port" SET k v >/dev/null

# ticks PID -> "utime stime" of the process (all its threads), in ticks.
ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

declare -A rps user sys
for _ in $(seq 1 "$rounds"); do
    for side in redis rostrum; do
        port_var=${side}_port pid_var=${side}_pid
        port=${!port_var} pid=${!pid_var}
        read -r u0 s0 < <(ticks "$pid")
        out=$(redis-benchmark -p "$port" -n "$connections" -c 50 -k 0 -t get --csv 2>/dev/null | tail -1)
        read -r u1 s1 < <(ticks "$pid")
        rps[$side]+="$(printf '%s' "$out" | awk -F, '{ gsub(/"/, "", $2); print $2 }') "
        user[$side]+="$(awk -v d=$((u1 - u0)) -v hz="$hz" -v n="$connections" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }') "
        sys[$side]+="$(awk -v d=$((s1 - s0)) -v hz="$hz" -v n="$connections" 'BEGIN { printf "%.2f", d * 1e6 / hz / n }') "
    done
done

# med "V V V" -> the median (lib.sh's).
med() { median <<<"$1"; }

echo "connect, GET, close (redis-benchmark -k 0 -c 50 -n $connections), medians of $rounds rounds:"
printf '%-8s %10s %14s %14s\n' server "conn/s" "user us/conn" "sys us/conn"
for side in redis rostrum; do
    printf '%-8s %10.0f %14s %14s\n' "$side" "$(med "${rps[$side]}")" "$(med "${user[$side]}")" "$(med "${sys[$side]}")"
done
awk -v a="$(med "${rps[rostrum]}")" -v b="$(med "${rps[redis]}")" \
    'BEGIN { printf "Rostrum/Redis conn/s: %.2f\n\n", a / b }'

idle_clients() {
    python3 - "$1" "$2" "$idle" <<'EOF'
import socket, subprocess, sys, time
port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0

def used():
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0

r0, u0 = rss(), used()
socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*1\r\n$4\r\nPING\r\n")
    socks.append(s)
for s in socks:
    if not s.recv(64).startswith(b"+PONG"):
        sys.exit("no PONG")
time.sleep(0.5)
r1, u1 = rss(), used()
print(f"{(r1 - r0) / n:.0f} {(u1 - u0) / n:.0f}")
for s in socks:
    s.close()
EOF
}
echo "$idle idle clients (one PING each), bytes per client:"
printf '%-8s %10s %12s\n' server RSS used_memory
for side in redis rostrum; do
    port_var=${side}_port pid_var=${side}_pid
    read -r r u < <(idle_clients "${!port_var}" "${!pid_var}")
    printf '%-8s %10s %12s\n' "$side" "$r" "$u"
done
