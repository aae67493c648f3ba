#!/usr/bin/env bash
# bench/slowbody.sh — the slow-body attack of issue 37 against `vkcounter
# serve` (embedded Redis, dry-run, demo community 1): 400 and 3000
# connections each declaring a 1 MiB webhook body and sending 10 bytes,
# held 2 s; the server's VmRSS before and after, and a normal webhook
# posted meanwhile. The reference is REF (default: the commit before the
# body was read as it arrives), built and run in the same run.
# Usage: [REF=rev] bench/slowbody.sh
source "$(dirname "$0")/lib.sh"
ref=${REF:-6a7a14b}
machine
go build -o "$work/vkcounter" ./cmd/vkcounter
go build -o "$work/slowbody" ./bench/slowbody
mkdir "$work/ref" && git archive "$ref" | tar -x -C "$work/ref"
(cd "$work/ref" && go build -o "$work/vkcounter-ref" ./cmd/vkcounter)

run() { # BINARY CONNS
  local port
  port=$(free_port 26810 2)
  HTTP_ADDR=127.0.0.1:$port ADMIN_ADDR=127.0.0.1:$((port + 1)) COUNTER_ADDR=off LOG_LEVEL=error "$1" serve 2>"$work/serve.log" &
  local pid=$!
  pids+=($pid)
  wait_port "$port" 100
  "$work/slowbody" -addr 127.0.0.1:$port -pid $pid -conns "$2" || tail -3 "$work/serve.log"
  kill $pid; wait $pid 2>/dev/null || true
}
for n in 400 3000; do
  echo "== reference $ref, $n connections"; run "$work/vkcounter-ref" $n
  echo "== this tree, $n connections"; run "$work/vkcounter" $n
done
