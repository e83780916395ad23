#!/usr/bin/env bash
# LB.* against the Redis recipe it replaces (issue 16): the same board of
# MEMBERS entries (`m:<12 digits>`, integer scores) is loaded into
# redis-server as a sorted set with time packed into the score (the
# scenarios' recipe) and into Rostrum as a leaderboard, then each LB row is
# timed against its recipe row at every pipeline depth:
#   LB.SUBMIT        vs ZADD GT with a packed score
#   LB.INCR          vs ZINCRBY
#   LB.RANK          vs ZREVRANK
#   LB.TOP 10 / 100  vs ZREVRANGE 0 9 / 0 99 WITHSCORES
#   LB.AROUND 21     vs ZREVRANK + ZCARD, then ZREVRANGE of the window
#   LB.FRIENDS       vs SMEMBERS + one ZSCORE per friend + a sort (FRIENDS
#                       friends in the set `friends:me`)
# The single-command rows run through redis-benchmark; AROUND and FRIENDS
# through benches/clients/lb_recipe.rs, timed end to end (client work
# included). One table prints requests/s for both, the ratio LB / recipe
# and each server's CPU time per request; then memory per entry.
#
# Usage: benches/lb_benchmark.sh [-m MEMBERS] [-n REQUESTS] [-c CLIENTS]
#                                [-P "1 16"] [-f FRIENDS]
#   defaults: -m 1000000 -n 200000 -c 50 -P "1 16" -f 1000
# Environment: ROSTRUM_BIN, CARGO_TARGET_DIR as in benches/lib.sh.
# Run it on an otherwise idle machine: servers and clients share the CPU.
set -euo pipefail

members=1000000
requests=200000
clients=50
pipelines="1 16"
friends=1000
while getopts "m:n:c:P:f:h" opt; do
    case "$opt" in
        m) members=$OPTARG ;;
        n) requests=$OPTARG ;;
        c) clients=$OPTARG ;;
        P) pipelines=$OPTARG ;;
        f) friends=$OPTARG ;;
        *) sed -n '2,24p' "$0"; exit 2 ;;
    esac
done

# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
echo "building the lb_recipe client (release)..." >&2
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --example lb_recipe
driver="${CARGO_TARGET_DIR:-$root/target}/release/examples/lb_recipe"

start_both

echo "generating a board of $members entries..." >&2
gen_lb_board "$members" zset >"$work/zset.resp"
gen_lb_board "$members" lb >"$work/lb.resp"
redis_mem=$(load_and_measure "$redis_port" "$work/zset.resp" "$members")
rostrum_mem=$(load_and_measure "$rostrum_port" "$work/lb.resp" "$members")
rm -f "$work/zset.resp" "$work/lb.resp"
[[ "$(redis-cli -p "$redis_port" ZCARD board)" == $((members + 1)) ]] ||
    { echo "error: redis board incomplete" >&2; exit 1; }
[[ "$(redis-cli -p "$rostrum_port" LB.COUNT lb)" == $((members + 1)) ]] ||
    { echo "error: rostrum board incomplete" >&2; exit 1; }
awk -v n="$members" -v f="$friends" 'BEGIN { srand(7); printf "SADD friends:me"
    for (i = 0; i < f; i++) printf " m:%012d", int(rand() * n); printf "\n" }' >"$work/friends.txt"
for port in "$redis_port" "$rostrum_port"; do
    redis-cli -p "$port" <"$work/friends.txt" >/dev/null
done

# Rows: "title|recipe command on redis-server|LB command on Rostrum"; a
# command starting with `client:` is an lb_recipe mode.
commands=(
    "SUBMIT / ZADD GT packed|ZADD board GT 1000001.99470705 m:__rand_int__|LB.SUBMIT lb m:__rand_int__ 1000001"
    "INCR / ZINCRBY|ZINCRBY board 1 m:__rand_int__|LB.INCR lb m:__rand_int__ 1"
    "RANK / ZREVRANK|ZREVRANK board m:__rand_int__|LB.RANK lb m:__rand_int__"
    "TOP 10 / ZREVRANGE 0 9|ZREVRANGE board 0 9 WITHSCORES|LB.TOP lb 10"
    "TOP 100 / ZREVRANGE 0 99|ZREVRANGE board 0 99 WITHSCORES|LB.TOP lb 100"
    "AROUND 21 / RANK+RANGE|client:around-recipe|client:around-lb"
    "FRIENDS $friends / ZSCOREs|client:friends-recipe|client:friends-lb"
)

# Like lib.sh's measure, for an lb_recipe mode.
measure_client() {
    local port=$1 pipeline=$2 mode=$3 pid=$4 n c0 c1 qps
    n=$requests
    [[ "$mode" == friends-* ]] && n=$((requests / 100 > 200 ? requests / 100 : 200))
    c0=$(cpu_seconds "$pid")
    qps=$("$driver" "$mode" --port "$port" --members "$members" --requests "$n" \
        --conns "$clients" --pipeline "$pipeline") || { printf -- '-\t-\t-\t-\n'; return 0; }
    c1=$(cpu_seconds "$pid")
    awk -v q="$qps" -v c0="$c0" -v c1="$c1" -v n="$n" \
        'BEGIN { printf "%s\t-\t%.2f\t-\n", q, (c1 - c0) * 1e6 / n }'
}

rand_range=$members
rows=()
for p in $pipelines; do
    for entry in "${commands[@]}"; do
        IFS='|' read -r title recipe native <<<"$entry"
        echo "  -P $p $title..." >&2
        if [[ "$recipe" == client:* ]]; then
            r=$(measure_client "$redis_port" "$p" "${recipe#client:}" "$redis_pid")
            q=$(measure_client "$rostrum_port" "$p" "${native#client:}" "$rostrum_pid")
        else
            r=$(measure "$redis_port" "$p" "$recipe" "$redis_pid")
            q=$(measure "$rostrum_port" "$p" "$native" "$rostrum_pid")
        fi
        rows+=("$title -P $p	$r	$q")
    done
done
echo "redis-benchmark -n $requests -c $clients -r $members; FRIENDS rows: $((requests / 100 > 200 ? requests / 100 : 200)) queries" >&2
print_rows | sed 's/redis rps/recipe rps/; s/rostrum rps/LB rps/'
printf '\nmemory per entry, board of %s (bytes; growth of INFO memory over the empty server)\n' "$members"
printf '%-22s %14s %14s\n' server used_memory used_memory_rss
printf 'redis-server (zset)\t%s\nrostrum (leaderboard)\t%s\n' "$redis_mem" "$rostrum_mem" |
    awk -F'\t' '{ printf "%-22s %14s %14s\n", $1, $2, $3 }'
