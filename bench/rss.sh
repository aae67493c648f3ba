#!/usr/bin/env bash
# bench/rss.sh — resident memory of `vkcounter serve` at the in-memory caps
# (issue 20: "RSS within 25 % of the cap"). For each kind, a fresh server
# (COUNTERS_STORE=memory, RESOURCE_STORE=memory, no Redis, no VK token)
# gets new names over the counter port from bench/flood until it refuses
# one with 0x82 Out of memory; then VmRSS and VmHWM of its process are read
# and compared with the kind's cap. One kind is run again with GOMEMLIMIT
# set far above the caps, i.e. without the soft memory limit serve sets
# from the caps, as the reference, and one with GOMEMLIMIT at one cap +
# 256 MiB; then every kind is filled in one server, with and without the
# soft limit. One server at a time; every flood is
# bounded by -max names and -duration. The live heap the last collection
# found (GODEBUG=gctrace=1) is printed too: what the stores really hold.
# Usage: [CAP_MIB=512] [KINDS='access visit …'] bench/rss.sh
source "$(dirname "$0")/lib.sh"
cap=$(( ${CAP_MIB:-512} << 20 ))
machine
go build -o "$work/vkcounter" ./cmd/vkcounter
go build -o "$work/flood" ./bench/flood

# serve [ENV=VALUE…]: a fresh server; sets $pid and $port.
serve() {
  port=$(free_port 26610 2)
  env HTTP_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:$((port + 1)) COUNTER_ADDR=127.0.0.1:$port \
    COUNTERS_STORE=memory RESOURCE_STORE=memory LOG_LEVEL=warn \
    COUNTERS_MEMORY_MAX_BYTES=$cap COUNTERS_MEMORY_MAX_NAMES=100000000 RESOURCE_MAX_MEMORY=$cap \
    GODEBUG=gctrace=1 "$@" "$work/vkcounter" serve 2>"$work/serve.log" &
  pid=$!
  pids+=($pid)
  wait_port "$port" 100
  echo "          idle: $(grep VmRSS /proc/$pid/status | tr -s ' \t' ' ')"
}

# flood KIND [CAP]: one flood of KIND on the server of serve, with the
# ratios to CAP (default: one kind's cap).
flood() {
  local kind=$1 most=20000000 len=64
  case $kind in
  hold) len=65535 most=100000 ;;
  acquire) len=65535 most=$((6 * cap >> 16)) ;; # released names of 6 × the cap
  visitkeys) len=255 ;;
  esac
  "$work/flood" -addr 127.0.0.1:$port -admin 127.0.0.1:$((port + 1)) -pid $pid -kind "$kind" -len "$len" \
    -cap "${2:-$cap}" -max $most -duration 5m || { tail -5 "$work/serve.log"; exit 1; }
  # The live heap the last collection found (gctrace: before->after->live MB).
  grep '^gc ' "$work/serve.log" | tail -1 | sed -E 's/.* ([0-9]+)->([0-9]+)->([0-9]+) MB, ([0-9]+) MB goal.*/          live heap at the last GC: \3 MB (goal \4 MB)/'
}

stop() { kill $pid; wait $pid 2>/dev/null || true; }

mib=$((cap >> 20))
echo "caps: COUNTERS_MEMORY_MAX_BYTES = RESOURCE_MAX_MEMORY = $mib MiB; soft memory limit 4 × $mib + $mib + 256 = $((5 * mib + 256)) MiB"
for kind in ${KINDS:-access visit visitkeys window unique hold acquire}; do
  echo "== $kind alone, a fresh server"
  serve; flood $kind; stop
done
echo "== access alone, GOMEMLIMIT=100GiB (no soft limit from the caps)"
serve GOMEMLIMIT=100GiB; flood access; stop
echo "== unique alone, GOMEMLIMIT=$((mib + 256))MiB (one cap + 256 MiB: a limit following the stores in use)"
serve GOMEMLIMIT=$((mib + 256))MiB; flood unique; stop
for limit in "" 100GiB; do
  echo "== every kind in one server, one after the other, ratios to the sum of the caps ($((5 * mib)) MiB)${limit:+, GOMEMLIMIT=$limit}"
  serve ${limit:+GOMEMLIMIT=$limit}
  for kind in access visit window unique hold; do flood $kind $((5 * cap)); done
  stop
done
