#!/usr/bin/env bash
# bench/stores.sh — access (Hit) and participant (Visit) stores, each store
# through its Go API with 50 goroutines, the Redis stores next to
# redis-benchmark running the same command / script in the same run, on a
# fresh Redis server on a spare loopback port.
source "$(dirname "$0")/lib.sh"
start_redis 26490

machine
echo "== redis-benchmark INCRBY (the Redis access store's command)"; rb INCRBY 'bench:a:{pages}' 1
sha=$(redis-cli -p $port SCRIPT LOAD "$(cat counters/participant/visit.lua)")
echo "== redis-benchmark EVALSHA visit.lua, 10000 keys (the Redis participant store's script)"
rb -r 10000 EVALSHA "$sha" 1 'bench:p:{room}' 300 '' __rand_int__
echo "== the stores (Go, 50 goroutines)"
VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench . -benchtime 2s ./counters/access/ ./counters/participant/ | grep Benchmark
echo "== over the counter port (4 connections x 32 pipelined unless named)"
VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench 'Hit|Visit' -benchtime 50000x ./counters/ | grep Benchmark
echo "== redis-benchmark INCRBY again"; rb INCRBY 'bench:a:{pages}' 1
