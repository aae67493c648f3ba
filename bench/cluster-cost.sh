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
# the EXPIREs among them, Redis CPU and used_memory's growth. The binaries,
# alternated, are each other's reference.
# Usage: [ROUNDS=2] [MESSAGES=30000] [BENCH_PORT=first port] bench/cluster-cost.sh BIN…
source "$(dirname "$0")/lib.sh"
[ $# -gt 0 ] || { echo "usage: bench/cluster-cost.sh BIN…" >&2; exit 2; }
rounds=${ROUNDS:-2}
messages=${MESSAGES:-30000}

# Three masters, each on a free port whose bus port (+10000) is free too.
masters=()
p=${BENCH_PORT:-26700}
for i in 1 2 3; do
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null; do p=$((p + 1)); done
  mkdir -p "$work/c$p"
  redis-server --bind 127.0.0.1 --port "$p" --save "" --appendonly no --dir "$work/c$p" --logfile "$work/c$p/log" \
    --cluster-enabled yes --cluster-config-file "$work/c$p/nodes.conf" &
  pids+=($!)
  masters+=("$p")
  p=$((p + 1))
done
for m in "${masters[@]}"; do wait_port "$m"; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${masters[@]}") --cluster-replicas 0 --cluster-yes >"$work/create.log"
for _ in $(seq 100); do
  ok=1
  for m in "${masters[@]}"; do redis-cli -p "$m" CLUSTER INFO | grep -q cluster_state:ok || ok=0; done
  [ "$ok" = 1 ] && break
  sleep 0.1
done
seeds=$(printf '127.0.0.1:%s,' "${masters[@]}")
seeds=${seeds%,}

# cluster_stats: every command's calls, the EXPIREs', the CPU seconds and
# used_memory, summed over the masters.
cluster_stats() {
  for m in "${masters[@]}"; do redis-cli -p "$m" INFO all | tr -d '\r'; done |
    awk -F'[:=,]' '/^cmdstat_/ {all += $3; if ($1 == "cmdstat_expire") ex += $3}
      /^used_cpu_(sys|user):/ {cpu += $2} /^used_memory:/ {mem += $2}
      END {printf "%d %d %.6f %d\n", all, ex, cpu, mem}'
}

machine
echo "== Redis $(redis-server --version | grep -o 'v=[^ ]*'), a cluster of 3 masters, MESSAGES=$messages"
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    for m in "${masters[@]}"; do
      redis-cli -p "$m" FLUSHALL >/dev/null
      redis-cli -p "$m" CONFIG RESETSTAT >/dev/null
    done
    read -r a0 e0 c0 m0 < <(cluster_stats)
    "$bin" loadtest callback -spawn -bin "$bin" -redis-cluster "$seeds" -key-prefix vkc: -texts "$messages" \
      -per-text 1 -peers 1000 -concurrency 50 -duration 120s -reply-timeout 60s >"$work/out" 2>/dev/null || true
    read -r a1 e1 c1 m1 < <(cluster_stats)
    n=$(grep -o '[0-9]* events,' "$work/out" | head -1 | awk '{print $1}')
    echo "== round $round, $bin: $n messages ($(grep -E 'result:' "$work/out")); per message: $(awk -v a="$a0" -v b="$a1" -v n="$n" 'BEGIN {printf "%.2f", (b - a) / n}') commands, $(awk -v a="$e0" -v b="$e1" -v n="$n" 'BEGIN {printf "%.3f", (b - a) / n}') of them EXPIRE; Redis CPU $(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}') µs; memory $(per "$m0" "$m1" "$n") B"
  done
done
