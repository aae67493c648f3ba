#!/usr/bin/env bash
# bench/counters.sh — the counter port of `vkcounter serve` side by side with
# the reference yrmcds counter server, in one run on one machine, driven by
# the same load tool (`vkcounter loadtest counters`, which checks every
# response). Needs yrmcdsd (Debian package yrmcds) for the reference column.
# BEFORE=path/to/an/older/vkcounter adds that build's rows to the same run
# (before, yrmcds, this tree), to compare a change; PORT (default 21211)
# is the first of the 6 loopback ports used.
# Usage: [RUNS='acquire:50:1 …'] [BEFORE=…] [PORT=…] bench/counters.sh [seconds per run, default 10]
source "$(dirname "$0")/lib.sh"
secs=${1:-10}
p0=${PORT:-21211}

go build -o "$work/vkcounter" ./cmd/vkcounter
serve() { # serve BINARY PORT: the counter port of BINARY in memory mode
  HTTP_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0 COUNTER_ADDR=127.0.0.1:$2 COUNTERS_STORE=memory LOG_LEVEL=warn \
    "$1" serve 2>>"$work/serve.log" &
  pids+=($!)
}
serve "$work/vkcounter" $((p0 + 4)); ours=$!
servers="vkcounter yrmcds"
if [ -n "${BEFORE:-}" ]; then serve "$BEFORE" $((p0 + 3)); old=$!; servers="before yrmcds vkcounter"; fi

mkdir -p "$work/yrmcds"
cat >"$work/yrmcds.conf" <<CONF
virtual_ip = 127.0.0.1
port = $p0
repl_port = $((p0 + 2))
temp_dir = "$work/yrmcds"
log.file = "$work/yrmcds.log"
memory_limit = 256M
counter.enable = true
counter.port = $((p0 + 5))
counter.buckets = 1000000
counter.stat_interval = 86400
CONF
yrmcdsd -f "$work/yrmcds.conf" &
ref=$!; pids+=($ref)
sleep 1

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # user + system clock ticks

machine
printf '%-10s %-11s %-8s %12s %9s %16s %6s\n' server workload conns×d 'requests/s' 'p99 ms' 'CPU s / 1M req' load1
# RUNS: workload:connections:depth items (default: the reference's four figures).
for run in ${RUNS:-acquire:1:1 acquire:50:1 acquire:4:32 noop:4:32}; do
  IFS=: read -r -a parts <<<"$run"
  set -- "${parts[@]}"
  for server in $servers; do
    case $server in
      vkcounter) pid=$ours port=$((p0 + 4)) ;;
      before) pid=$old port=$((p0 + 3)) ;;
      yrmcds) pid=$ref port=$((p0 + 5)) ;;
    esac
    before=$(cpu $pid)
    "$work/vkcounter" loadtest counters -addr 127.0.0.1:$port -op "$1" -conns "$2" -depth "$3" \
      -names 1000 -duration "${secs}s" -requests 0 -json >"$work/out.json" 2>/dev/null || {
      echo "load run failed:"; cat "$work/out.json"; exit 1; }
    after=$(cpu $pid)
    rps=$(grep -o '"requests_per_s": [0-9.]*' "$work/out.json" | awk '{print $2}')
    reqs=$(grep -o '"requests": [0-9]*' "$work/out.json" | head -1 | awk '{print $2}')
    p99=$(grep -o '"p99_ms": [0-9.]*' "$work/out.json" | awk '{print $2}' | sort -g | tail -1)
    cpu1m=$(awk -v t=$((after - before)) -v hz="$ticks" -v n="$reqs" 'BEGIN{printf "%.2f", t / hz / n * 1e6}')
    printf '%-10s %-11s %-8s %12.0f %9s %16s %6s\n' $server "$1" "$2×$3" "$rps" "$p99" "$cpu1m" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
