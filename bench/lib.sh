# bench/lib.sh — sourced by the bench scripts: a scratch directory and
# child processes cleaned up on exit, a fresh Redis server (nothing on disk)
# on a spare loopback port, its CPU, redis-benchmark's rate (rb) and the
# count script's ceiling on it, and the machine line every report starts
# with.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# PIN=1 gives the process a script measures (Redis in redis-cost.sh, the
# handler or the service in handler.sh) the first core, and everything else
# (this script, the load tool, redis-benchmark, the other servers) the
# others: the measured process then runs as it is deployed, on a machine
# of its own, its CPU per call not inflated by the clients sharing its core
# (cache misses, preemption in the middle of a call). The scripts run the
# measured process under $pinned ("taskset -c 0"; empty without PIN).
pinned=
if [ "${PIN:-}" = 1 ]; then
  taskset -cp "1-$(($(grep -c ^processor /proc/cpuinfo) - 1))" $$ >/dev/null
  pinned="taskset -c 0"
fi

# listening PORT: whether something listens on the loopback PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port FIRST [STEP]: the first loopback port from FIRST (by STEP,
# default 1) that nothing listens on.
free_port() {
  local p=$1
  while listening "$p"; do p=$((p + ${2:-1})); done
  echo "$p"
}

# wait_port PORT [TRIES]: waits until something listens on the loopback
# PORT, at most TRIES (default 50) × 0.1 s.
wait_port() {
  for _ in $(seq "${2:-50}"); do listening "$1" && break; sleep 0.1; done
}

# free_node_port FIRST: a free port from FIRST whose bus port (+10000) is
# free too, for a cluster's node.
free_node_port() {
  local p=$1
  while listening "$p" || listening $((p + 10000)); do p=$((p + 1)); done
  echo "$p"
}

# start_cluster DIR REPLICAS FIRST_PORT: a Redis Cluster of three masters
# with REPLICAS replicas each (nothing on disk), on free ports from
# FIRST_PORT, ready when every node says ok and every replica is in sync;
# sets $nodes (their ports), $masters (the masters' host:port,
# comma-separated) and $node_pids.
start_cluster() {
  local dir=$1 replicas=$2 next=$3 p i
  nodes=() node_pids=()
  for i in $(seq $((3 * (replicas + 1)))); do
    p=$(free_node_port "$next"); next=$((p + 1))
    mkdir -p "$dir/n$i"
    redis-server --bind 127.0.0.1 --port "$p" --save "" --appendonly no --dir "$dir/n$i" --logfile "$dir/n$i/log" \
      --cluster-enabled yes --cluster-config-file "$dir/n$i/nodes.conf" --cluster-node-timeout 2000 &
    pids+=($!); node_pids+=($!)
    nodes+=("$p")
  done
  for p in "${nodes[@]}"; do wait_port "$p"; done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${nodes[@]}") --cluster-replicas "$replicas" --cluster-yes >"$dir/create.log"
  for _ in $(seq 300); do
    local ok=1
    for p in "${nodes[@]}"; do
      redis-cli -p "$p" cluster info | grep -q cluster_state:ok || ok=0
      if redis-cli -p "$p" info replication | grep -q role:slave; then
        redis-cli -p "$p" info replication | grep -q master_link_status:up || ok=0
      fi
    done
    [ $ok = 1 ] && break
    sleep 0.1
  done
  masters=$(redis-cli -p "${nodes[0]}" cluster nodes | awk '$3 ~ /master/ { sub(/@.*/, "", $2); print $2 }' | sort | paste -sd,)
}

# start_redis FIRST_PORT sets $port and $url to a new Redis server, on the
# first free port from BENCH_PORT when it is set (a port range of one's own on
# a shared machine), else from FIRST_PORT.
start_redis() {
  port=$(free_port "${BENCH_PORT:-$1}")
  ${redis_pin:-} redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  url=redis://127.0.0.1:$port/0
}

# redis_cpu: the Redis server's CPU (user + system seconds, its own INFO),
# to divide by the calls made.
redis_cpu() { redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {print s}'; }

# redis_reads: the reads from clients' connections the Redis server has
# processed (INFO stats), to divide by the calls made.
redis_reads() { redis-cli -p "$port" INFO stats | tr -d '\r' | awk -F: '/^total_reads_processed:/ {print $2}'; }

# del PATTERN: deletes the keys that match, in the server (key names may be binary).
del() { redis-cli -p "$port" EVAL "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end" 0 "$1" >/dev/null; }

# rb ARGS…: redis-benchmark on $port, 50 clients, $rb_calls (200,000)
# calls, with ARGS (options, then the command); prints its
# requests-per-second line.
rb_calls=200000
rb() { redis-benchmark -p "$port" -n "$rb_calls" -c 50 "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1; }

# count_ceiling [TREE]: redis-benchmark running TREE's count script alone
# (default: this tree), one text, 50 clients, 200,000 calls, a new message
# each call (__rand_int__, as every webhook request is a new event); prints
# its requests-per-second line. Keys under bench:.
count_ceiling() {
  local tree=${1:-.} sha
  if [ -f "$tree/freq/text.lua" ] && grep -q 'KEYS\[4\]' "$tree/freq/count.lua"; then # texts seen once in buckets
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$tree/freq/text.lua" "$tree/freq/count.lua")")
    rb -r 1000000000 EVALSHA "$sha" 4 'bench:f:{abc}123456789' 'bench:f:{abc}e0' 'bench:f:{abc}e1' 'bench:f:{abc}b' \
      86400 86460 60 3600 "" __rand_int__
  elif [ -f "$tree/freq/text.lua" ] && [ ! -f "$tree/freq/textcount.lua" ]; then # one record per message
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$tree/freq/text.lua" "$tree/freq/count.lua")")
    rb -r 1000000000 EVALSHA "$sha" 3 'bench:f:{abc}123456789' 'bench:f:{abc}e0' 'bench:f:{abc}e1' \
      86400 86460 60 3600 "" __rand_int__
  elif [ -f "$tree/freq/text.lua" ]; then
    local t='bench:f:{abc}123456789' o='bench:f:{6b86b273ff34fce19d6b804eff5a3f57}:'
    local lib="$tree/internal/runlist/count.lua" # freq/count.lua in trees before it moved
    [ -f "$lib" ] || lib="$tree/freq/count.lua"
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$lib" "$tree/freq/text.lua" "$tree/freq/textcount.lua")")
    rb -r 1000000000 EVALSHA "$sha" 6 "$t" 'bench:f:{abc}e0' 'bench:f:{abc}e1' \
      "${o}l" "${o}n" "${o}e:__rand_int__" 86400 86460 3600 "" __rand_int__
  else # the layout before the compact one
    local k='bench:{6b86b273ff34fce19d6b804eff5a3f57}'
    sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat "$tree/freq/count.lua" "$tree/freq/window.lua")")
    rb -r 1000000000 EVALSHA "$sha" 3 "$k:l" "$k:n" "$k:e:__rand_int__" 86400 86460 3600000 ""
  fi
}

# build_before COMMIT: builds this tree's vkcounter ($work/vkcounter) and
# COMMIT's, from a temporary checkout ($work/before, $work/vkcounter-before).
build_before() {
  go build -o "$work/vkcounter" ./cmd/vkcounter
  mkdir -p "$work/before"
  git archive "$1" | tar -x -C "$work/before"
  (cd "$work/before" && go build -o "$work/vkcounter-before" ./cmd/vkcounter)
}

# mem: the server's used_memory; per A B N [FORMAT]: (B - A) / N, printed
# with FORMAT (default %.0f, rounded); stop_redis: stops the server at
# once, keeping nothing.
mem() { redis-cli -p "$port" INFO memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}'; }
per() { awk -v a="$1" -v b="$2" -v n="$3" -v f="${4:-%.0f}" 'BEGIN {printf f, (b - a) / n}'; }

# calls: every command's calls so far (INFO commandstats), and
# script_calls: the EVAL, EVALSHA and FCALL calls among them.
calls() { redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_/ {s += $2} END {print s}'; }
script_calls() { redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[=,]' '/^cmdstat_(eval|fcall)/ {s += $2} END {print s + 0}'; }

# alone N CMD…: runs CMD, N calls of one script (redis-benchmark, whose
# requests-per-second line it prints), and prints per call Redis's CPU in
# µs, the commands run inside the script (INFO commandstats, less the
# scripts' own calls) and used_memory's growth in bytes, then CMD's
# calls/s.
alone() {
  local n=$1 c0 k0 s0 m0 rps c1 k1 s1
  shift
  c0=$(redis_cpu); k0=$(calls); s0=$(script_calls); m0=$(mem)
  rps=$("$@" | grep -o '[0-9.]* requests per second' | tail -1 | awk '{print $1}')
  c1=$(redis_cpu); k1=$(calls); s1=$(script_calls)
  awk -v c0="$c0" -v c1="$c1" -v k="$((k1 - k0 - (s1 - s0)))" -v m0="$m0" -v m1="$(mem)" -v r="$rps" -v n="$n" \
    'BEGIN {printf "%.1f %.2f %.0f %s\n", (c1 - c0) / n * 1e6, k / n, (m1 - m0) / n, r}'
}

# reference: the reference script alone (internal/runlist's count.lua with
# a dedupe key per call, the list-and-total layout: one text, a new message
# each call), rb_calls calls; prints as alone does. Keys under bench:.
reference() {
  local sha out
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat internal/runlist/count.lua)
local previous, time = seen(KEYS[3])
if previous then return {previous, 1, time} end
return count(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), '', '')")
  out=$(alone "$rb_calls" rb -r 1000000000 EVALSHA "$sha" 3 'bench:{ref}:l' 'bench:{ref}:n' 'bench:{ref}:e:__rand_int__' 86400 86460 3600000)
  del 'bench:*'
  echo "$out"
}
# spread FILE COLUMN [KEY]: the mean, least and greatest of COLUMN over
# FILE's lines (those whose first field is KEY, when given) and how many:
# the rounds' figure and their noise, which a difference must exceed.
spread() {
  awk -v c="$2" -v k="${3:-}" 'k == "" || $1 == k {n++; s += $c; if (n == 1 || $c < lo) lo = $c; if (n == 1 || $c > hi) hi = $c}
    END {printf "%.2f %.2f %.2f %d\n", s / n, lo, hi, n}' "$1"
}

stop_redis() { redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; }

machine() {
  echo "== machine: $(grep -c ^processor /proc/cpuinfo) cores$([ -n "$pinned" ] && echo " (PIN=1: the measured process on the first, the rest on the others)"), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# load NAME FLAGS…: one load-tool run against a freshly spawned bot on $url,
# with the lines of its summary that the reports quote.
load() {
  local name=$1; shift
  echo "== loadtest: $name"
  "$work/vkcounter" loadtest callback -spawn -redis "$url" -key-prefix "bench$RANDOM:" "$@" 2>/dev/null |
    grep -E 'stopped:|errors:|latency|webhook|long poll|→reply|answers checked|result:' || true
}

# proc_cpu PID: the process's user + system CPU seconds so far.
proc_cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# with_cpu OUT CMD...: runs CMD with its standard output in OUT and prints
# the CPU seconds of CMD and of its child (the service it spawns, if any),
# sampled every 0.1 s while CMD runs: what a child spends after the last
# sample, while it shuts down, is not counted.
with_cpu() {
  local out=$1 pid own=0 child=0 c v
  shift
  "$@" >"$out" 2>/dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    v=$(proc_cpu "$pid") && [ "$v" != 0 ] && own=$v
    for c in $(pgrep -P "$pid"); do
      v=$(proc_cpu "$c") && child=$(awk -v a="$child" -v b="$v" 'BEGIN {print (b > a) ? b : a}')
    done
    sleep 0.1
  done
  wait "$pid" || true
  echo "$own $child"
}
