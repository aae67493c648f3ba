# bench/lib.sh — sourced by the bench scripts: a scratch directory and
# child processes cleaned up on exit, a fresh Redis server (nothing on disk)
# on a spare loopback port, and the machine line every report starts with.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# start_redis FIRST_PORT sets $port and $url to a new Redis server.
start_redis() {
  port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  url=redis://127.0.0.1:$port/0
}

machine() {
  echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# load NAME FLAGS…: one load-tool run against a freshly spawned bot on $url,
# with the lines of its summary that the reports quote.
load() {
  local name=$1; shift
  echo "== loadtest: $name"
  "$work/vkcounter" loadtest callback -spawn -redis "$url" -key-prefix "bench$RANDOM:" "$@" 2>/dev/null |
    grep -E 'stopped:|errors:|latency|webhook|long poll|→reply|answers checked|result:' || true
}
