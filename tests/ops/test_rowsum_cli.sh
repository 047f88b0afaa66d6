#!/usr/bin/env bash
# test_rowsum_cli.sh — the second operation through the same CLI verb as GEMM: the `autotune`
# command built with tests/ops/rowsum.c linked in (registered at start-up) tunes, answers from
# the database, counts its space, lists its keys and rejects bad input like any operation.
#   tests/ops/test_rowsum_cli.sh path/to/autotune_rowsum
set -uo pipefail
AT=${1:?usage: test_rowsum_cli.sh path/to/autotune_rowsum}
# shellcheck source=../cli/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/../cli/lib.sh" # $work, ok, bad, expect, json, finish
db="$work/db"

expect 0 "rowsum +tune one rowsum problem" -- --help
expect 0 "usage: autotune rowsum --rows R --cols C" -- rowsum --help
expect 2 "rowsum needs --cols" -- rowsum --rows 8 --db "$db"
expect 2 "--rows '0' is not an integer from 1 to 2147483647" -- rowsum --rows 0 --cols 8
expect 2 "unknown option '--m'" -- rowsum --m 8 --cols 8
expect 0 "configurations, [0-9]+ valid" -- space rowsum --rows 100 --cols 30 --db "$db"

if "$AT" rowsum --rows 123 --cols 45 --budget 5 --db "$db" --json >"$work/out.json" 2>"$work/err"; then
  ok "rowsum tunes 123x45"
else
  bad "rowsum tune failed: $(cat "$work/err")"
fi
json 'd["problem"] == {"op": "rowsum", "rows": 123, "cols": 45} and d["template"] == "rowsum" and d["cache"] == "miss" and d["candidates"]["evaluated"] == 5 and d["best"]["max_rel_error"] < 1e-4 and "WG=" in d["best"]["config"]' |
  grep -q True && ok "json: problem, template, best, candidates" || bad "json: $(cat "$work/out.json")"
"$AT" rowsum --rows 123 --cols 45 --budget 5 --db "$db" --json >"$work/out.json"
json 'd["cache"] == "hit" and d["candidates"]["space"] > 0' | grep -q True &&
  ok "second run is a cache hit" || bad "second run: $(cat "$work/out.json")"
expect 0 "^rowsum/123x45\|" -- db list --db "$db"
expect 0 "status=ok" -- db show rowsum/123x45 --db "$db"
# the layered lookup and verify take any operation (its parse_key rebuilds problems from keys)
expect 0 "exact +rowsum/123x45 from" -- db show rowsum/123x45 --db "$db"
expect 0 '"source":"exact"' -- rowsum --rows 123 --cols 45 --no-tune --json --db "$db"
expect 0 '"source":"nearest-shape"' -- rowsum --rows 120 --cols 45 --no-tune --json --db "$db"
expect 0 "0 flagged" -- db verify --op rowsum --max-slowdown 50 --db "$db"
"$AT" rowsum --rows 123 --cols 45 --strategy exhaustive --replay "$db" --db "$work/db-replay" \
  --json >"$work/out.json" 2>"$work/err"
json 'd["candidates"]["measured"] == 0 and d["candidates"]["evaluated"] == d["candidates"]["space"]' |
  grep -q True && ok "rowsum --replay answers from the records" || bad "replay: $(cat "$work/out.json" "$work/err")"
# (gemm_cpu: the default on a CPU device such as PoCL)
expect 0 '"template":"gemm(_cpu)?"' -- space gemm --m 64 --n 64 --json --db "$db"

finish
