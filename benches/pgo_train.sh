#!/usr/bin/env bash
# Makes benches/pgo/rostrum.profdata, the profile every optimised build of
# Rostrum is compiled with (profile-guided optimisation; see
# .cargo/pgo-rustc and the README's "Built with a profile of its load").
#
# 1. Builds Rostrum and the loadgen client instrumented
#    (-Cprofile-generate), in a target folder of their own.
# 2. Runs them under the load the benchmarks and the scenarios bring, every
#    family at -P 1 and -P 16: sorted sets and LB.* boards, hashes, lists,
#    strings and counters, sets, bitmaps, streams, pub/sub, Lua (the vote
#    script), keys and expiry; then again with the AOF (everysec), a
#    replica, an AOF rewrite, maxmemory with allkeys-lru under evicting
#    SETs, and TLS (when openssl and a TLS-capable redis-benchmark are
#    there).
# 3. Merges what they counted into the profile (llvm-profdata of the LLVM
#    that rustc is built on: `apt-get install llvm-22` for rustc 1.95).
#
# Usage: benches/pgo_train.sh [-n REQUESTS]   (default 20000 a row)
# Run it when the hot paths changed: a function whose code changed since
# the profile was made is compiled as without one. It takes about 5
# minutes on the 2-core machine, and ends by removing the release and
# iter builds (cargo would not rebuild the dependencies for a new
# profile).
set -euo pipefail

requests=20000
while getopts "n:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        *) sed -n '2,23p' "$0"; exit 2 ;;
    esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
llvm=$(rustc -vV | awk '/^LLVM version:/ { split($3, v, "."); print v[1] }')
profdata=""
for candidate in "llvm-profdata-$llvm" "/usr/lib/llvm-$llvm/bin/llvm-profdata" llvm-profdata; do
    if command -v "$candidate" >/dev/null &&
        "$candidate" merge --version 2>/dev/null | grep -q "LLVM version $llvm\."; then
        profdata=$candidate
        break
    fi
done
[[ -n $profdata ]] || {
    echo "error: no llvm-profdata of LLVM $llvm (rustc's); try: apt-get install llvm-$llvm" >&2
    exit 1
}

build=$(mktemp -d -t rostrum-pgo.XXXXXX)
raw="$build/raw"
echo "building instrumented rostrum and loadgen into $build..." >&2
# RUSTFLAGS replaces the config's flags; ROSTRUM_PGO=0 keeps the wrapper
# from adding the old profile.
ROSTRUM_PGO=0 RUSTFLAGS="-Cprofile-generate=$raw" CARGO_TARGET_DIR="$build/target" \
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin rostrum --example loadgen

export ROSTRUM_BIN="$build/target/release/rostrum"
export LOADGEN=light LOADGEN_BIN="$build/target/release/examples/loadgen"
# shellcheck source=benches/lib.sh
source "$root/benches/lib.sh"
trap 'cleanup; rm -rf "$build"' EXIT

# Stops the server on port $1 (process $2) with SHUTDOWN, so that it
# writes its counts as it exits.
stop() {
    redis-cli -p "$1" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    wait "$2" 2>/dev/null || true
}

# One row: loadgen at -P 1 and -P 16 on port $port, $requests requests
# (or $n, for the rows that do a hundred times more a request: their
# counts would otherwise outweigh every other path's).
row() {
    local p
    for p in 1 16; do
        "${loadgen[@]}" -p "$port" -n "${n:-$requests}" -c 50 -r 100000 -P "$p" --csv "$@" \
            >/dev/null || echo "  (row failed: $*)" >&2
    done
}

# The data the rows read: a board, an LB board with its friends, profiles,
# a list, a vote script.
load() {
    gen_zset 100000 >"$work/board.resp"
    gen_lb_board 100000 lb >"$work/lb.resp"
    gen_profiles 0 100000 >"$work/profiles.resp"
    gen_list recent 1000 >"$work/recent.resp"
    local f
    for f in board lb profiles recent; do
        redis-cli -p "$port" --pipe <"$work/$f.resp" >/dev/null
    done
    awk 'BEGIN { srand(7); printf "SADD friends:me"
        for (i = 0; i < 1000; i++) printf " m:%012d", int(rand() * 100000); printf "\n" }' |
        redis-cli -p "$port" >/dev/null
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(vote_script "redis.call('ZINCRBY', KEYS[2], 1, ARGV[2])")")
}

# Commands that go in sequences (MULTI / EXEC, blocking pops that find
# data, cursors), $requests of each group, as RESP through redis-cli --pipe.
sequences() {
    awk -v n="$requests" '
        function cmd(s,    w, k, i, out) {
            k = split(s, w, " "); out = "*" k "\r\n"
            for (i = 1; i <= k; i++) out = out "$" length(w[i]) "\r\n" w[i] "\r\n"
            return out
        }
        BEGIN {
            for (i = 0; i < n; i++) {
                m = sprintf("m:%012d", (i * 7919) % 100000)
                printf "%s%s%s%s", cmd("MULTI"), cmd("ZINCRBY board 3 " m),
                    cmd("HINCRBY profile:" sprintf("%012d", i % 100000) " visits 1"), cmd("EXEC")
                printf "%s%s", cmd("RPUSH jobs job:" i), cmd("BLPOP jobs 1")
                printf "%s%s", cmd("ZADD waiting " i " w:" i), cmd("BZPOPMIN waiting 1")
                if (i % 20 == 0) printf "%s", cmd("SCAN " i " COUNT 100")
                if (i % 50 == 0) printf "%s", cmd("ZRANGESTORE top10 board 0 9 REV")
            }
        }' >"$work/sequences.resp"
    redis-cli -p "$port" --pipe <"$work/sequences.resp" >/dev/null
}

rows() {
    sequences
    row ZADD board __rand_int__ m:__rand_int__
    row ZADD grow __rand_int__ n:__rand_int__
    row ZADD board GT 1000001.99470705 m:__rand_int__
    row ZINCRBY board 7 m:__rand_int__
    row ZREVRANK board m:__rand_int__
    row ZRANK board m:__rand_int__
    row ZSCORE board m:__rand_int__
    row ZREVRANGE board 0 9 WITHSCORES
    row ZREVRANGE board 0 99 WITHSCORES
    row ZRANGEBYSCORE board 1000 2000 LIMIT 0 10
    row ZCARD board
    row ZCOUNT board 1000 500000
    row ZREM grow m:__rand_int__
    row LB.SUBMIT lb m:__rand_int__ 1000001
    row LB.INCR lb m:__rand_int__ 1
    row LB.RANK lb m:__rand_int__
    row LB.SCORE lb m:__rand_int__
    row LB.TOP lb 10
    row LB.TOP lb 100
    row LB.AROUND lb m:__rand_int__ 21
    n=$((requests / 100)) row LB.FRIENDS lb friends:me INCLUDE m:me
    row HSET profile:__rand_int__ name p country SE avatar a level 7 xp 123 wins 4 losses 2 \
        created 1700000000 seen 1750000000 visits 9
    row HGET profile:__rand_int__ xp
    row HMGET profile:__rand_int__ name xp level
    row HGETALL profile:__rand_int__
    row HINCRBY profile:__rand_int__ visits 1
    row LPUSH queue job:__rand_int__
    row RPUSH queue job:__rand_int__
    row RPOP queue
    row LPOP queue
    row LRANGE recent 0 99
    row LINDEX recent 500
    row SET key:__rand_int__ xxx
    row SET lock:__rand_int__ owner NX PX 30000
    row GET key:__rand_int__
    row MGET key:__rand_int__ key:__rand_int__ key:__rand_int__
    row INCR counter:__rand_int__
    row INCRBY counter:__rand_int__ 5
    row EXPIRE key:__rand_int__ 3600
    row TTL key:__rand_int__
    row EXISTS key:__rand_int__
    row DEL lock:__rand_int__
    row SADD set:__rand_int__ m:__rand_int__
    row SISMEMBER friends:me m:__rand_int__
    row SCARD friends:me
    row SETBIT bits 123457 1
    row GETBIT bits 7777
    row BITCOUNT bits 0 1000
    row XADD events '*' user u__rand_int__ post p__rand_int__ kind like
    row XRANGE events - + COUNT 100
    row XLEN events
    row PUBLISH news:__rand_int__ hello
    row EVALSHA "$sha" 2 vote:topic:7 topic_rank __rand_int__ topic_7
    row PING
}

echo "in memory..." >&2
launch_ready rostrum "$work" "$work/plain.log"
port=$rostrum_port
load
rows
"${loadgen[@]}" -p "$port" -n 2000 -c 5 -r 100000 -P 1 --csv INFO >/dev/null
stop "$port" "$rostrum_pid"

echo "with the AOF, a replica, a rewrite, then maxmemory..." >&2
mkdir -p "$work/aof" "$work/replica"
launch_ready rostrum "$work/aof" "$work/aof.log" --appendonly yes --appendfsync everysec
port=$rostrum_port
primary_pid=$rostrum_pid
launch_ready rostrum "$work/replica" "$work/replica.log"
replica_port=$rostrum_port
replica_pid=$rostrum_pid
redis-cli -p "$replica_port" REPLICAOF 127.0.0.1 "$port" >/dev/null
load
redis-cli -p "$port" BGREWRITEAOF >/dev/null
rows
settle "$port"
redis-cli -p "$port" CONFIG SET maxmemory-policy allkeys-lru >/dev/null
redis-cli -p "$port" CONFIG SET maxmemory 32mb >/dev/null
for round in a b c; do
    row SET "new$round:__rand_int__:__rand_int__" "$(printf '_%.0s' $(seq 1 100))"
done
row ZINCRBY board 7 m:__rand_int__
stop "$replica_port" "$replica_pid"
stop "$port" "$primary_pid"

if command -v openssl >/dev/null && redis-benchmark --help 2>&1 | grep -q -- '--tls'; then
    echo "over TLS..." >&2
    (
        cd "$work"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
            -subj "/CN=pgo-ca" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
            -subj "/CN=server" 2>/dev/null
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
            -out server.crt -days 2 -extfile server.ext 2>/dev/null
    )
    tls_port=$(free_port)
    launch_ready rostrum "$work" "$work/tls.log" --tls-port "$tls_port" \
        --tls-cert-file "$work/server.crt" --tls-key-file "$work/server.key" \
        --tls-ca-cert-file "$work/ca.crt" --tls-auth-clients no
    for p in 1 16; do
        for t in get,set zincrby; do
            if [[ $t == zincrby ]]; then
                redis-benchmark -p "$tls_port" --tls --cacert "$work/ca.crt" -n "$requests" -c 50 \
                    -P "$p" -r 100000 -q ZINCRBY board 7 m:__rand_int__ >/dev/null
            else
                redis-benchmark -p "$tls_port" --tls --cacert "$work/ca.crt" -n "$requests" -c 50 \
                    -P "$p" -r 100000 -q -t "$t" >/dev/null
            fi
        done
    done
    stop "$rostrum_port" "$rostrum_pid"
else
    echo "(no openssl or no TLS in redis-benchmark: TLS left out of the profile)" >&2
fi

mkdir -p "$root/benches/pgo"
"$profdata" merge --sparse -o "$root/benches/pgo/rostrum.profdata" "$raw"/*.profraw
echo "wrote benches/pgo/rostrum.profdata ($(git -C "$root" rev-parse --short HEAD), LLVM $llvm)" >&2
# Cargo rebuilds the dependencies only when their fingerprint changes,
# and the profile's content is not in it: without this, tokio and the
# rest would keep the old profile (or none) until their next rebuild.
for profile in release iter; do
    cargo clean --quiet --manifest-path "$root/Cargo.toml" --profile "$profile"
done
echo "removed the release and iter builds: the next build takes the new profile everywhere" >&2
