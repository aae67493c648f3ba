#!/usr/bin/env bash
# bench/memory.sh — Redis memory per message, as issue 22 measures it, for
# this tree and for another commit built from a temporary checkout
# (BEFORE, default the main of before the compact layout), each on a fresh
# Redis server (nothing on disk):
#   * distinct texts: the service (vkcounter serve with REDIS_URL and the
#     load tool's fake VK API) gets 20,000 message_new events with 20,000
#     distinct texts from 1,000 peers over its webhook; once every reply is
#     sent, used_memory after minus before, per message: the first hour.
#     Then the dedupe state (the former layout's per-message keys, or the
#     compact layout's dedupe hashes) and the activity once-keys are
#     deleted: the rest of the day. The server's costs of first use (its
#     script cache and Lua heap, a few hundred KB that do not grow with
#     the messages) weigh on that measure, so a second 20,000 (under
#     another KEY_PREFIX) is measured on the same server too.
#   * the floor: one SET with a 10-byte value and a TTL per text, under
#     keys as long as the former layout's (the issue's 120-150 B).
#   * a hot text: one text stored at every second of a day (vkcounter
#     prefill -expired 86400, the counting script once per second): its
#     keys' MEMORY USAGE.
# Usage: [BEFORE=commit] [MESSAGES=20000] bench/memory.sh
source "$(dirname "$0")/lib.sh"
before=${BEFORE:-c4eb15af5c2a1349f2bc085145322ad6b91078e3}
messages=${MESSAGES:-20000}

go build -o "$work/vkcounter" ./cmd/vkcounter
mkdir -p "$work/before"
git archive "$before" | tar -x -C "$work/before"
(cd "$work/before" && go build -o "$work/vkcounter-before" ./cmd/vkcounter)

mem() { redis-cli -p "$port" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {printf "%.0f", (b - a) / n}'; }
del() { redis-cli -p "$port" --scan --pattern "$1" | xargs -r -n 1000 redis-cli -p "$port" DEL >/dev/null; }

run() { # run BINARY PREFIX: the distinct-text messages through a spawned service
  "$1" loadtest callback -spawn -bin "$1" -redis "$url" -key-prefix "$2" -texts "$messages" -per-text 1 \
    -peers 1000 -concurrency 50 -reply-timeout 120s 2>/dev/null | grep -E 'result:' | sed 's/^/   /'
}
forget() { # forget PREFIX: delete the dedupe state and the activity once-keys
  del "$1f:*:e:*"; del "$1f:{???}e[01]"; del "$1*:once:*"
}

measure() { # measure LABEL BINARY
  local label=$1 bin=$2 m0 m1 m2 m3 m4
  echo "== $label: $messages distinct texts from 1,000 peers over the webhook, twice"
  start_redis 26490
  m0=$(mem); run "$bin" vkc:; m1=$(mem); run "$bin" vkd:; m2=$(mem)
  forget vkd:; m3=$(mem); forget vkc:; m4=$(mem)
  echo "   fresh server (the issue's measure, with the server's first-use costs): first hour $(per "$m0" "$m1" "$messages") B per message, the rest of the day $(per "$m0" "$((m4 - (m3 - m1)))" "$messages") B"
  echo "   the second $messages on the same server (per message alone): first hour $(per "$m1" "$m2" "$messages") B, the rest of the day $(per "$m1" "$m3" "$messages") B"
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true

  start_redis 26490
  REDIS_URL=$url KEY_PREFIX=vkc: VK_GROUP_ID=1 "$bin" prefill -expired 86400 <<<"hot" >/dev/null
  echo "   hot text, one occurrence every second of a day: $(redis-cli -p "$port" EVAL "local n = 0 for _, k in ipairs(redis.call('KEYS', 'vkc:f:*')) do n = n + redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0') end return n" 0) B (MEMORY USAGE of its keys)"
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
}

machine
echo "== Redis $(redis-server --version | grep -o 'v=[0-9.]*')"
start_redis 26490
m0=$(mem)
redis-cli -p "$port" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'vkc:f:{' .. string.format('%032x', i) .. '}:n', '1700000000', 'EX', 86460) end" 0 "$messages" >/dev/null
echo "== floor: one key per text (a 10-byte value, a TTL, a 42-byte name): $(per "$m0" "$(mem)" "$messages") B per text"
redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
measure "before ($(git rev-parse --short "$before"))" "$work/vkcounter-before"
measure "after ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes))" "$work/vkcounter"
