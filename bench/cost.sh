#!/usr/bin/env bash
# bench/cost.sh — every figure of issue 22 (the Redis memory per message and
# the webhook's own cost), for this tree ("after") and for another commit
# built from a temporary checkout ("before": BEFORE, by default the main of
# before the compact layout), each reference measured in the same run:
#   * memory: on a fresh Redis server (nothing on disk), the service
#     (vkcounter serve with REDIS_URL and the load tool's fake VK API) gets
#     20,000 message_new events with 20,000 distinct texts from 1,000 peers
#     over its webhook; once every reply is sent, used_memory after minus
#     before, per message: the first hour. Then the dedupe state (the former
#     layout's per-message keys, or the compact layout's dedupe hashes) and
#     the activity once-keys are deleted: the rest of the day. The server's
#     costs of first use (script cache, Lua, a few hundred KB that do not
#     grow with the messages) weigh on that measure, so a second 20,000
#     (another KEY_PREFIX) is measured on the same server too;
#   * the floor: one SET with a TTL per text, a 20-byte name and an
#     integer value, on a fresh server;
#   * a hot text: one text stored at every second of a day (vkcounter
#     prefill -expired 86400): its keys' MEMORY USAGE;
#   * the ceiling: redis-benchmark running the tree's count script alone (a
#     new message each call), 50 clients, and its Redis CPU per call;
#   * BenchmarkWebhook/redis of the tree, in process, against that ceiling;
#   * over HTTP, 50 keep-alive clients (the load tool): the tree's service as
#     fast as it goes, against bench/floor (a handler that reads the body,
#     decodes the JSON and answers ok) driven by the same client; the Redis
#     CPU per message of the service's run (replies sent included) against
#     the script's alone;
#   * latency at 4,000 events/s over HTTP.
# Usage: [BEFORE=commit] [MESSAGES=20000] bench/cost.sh
source "$(dirname "$0")/lib.sh"
before=${BEFORE:-c4eb15af5c2a1349f2bc085145322ad6b91078e3}
messages=${MESSAGES:-20000}

build_before "$before"
go build -o "$work/floor" ./bench/floor

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
us() { awk -v s="$1" -v n="$2" 'BEGIN {printf "%.1f", s / n * 1e6}'; } # us SECONDS N: µs each

distinct() { # distinct BINARY PREFIX: the distinct-text messages through a spawned service
  "$1" loadtest callback -spawn -bin "$1" -redis "$url" -key-prefix "$2" -texts "$messages" -per-text 1 \
    -peers 1000 -concurrency 50 -reply-timeout 120s 2>/dev/null | grep -E 'result:' | sed 's/^/   /'
}
forget() { # forget PREFIX: delete the dedupe state and the activity once-keys
  del "$1f:*:e:*"; del "$1f:{???}e[01]"; del "$1*:once:*"
}

# ceiling TREE: the tree's count script alone, one text, a new message each
# call; prints calls/s and the Redis CPU per call (µs).
ceiling() {
  local tree=$1 c0 rps
  c0=$(redis_cpu)
  rps=$(count_ceiling "$tree" | grep -o '[0-9.]* requests per second' | awk '{print $1}')
  echo "$rps $(awk -v a="$c0" -v b="$(redis_cpu)" 'BEGIN {printf "%.1f", (b - a) / 200000 * 1e6}')"
  del 'bench:*'
}

measure() { # measure LABEL TREE BINARY
  local label=$1 tree=$2 bin=$3 m0 m1 m2 m3 m4 ceil cpu_script out rps c0 floor_rps
  echo "== $label"
  start_redis 26490
  m0=$(mem); distinct "$bin" vkc:; m1=$(mem); distinct "$bin" vkd:; m2=$(mem)
  forget vkd:; m3=$(mem); forget vkc:; m4=$(mem)
  echo "   memory, $messages distinct texts from 1,000 peers, fresh server (the issue's measure): first hour $(per "$m0" "$m1" "$messages") B per message, the rest of the day $(per "$m0" "$((m4 - (m3 - m1)))" "$messages") B"
  echo "   memory, the second $messages on the same server (per message alone): first hour $(per "$m1" "$m2" "$messages") B, the rest of the day $(per "$m1" "$m3" "$messages") B"
  stop_redis

  start_redis 26490
  REDIS_URL=$url KEY_PREFIX=vkc: VK_GROUP_ID=1 "$bin" prefill -expired 86400 <<<"hot" >/dev/null
  echo "   hot text, one occurrence every second of a day: $(redis-cli -p "$port" EVAL "local n = 0 for _, k in ipairs(redis.call('KEYS', 'vkc:f:*')) do n = n + redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0') end return n" 0) B (MEMORY USAGE of its keys)"
  stop_redis

  start_redis 26490
  # The best of two runs: one run alone moved by a third between runs on
  # this shared machine.
  local ceil2 cpu2
  read -r ceil cpu_script < <(ceiling "$tree")
  read -r ceil2 cpu2 < <(ceiling "$tree")
  echo "   ceiling: the count script alone (redis-benchmark, 50 clients), two runs: $ceil and $ceil2 calls/s, Redis CPU $cpu_script and $cpu2 µs per call; the best of each is the ceiling"
  ceil=$(awk -v a="$ceil" -v b="$ceil2" 'BEGIN {print (a > b) ? a : b}')
  cpu_script=$(awk -v a="$cpu_script" -v b="$cpu2" 'BEGIN {print (a < b) ? a : b}')
  # The benchmark lives with the service (internal/service), in cmd/vkcounter before it moved.
  local benchpkg=./internal/service/
  [ -d "$tree/internal/service" ] || benchpkg=./cmd/vkcounter/
  out=$(cd "$tree" && VKCOUNTER_TEST_REDIS=$url go test -run '^$' -bench 'Webhook/^redis$' -benchtime 100000x "$benchpkg" | grep Benchmark)
  echo "   in process: $out"
  rps=$(grep -o '[0-9.]* req/s' <<<"$out" | awk '{print $1}')
  echo "   in process / ceiling: $(ratio "$rps" "$ceil")"
  redis-cli -p "$port" FLUSHALL >/dev/null

  "$work/floor" >"$work/floor.url" & pids+=($!)
  sleep 0.5
  local floor_pid=${pids[-1]} f0 fcpu lcpu scpu
  f0=$(proc_cpu "$floor_pid")
  read -r lcpu _ < <(with_cpu "$work/out" "$work/vkcounter" loadtest callback -no-probe -url "$(cat "$work/floor.url")" -texts 100000 \
    -per-text 1 -concurrency 50 -duration 10s -reply-timeout 1ms) # every answer missing: exit 1
  fcpu=$(awk -v a="$f0" -v b="$(proc_cpu "$floor_pid")" 'BEGIN {print b - a}')
  kill "$floor_pid"
  local floor_n; floor_n=$(grep -o '[0-9]* requests,' "$work/out" | head -1 | awk '{print $1}')
  floor_rps=$(grep -o '[0-9]* requests/s' "$work/out" | head -1 | awk '{print $1}')
  echo "   the minimal handler over HTTP, 50 clients: $floor_rps req/s; CPU per request: the handler $(us "$fcpu" "$floor_n") µs, the load tool $(us "$lcpu" "$floor_n") µs"
  c0=$(redis_cpu)
  read -r lcpu scpu < <(with_cpu "$work/out" "$work/vkcounter" loadtest callback -spawn -bin "$bin" -redis "$url" -key-prefix vkc: \
    -texts 100000 -per-text 1 -peers 1000 -concurrency 50 -duration 10s -reply-timeout 60s)
  out=$(cat "$work/out")
  rps=$(grep -o '[0-9]* requests/s' <<<"$out" | head -1 | awk '{print $1}')
  local events; events=$(grep -o '[0-9]* events,' <<<"$out" | head -1 | awk '{print $1}')
  local cpu_msg; cpu_msg=$(awk -v a="$c0" -v b="$(redis_cpu)" -v n="$events" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}')
  echo "   over HTTP, 50 clients: $rps req/s ($(grep -E 'result:' <<<"$out")), the minimal handler $floor_rps req/s: $(ratio "$rps" "$floor_rps") of the floor"
  echo "   CPU per request over HTTP: the service $(us "$scpu" "$events") µs, the load tool (and its fake VK API) $(us "$lcpu" "$events") µs, Redis $cpu_msg µs"
  echo "   Redis CPU per message over HTTP, replies sent included: $cpu_msg µs = $(ratio "$cpu_msg" "$cpu_script") × the script alone"
  redis-cli -p "$port" FLUSHALL >/dev/null
  out=$("$work/vkcounter" loadtest callback -spawn -bin "$bin" -redis "$url" -key-prefix vkc: -texts 40000 -per-text 1 \
    -concurrency 50 -rate 4000 -duration 10s -reply-timeout 60s 2>/dev/null || true)
  echo "   4,000 events/s over HTTP: $(grep -E 'stopped:' <<<"$out" | sed 's/^stopped: //')"
  grep -E '^ *(latency|webhook) ' <<<"$out" | sed 's/^/   /'
  stop_redis
}

machine
echo "== Redis $(redis-server --version | grep -o 'v=[0-9.]*'), MESSAGES=$messages"
start_redis 26490
m0=$(mem)
redis-cli -p "$port" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('SET', string.format('vkc:f:{%03d}%09d', i % 1000, i), 1764000000 + i, 'EX', 86460) end" 0 "$messages" >/dev/null
echo "== floor: one key per text with a TTL (a 20-byte name, an integer value), fresh server: $(per "$m0" "$(mem)" "$messages") B per text"
stop_redis
measure "before ($(git rev-parse --short "$before"))" "$work/before" "$work/vkcounter-before"
measure "after ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes))" . "$work/vkcounter"
