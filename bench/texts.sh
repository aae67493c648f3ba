#!/usr/bin/env bash
# bench/texts.sh — what one /texts request of TEXTS (1,000, the most one
# request may ask) texts costs Redis, for this tree ("after") and another
# commit built from a temporary checkout ("before": BEFORE, by default the
# main of before /texts was pipelined), each on a fresh server (nothing on
# disk): the service (vkcounter serve with REDIS_URL, the README's demo
# community in dry-run) counts 100 of the texts through its webhook, then
# answers REQUESTS (10) /texts requests one after another. Per request:
# the commands Redis ran for it (INFO commandstats, all commands), the
# EVALSHAs among them, the socket reads Redis made (INFO stats'
# total_reads_processed: a client's round trip is at least one read, a
# pipeline a few, 16 KiB each), Redis's CPU and the request's time at the
# client (curl, the median).
# Usage: [BEFORE=commit] [TEXTS=1000] [REQUESTS=10] bench/texts.sh
source "$(dirname "$0")/lib.sh"
before=${BEFORE:-e60dab8}
texts=${TEXTS:-1000}
requests=${REQUESTS:-10}

build_before "$before"

stat() { redis-cli -p "$port" INFO "$1" | tr -d '\r' | awk -F: -v k="$2" '$1 == k {print $2}'; }
calls() { redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[=,]' -v p="${1:-cmdstat_}" 'index($1, p) == 1 {s += $2} END {print s + 0}'; }
per() { awk -v a="$1" -v b="$2" -v n="$requests" 'BEGIN {printf "%.1f", (b - a) / n}'; }

query=$(seq 0 $((texts - 1)) | sed 's/^/text=t/' | paste -sd '&')
echo "$(uname -m), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f3), $(go version | cut -d' ' -f3)"
echo "| tree | commands per request | EVALSHA per request | socket reads per request | Redis CPU per request | time per request (median) |"
echo "|---|---|---|---|---|---|"
for tree in before after; do
  start_redis "${BENCH_PORT:-22100}"
  bin=$work/vkcounter
  [ "$tree" = before ] && bin=$work/vkcounter-before
  http=$(free_port 22180) admin=$(free_port 22190)
  REDIS_URL=$url HTTP_ADDR=127.0.0.1:$http ADMIN_ADDR=127.0.0.1:$admin COUNTER_ADDR=off KEY_PREFIX=bench: LOG_LEVEL=warn \
    "$bin" serve >"$work/$tree.log" 2>&1 &
  pids+=($!)
  wait_port "$admin" 100
  for i in $(seq 0 99); do
    curl -sf "127.0.0.1:$http/callback" -d '{"type":"message_new","group_id":1,"event_id":"e'$i'","v":"5.199",
      "object":{"message":{"id":'$((i + 1))',"peer_id":42,"from_id":42,"date":1764115200,"conversation_message_id":'$((i + 1))',"text":"t'$i'"}}}' >/dev/null
  done
  curl -sf "127.0.0.1:$admin/texts?$query" >/dev/null # the scripts loaded, the connections open
  c0=$(calls) e0=$(calls cmdstat_evalsha) r0=$(stat stats total_reads_processed)
  u0=$(redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}')
  times=$(for _ in $(seq "$requests"); do
    curl -sf -o "$work/answer" -w '%{time_total}\n' "127.0.0.1:$admin/texts?$query"
  done | sort -n)
  u1=$(redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}')
  c1=$(calls) e1=$(calls cmdstat_evalsha) r1=$(stat stats total_reads_processed)
  grep -q '"text":"t99","count":1' "$work/answer" || { echo "$tree: t99 not counted 1: $(head -c 300 "$work/answer")"; exit 1; }
  median=$(echo "$times" | awk '{a[NR] = $1} END {printf "%.0f ms", a[int((NR + 1) / 2)] * 1000}')
  cpu=$(awk -v a="$u0" -v b="$u1" -v n="$requests" 'BEGIN {printf "%.1f ms", (b - a) * 1000 / n}')
  echo "| $tree | $(per "$c0" "$c1") | $(per "$e0" "$e1") | $(per "$r0" "$r1") | $cpu | $median |"
  kill "${pids[-1]}" "${pids[-2]}"
  wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
done
