#!/usr/bin/env bash
# bench/redis-cost.sh — the Redis cost per message (issue 38), for this tree
# ("after") and another commit built from a temporary checkout ("before":
# BEFORE, by default the main of before the issue), beside the reference
# script measured in the same run on the same kind of fresh server:
#   * the reference: a Lua list script that counts one text with a dedupe
#     key (internal/runlist's count.lua with a dedupe key per call, the
#     list-and-total layout), run by redis-benchmark, 50 clients, 200,000
#     calls, a new message each call: its Redis CPU and the commands it runs
#     per call (INFO commandstats: every command's calls, less the
#     EVALSHAs);
#   * per tree, on a fresh server (nothing on disk): the service (vkcounter
#     serve with REDIS_URL, spawned by the load tool with its fake VK API)
#     gets MESSAGES (30,000) message_new events of as many distinct texts
#     from 1,000 peers over its webhook, every reply sent and checked: Redis
#     CPU per message (the drain included: the replies' reads and
#     acknowledgements), the commands run inside scripts per message
#     (commandstats' calls less the commands clients sent, which MONITOR
#     shows in a second run of the same load) and the client commands per
#     message;
#   * per tree, the webhook's writes alone (writes_alone): the sending
#     side's share is the difference;
#   * memory, per tree: 20,000 and 100,000 distinct messages on a fresh
#     server, used_memory after (every reply sent) minus before, per
#     message: the first hour; then the messages' records (freq's dedupe
#     hashes, the outbox's once or state hashes) and the activity once-keys
#     are deleted, as they expire after one to two hours: the rest of the
#     day. The floor: one SET with a TTL per text, on a fresh server.
#   * at the end, this tree's record script alone against the reference,
#     alternated on one fresh server; and each tree's count script alone
#     (as a Redis Cluster and Store.Count run it: one text, a new message
#     each call), on a fresh server of its own with the reference after
#     it: Redis CPU, the commands inside and used_memory's growth per call.
# (bench/cost.sh measures the webhook against a minimal handler.)
# Usage: [BEFORE=commit] [MESSAGES=30000] bench/redis-cost.sh
#
# AB mode, for a change whose effect is smaller than the machine's drift
# between two runs: [ROUNDS=3] [MESSAGES=30000] [PER_TEXT=1] bench/redis-cost.sh ab BIN…
# runs each vkcounter binary BIN in turn, ROUNDS times, each time on a
# fresh server with the reference beside it, and prints the Redis CPU per
# message (the drain included) and its ratio to the reference, the
# commands per message (INFO commandstats: every command, the scripts'
# inner ones included) and used_memory's growth per message: the figures
# side by side, taken minutes apart; then each binary's mean ratio and its
# spread over the rounds. PER_TEXT messages of each text (1: every text
# new) take a text past its first message, into the list form.
#
# Instruction-count mode, which the machine's speed does not move:
# [CALLS=20000] [MESSAGES=30000] [PER_TEXT=1] bench/redis-cost.sh instr BIN…
# runs a Redis server under valgrind's callgrind for each binary BIN and
# prints the instructions it executed per call of the reference (CALLS
# calls, before and after the service), per call of BIN's record script
# alone (CALLS calls; as the service calls it: FCALL where BIN has Redis
# functions, else this tree's script), and per message of the service (the drain
# included), with their ratios. Redis runs some 40 times slower so, and
# the service's run takes as much longer: what the service does per
# second rather than per message (the activity's flushes, the senders'
# idle reads) weighs more per message than at full speed, and the
# senders read their replies in larger batches (cheaper per message).
# The record script alone is the exact figure; the service's, a check
# of the whole. Needs valgrind (Debian's package).
#
# PIN=1 (any mode) runs every Redis server on the first core and the
# rest (the service, the load tool, redis-benchmark) on the others, as
# Redis is deployed: on a machine of its own (see lib.sh).
source "$(dirname "$0")/lib.sh"
redis_pin=$pinned # the Redis servers are what is measured
before=${BEFORE:-207d1c6}
messages=${MESSAGES:-30000}

case "${1:-}" in ab | instr) ;; *) build_before "$before" ;; esac

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# spawn BINARY PREFIX N [PER_TEXT]: N messages through a spawned service,
# PER_TEXT (1) of each text.
spawn() {
  local per=${4:-1}
  "$1" loadtest callback -spawn -bin "$1" -redis "$url" -key-prefix "$2" -texts "$(($3 / per))" -per-text "$per" \
    -peers 1000 -concurrency 50 -reply-timeout 120s 2>/dev/null | grep -E 'result:' | sed 's/^/   /'
}
forget() { # forget PREFIX: delete what expires within two hours: the messages' records and the activity once-keys
  del "$1f:*:e:*"; del "$1f:{???}e[01]"; del "$1*:once:*"; del "$1o:{*}:once[01]"; del "$1o:{*}:s[01]"
}

# writes_alone BINARY: Redis CPU per message of the webhook's writes alone
# (record script, activity), the sending side idle: the service serves on
# its own with a pace of one VK call per 100 s, and the load tool posts
# MESSAGES events without waiting for replies (it reports them missing).
# The service's full figure less this one is the sending side's share: the
# outbox's reads, acknowledgements and pace.
writes_alone() {
  local bin=$1 hp c0
  hp=$(free_port 26100)
  REDIS_URL=$url VK_TOKEN=x VK_GROUP_ID=1 VK_SECRET=loadtest VK_API_URL=http://127.0.0.1:9/method/ VK_RATE=0.01 \
    HTTP_ADDR=127.0.0.1:$hp ADMIN_ADDR=127.0.0.1:0 COUNTER_ADDR=off WINDOW=24h REPLY_QUOTE=all LOG_LEVEL=error KEY_PREFIX=vkc: \
    OUTBOX_MAX_LEN=1000000 "$bin" serve 2>/dev/null &
  local sp=$!
  wait_port "$hp" 100
  c0=$(redis_cpu)
  "$bin" loadtest callback -url "http://127.0.0.1:$hp/callback" -no-probe -texts "$messages" -per-text 1 -peers 1000 \
    -concurrency 50 -reply-timeout 1ms >/dev/null 2>&1 || true # every answer missing: exit 1
  awk -v a="$c0" -v b="$(redis_cpu)" -v n="$messages" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}'
  kill "$sp"; wait "$sp" 2>/dev/null || true
}

# The texts go to one bucket (it becomes a hash table past 128 texts).
record_calls=50000
# load_libraries BIN: BIN loads its libraries into the server as the
# service does (a prefill of one text, under bench:, which record_alone
# deletes).
load_libraries() { echo bench-library | "$1" prefill -redis-url "$url" -key-prefix bench:lib: >/dev/null 2>&1 || true; }

# record_alone: the record script alone, as the reference runs (a new text
# and message each call, no drain), record_calls calls; prints as alone
# (lib.sh) does. Where a binary
# loaded its libraries (load_libraries) and has a record function (Redis
# 7's functions), it is called with FCALL as the service calls it; else
# this tree's record script runs with EVALSHA. The arguments are this
# tree's (layout 3: the entry's data in one).
record_alone() {
  local run fn c0 rps
  fn=$(redis-cli -p "$port" FUNCTION LIST | grep -m1 '^vkcounter_.*_record$' || true)
  if [ -n "$fn" ]; then
    run=(FCALL "$fn")
  else
    run=(EVALSHA "$(redis-cli -p "$port" SCRIPT LOAD "$(cat freq/text.lua freq/reply.lua freq/record.lua)")")
  fi
  rb_calls=$record_calls alone "$record_calls" rb -r 1000000000 "${run[@]}" 6 'bench:o:{1}' 'bench:o:{1}:s0' 'bench:o:{1}:s1' \
    'bench:o:{1}:rid' 'bench:f:{abc}__rand_int__' 'bench:f:{abc}b' 3600 '__rand_int__' 100000 12345 '' '' 86400 86460 60 '' \
    1,2,1764115200123
  del 'bench:*'
}

measure() { # measure LABEL BINARY
  local label=$1 bin=$2 m0 m1 m2 c0 k0 cpu inner client rcpu rcmd rrps
  echo "== $label"
  for n in 20000 100000; do
    start_redis 16960
    m0=$(mem); spawn "$bin" vkc: "$n"; m1=$(mem); forget vkc:; m2=$(mem)
    echo "   memory per distinct message, $n messages, fresh server: first hour $(per "$m0" "$m1" "$n") B, after the records expired $(per "$m0" "$m2" "$n") B"
    stop_redis
  done

  start_redis 16960
  read -r rcpu rcmd _ rrps <<<"$(reference)"
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  c0=$(redis_cpu); k0=$(calls)
  spawn "$bin" vkc: "$messages"
  cpu=$(awk -v a="$c0" -v b="$(redis_cpu)" -v n="$messages" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}')
  local total=$(($(calls) - k0))
  redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v n="$messages" \
    '/^cmdstat/ {sub(/^cmdstat_/, "", $1); printf "%.2f %s %s calls, %s µs each\n", $5 / n, $1, $3, $7}' | sort -rn | head -8 >"$work/usec"
  stop_redis
  start_redis 16960
  local writes
  writes=$(writes_alone "$bin")
  stop_redis
  # The same load again on a fresh server, MONITOR counting what clients
  # sent (lines without "lua") and what scripts ran.
  start_redis 16960
  redis-cli -p "$port" MONITOR >"$work/monitor" 2>/dev/null & local mon=$!
  sleep 0.3
  spawn "$bin" vkc: "$messages" >/dev/null
  sleep 0.5; kill "$mon" 2>/dev/null || true; wait "$mon" 2>/dev/null || true
  client=$(grep -v ' lua\]' "$work/monitor" | grep -vc '"monitor"' || true)
  inner=$(grep -c ' lua\]' "$work/monitor" || true)
  stop_redis
  echo "   reference script alone (redis-benchmark, 50 clients): $rrps calls/s, Redis CPU $rcpu µs per call, $rcmd commands inside per call"
  echo "   Redis CPU per message, the drain included: $cpu µs = $(ratio "$cpu" "$rcpu") × the reference's"
  echo "   of which the webhook's writes alone (the sender idle): $writes µs = $(ratio "$writes" "$rcpu") ×; the sending side the rest: $(awk -v a="$cpu" -v b="$writes" 'BEGIN {printf "%.1f", a - b}') µs"
  echo "   Redis CPU per message by command (commandstats, µs per message, the scripts' inner commands inside their EVALSHA):"
  sed 's/^/      /' "$work/usec"
  echo "   commands per message (commandstats, all): $(awk -v t="$total" -v n="$messages" 'BEGIN {printf "%.2f", t / n}')"
  echo "   commands run inside scripts per message (MONITOR): $(awk -v t="$inner" -v n="$messages" 'BEGIN {printf "%.2f", t / n}'); client commands per message: $(awk -v t="$client" -v n="$messages" 'BEGIN {printf "%.3f", t / n}')"
  grep ' lua\]' "$work/monitor" | awk '{print $4}' | sort | uniq -c | sort -rn | awk -v n="$messages" '{printf "      %s %.2f\n", $2, $1 / n}' | head -20
}

# ab BIN…: the AB mode (see the usage above).
ab() {
  local bin c0 k0 m0 cpu rcpu r per=${PER_TEXT:-1}
  for round in $(seq "${ROUNDS:-3}"); do
    for bin in "$@"; do
      start_redis 16960
      read -r rcpu _ _ <<<"$(reference)"
      c0=$(redis_cpu); k0=$(calls); m0=$(mem)
      spawn "$bin" vkc: "$messages" "$per" >/dev/null
      cpu=$(awk -v a="$c0" -v b="$(redis_cpu)" -v n="$messages" 'BEGIN {printf "%.1f", (b - a) / n * 1e6}')
      r=$(ratio "$cpu" "$rcpu")
      echo "== round $round, $bin: Redis CPU per message, the drain included: $cpu µs = $r × the reference's ($rcpu µs);" \
        "commands $(awk -v a="$k0" -v b="$(calls)" -v n="$messages" 'BEGIN {printf "%.2f", (b - a) / n}'), memory $(per "$m0" "$(mem)" "$messages") B per message"
      echo "$bin $r" >>"$work/ratios"
      stop_redis
    done
  done
  # Each binary's rounds: their mean and their spread.
  local mean lo hi n
  for bin in "$@"; do
    read -r mean lo hi n < <(spread "$work/ratios" 2 "$bin")
    echo "== $bin: mean $mean × over $n rounds ($lo to $hi)"
  done
}

# instructions LABEL N CMD…: runs CMD with the Redis server under
# callgrind counting, and prints the instructions it executed meanwhile,
# per N (CMD's calls or messages).
instructions() {
  local label=$1 n=$2 dump; shift 2
  callgrind_control -z "$vpid" >/dev/null 2>&1
  callgrind_control -i on "$vpid" >/dev/null 2>&1
  "$@" >/dev/null
  callgrind_control -d "$label" "$vpid" >/dev/null 2>&1
  callgrind_control -i off "$vpid" >/dev/null 2>&1
  dump=$(ls -t "$work"/cg."$vpid".* | head -1)
  awk -v n="$n" '/^totals:/ {printf "%.0f", $2 / n}' "$dump"
}

# instr BIN…: the instruction-count mode (see the usage above).
instr() {
  local bin k0 ref ref2 rec svc cmds
  command -v callgrind_control >/dev/null || { echo "instr: needs valgrind (Debian package valgrind)" >&2; exit 2; }
  redis_pin="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$work/cg.%p --log-file=$work/valgrind.log"
  rb_calls=${CALLS:-20000} record_calls=${CALLS:-20000}
  for bin in "$@"; do
    start_redis 16960
    vpid=${pids[-1]}
    ref=$(instructions reference "$rb_calls" reference)
    load_libraries "$bin" # before the count starts
    rec=$(instructions record "$record_calls" record_alone)
    redis-cli -p "$port" FLUSHALL >/dev/null
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    k0=$(calls)
    svc=$(instructions service "$messages" spawn "$bin" vkc: "$messages" "${PER_TEXT:-1}")
    cmds=$(awk -v a="$k0" -v b="$(calls)" -v n="$messages" 'BEGIN {printf "%.2f", (b - a) / n}')
    ref2=$(instructions reference "$rb_calls" reference)
    echo "== $bin: Redis instructions per message, the drain included: $svc = $(ratio "$svc" "$ref") × the reference's ($ref a call; $ref2 measured after);" \
      "commands $cmds per message"
    echo "   its record script alone (FCALL where it has functions, else this tree's with EVALSHA), a new text and message each call: $rec = $(ratio "$rec" "$ref") × the reference's"
    stop_redis
  done
}

machine
echo "== Redis $(redis-server --version | grep -o 'v=[0-9.]*'), MESSAGES=$messages${PER_TEXT:+, PER_TEXT=$PER_TEXT}"
case "${1:-}" in
ab | instr)
  mode=$1
  shift
  "$mode" "$@"
  exit 0
  ;;
esac
start_redis 16960
m0=$(mem)
redis-cli -p "$port" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('SET', string.format('vkc:f:{%03d}%09d', i % 1000, i), 1764000000 + i, 'EX', 86460) end" 0 20000 >/dev/null
echo "== floor: one key per text with a TTL (a 20-byte name, an integer value), fresh server: $(per "$m0" "$(mem)" 20000) B per text"
stop_redis
measure "before ($(git rev-parse --short "$before"))" "$work/vkcounter-before"
measure "after ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes))" "$work/vkcounter"
start_redis 16960
read -r rcpu _ _ rrps <<<"$(reference)"
load_libraries "$work/vkcounter"
read -r acpu _ _ arps <<<"$(record_alone)"
read -r rcpu2 _ _ rrps2 <<<"$(reference)"
echo "== the record script alone against the reference, alternated on one fresh server (redis-benchmark, 50 clients): reference $rcpu and $rcpu2 µs ($rrps, $rrps2 calls/s), record script $acpu µs ($arps calls/s): $(ratio "$acpu" "$(awk -v a="$rcpu" -v b="$rcpu2" 'BEGIN {print (a + b) / 2}')") × the reference's mean"
stop_redis
# count.lua alone, each tree's as a Redis Cluster runs it (EVALSHA; and
# Store.Count), first on a fresh server of its own (its memory owes
# nothing to what another run freed), the reference after it there.
start_redis 16960
read -r _ rcmd rmem _ <<<"$(reference)"
stop_redis
echo "== the count script alone (one text, a new message each call, EVALSHA, redis-benchmark, 50 clients) on a fresh server, then the reference on it; the reference first on a fresh server: $rcmd commands inside, $rmem B a call"
for tree in "$work/before" .; do
  start_redis 16960
  read -r ccpu ccmd cmem crps <<<"$(alone "$rb_calls" count_ceiling "$tree")"
  del 'bench:*'
  read -r rcpu _ _ _ <<<"$(reference)"
  stop_redis
  label=after
  [ "$tree" = . ] || label="before ($(git rev-parse --short "$before"))"
  echo "   $label: Redis CPU $ccpu µs = $(ratio "$ccpu" "$rcpu") × the reference's ($rcpu µs), $ccmd commands inside, $cmem B a call ($crps calls/s)"
done
