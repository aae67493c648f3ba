#!/usr/bin/env bash
# bench/longpoll.sh — Bots Long Poll mode next to the webhook, in one run on
# one fresh Redis: the load tool spawns the real program each time and
# checks every answer; the two modes alternate, twice each, so that a
# change in the machine's load shows up in both.
source "$(dirname "$0")/lib.sh"
start_redis 26400
go build -o "$work/vkcounter" ./cmd/vkcounter

machine
scenario=(-texts 3000 -per-text 5 -reply-timeout 60s)
for round in 1 2 3; do
  load "round $round: webhook, 10 in flight" "${scenario[@]}" -concurrency 10
  load "round $round: webhook, 50 in flight" "${scenario[@]}" -concurrency 50
  load "round $round: long poll (8 messages at once)" "${scenario[@]}" -longpoll
done
