#!/usr/bin/env bash
# kill9.sh — kill -9 a tuning run at five moments; compare the last candidate count its progress
# line showed (printed after a result is stored) with the results in its database, and check no
# worker process outlives it. Run from the repository root with build/autotune built.
set -u
for t in 1 2 3 4 5; do
  db=$(mktemp -d)/db out=$(mktemp)
  (script -qfc "build/autotune gemm --m 96 --n 96 --k 96 --strategy random --seed $t --budget 300 --db $db" "$out" >/dev/null 2>&1 &)
  sleep $((3 + t))
  pkill -9 -f "autotune gemm --m 96"
  sleep 0.5
  last=$(tr '\r' '\n' <"$out" | grep -oE "^ +[0-9]+/300" | tail -1 | tr -d ' ')
  stored=$(build/autotune db list --table results --db "$db" 2>/dev/null | wc -l)
  echo "trial $t: killed after $((3 + t)) s; progress said ${last:-0}; stored $stored"
done
echo "workers left: $(pgrep -f autotune-worker | wc -l)"
