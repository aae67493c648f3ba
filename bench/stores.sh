#!/usr/bin/env bash
# bench/stores.sh — access (Hit) and participant (Visit) stores, each store
# through its Go API with 50 goroutines, the Redis stores next to
# redis-benchmark running the same command / script in the same run, on a
# fresh Redis server on a spare loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
port=26490
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
redis-server --bind 127.0.0.1 --port $port --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 50); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done

rb() { redis-benchmark -p $port -n 200000 -c 50 "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1; }
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== redis-benchmark INCRBY (the Redis access store's command)"; rb INCRBY 'bench:a:{pages}' 1
sha=$(redis-cli -p $port SCRIPT LOAD "$(cat counters/participant/visit.lua)")
echo "== redis-benchmark EVALSHA visit.lua, 10000 keys (the Redis participant store's script)"
rb -r 10000 EVALSHA "$sha" 1 'bench:p:{room}' 300 '' __rand_int__
echo "== the stores (Go, 50 goroutines)"
VKCOUNTER_TEST_REDIS=redis://127.0.0.1:$port/0 go test -run '^$' -bench . -benchtime 2s ./counters/access/ ./counters/participant/ | grep Benchmark
echo "== over the counter port (4 connections x 32 pipelined unless named)"
VKCOUNTER_TEST_REDIS=redis://127.0.0.1:$port/0 go test -run '^$' -bench 'Hit|Visit' -benchtime 50000x ./counters/ | grep Benchmark
echo "== redis-benchmark INCRBY again"; rb INCRBY 'bench:a:{pages}' 1
