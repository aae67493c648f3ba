#!/usr/bin/env bash
# bench/webhook.sh — the bot's figures for BENCHMARKS.md, each next to its
# reference measured in the same run on the same machine: a fresh Redis
# server (nothing on disk) on a spare loopback port; redis-benchmark running
# the counting script (the ceiling) before and after; the in-process webhook
# benchmark; the load tool against the real program over HTTP (as fast as
# possible and at half that rate, the seed's two scenarios with a 60 s window, the expired
# scenario); and the reply backlog drain under VK's 20 requests/s.
source "$(dirname "$0")/lib.sh"
start_redis 26390
go build -o "$work/vkcounter" ./cmd/vkcounter

machine
per_call() { awk -v a="$1" -v b="$(redis_cpu)" 'BEGIN {printf "%.1f", (b - a) / 200000 * 1e6}'; }
c0=$(redis_cpu)
echo "== ceiling before: redis-benchmark EVALSHA count.lua+text.lua+textcount.lua, 50 clients"; count_ceiling
echo "   Redis CPU per script call: $(per_call "$c0") µs"; del 'bench:*'
echo "== in-process webhook (handler, script, outbox, batched vk.messages and vk.users, sender), 50 goroutines"
c0=$(redis_cpu)
VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench 'Webhook/^redis$' -benchtime 200000x ./internal/service/ | grep Benchmark
echo "   Redis CPU per webhook request: $(per_call "$c0") µs (cmds/op: commands the client sent per message, everything amortised)"
max_out=$(load "as fast as possible, HTTP, 50 in flight" -texts 1000 -per-text 100 -concurrency 50 -duration 20s -reply-timeout 60s)
echo "$max_out"
# The latency aim is set at half the maximum rate just measured.
half=$(grep -o '[0-9]* requests/s' <<<"$max_out" | head -1 | awk '{printf "%d", $1 / 2}')
load "half that rate ($half/s), HTTP, 50 in flight" -texts 1000 -per-text 100 -concurrency 50 -rate "$half" -duration 15s -reply-timeout 60s
c0=$(redis_cpu)
echo "== ceiling after"; count_ceiling
echo "   Redis CPU per script call: $(per_call "$c0") µs"; del 'bench:*'
load "seed scenario 300 texts x 10, window 60s, one at a time" -window 60s -texts 300 -per-text 10 -concurrency 1
load "seed scenario 3000 texts x 1, window 60s, one at a time" -window 60s -texts 3000 -per-text 1 -concurrency 1
load "expired: 3000 texts x 1 old occurrence" -window 60s -texts 3000 -per-text 1 -expired 1 -concurrency 1
load "expired: 300 texts x 10 old occurrences" -window 60s -texts 300 -per-text 1 -expired 10 -concurrency 1
echo "== reply backlog: 5000 replies, one token, fake VK enforcing 20 requests/s"
VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench BacklogDrain -benchtime 1x ./internal/service/ | grep Benchmark

echo "== idle: commands the service sends in 30 s with one community and one token, nothing to do"
idle_prefix="idle$RANDOM:"
REDIS_URL=$url KEY_PREFIX=$idle_prefix HTTP_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0 COUNTER_ADDR=off VK_GROUP_ID=1 LOG_LEVEL=error \
  "$work/vkcounter" serve & pids+=($!)
sleep 5 # started, and past its start-up calls
# MONITOR also lists the commands a script runs inside ([0 lua]): those are not sent by the client.
# Nothing else uses this Redis by now.
timeout 30 redis-cli -p $port MONITOR | grep -v ' lua\]' | grep -c '^[0-9]' | awk '{printf "   %d commands in 30 s: %.3f per second\n", $1, $1 / 30}' || true
