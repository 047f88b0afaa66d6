#!/usr/bin/env bash
# test_shipped_cli.sh — the databases the project ships (share/autotune/db) answer: every shipped
# bundle reads (db stats), covers its shape lists (db stats --shapes), and on this machine's
# OpenCL device --no-tune answers a shipped LLM shape from it (exact on the machine it was tuned
# on, same-arch or vendor on another CPU), checked here on first use, without writing to it.
#   tests/cli/test_shipped_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_shipped_cli.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
shipped=$(cd "$here/../../share/autotune/db" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, expect RC PATTERN -- ARGS, json EXPR, finish
export AUTOTUNE_DB="$work/user" AUTOTUNE_DB_PATH='' XDG_CACHE_HOME="$work/cache"
unset AUTOTUNE_BACKEND
bundles=("$shipped"/*.jsonl.gz)
[ -e "${bundles[0]}" ] || { bad "no bundle in share/autotune/db"; finish; exit; }
sums=$(md5sum "${bundles[@]}")

for b in "${bundles[@]}"; do
  name=$(basename "$b")
  "$AT" db import "$b" --db "$work/imported-$name" >/dev/null 2>"$work/err" &&
    ok "$name imports" || bad "$name: $(cat "$work/err")"
  for list in "$here"/../../benchmarks/shapes/*.yaml; do
    "$AT" db stats --db "$work/imported-$name" --shapes "$list" --json >"$work/out.json" 2>"$work/err"
    [ "$(json 'd["coverage"]["covered"] == d["coverage"]["problems"]')" = True ] &&
      ok "$name covers $(basename "$list")" || bad "$name, $(basename "$list"): $(cat "$work/out.json" "$work/err")"
  done
done

if ! "$AT" devices | grep -qE "opencl +available"; then
  skip "--no-tune from the shipped folder: no OpenCL device"
  finish
  exit 77
fi
# Qwen2.5 7B's k_proj at 16 tokens: the smallest shipped GEMM, so its first-use check is quick.
export AUTOTUNE_SHIPPED_DB="$shipped"
"$AT" gemm --m 16 --n 512 --k 3584 --layout nt --no-tune --json >"$work/out.json" 2>"$work/err"
[ "$(json 'd["source"] in ("exact", "same-arch", "vendor") and d["database"].endswith(".jsonl.gz") and d["validated"]')" = True ] &&
  ok "--no-tune answers a shipped shape from $(json 'd["database"].split("/")[-1]') ($(json 'd["source"]'), checked here)" ||
  bad "--no-tune from the shipped folder: $(cat "$work/out.json" "$work/err")"
"$AT" db list --table checks --db "$work/user" | grep -q 'gemm/f32/nt/16x512x3584|' &&
  ok "the first-use check is stored in the user's database" || bad "no check stored"
# db show lists a bundle layer's entries (through its private copy), without a warning.
"$AT" db show gemm/f32/nt/16x512x3584 >"$work/show" 2>&1
grep -q '^best    gemm/f32/nt/16x512x3584|' "$work/show" && ! grep -q warning "$work/show" &&
  ok "db show lists the shipped entry of the bundle layer" || bad "db show: $(head -c 600 "$work/show")"
"$AT" db list --db "${bundles[0]}" | grep -q '^gemm/f32/nt/16x512x3584|' &&
  ok "db list reads a bundle given as --db" || bad "db list --db bundle: $("$AT" db list --db "${bundles[0]}" 2>&1 | head -3)"
[ "$(md5sum "${bundles[@]}")" = "$sums" ] && [ -z "$(find "$shipped" -newer "$work/out.json")" ] &&
  ok "the shipped folder is not written" || bad "the shipped folder changed"
finish
