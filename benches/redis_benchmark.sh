#!/usr/bin/env bash
# Throughput side by side: redis-server and a release Rostrum, each measured
# with redis-benchmark (-P 1 and -P 16), printed as one table.
#
# Usage: benches/redis_benchmark.sh [-n REQUESTS] [-c CLIENTS] [-t TESTS] [-P "1 16"]
#                                   [-d VALUE_BYTES]
#   defaults: -n 200000 -c 50 -t ping,set,get,incr -P "1 16" -d 3
# Environment:
#   ROSTRUM_BIN       use this rostrum binary instead of `cargo build --release`
#   CARGO_TARGET_DIR  where cargo puts the release build (default: ./target)
#
# Both servers listen on free ports on 127.0.0.1 and are stopped on exit,
# including on Ctrl-C or an error. Run it on an otherwise idle machine: the
# servers and the benchmark share the CPU.
set -euo pipefail

requests=200000
clients=50
tests=ping,set,get,incr
pipelines="1 16"
value_size=3
while getopts "n:c:t:P:d:h" opt; do
    case "$opt" in
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        t) tests=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        d) value_size=$OPTARG ;;
        *) sed -n '2,13p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"

start_both

# Runs redis-benchmark against port $1 with pipeline $2; prints "TEST<TAB>RPS"
# lines (TEST with " -P n" appended).
measure() {
    local port=$1 pipeline=$2 out status=0
    out=$(redis-benchmark -p "$port" -t "$tests" -n "$requests" -c "$clients" \
        -d "$value_size" -P "$pipeline" --csv 2>"$work/bench.err") || status=$?
    # A failing test (e.g. a command the server lacks) stops redis-benchmark;
    # report it and keep the rows measured before it.
    if [[ $status -ne 0 ]] || grep -qiE 'error|warning' "$work/bench.err"; then
        echo "  redis-benchmark on port $port (-P $pipeline) exited $status:" >&2
        sed 's/^/    /' "$work/bench.err" >&2
    fi
    printf '%s\n' "$out" | awk -F'","' -v p="$pipeline" '
        NR > 1 && NF > 1 { gsub(/"/, "", $1); gsub(/"/, "", $2); printf "%s -P %s\t%s\n", $1, p, $2 }'
}

echo "redis-benchmark -t $tests -n $requests -c $clients (redis-server port $redis_port, rostrum port $rostrum_port)" >&2
for p in $pipelines; do
    echo "  -P $p: redis-server..." >&2
    measure "$redis_port" "$p" >>"$work/redis.tsv"
    echo "  -P $p: rostrum..." >&2
    measure "$rostrum_port" "$p" >>"$work/rostrum.tsv"
done

printf '%-26s %14s %14s %8s\n' test "redis rps" "rostrum rps" ratio
awk -F'\t' '
    NR == FNR { redis[$1] = $2; order[++n] = $1; next }
    { rostrum[$1] = $2 }
    END {
        for (i = 1; i <= n; i++) {
            t = order[i]
            r = redis[t]; q = (t in rostrum) ? rostrum[t] : "-"
            ratio = (q != "-" && r > 0) ? sprintf("%.2f", q / r) : "-"
            printf "%-26s %14s %14s %8s\n", t, r, q, ratio
        }
    }' "$work/redis.tsv" "$work/rostrum.tsv"
