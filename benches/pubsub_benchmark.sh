#!/usr/bin/env bash
# Pub/Sub side by side: redis-server and a release Rostrum. PUBLISH fan-out
# to 1, 100 and 1,000 subscribers of one channel (messages delivered per
# second, and the server's CPU time per delivered message), then the
# server's memory per subscription with 100,000 subscriptions (10 clients
# with 10,000 channels each; measured first, as the growth of the resident
# size of a fresh server), and a row of 10 readers beside a subscriber
# that never reads, which both servers must cut off at a small pubsub
# limit while PUBLISH keeps its rate (MESSAGES / 10 messages, so that the
# stalled one's share outgrows the kernel's socket buffers). The client is benches/clients/pubsub_fanout.rs
# (single-threaded; it reads the servers' CPU and memory from /proc).
#
# Usage: benches/pubsub_benchmark.sh [-m MESSAGES] [-s SIZE] [-w WINDOW] [-k SUBSCRIPTIONS]
#   -m  deliveries per row: each row publishes MESSAGES / subscribers
#       messages (default 2000000)
#   -s  payload bytes (default 32)
#   -w  PUBLISH calls in flight (default 64)
#   -k  subscriptions of the memory row (default 100000; 10 clients)
# Environment: ROSTRUM_BIN, CARGO_TARGET_DIR, ROSTRUM_ARGS as benches/lib.sh.
#
# Run it on an otherwise idle machine: servers and client share the CPU.
set -euo pipefail

deliveries=2000000
size=32
window=64
subscriptions=100000
while getopts "m:s:w:k:h" opt; do
    case "$opt" in
        m) deliveries=$OPTARG ;;
        s) size=$OPTARG ;;
        w) window=$OPTARG ;;
        k) subscriptions=$OPTARG ;;
        *) sed -n '2,16p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

echo "building the pubsub_fanout client (release)..." >&2
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --example pubsub_fanout
driver="${CARGO_TARGET_DIR:-$root/target}/release/examples/pubsub_fanout"

start_both
echo "pubsub fan-out, $size-byte messages, $window in flight (redis-server port $redis_port, rostrum port $rostrum_port)" >&2

# Memory first, on fresh servers: the fan-out rows leave freed buffers that
# later allocations would reuse without growing the resident size.
clients=10
per=$((subscriptions / clients))
echo "  memory of $subscriptions subscriptions: redis-server..." >&2
r_mem=$("$driver" memory --port "$redis_port" --pid "$redis_pid" --clients "$clients" --channels "$per")
echo "  memory of $subscriptions subscriptions: rostrum..." >&2
q_mem=$("$driver" memory --port "$rostrum_port" --pid "$rostrum_pid" --clients "$clients" --channels "$per")
printf '%-22s %14s %14s %7s\n' "" "redis B/sub" "rostrum B/sub" ratio
awk -v row="$subscriptions subscriptions" -v r="$r_mem" -v q="$q_mem" 'BEGIN {
    printf "%-22s %14.1f %14.1f %7.2f\n", row, r, q, (q > 0 ? r / q : 0)
}'

printf '%-22s %14s %14s %7s %12s %12s %7s\n' row "redis msg/s" "rostrum msg/s" ratio \
    "redis us/msg" "rostrum us/msg" ratio
for n in 1 100 1000; do
    m=$((deliveries / n))
    echo "  $n subscriber(s), $m messages: redis-server..." >&2
    read -r r_rate r_cpu _ < <("$driver" fanout --port "$redis_port" --pid "$redis_pid" \
        --subscribers "$n" --messages "$m" --size "$size" --window "$window")
    echo "  $n subscriber(s), $m messages: rostrum..." >&2
    read -r q_rate q_cpu _ < <("$driver" fanout --port "$rostrum_port" --pid "$rostrum_pid" \
        --subscribers "$n" --messages "$m" --size "$size" --window "$window")
    awk -v row="PUBLISH to $n" -v rr="$r_rate" -v qr="$q_rate" -v rc="$r_cpu" -v qc="$q_cpu" 'BEGIN {
        printf "%-22s %14d %14d %7.2f %12.3f %12.3f %7.2f\n", row, rr, qr, qr / rr, rc, qc, (qc > 0 ? rc / qc : 0)
    }'
done

# A subscriber that never reads, beside 10 that do: with a small pubsub
# limit both servers must cut it off while PUBLISH keeps its rate.
m=$((deliveries / 10))
limit="pubsub 1mb 256kb 2"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" config set client-output-buffer-limit "$limit" >/dev/null
done
echo "  10 subscribers + 1 that never reads ($limit): redis-server..." >&2
read -r r_rate r_cpu r_cut < <("$driver" fanout --port "$redis_port" --pid "$redis_pid" \
    --subscribers 10 --stalled 1 --messages "$m" --size "$size" --window "$window")
echo "  10 subscribers + 1 that never reads: rostrum..." >&2
read -r q_rate q_cpu q_cut < <("$driver" fanout --port "$rostrum_port" --pid "$rostrum_pid" \
    --subscribers 10 --stalled 1 --messages "$m" --size "$size" --window "$window")
awk -v row="to 10 + 1 stalled" -v rr="$r_rate" -v qr="$q_rate" -v rc="$r_cpu" -v qc="$q_cpu" 'BEGIN {
    printf "%-22s %14d %14d %7.2f %12.3f %12.3f %7.2f\n", row, rr, qr, qr / rr, rc, qc, (qc > 0 ? rc / qc : 0)
}'
echo "  stalled subscribers cut off: redis-server $r_cut, rostrum $q_cut (of 1)"

echo "(msg/s ratio: rostrum / redis, higher is better; us/msg and B/sub ratios: redis / rostrum, higher is better)"
