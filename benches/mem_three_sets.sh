#!/bin/bash
# RSS growth per key for three key sets, redis vs rostrum (issue 20); see
# benches/key_rss.sh for the same sets through benches/lib.sh. Usage:
#   ROSTRUM_BIN=target/release/rostrum SETS="str ttl" bash benches/mem_three_sets.sh
BIN=$(readlink -f ${ROSTRUM_BIN:-target/release/rostrum}); RP=${RP:-$((20000+RANDOM%20000))}; OP=$((RP+1))
mkdir -p /tmp/mem.$$; cd /tmp/mem.$$
gen() { case $1 in
 str) awk 'BEGIN{for(i=0;i<2000000;i++){k="k:" i; printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", length(k), k}}' ;;
 zset) awk 'BEGIN{for(i=0;i<1000000;i++){k="z:" i; printf "*12\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n", length(k), k; for(j=1;j<=5;j++){m="player" j; s=j*10; printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(s), s, length(m), m}}}' ;;
 ttl) awk 'BEGIN{for(i=0;i<1000000;i++){k="t:" i; printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n$2\r\nEX\r\n$4\r\n3600\r\n", length(k), k}}' ;;
esac; }
for set in ${SETS:-str zset ttl}; do gen $set > $set.resp; done
for set in ${SETS:-str zset ttl}; do
 n=$([ $set = str ] && echo 2000000 || echo 1000000)
 redis-server --port $RP --save "" --appendonly no >/dev/null 2>&1 & rp=$!
 $BIN --port $OP $ROSTRUM_ARGS >/dev/null 2>&1 & op=$!
 sleep 1
 for port in $RP $OP; do
  pid=$([ $port = $RP ] && echo $rp || echo $op)
  r0=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  redis-cli -p $port --pipe < $set.resp >/dev/null
  sleep 2
  r1=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
  um=$(redis-cli -p $port info memory | grep '^used_memory:' | tr -d '\r' | cut -d: -f2)
  echo "$set $port rss_per_key $(( (r1-r0)*1024/n )) used_memory_total $um dbsize $(redis-cli -p $port dbsize)"
 done
 kill $rp $op; wait
done
rm -rf /tmp/mem.$$
