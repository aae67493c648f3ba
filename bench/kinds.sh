#!/usr/bin/env bash
# bench/kinds.sh — window counters (Hit) and unique counters (Add), each
# store through its Go API with 50 goroutines, the Redis stores next to
# redis-benchmark -c 50 running the same script / command in the same run,
# on a fresh Redis server on a spare loopback port.
source "$(dirname "$0")/lib.sh"
start_redis 26590

machine
# The script the Redis window store's Hit runs: headroom.lua, runlist's
# count.lua, then counters/window/window.lua (no headroom check: percent 0).
sha=$(redis-cli -p $port SCRIPT LOAD "$(cat internal/headroom/headroom.lua internal/runlist/count.lua counters/window/window.lua)")
echo "== redis-benchmark EVALSHA count.lua+window.lua, one hot counter, 1 h window (the Redis window store's Hit)"
rb EVALSHA "$sha" 2 'bench:w:{api}:3600:l' 'bench:w:{api}:3600:n' 3600 3660 '' 0
echo "== redis-benchmark PFADD, keys 0…99999 (the Redis unique store's Add)"
rb -r 100000 PFADD 'bench:u:{visitors}' __rand_int__
echo "== the stores (Go, 50 goroutines)"
VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench . -benchtime 2s ./counters/window/ ./counters/unique/ | grep Benchmark
echo "== redis-benchmark EVALSHA again"
rb EVALSHA "$sha" 2 'bench:w:{api}:3600:l' 'bench:w:{api}:3600:n' 3600 3660 '' 0
echo "== redis-benchmark PFADD again"
rb -r 100000 PFADD 'bench:u:{visitors}' __rand_int__
