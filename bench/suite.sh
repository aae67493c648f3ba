#!/usr/bin/env bash
# bench/suite.sh — the test suite's wall time on a busy machine: a fresh
# clone of this tree's HEAD runs `go test -race -count=1 ./...` beside N
# busy loops (each bounded by `timeout`), and the load average is sampled
# every 30 s. The real-server and cluster variants run when the usual
# VKCOUNTER_TEST_REDIS and VKCOUNTER_TEST_REDIS_CLUSTER name servers (as
# .ci/run sets them up); they must not be shared with other runs. PKGS
# (default ./...) narrows the packages.
# Six loops and the suite's own work make a load of about 8 (measured: 6.6–9.2,
# median 8.6).
# Usage: [PKGS=…] bench/suite.sh [busy loops, default 6] [runs, default 1]
source "$(dirname "$0")/lib.sh"
loops=${1:-6}
runs=${2:-1}
limit=1800 # seconds: no run, and no busy loop, outlives this

git clone -q . "$work/tree"
machine
printf '%-4s %-8s %-9s %-22s %s\n' run result 'wall s' 'load min/median/max' failed
for run in $(seq "$runs"); do
  for _ in $(seq "$loops"); do
    timeout "$limit" sh -c 'while :; do :; done' &
    pids+=($!)
  done
  : >"$work/load"
  (while sleep 30; do cut -d' ' -f1 /proc/loadavg >>"$work/load"; done) &
  sampler=$!
  start=$(date +%s)
  result=ok
  (cd "$work/tree" && timeout "$limit" go test -race -count=1 ${PKGS:-./...} >"$work/out" 2>&1) || result=FAIL
  wall=$(($(date +%s) - start))
  kill "$sampler" "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
  load=$(sort -n "$work/load" | awk '{a[NR] = $1} END {if (NR) printf "%s/%s/%s", a[1], a[int((NR + 1) / 2)], a[NR]; else print "-"}')
  failed=$(grep -E '^--- FAIL' "$work/out" | awk '{print $3}' | sort -u | paste -sd, - || true)
  printf '%-4s %-8s %-9s %-22s %s\n' "$run" "$result" "$wall" "$load" "${failed:--}"
done
