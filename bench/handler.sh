#!/usr/bin/env bash
# bench/handler.sh — the webhook over HTTP against the minimal handler
# (issue 38 item 5): the same load tool, 50 keep-alive clients, DURATION
# (10 s) each, by turns ROUNDS (2) times:
#   * bench/floor: reads the body, decodes the JSON of a message_new event
#     and answers "ok", nothing else;
#   * the service (vkcounter serve, spawned by the load tool with its fake
#     VK API, on a fresh Redis server): distinct texts from 1,000 peers,
#     every reply sent and checked.
# For each: requests/s and the CPU per request of the handler or the
# service (its process, sampled every 0.1 s), the load tool's, and for the
# service Redis's; then the ratios of the service to the floor, and at
# the end their mean (and the CPU ratio's spread) over the rounds.
# Redis's reads a request say how many scripts its pipelines carry.
# With PIN=1 Redis shares the load tool's core, and answers late when the
# load tool keeps that core busy; REDIS_CORES (a taskset list, e.g. 0-1)
# lets it run where the scheduler finds room, as a Redis of its own would
# answer at once.
# Usage: [ROUNDS=2] [DURATION=10s] [BIN=vkcounter binary, else built from
# this tree] [PIN=1: the handler and the service on a core of their own,
# see lib.sh] [REDIS_CORES=list] bench/handler.sh
source "$(dirname "$0")/lib.sh"
rounds=${ROUNDS:-2}
duration=${DURATION:-10s}

if [ -n "${REDIS_CORES:-}" ]; then redis_pin="taskset -c $REDIS_CORES"; fi
if [ -n "${BIN:-}" ]; then cp "$BIN" "$work/vkcounter"; else go build -o "$work/vkcounter" ./cmd/vkcounter; fi
go build -o "$work/floor" ./bench/floor
serve=$work/vkcounter # what the load tool spawns
if [ -n "$pinned" ]; then
  serve=$work/vkcounter-pinned
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$pinned" "$work/vkcounter" >"$serve"
  chmod +x "$serve"
fi
us() { awk -v s="$1" -v n="$2" 'BEGIN {printf "%.1f", s / n * 1e6}'; } # us SECONDS N: µs each

machine
for round in $(seq "$rounds"); do
  $pinned "$work/floor" >"$work/floor.url" & pids+=($!)
  floor_pid=$!
  sleep 0.5 # it prints its address once it listens
  f0=$(proc_cpu "$floor_pid")
  read -r lcpu _ < <(with_cpu "$work/out" "$work/vkcounter" loadtest callback -no-probe -url "$(cat "$work/floor.url")" -texts 100000 \
    -per-text 1 -concurrency 50 -duration "$duration" -reply-timeout 1ms) # every answer missing: exit 1
  fcpu=$(awk -v a="$f0" -v b="$(proc_cpu "$floor_pid")" 'BEGIN {print b - a}')
  kill "$floor_pid"
  fn=$(grep -o '[0-9]* requests,' "$work/out" | head -1 | awk '{print $1}')
  frps=$(grep -o '[0-9]* requests/s' "$work/out" | head -1 | awk '{print $1}')
  fus=$(us "$fcpu" "$fn")
  echo "== round $round: the minimal handler: $frps req/s; CPU per request: the handler $fus µs, the load tool $(us "$lcpu" "$fn") µs"

  start_redis 25990
  c0=$(redis_cpu)
  r0=$(redis_reads)
  read -r lcpu scpu < <(with_cpu "$work/out" "$work/vkcounter" loadtest callback -spawn -bin "$serve" -redis "$url" \
    -key-prefix vkc: -texts 100000 -per-text 1 -peers 1000 -concurrency 50 -duration "$duration" -reply-timeout 60s)
  n=$(grep -o '[0-9]* events,' "$work/out" | head -1 | awk '{print $1}')
  rps=$(grep -o '[0-9]* requests/s' "$work/out" | head -1 | awk '{print $1}')
  sus=$(us "$scpu" "$n")
  echo "   the service: $rps req/s ($(grep -E 'result:' "$work/out")); CPU per request: the service $sus µs, the load tool and its fake VK $(us "$lcpu" "$n") µs, Redis $(awk -v a="$c0" -v b="$(redis_cpu)" -v n="$n" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}') µs; Redis's reads $(awk -v a="$r0" -v b="$(redis_reads)" -v n="$n" 'BEGIN {printf "%.3f", (b - a) / n}')"
  stop_redis
  echo "   the service / the minimal handler: $(awk -v a="$rps" -v b="$frps" 'BEGIN {printf "%.2f", a / b}') of its requests/s, $(awk -v a="$sus" -v b="$fus" 'BEGIN {printf "%.2f", a / b}') × its CPU per request"
  awk -v a="$rps" -v b="$frps" -v c="$sus" -v d="$fus" 'BEGIN {print a / b, c / d}' >>"$work/ratios"
done
read -r rps_mean _ < <(spread "$work/ratios" 1)
read -r cpu_mean lo hi n < <(spread "$work/ratios" 2)
echo "== $n rounds: the service / the minimal handler: $rps_mean of its requests/s, $cpu_mean × its CPU per request ($lo to $hi)"
