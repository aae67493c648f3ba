#!/usr/bin/env bash
# bench/failover.sh — what a master's failover costs the webhook on a Redis
# Cluster (issue 29), for this tree ("after") and another commit built from
# a temporary checkout ("before": BEFORE, by default the main of before the
# fix), each on a fresh cluster of 3 masters + 3 replicas
# (cluster-node-timeout 2000, nothing on disk):
#   * the service (vkcounter serve, REDIS_CLUSTER at the masters) gets
#     RATE message_new events/s for DURATION from the load tool, which
#     re-posts a refused event after its Retry-After as VK does (up to 100
#     times; CONCURRENCY requests in flight, 1000 by default, so that events
#     waiting to be re-posted do not hold back the new ones, as with VK) and
#     checks every reply;
#   * at KILL_AT one master is killed with SIGKILL: VICTIM=other (default)
#     a master not holding the community's outbox stream, so a third of
#     the texts are refused meanwhile; VICTIM=outbox the master holding it,
#     so every message is;
#   * events recorded every 0.1 s: the service's refused webhook requests
#     (its metric vkcounter_webhook_requests_total{outcome="unavailable"}),
#     and the cluster's view (CLUSTER NODES of a live node): the failover
#     time is from the kill to the replica promoted and cluster_state:ok;
#     the 503 window from the first refused request after the kill to the
#     last (to 0.1 s).
# Usage: [BEFORE=commit] [VICTIM=other|outbox] [RATE=200] [DURATION=45]
#        [KILL_AT=12] [CONCURRENCY=1000] bench/failover.sh
source "$(dirname "$0")/lib.sh"
before=${BEFORE:-ec4738c49f9cca978ec9cffe6f16df5aeaea2b2b}
victim_kind=${VICTIM:-other}
rate=${RATE:-200}
duration=${DURATION:-45}
kill_at=${KILL_AT:-12}
concurrency=${CONCURRENCY:-1000}

build_before "$before"

now_ms() { date +%s%3N; }

# master_of PORT SLOT: the port of the master serving SLOT, as the node on
# PORT sees it.
master_of() {
  redis-cli -p "$1" cluster nodes | awk -v s="$2" '$3 ~ /master/ {
    for (i = 9; i <= NF; i++) { n = split($i, r, "-"); if (n == 1) r[2] = r[1]
      if (s >= r[1] + 0 && s <= r[2] + 0) { a = $2; sub(/@.*/, "", a); sub(/.*:/, "", a); print a } } }'
}

# run NAME BINARY: one run on a fresh cluster; prints its figures.
run() {
  local name=$1 bin=$2 dir="$work/$1" http admin vk slot outbox victim promoted="" killed
  mkdir -p "$dir"
  start_cluster "$dir" 1 17300
  http=$(free_port 16560); admin=$(free_port $((http + 1))); vk=$(free_port $((admin + 1)))
  # The community (VK_GROUP_ID=1) keeps its outbox stream under the hash tag {1}.
  slot=$(redis-cli -p "${nodes[0]}" cluster keyslot '{1}')
  outbox=$(master_of "${nodes[0]}" "$slot")
  for m in ${masters//,/ }; do
    if [ "$victim_kind" = outbox ] && [ "${m##*:}" = "$outbox" ]; then victim=${m##*:}; fi
    if [ "$victim_kind" != outbox ] && [ "${m##*:}" != "$outbox" ] && [ -z "${victim:-}" ]; then victim=${m##*:}; fi
  done
  # A slot of the victim's, to see it served by another node.
  local vslot
  vslot=$(redis-cli -p "${nodes[0]}" cluster nodes | awk -v v="127.0.0.1:$victim" '
    { a = $2; sub(/@.*/, "", a) } a == v { split($9, r, "-"); print r[1] }')
  local victim_pid
  for i in "${!nodes[@]}"; do [ "${nodes[$i]}" = "$victim" ] && victim_pid=${node_pids[$i]}; done

  "$bin" loadtest callback -url "http://127.0.0.1:$http/callback" -vk-addr "127.0.0.1:$vk" \
    -texts 300 -per-text $((rate * duration / 300)) -rate "$rate" -duration "${duration}s" \
    -concurrency "$concurrency" -attempts 100 -reply-timeout 120s >"$dir/load.out" 2>"$dir/load.err" &
  local load=$!
  pids+=($load)
  wait_port "$vk"
  env KEY_PREFIX=vkc: NORMALIZE=false VK_API_URL="http://127.0.0.1:$vk/method/" VK_GROUP_ID=1 VK_RATE=1000000 \
    VK_SECRET=loadtest VK_TOKEN=loadtest REDIS_CLUSTER="$masters" HTTP_ADDR="127.0.0.1:$http" \
    ADMIN_ADDR="127.0.0.1:$admin" COUNTER_ADDR=off LOG_LEVEL=warn "$bin" serve 2>"$dir/serve.log" &
  local svc=$!
  pids+=($svc)
  wait_port "$admin" 100
  local start
  start=$(now_ms)
  : >"$dir/events"
  while kill -0 "$load" 2>/dev/null; do
    local t v
    t=$(now_ms)
    v=$(curl -s "http://127.0.0.1:$admin/metrics" | awk '/^vkcounter_webhook_requests_total\{outcome="unavailable"\}/ {print $2}')
    echo "$t ${v:-0}" >>"$dir/events"
    if [ -z "${killed:-}" ] && [ $((t - start)) -ge $((kill_at * 1000)) ]; then
      kill -9 "$victim_pid"; killed=$(now_ms)
    fi
    if [ -n "${killed:-}" ] && [ -z "$promoted" ]; then
      local live=${nodes[0]}
      [ "$live" = "$victim" ] && live=${nodes[1]}
      if redis-cli -p "$live" cluster info | grep -q cluster_state:ok && [ "$(master_of "$live" "$vslot")" != "$victim" ]; then
        promoted=$(now_ms)
      fi
    fi
    sleep 0.1
  done
  wait "$load" || true
  kill "$svc" 2>/dev/null || true
  wait "$svc" 2>/dev/null || true
  for p in "${node_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  echo "== $name ($bin): killed master 127.0.0.1:$victim ($victim_kind) at +${kill_at}s"
  echo "   failover (kill to promotion, cluster_state:ok): $(awk -v a="$killed" -v b="$promoted" 'BEGIN {printf "%.1f s", (b - a) / 1000}')"
  awk -v k="$killed" '
    { if (NR > 1 && $2 > prev && $1 >= k) { if (!first) first = $1; last = $1 } prev = $2 }
    END { if (first) printf "   503 window: %.1f s (first refused %.1f s after the kill, last %.1f s after)\n", (last - first) / 1000, (first - k) / 1000, (last - k) / 1000
          else print "   503 window: none" }' "$dir/events"
  echo "   refused requests (unavailable): $(tail -1 "$dir/events" | cut -d' ' -f2)"
  grep -E 'stopped:|errors:|result:' "$dir/load.out" | sed 's/^/   /' || true
  grep -c 'connection refused' "$dir/serve.log" | sed 's/^/   log lines with "connection refused": /' || true
}

machine
run before "$work/vkcounter-before"
run after "$work/vkcounter"
