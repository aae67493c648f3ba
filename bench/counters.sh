#!/usr/bin/env bash
# bench/counters.sh — the counter port of `vkcounter serve` side by side with
# the reference yrmcds counter server, in one run on one machine, driven by
# the same load tool (`vkcounter loadtest counters`, which checks every
# response). Needs yrmcdsd (Debian package yrmcds) for the reference column.
# Usage: [RUNS='acquire:50:1 …'] bench/counters.sh [seconds per run, default 10]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}

go build -o "$work/vkcounter" ./cmd/vkcounter
HTTP_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0 COUNTER_ADDR=127.0.0.1:21215 COUNTERS_STORE=memory LOG_LEVEL=warn \
  "$work/vkcounter" serve 2>"$work/serve.log" &
ours=$!; pids+=($ours)

mkdir -p "$work/yrmcds"
cat >"$work/yrmcds.conf" <<CONF
virtual_ip = 127.0.0.1
port = 21211
repl_port = 21213
temp_dir = "$work/yrmcds"
log.file = "$work/yrmcds.log"
memory_limit = 256M
counter.enable = true
counter.port = 21216
counter.buckets = 1000000
counter.stat_interval = 86400
CONF
yrmcdsd -f "$work/yrmcds.conf" &
ref=$!; pids+=($ref)
sleep 1

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system clock ticks

printf '%-10s %-11s %-8s %12s %9s %16s\n' server workload conns×d 'requests/s' 'p99 ms' 'CPU s / 1M req'
# RUNS: workload:connections:depth items (default: the reference's four figures).
for run in ${RUNS:-acquire:1:1 acquire:50:1 acquire:4:32 noop:4:32}; do
  IFS=: read -r -a parts <<<"$run"
  set -- "${parts[@]}"
  for server in vkcounter yrmcds; do
    if [ $server = vkcounter ]; then pid=$ours port=21215; else pid=$ref port=21216; fi
    before=$(cpu $pid)
    "$work/vkcounter" loadtest counters -addr 127.0.0.1:$port -op "$1" -conns "$2" -depth "$3" \
      -names 1000 -duration "${secs}s" -requests 0 -json >"$work/out.json" 2>/dev/null || {
      echo "load run failed:"; cat "$work/out.json"; exit 1; }
    after=$(cpu $pid)
    rps=$(grep -o '"requests_per_s": [0-9.]*' "$work/out.json" | awk '{print $2}')
    reqs=$(grep -o '"requests": [0-9]*' "$work/out.json" | head -1 | awk '{print $2}')
    p99=$(grep -o '"p99_ms": [0-9.]*' "$work/out.json" | awk '{print $2}' | sort -g | tail -1)
    cpu1m=$(awk -v t=$((after - before)) -v hz="$ticks" -v n="$reqs" 'BEGIN{printf "%.2f", t / hz / n * 1e6}')
    printf '%-10s %-11s %-8s %12.0f %9s %16s\n' $server "$1" "$2×$3" "$rps" "$p99" "$cpu1m"
  done
done
