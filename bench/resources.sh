#!/usr/bin/env bash
# bench/resources.sh — resource counters (acquire+release pairs over the
# counter port) with RESOURCE_STORE=redis next to redis-benchmark running
# the acquire script alone on the same fresh Redis, and with
# RESOURCE_STORE=memory, in one run on one machine. Every response of the
# load tool is checked.
# Usage: [RUNS='50:1 …'] bench/resources.sh [seconds per run, default 10]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
machine
start_redis 26400
# No instance holds anything yet: the stores' birth (docs/COUNTERS.md, the
# birth rule) is set in the past, so they grant from the first second.
redis-cli -p "$port" set bench:r:b 0 >/dev/null
redis-cli -p "$port" set rb:b 0 >/dev/null

go build -o "$work/vkcounter" ./cmd/vkcounter
serve() { # serve PORT STORE
  HTTP_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0 COUNTER_ADDR=127.0.0.1:$1 RESOURCE_STORE=$2 REDIS_URL=$url \
    KEY_PREFIX=bench: LOG_LEVEL=warn "$work/vkcounter" serve 2>>"$work/serve.log" &
  pids+=($!)
}
serve 26415 redis
serve 26416 memory
wait_port 26416

# The acquire script exactly as the store sends it (common.lua + acquire.lua).
script=$(cat counters/resource/common.lua counters/resource/acquire.lua)
sha=$(redis-cli -p "$port" script load "$script")
acquire_script() { # acquire_script CLIENTS: calls/s of the script alone
  redis-benchmark -p "$port" -c "$1" -n $(( 40000 * secs )) -q \
    EVALSHA "$sha" 3 'rb:{x}' 'rb:{x}:l' 'rb:b' holder 1 1073741824 86400 10000 x 0 |
    grep -o '[0-9.]* requests per second' | awk '{print $1}'
}
ours() { # ours PORT CONNS DEPTH: acquire+release requests/s and p99
  "$work/vkcounter" loadtest counters -addr 127.0.0.1:$1 -op acquire -conns "$2" -depth "$3" \
    -names 1000 -duration "${secs}s" -requests 1000000000 -json >"$work/out.json" 2>/dev/null || {
    echo "load run failed:"; grep -A3 listed "$work/out.json"; tail -5 "$work/serve.log"; exit 1; }
  rps=$(grep -o '"requests_per_s": [0-9.]*' "$work/out.json" | awk '{print $2}')
  p99=$(grep -o '"p99_ms": [0-9.]*' "$work/out.json" | awk '{print $2}' | sort -g | tail -1)
}

printf '%-8s %16s %9s %22s %6s %18s\n' conns×d 'redis pairs/s' 'p99 ms' 'acquire script/s' ratio 'memory pairs/s'
for run in ${RUNS:-50:1 4:32 1:1}; do
  IFS=: read -r c d <<<"$run"
  ref=$(acquire_script "$(( c * d ))")
  ours 26415 "$c" "$d"; redis_pairs=$(awk -v r="$rps" 'BEGIN{printf "%.0f", r / 2}'); redis_p99=$p99
  ours 26416 "$c" "$d"; mem_pairs=$(awk -v r="$rps" 'BEGIN{printf "%.0f", r / 2}')
  ratio=$(awk -v a="$redis_pairs" -v b="$ref" 'BEGIN{printf "%.2f", a / b}')
  printf '%-8s %16s %9s %22.0f %6s %18s\n' "$c×$d" "$redis_pairs" "$redis_p99" "$ref" "$ratio" "$mem_pairs"
done
