#!/usr/bin/env bash
# Writes during a snapshot, side by side with redis-server in the same run:
# a sorted set of N members (default 1M and 5M; SIZES="1000000 5000000
# 10000000" for more), and a probe client (benches/clients/snapshot_probe.rs)
# sending ZINCRBY to a random member every ~1 ms while BGSAVE runs, then
# while BGREWRITEAOF runs (both servers with appendonly yes, appendfsync
# everysec). For each: the snapshot's duration, the longest wait and the
# p99.9 / p99 of the probe's writes, resident memory before and at peak
# (Redis: parent + fork child), and the copy-on-write size the server
# reports (current_cow_peak, rdb_/aof_last_cow_size).
#
# With TYPES="zset board" (default: zset) Rostrum is also measured with a
# leaderboard of N entries written by LB.INCR (redis-server, which has no
# such type, keeps its sorted set and ZINCRBY: the nearest equivalent).
# TYPES may also name hash (HINCRBY), set (SADD of a new member), list
# (LSET at a random index), stream (XADD) and strings (N string keys,
# INCR of a random one); both servers get the same type.
#
#   benches/snapshot_probe.sh            # 1M and 5M
#   SIZES=2000000 benches/snapshot_probe.sh
#   SIZES=10000000 TYPES="zset board" benches/snapshot_probe.sh
#   OPS=BGSAVE benches/snapshot_probe.sh   # one operation only
#
# Timings are wall-clock: on a loaded machine they are noisy; run it when
# `uptime` shows the lowest load.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# SNAPSHOT_PROBE_BIN: a probe client built already (no cargo run here).
if [[ -n "${SNAPSHOT_PROBE_BIN:-}" ]]; then
    probe=$(realpath "$SNAPSHOT_PROBE_BIN")
else
    echo "building the snapshot_probe client (release)..." >&2
    cargo build --release --quiet --manifest-path "$root/Cargo.toml" --example snapshot_probe
    probe="${CARGO_TARGET_DIR:-$root/target}/release/examples/snapshot_probe"
fi

read -r -a sizes <<<"${SIZES:-1000000 5000000}"
read -r -a types <<<"${TYPES:-zset}"
read -r -a ops <<<"${OPS:-BGSAVE BGREWRITEAOF}"

start_servers() {
    local side
    for side in redis rostrum; do
        mkdir -p "$work/$side"
        launch_ready "$side" "$work/$side" "$work/$side.log" \
            --save '' --appendonly yes --appendfsync everysec
    done
}

start_servers
echo "load: $(uptime | sed 's/.*load average/load average/')"
printf 'members\ttype\toperation\tserver\tsnapshot_ms\twrites\tmax_ms\tp99.9_ms\tp99_ms\trss_before_MB\trss_peak_MB\tpeak/before\tcow_MB\n'
for n in "${sizes[@]}"; do
  for type in "${types[@]}"; do
    for side in redis rostrum; do
        port_var="${side}_port"
        # Redis has no leaderboard: its side is always the sorted set.
        t=$type
        [[ $side == redis && $type == board ]] && t=zset
        redis-cli -p "${!port_var}" FLUSHALL >/dev/null
        "$probe" load --port "${!port_var}" --key board --members "$n" --type "$t"
        # A compact AOF first, so both start alike.
        redis-cli -p "${!port_var}" BGREWRITEAOF >/dev/null
        settle "${!port_var}"
    done
    for op in "${ops[@]}"; do
        for side in redis rostrum; do
            port_var="${side}_port"
            pid_var="${side}_pid"
            t=$type
            [[ $side == redis && $type == board ]] && t=zset
            settle "${!port_var}"
            sleep 1
            line=$("$probe" run --port "${!port_var}" --pid "${!pid_var}" --key board \
                --members "$n" --command "$op" --type "$t")
            printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$t" "$op" "$side" "$line" |
                awk -F'\t' -v OFS='\t' '{ r = ($10 > 0) ? $11 / $10 : 0;
                    print $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, sprintf("%.2f", r), $12 }'
        done
    done
  done
done
