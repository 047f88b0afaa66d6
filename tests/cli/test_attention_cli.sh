#!/usr/bin/env bash
# test_attention_cli.sh — `autotune attention` end to end on the default device (PoCL in CI):
# help, every bad input with exit 2 and a message naming the argument, a tuning run and its JSON
# (the causal flag a bool), the cache hit, resume after SIGINT without re-measuring, db keys,
# replay, `space attention`, and the compile-only path for the GPU targets where their compilers
# are here.
#   tests/cli/test_attention_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_attention_cli.sh path/to/autotune}
# shellcheck source=lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh" # $work, ok, bad, expect, reject, json, skip, finish
db="$work/db"

expect 0 "attention +tune one attention problem: autotune attention --heads 8 --seq 512 --head-dim 64" -- --help
expect 0 "usage: autotune attention --heads H --seq S --head-dim H" -- attention --help
expect 0 "--causal +query i sees keys up to i \+ seq-kv - seq" -- attention --help

# ---- bad input: exit 2, the argument named -----------------------------------------------------
s=(--heads 8 --seq 16 --db "$db")
reject 2 "attention needs --head-dim" -- attention "${s[@]}"
reject 2 "attention needs --heads" -- attention --seq 16 --head-dim 64 --db "$db"
reject 2 "head-dim = 48 is not supported \(32, 64, 80, 96, 128 or 256\)" -- attention "${s[@]}" --head-dim 48
reject 2 "--head-dim '512' is not an integer from 1 to 256" -- attention "${s[@]}" --head-dim 512
reject 2 "heads = 8 is not a multiple of kv-heads = 3" -- attention "${s[@]}" --head-dim 64 --kv-heads 3
reject 2 "heads = 8 is not a multiple of kv-heads = 16" -- attention "${s[@]}" --head-dim 64 --kv-heads 16
for f in batch heads kv-heads seq seq-kv; do
  given=(--head-dim 64)
  [ $f = heads ] || given+=(--heads 8)
  [ $f = seq ] || given+=(--seq 16)
  reject 2 "--$f '0' is not an integer from 1 to 2147483647" -- attention "${given[@]}" --$f 0
done
reject 2 "seq-kv = 8 < seq = 16 with causal" -- attention "${s[@]}" --head-dim 64 --seq-kv 8 --causal
reject 2 "option '--causal' takes no value" -- attention "${s[@]}" --head-dim 64 --causal=1
reject 2 "option '--causal' is given twice" -- attention "${s[@]}" --head-dim 64 --causal --causal
reject 2 "unknown layout 'bsdh' \(one of: bshd, bhsd\)" -- attention "${s[@]}" --head-dim 64 --layout bsdh
reject 2 "unknown dtype 'f64' \(one of: f32, f16, bf16\)" -- attention "${s[@]}" --head-dim 64 --dtype f64
reject 2 "unknown option '--scale'" -- attention "${s[@]}" --head-dim 64 --scale 0.1
reject 2 "dtype f16 is not supported on the opencl backend" -- attention "${s[@]}" --head-dim 64 --dtype f16 --backend opencl

# ---- a tuning run, its JSON, the cache hit ---------------------------------------------------------
shape=(--batch 2 --heads 4 --kv-heads 2 --seq 17 --seq-kv 31 --head-dim 64 --causal)
if "$AT" attention "${shape[@]}" --budget 4 --db "$db" --json >"$work/out.json" 2>"$work/err"; then
  ok "attention tunes 2x4/2 heads, 17x31, d64, causal"
else
  bad "attention tune failed: $(cat "$work/err")"
fi
json 'd["problem"] == {"op": "attention", "batch": 2, "heads": 4, "kv-heads": 2, "seq": 17, "seq-kv": 31, "head-dim": 64, "causal": True, "dtype": "f32", "layout": "bshd"} and d["template"].startswith("attention") and d["cache"] == "miss" and d["candidates"]["evaluated"] == 4 and d["best"]["time_us"] > 0 and d["best"]["max_rel_error"] < 1e-3' |
  grep -q True && ok "json: problem (causal a bool), template, best, candidates" || bad "json: $(cat "$work/out.json")"
"$AT" attention "${shape[@]}" --budget 4 --db "$db" --json >"$work/out.json"
json 'd["cache"] == "hit"' | grep -q True && ok "second run is a cache hit" || bad "second run: $(cat "$work/out.json")"
expect 0 "^attention/f32/bshd/d64/causal/2x4x2/17x31\|" -- db list --db "$db"
expect 0 "status=ok" -- db show attention/f32/bshd/d64/causal/2x4x2/17x31 --db "$db"
"$AT" attention "${shape[@]}" --strategy exhaustive --replay "$db" --db "$work/db-replay" \
  --json >"$work/out.json" 2>"$work/err"
json 'd["candidates"]["measured"] == 0 and d["candidates"]["evaluated"] == d["candidates"]["space"]' |
  grep -q True && ok "attention --replay answers from the records" || bad "replay: $(cat "$work/out.json" "$work/err")"
# bhsd is another problem (another key), tuned and checked the same way.
expect 0 "best" -- attention --heads 3 --seq 5 --seq-kv 9 --head-dim 32 --layout bhsd --budget 2 --db "$db"
expect 0 "^attention/f32/bhsd/d32/full/1x3x3/5x9\|" -- db list --db "$db"

# ---- an interrupted run resumes without re-measuring -----------------------------------------------
db2="$work/db2"
long=(--heads 2 --seq 33 --seq-kv 65 --head-dim 32 --strategy exhaustive)
"$AT" attention "${long[@]}" --budget 300 --db "$db2" --json >"$work/int.json" 2>"$work/err" &
pid=$!
for _ in $(seq 1 600); do
  n=$("$AT" db list --table results --db "$db2" 2>/dev/null | wc -l)
  [ "$n" -ge 4 ] && break
  sleep 0.2
done
kill -INT "$pid"
wait "$pid"
rc=$?
measured_before=$("$AT" db list --table results --db "$db2" | wc -l)
[ "$rc" -eq 1 ] && grep -q "interrupted" "$work/err" && ok "SIGINT stops with exit 1 ($measured_before saved)" ||
  bad "SIGINT: rc=$rc $(cat "$work/err")"
"$AT" attention "${long[@]}" --budget "$measured_before" --db "$db2" --json >"$work/out.json"
[ "$(json 'd["candidates"]["measured"]')" = 0 ] && [ "$(json 'd["candidates"]["evaluated"]')" = "$measured_before" ] &&
  ok "resume re-measures nothing of $measured_before" || bad "resume: $(json 'd["candidates"]')"

# ---- spaces, and compiling for the GPU targets without a GPU ----------------------------------------
expect 0 "configurations, [0-9]+ valid" -- space attention --heads 8 --seq 512 --head-dim 64 --db "$db"
expect 0 '"template":"attention"' -- space attention --json --db "$db"
for arch in sm_80 sm_90a gfx90a; do
  case $arch in
  sm_*) have_lib AUTOTUNE_NVRTC_LIBRARY 'libnvrtc\.so\.1[23] ' || { skip "$arch compile: no NVRTC"; continue; } ;;
  gfx*) have_lib AUTOTUNE_HIPRTC_LIBRARY 'libamdhip64\.so\.5 \|libhiprtc\.so' || { skip "$arch compile: no hipRTC"; continue; } ;;
  esac
  for dt in f16 bf16; do
    expect 0 '"compiled":1' -- space attention --arch $arch --compile --limit 1 --dtype $dt \
      --heads 8 --seq 1000 --head-dim 128 --causal --json
  done
done

finish
