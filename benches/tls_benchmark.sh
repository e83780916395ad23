#!/usr/bin/env bash
# The leaderboard rows over TLS: redis-server and a release Rostrum side by
# side, each with a TLS port (the same certificates, client certificates
# required, as both servers do by default), a board of MEMBERS members
# (`m:<id>`, loaded through the plain port), then redis-benchmark --tls
# runs ZINCRBY, ZREVRANK and ZREVRANGE 0 9 WITHSCORES against each TLS
# port at every pipeline depth, ROUNDS times (the servers taking turns);
# one table prints the median requests/s for both, the ratio against the
# targets (Rostrum at least 1.0x Redis at -P 1, 1.3x at -P 16), p99
# latency and each server's CPU time per request (medians too). The TLS
# version and suite each server negotiated, and the load average before
# and after, are printed with it.
#
# Usage: benches/tls_benchmark.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS] [-P "1 16"] [-R ROUNDS]
#   defaults: -m 1000000 -n 200000 -c 50 -P "1 16" -R 3
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#
# Needs the openssl command (the certificates are made into the work
# folder). Both servers listen on free ports on 127.0.0.1 and are stopped
# on exit. Run it on an otherwise idle machine: the servers, the TLS work
# and the benchmark share the CPU.
set -euo pipefail

members=1000000
requests=200000
clients=50
pipelines="1 16"
rounds=3
while getopts "m:n:c:P:R:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        R) rounds=$OPTARG ;;
        *) sed -n '2,24p' "$0"; exit 2 ;;
    esac
done
command -v openssl >/dev/null || { echo "error: openssl is not in PATH" >&2; exit 1; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: -R wants a positive count" >&2; exit 2; }
redis-benchmark --help 2>&1 | grep -q -- '--tls' ||
    { echo "error: this redis-benchmark was built without TLS" >&2; exit 1; }
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

# A CA, a server certificate for 127.0.0.1 and a client certificate.
certs="$work/certs"
mkdir -p "$certs"
(
    cd "$certs"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=bench CA" 2>/dev/null
    for who in server client; do
        openssl req -newkey rsa:2048 -nodes -keyout "$who.key" -out "$who.csr" \
            -subj "/CN=$who" 2>/dev/null
        if [[ $who == server ]]; then
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$who.ext"
        else
            printf 'extendedKeyUsage=clientAuth\n' >"$who.ext"
        fi
        openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out "$who.crt" -days 2 -extfile "$who.ext" 2>/dev/null
    done
)
tls_server_args=(--tls-cert-file "$certs/server.crt" --tls-key-file "$certs/server.key"
    --tls-ca-cert-file "$certs/ca.crt")
tls_client_args=(--tls --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key")

redis_tls_port=$(free_port)
rostrum_tls_port=$(free_port)
# The plain ports (for loading) come from start_both; the TLS ports join
# through the server arguments.
redis_port=$(free_port)
redis-server --port "$redis_port" --tls-port "$redis_tls_port" "${tls_server_args[@]}" \
    --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$work" \
    --logfile "$work/redis.log" &
redis_pid=$!
pids+=("$redis_pid")
wait_ready "$redis_port" "$redis_pid" ||
    { echo "error: redis-server did not start" >&2; cat "$work/redis.log" >&2; exit 1; }
rostrum_port=$(free_port)
(cd "$work" && exec "$rostrum_bin" --port "$rostrum_port" --tls-port "$rostrum_tls_port" \
    "${tls_server_args[@]}" --bind 127.0.0.1 --loglevel warning "${rostrum_args[@]}") \
    >"$work/rostrum.log" 2>&1 &
rostrum_pid=$!
pids+=("$rostrum_pid")
wait_ready "$rostrum_port" "$rostrum_pid" ||
    { echo "error: rostrum did not start" >&2; cat "$work/rostrum.log" >&2; exit 1; }
for port in "$redis_tls_port" "$rostrum_tls_port"; do
    [[ "$(redis-cli -p "$port" "${tls_client_args[@]}" PING)" == PONG ]] ||
        { echo "error: no TLS on port $port" >&2; exit 1; }
done
# What each server negotiates with a client like redis-benchmark's.
negotiated() {
    openssl s_client -connect "127.0.0.1:$1" -CAfile "$certs/ca.crt" -cert "$certs/client.crt" \
        -key "$certs/client.key" -brief </dev/null 2>&1 |
        awk -F': ' '/^Protocol version/ { p = $2 } /^Ciphersuite/ { c = $2 } END { print p " " c }'
}
redis_tls=$(negotiated "$redis_tls_port")
rostrum_tls=$(negotiated "$rostrum_tls_port")

echo "generating a board of $members members..." >&2
awk -v n="$members" 'BEGIN {
    for (first = 0; first < n; first += 1000) {
        count = (n - first < 1000) ? n - first : 1000
        printf "*%d\r\n$4\r\nZADD\r\n$5\r\nboard\r\n", 2 + 2 * count
        for (i = 0; i < count; i++) {
            id = first + i; s = (id * 7919) % 1000003; m = sprintf("m:%012d", id)
            printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s ""), s, length(m), m
        }
    }
}' >"$work/board.resp"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe <"$work/board.resp" >/dev/null
    got=$(redis-cli -p "$port" ZCARD board)
    [[ "$got" == "$members" ]] || { echo "error: port $port has $got members, not $members" >&2; exit 1; }
done
rm -f "$work/board.resp"

# lib.sh's `measure`, through the TLS port of the server on plain port $1.
measure() {
    local port=$1 pipeline=$2 command=$3 pid=$4 out c0 c1 tls_port
    tls_port=$redis_tls_port
    [[ $port == "$rostrum_port" ]] && tls_port=$rostrum_tls_port
    c0=$(cpu_seconds "$pid")
    # shellcheck disable=SC2086 # the command is split into its words
    out=$(redis-benchmark -p "$tls_port" "${tls_client_args[@]}" -n "$requests" -c "$clients" \
        -r "$rand_range" -P "$pipeline" --csv $command 2>"$work/bench.err") || {
        echo "  redis-benchmark on port $tls_port failed:" >&2
        sed 's/^/    /' "$work/bench.err" >&2
        printf -- '-\t-\t-\n'
        return 0
    }
    c1=$(cpu_seconds "$pid")
    printf '%s\n' "$out" | awk -F, -v c0="$c0" -v c1="$c1" -v n="$requests" 'NR == 2 {
        gsub(/"/, "", $2); gsub(/"/, "", $7)
        printf "%s\t%s\t%.2f\n", $2, $7, (c1 - c0) * 1e6 / n }'
}

commands=(
    "ZINCRBY|ZINCRBY board 1 m:__rand_int__"
    "ZREVRANK|ZREVRANK board m:__rand_int__"
    "ZREVRANGE 0 9 WITHSCORES|ZREVRANGE board 0 9 WITHSCORES"
)
# The ratio each row must reach: 1.0 at -P 1, 1.3 when pipelined.
check_targets() {
    local row
    echo
    for row in "${rows[@]}"; do
        printf '%s\n' "$row" | awk -F'\t' '{
            target = ($1 ~ / -P 1$/) ? 1.0 : 1.3
            if ($2 <= 0 || $5 == "-") { printf "%-31s no figure\n", $1; next }
            ratio = $5 / $2
            printf "%-31s ratio %.2f, target %.1f: %s\n", $1, ratio, target,
                (ratio >= target) ? "met" : "NOT met"
        }'
    done
}

rand_range=$members
echo "redis-benchmark --tls -n $requests -c $clients -r $members, $rounds rounds" >&2
run_rows
print_rows
check_targets
echo
echo "(over TLS with client certificates required on both servers:"
echo " redis-server negotiated ${redis_tls:-?}, rostrum ${rostrum_tls:-?})"
echo "load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
