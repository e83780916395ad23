#!/usr/bin/env bash
# Server instructions per request (valgrind's callgrind) of lone commands
# from 50 clients, for any number of servers (Rostrum builds and
# redis-server side by side): GET of one key, HGET (100,000 10-field
# profiles loaded; redis-benchmark without -r asks for the same missing
# key each time), XADD of a 3-field event. The part of a request that
# is not the command's (read, dispatch, reply, the wait for the next
# request) shows most at -P 1.
#
# Usage: benches/p1_instructions.sh BIN [BIN...] [-n REQUESTS] [-P PIPELINE]
#   defaults: -n 5000 -P 1.
set -euo pipefail
bins=()
requests=5000
pipeline=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        -n) requests=$2; shift 2 ;;
        -P) pipeline=$2; shift 2 ;;
        -h) sed -n '2,11p' "$0"; exit 0 ;;
        *) bins+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done
[[ ${#bins[@]} -ge 1 ]] || { sed -n '2,11p' "$0"; exit 2; }
ROSTRUM_BIN=${bins[0]}
# shellcheck source=benches/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=benches/callgrind_lib.sh
source "$(dirname "$0")/callgrind_lib.sh"

gen_profiles 0 100000 >"$work/profiles.resp"
tests=(
    "GET|GET k"
    "HGET|HGET profile:__rand_int__ xp"
    "XADD|XADD events * user u__rand_int__ post p__rand_int__ kind like"
)

printf '%-8s' "-P $pipeline"
for bin in "${bins[@]}"; do printf ' %14s' "$(basename "$bin")"; done
printf '\n'
declare -A ir
for i in "${!bins[@]}"; do
    callgrind_start "${bins[$i]}" "$work/$i.log"
    redis-cli -p "$port" SET k abc >/dev/null
    redis-cli -p "$port" --pipe <"$work/profiles.resp" >/dev/null
    for t in "${tests[@]}"; do
        title=${t%%|*}
        # XADD's `*` goes to redis-benchmark as is, not as a file glob.
        set -f
        read -r -a cmd <<<"${t#*|}"
        set +f
        count_instructions "$pid" redis-benchmark -p "$port" -n "$requests" -c 50 \
            -P "$pipeline" "${cmd[@]}"
        ir["$i|$title"]=$((instructions / requests))
    done
    callgrind_stop
done
for t in "${tests[@]}"; do
    title=${t%%|*}
    printf '%-8s' "$title"
    for i in "${!bins[@]}"; do printf ' %14s' "${ir[$i|$title]}"; done
    printf '\n'
done
