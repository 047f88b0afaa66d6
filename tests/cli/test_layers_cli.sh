#!/usr/bin/env bash
# test_layers_cli.sh — the CLI over layered databases (docs/shipping.md): --no-tune answers from
# a read-only layer on $AUTOTUNE_DB_PATH without writing to it, the default without one; a
# damaged layer is a warning, not a failure; db show lists every database and the chain;
# db verify on a fresh tune; every bad input of --no-tune, db show and db verify exits 2; the warm
# start of a tuning run from a neighbouring shape tuned before (docs/search.md, "Transfer").
# (test_layers covers each level of the chain on crafted layers.)
#   tests/cli/test_layers_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_layers_cli.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, expect RC PATTERN -- ARGS, json EXPR, finish
export AUTOTUNE_DB="$work/default-db" AUTOTUNE_SHIPPED_DB='' AUTOTUNE_DB_PATH='' XDG_CACHE_HOME="$work/cache"
unset AUTOTUNE_BACKEND
tiny=(--strategy random --seed 1 --budget 2)

# ---- bad input: exit 2, before any device or database is touched ---------------------------
for o in "--force" "--budget 3" "--strategy random" "--replay $work/x" "--template gemm"; do
  # shellcheck disable=SC2086
  reject 2 "--no-tune answers from the databases" -- gemm --m 8 --n 8 --no-tune $o
done
reject 2 "option '--no-tune' takes no value" -- gemm --m 8 --n 8 --no-tune=1
reject 2 "--max-slowdown 'x' is not a number above 1" -- db verify --max-slowdown x
reject 2 "--max-slowdown '1' is not a number above 1" -- db verify --max-slowdown 1
reject 2 "unknown operation 'nope'" -- db verify --op nope
reject 2 "db verify takes no argument" -- db verify extra
reject 2 "search options of db verify are for --retune" -- db verify --budget 3
reject 2 "unknown option '--retune' for db list" -- db list --retune
reject 2 "unknown option '--max-slowdown' for db show" -- db show gemm --max-slowdown 2
reject 2 "--device 'x' is not a device index" -- db verify --device x --db "$work/none"

# ---- a layer answers, and is not written --------------------------------------------------
if ! "$AT" devices | grep -qE "opencl +available"; then
  skip "no OpenCL device: the layer checks"
  finish || exit 1
  exit 77 # ctest: skipped
fi
layer="$work/layer"
expect 0 '"cache":"miss"' -- gemm --m 40 --n 24 --k 16 "${tiny[@]}" --db "$layer" --json
rm -f "$layer/lock.mdb"
sum=$(md5sum <"$layer/data.mdb")
export AUTOTUNE_DB_PATH="$layer"
user="$work/user"
"$AT" gemm --m 40 --n 24 --k 16 --db "$user" --no-tune --json >"$work/out.json" 2>"$work/err"
json "d['source'] == 'exact' and d['database'] == '$layer' and d['validated'] and d['config'] != ''" |
  grep -q True && ok "--no-tune: exact from the layer, checked here" || bad "exact: $(cat "$work/out.json" "$work/err")"
"$AT" gemm --m 40 --n 24 --k 20 --db "$user" --no-tune >"$work/out" 2>&1
grep -q "source      nearest-shape" "$work/out" && grep -q "database    $layer" "$work/out" &&
  ok "--no-tune: nearest-shape from the layer (text)" || bad "nearest: $(cat "$work/out")"
[ "$(md5sum <"$layer/data.mdb")" = "$sum" ] && [ ! -e "$layer/lock.mdb" ] &&
  ok "the layer is unchanged, no lock file" || bad "the layer was written: $(ls "$layer")"
"$AT" db show gemm/f32/nn/40x24x16 --db "$layer" >"$work/out" 2>&1
! grep -q "read-only layer" "$work/out" && grep -qE "exact +gemm/f32/nn/40x24x16 from $(re "$layer") " "$work/out" &&
  ok "db show: the user's database on the path is not a layer too" || bad "db show: $(cat "$work/out")"
expect 0 "^== $(re "$layer") \(read-only layer\)" -- db show gemm/f32/nn/40x24x16 --db "$user"
expect 0 "exact +gemm/f32/nn/40x24x16 from $(re "$layer").*, checked here" -- db show gemm/f32/nn/40x24x16 --db "$user"
expect 0 "^gemm/f32/nn/40x24x16\|" -- db list --table checks --db "$user"

# ---- a damaged layer: a warning; no layers: the default ------------------------------------
mkdir -p "$work/bad" && head -c 8192 /dev/urandom >"$work/bad/data.mdb"
AUTOTUNE_DB_PATH="$work/bad:$layer" "$AT" gemm --m 40 --n 24 --k 16 --db "$user" --no-tune --json \
  >"$work/out.json" 2>"$work/err"
grep -q "warning: skipped the database $work/bad" "$work/err" && json "d['source'] == 'exact'" | grep -q True &&
  ok "a damaged layer is skipped with a warning" || bad "damaged layer: $(cat "$work/err" "$work/out.json")"
AUTOTUNE_DB_PATH= "$AT" gemm --m 40 --n 24 --k 16 --db "$work/empty" --no-tune --json >"$work/out.json"
json "d['source'] == 'default' and d['database'] == ''" | grep -q True &&
  ok "no layers, nothing tuned: the default" || bad "default: $(cat "$work/out.json")"

# ---- db verify -----------------------------------------------------------------------------
export AUTOTUNE_DB_PATH=''
expect 0 "0 flagged" -- db verify --db "$layer" --max-slowdown 50
"$AT" db verify --db "$layer" --max-slowdown 50 --op gemm --json >"$work/out.json"
json "d['flagged'] == 0 and len(d['entries']) == 1 and d['entries'][0]['measured_us'] > 0" |
  grep -q True && ok "db verify --json: one entry re-measured" || bad "verify: $(cat "$work/out.json")"
expect 0 "0 flagged" -- db verify --db "$layer" --op attention

# ---- warm start: a neighbouring shape's results are measured first -------------------------
# (the source holds the configs that ran: under load one may have been stopped as a timeout)
warm="$work/warm"
"$AT" gemm --m 40 --n 24 --k 16 --strategy random --seed 1 --budget 4 --db "$warm" --json >"$work/out.json"
src_best=$(json "d['best']['config']")
json "d['transfer'] == {'sources': [], 'first_picks_from_sources': 0, 'probe_picks': 0}" | grep -q True &&
  ok "the first shape has no warm start" || bad "first shape: $(cat "$work/out.json")"
"$AT" gemm --m 48 --n 24 --k 16 --strategy random --seed 1 --budget 4 --db "$warm" --progress always --json \
  >"$work/out.json" 2>"$work/err"
first=$(grep -m1 -o "1/4 candidates.*last [^ ]*" "$work/err" | sed 's/.*last //')
json "d['transfer']['sources'][0]['source'].startswith('gemm/f32/nn/40x24x16 on opencl/') and
  1 <= d['transfer']['sources'][0]['configs'] <= 4 and
  d['transfer']['first_picks_from_sources'] == min(3, d['transfer']['sources'][0]['configs'])" |
  grep -q True && [ "$first" = "$src_best" ] &&
  ok "a neighbouring shape warm-starts from the first one, its best measured first" ||
  bad "warm start: first measured '$first', source best '$src_best': $(cat "$work/out.json")"
"$AT" gemm --m 56 --n 24 --k 16 "${tiny[@]}" --db "$warm" --no-transfer --json >"$work/out.json"
json "d['transfer'] == {'sources': [], 'first_picks_from_sources': 0, 'probe_picks': 0}" | grep -q True &&
  ok "--no-transfer: no warm start" || bad "--no-transfer: $(cat "$work/out.json")"
finish
