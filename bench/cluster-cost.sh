#!/usr/bin/env bash
# bench/cluster-cost.sh — the Redis cost per message on a Redis Cluster,
# where a message is two scripts (count.lua in its text's slot, queue.lua
# in its community's) run with EVALSHA: a cluster of three masters (no
# replicas, nothing on disk) on spare loopback ports; for each round and
# each vkcounter binary BIN in turn, the masters emptied and their
# statistics reset, then the service (vkcounter serve with REDIS_CLUSTER,
# spawned by the load tool with its fake VK API) gets MESSAGES (30,000)
# message_new events of as many distinct texts from 1,000 peers, every
# reply sent and checked. Printed per message, summed over the masters:
# every command (INFO commandstats: the scripts' inner ones included),
# the EXPIREs among them, Redis CPU and used_memory's growth; and, before
# each binary's run, the reference script alone on a fresh single server
# (lib.sh's reference: one text, a new message each call), for the ratio
# of the cluster's CPU per message to the reference's per call.
# Usage: [ROUNDS=2] [MESSAGES=30000] [BENCH_PORT=first port] bench/cluster-cost.sh BIN…
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || { echo "usage: bench/cluster-cost.sh BIN…" >&2; exit 2; }
rounds=${ROUNDS:-2}
messages=${MESSAGES:-30000}

start_cluster "$work/cluster" 0 "${BENCH_PORT:-26700}" # three masters

# cluster_stats: every command's calls, the EXPIREs', the CPU seconds and
# used_memory, summed over the masters; the CPU in µs.
cluster_stats() {
  for m in "${nodes[@]}"; do redis-cli -p "$m" INFO all | tr -d '\r'; done |
    awk -F'[:=,]' '/^cmdstat_/ {all += $3; if ($1 == "cmdstat_expire") ex += $3}
      /^used_cpu_(sys|user):/ {cpu += $2} /^used_memory:/ {mem += $2}
      END {printf "%d %d %.0f %d\n", all, ex, cpu * 1e6, mem}'
}

machine
echo "== Redis $(redis-server --version | grep -o 'v=[^ ]*'), a cluster of 3 masters, MESSAGES=$messages"
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    start_redis 26690
    read -r rcpu _ _ _ <<<"$(reference)"
    stop_redis
    for m in "${nodes[@]}"; do
      redis-cli -p "$m" FLUSHALL >/dev/null
      redis-cli -p "$m" CONFIG RESETSTAT >/dev/null
    done
    read -r a0 e0 c0 m0 < <(cluster_stats)
    "$bin" loadtest callback -spawn -bin "$bin" -redis-cluster "$masters" -key-prefix vkc: -texts "$messages" \
      -per-text 1 -peers 1000 -concurrency 50 -duration 120s -reply-timeout 60s >"$work/out" 2>/dev/null || true
    read -r a1 e1 c1 m1 < <(cluster_stats)
    n=$(grep -o '[0-9]* events,' "$work/out" | head -1 | awk '{print $1}')
    cpu=$(per "$c0" "$c1" "$n" %.1f)
    echo "== round $round, $bin: $n messages ($(grep -E 'result:' "$work/out")); per message: $(per "$a0" "$a1" "$n" %.2f) commands," \
      "$(per "$e0" "$e1" "$n" %.3f) of them EXPIRE; Redis CPU $cpu µs = $(awk -v a="$cpu" -v b="$rcpu" 'BEGIN {printf "%.2f", a / b}') ×" \
      "the reference's ($rcpu µs a call); memory $(per "$m0" "$m1" "$n") B"
  done
done
