#!/usr/bin/env bash
# test_bundle_cli.sh — the portable store through the command (docs/shipping.md): db export,
# import (also through a pipe), merge, stats on databases tuned on the OpenCL device, and bad
# bundles refused with exit 2 and the destination left as it was. Skipped (77) without OpenCL.
#   tests/cli/test_bundle_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_bundle_cli.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, expect RC PATTERN -- ARGS, json EXPR, finish
export AUTOTUNE_DB="$work/default-db" AUTOTUNE_SHIPPED_DB= AUTOTUNE_DB_PATH=
export XDG_CACHE_HOME="$work/cache"
unset AUTOTUNE_BACKEND
if ! "$AT" devices 2>&1 | grep -qE "opencl +available"; then
  echo "skip: no OpenCL device to tune on"
  exit 77
fi

# Two tiny databases tuned on this device (a few evaluations each), of gemm.cl (the default on
# a CPU device is gemm_cpu; the checks below name the template).
tune=(--k 16 --budget 3 --strategy random --seed 1 --template gemm)
expect 0 "" -- gemm --m 16 --n 16 "${tune[@]}" --db "$work/A"
expect 0 "" -- gemm --m 24 --n 16 "${tune[@]}" --db "$work/B"
expect 0 "^opencl/" -- db list --table devices --db "$work/A"
expect 0 'template="gemm"' -- db show gemm --db "$work/A"

# ---- export, import, the same bundle again ---------------------------------------------------
expect 0 "exported [0-9]+ records to $(re "$work/a.jsonl.gz")" -- db export "$work/a.jsonl.gz" --db "$work/A"
n=$(zcat "$work/a.jsonl.gz" | tail -n +2 | wc -l)
zcat "$work/a.jsonl.gz" | python3 -c '
import json, sys
lines = sys.stdin.read().splitlines()
h = json.loads(lines[0])
assert h["format"] == "autotune-bundle" and h["version"] == 1 and h["records"] == len(lines) - 1, h
for l in lines[1:]:
    r = json.loads(l)
    assert r["table"] in ("result", "best") and r["op"] == "gemm", r
    assert r["device"]["backend"] == "opencl" and r["device"]["family"] and r["template"]["name"] == "gemm", r
' && ok "the bundle is JSON Lines with a header and $n records" || bad "the bundle does not read as JSON Lines"
"$AT" db export - --db "$work/A" | "$AT" db import - --db "$work/C" >"$work/out" 2>&1
grep -q "imported $n, kept 0 existing, unchanged 0" "$work/out" && ok "export - | import -: $n records" ||
  bad "export - | import -: $(cat "$work/out")"
cp "$work/C/data.mdb" "$work/C.before"
expect 0 "imported 0, kept 0 existing, unchanged $n " -- db import "$work/a.jsonl.gz" --db "$work/C"
cmp -s "$work/C/data.mdb" "$work/C.before" && ok "importing again wrote nothing" || bad "importing again changed data.mdb"
expect 0 '"imported":0,"kept":0,"unchanged":'"$n" -- db import "$work/a.jsonl.gz" --db "$work/C" --json
"$AT" db export "$work/c.jsonl.gz" --db "$work/C" >/dev/null
cmp -s <(zcat "$work/a.jsonl.gz" | tail -n +2) <(zcat "$work/c.jsonl.gz" | tail -n +2) &&
  ok "export -> import -> export gives the same records" || bad "the round trip changed records"

# ---- filters ---------------------------------------------------------------------------------
expect 0 "exported 1 records" -- db export "$work/f.jsonl.gz" --db "$work/A" --best-only
expect 0 "exported 0 records" -- db export "$work/f.jsonl.gz" --db "$work/A" --device 'cuda/*'
expect 0 "exported $n records" -- db export "$work/f.jsonl.gz" --db "$work/A" --device '*skylake*'
expect 0 "exported 0 records" -- db export "$work/f.jsonl.gz" --db "$work/A" --op attention

# ---- merge: commutative ------------------------------------------------------------------------
"$AT" db export "$work/b.jsonl.gz" --db "$work/B" >/dev/null
expect 0 "imported [0-9]+, kept 0 existing" -- db merge "$work/A" "$work/b.jsonl.gz" --output "$work/M1"
expect 0 "imported [0-9]+, kept 0 existing" -- db merge "$work/B" "$work/a.jsonl.gz" --output "$work/M2" --prefer newer
"$AT" db export "$work/m1.jsonl.gz" --db "$work/M1" >/dev/null
"$AT" db export "$work/m2.jsonl.gz" --db "$work/M2" >/dev/null
cmp -s <(zcat "$work/m1.jsonl.gz" | tail -n +2) <(zcat "$work/m2.jsonl.gz" | tail -n +2) &&
  ok "merge A B = merge B A" || bad "merge A B differs from merge B A"
expect 0 "imported 0, kept 0 existing, unchanged" -- db merge "$work/B" --output "$work/M1" --prefer existing
expect 0 "best entries" -- db stats --db "$work/M1"
"$AT" db stats --db "$work/M1" --json >"$work/out.json"
[ "$(json 'd["total"]["best"], d["operations"][0]["name"], d["templates"][0]["name"]')" = "2 gemm gemm" ] &&
  ok "db stats --json: 2 best entries of gemm" || bad "db stats --json: $(cat "$work/out.json")"

# ---- bad bundles and bad usage: exit 2, nothing written ------------------------------------------
head -c $(($(stat -c %s "$work/a.jsonl.gz") / 2)) "$work/a.jsonl.gz" >"$work/cut.jsonl.gz"
printf '\x89PNG garbage\n' >"$work/garbage.jsonl.gz"
echo '{"format":"autotune-bundle","version":7,"records":0}' | gzip >"$work/v7.jsonl.gz"
zcat "$work/a.jsonl.gz" | sed '2s/"op":"gemm","problem":"gemm/"op":"gemx","problem":"gemx/' | gzip >"$work/op.jsonl.gz"
(zcat "$work/a.jsonl.gz" | head -1; echo 'not json') | gzip >"$work/nojson.jsonl.gz"
cp "$work/C/data.mdb" "$work/C.before"
reject 2 "truncated" -- db import "$work/cut.jsonl.gz" --db "$work/C"
reject 2 "line 1: not an autotune bundle" -- db import "$work/garbage.jsonl.gz" --db "$work/C"
reject 2 "line 1: bundle version 7 is newer than this autotune reads \(1\)" -- db import "$work/v7.jsonl.gz" --db "$work/C"
reject 2 "line 2: a record of operation 'gemx'" -- db import "$work/op.jsonl.gz" --db "$work/C"
reject 2 "line 2: not a JSON object" -- db import "$work/nojson.jsonl.gz" --db "$work/C"
reject 2 "line 2: not a JSON object" -- db merge "$work/A" "$work/nojson.jsonl.gz" --output "$work/C"
reject 2 "cannot read $(re "$work")/none.gz" -- db import "$work/none.gz" --db "$work/C"
reject 2 "is a directory but not a database" -- db merge "$work/cache" --output "$work/C"
AUTOTUNE_DB="$work/C" AUTOTUNE_DB_READONLY=1 reject 2 "AUTOTUNE_DB_READONLY=1 keeps your database" -- db import "$work/a.jsonl.gz"
cmp -s "$work/C/data.mdb" "$work/C.before" && ok "bad bundles left the database as it was" ||
  bad "a bad bundle changed the database"
[ ! -e "$work/D" ] && "$AT" db import "$work/cut.jsonl.gz" --db "$work/D" >/dev/null 2>&1
[ ! -e "$work/D" ] && ok "a bad bundle creates no database" || bad "a bad bundle created $work/D"
reject 2 "db merge needs --output" -- db merge "$work/A" "$work/B"
reject 2 "db export needs one FILE" -- db export --db "$work/A"
reject 2 "db import needs one FILE" -- db import
reject 2 "unknown prefer 'slower'" -- db import "$work/a.jsonl.gz" --prefer slower
reject 2 "unknown option '--best-only' for db import" -- db import "$work/a.jsonl.gz" --best-only
reject 2 "db export --problem needs a format: --kernel-tuner" -- db export "$work/x.gz" --problem p
reject 2 "unknown option '--json' for db export" -- db export "$work/x.gz" --json
reject 2 "unknown option '--db' for db merge" -- db merge "$work/A" --output "$work/M3" --db "$work/A"
reject 2 "db stats takes no argument" -- db stats extra
[ "$signalled" -eq 0 ] && ok "none of $rejected bad inputs ended with a signal" ||
  bad "$signalled of $rejected bad inputs ended with a signal"

finish
