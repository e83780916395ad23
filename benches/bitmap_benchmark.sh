#!/usr/bin/env bash
# Bitmaps side by side: redis-server and a release Rostrum each receive the
# same 1,000,000 SETBITs (random offsets below 2^32, then offsets 0..10^6 in
# another key) through `redis-cli --pipe`, then the same GETBITs; prints the
# rate of each run, the server's CPU time per command (redis-cli --pipe is
# often the bottleneck, and then the rates say little), and the used memory
# (INFO used_memory growth)
# of each bitmap for both servers (after a warm-up pipe of as many PINGs,
# so buffers a big pipe leaves behind are not counted as the bitmap).
#
# Usage: benches/bitmap_benchmark.sh [-n BITS]      (default 1000000)
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   ROSTRUM_ARGS      extra server arguments (e.g. "--config worker-threads=1")
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
set -euo pipefail

bits=1000000
while getopts "n:h" opt; do
    case "$opt" in
        n) bits=$OPTARG ;;
        *) sed -n '2,14p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
for tool in python3 bc; do
    command -v "$tool" >/dev/null || { echo "error: $tool is not in PATH" >&2; exit 1; }
done

# The command files: RESP, generated once, sent to both servers.
python3 - "$bits" "$work" <<'PY'
import random, sys
n, work = int(sys.argv[1]), sys.argv[2]
rng = random.Random(42)
def cmd(*a):
    out = [b"*%d\r\n" % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)
sparse = [rng.randrange(0, 2**32) for _ in range(n)]
with open(f"{work}/sparse_set", "wb") as f:
    f.write(b"".join(cmd("SETBIT", "sparse", o, 1) for o in sparse))
with open(f"{work}/sparse_get", "wb") as f:
    f.write(b"".join(cmd("GETBIT", "sparse", o) for o in sparse))
with open(f"{work}/dense_set", "wb") as f:
    f.write(b"".join(cmd("SETBIT", "dense", o, 1) for o in range(n)))
with open(f"{work}/dense_get", "wb") as f:
    f.write(b"".join(cmd("GETBIT", "dense", o) for o in range(n)))
with open(f"{work}/warmup", "wb") as f:
    f.write(cmd("PING") * n)
PY

start_both
declare -A pid_of=([$redis_port]=$redis_pid [$rostrum_port]=$rostrum_pid)

used() { redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '$1=="used_memory"{print $2}'; }
run() { # port file -> "seconds server-cpu-seconds"
    local t0 t1 c0 c1
    c0=$(cpu_seconds "${pid_of[$1]}")
    t0=$(date +%s.%N)
    redis-cli -p "$1" --pipe < "$work/$2" >/dev/null
    t1=$(date +%s.%N)
    c1=$(cpu_seconds "${pid_of[$1]}")
    echo "$(echo "$t1 - $t0" | bc -l) $(echo "$c1 - $c0" | bc -l)"
}

# A pipe of the same size first, so buffers a big pipe leaves in place (and
# allocator caches, for a server that would count them) are already there
# before the bitmaps are measured.
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" --pipe < "$work/warmup" >/dev/null
done

printf '%-22s %12s %12s %6s %10s %10s %6s\n' "run ($bits commands)" "redis ops/s" "rost. ops/s" "ratio" \
    "redis us" "rost. us" "ratio"
declare -A mem
for case in sparse dense; do
    for port in "$redis_port" "$rostrum_port"; do
        before=$(used "$port")
        run "$port" "${case}_set" > "$work/t_${port}_${case}_set"
        after=$(used "$port")
        mem[$port,$case]=$((after - before))
        run "$port" "${case}_get" > "$work/t_${port}_${case}_get"
    done
    for op in set get; do
        read -r r rc <"$work/t_${redis_port}_${case}_${op}"
        read -r o oc <"$work/t_${rostrum_port}_${case}_${op}"
        printf '%-22s %12.0f %12.0f %6.2f %10.3f %10.3f %6.2f\n' "$case SETBIT/GETBIT $op" \
            "$(echo "$bits / $r" | bc -l)" "$(echo "$bits / $o" | bc -l)" "$(echo "$r / $o" | bc -l)" \
            "$(echo "$rc * 1000000 / $bits" | bc -l)" "$(echo "$oc * 1000000 / $bits" | bc -l)" \
            "$(awk -v r="$rc" -v o="$oc" 'BEGIN { print (o > 0 ? r / o : 0) }')"
    done
done
echo
printf '%-10s %16s %16s %8s\n' "bitmap" "redis bytes" "rostrum bytes" "ratio"
for case in sparse dense; do
    r=${mem[$redis_port,$case]}; o=${mem[$rostrum_port,$case]}
    printf '%-10s %16d %16d %8.3f\n' "$case" "$r" "$o" "$(echo "$o / $r" | bc -l)"
done
