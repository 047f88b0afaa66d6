#!/usr/bin/env bash
# test_tune_cli.sh — `autotune tune --shapes`: the 12 tiny GEMMs of tiny-gemms.yaml tuned by one
# process into REF (the reference the MPI test compares with), resume, --shard slices that
# `db merge` joins into the whole, the total budget, an interrupt and its resume, a problem that fails while the
# list goes on, the shipped LLM lists expanded (--dry-run), and bad lists and options (exit 2).
#   tests/cli/test_tune_cli.sh path/to/autotune REF
set -uo pipefail
AT=${1:?usage: test_tune_cli.sh path/to/autotune REF}
REF=${2:?usage: test_tune_cli.sh path/to/autotune REF}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, expect RC PATTERN -- ARGS, json EXPR, finish
export AUTOTUNE_DB="$work/default-db" AUTOTUNE_SHIPPED_DB='' AUTOTUNE_DB_PATH='' TMPDIR="$work"
unset AUTOTUNE_BACKEND OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK
list="$here/tiny-gemms.yaml"
search=(--strategy random --seed 1 --budget 3)
keys() { "$AT" db list --table "$2" --db "$1" | sort; }

# ---- help, bad options and bad lists: exit 2 naming the problem -------------------------------
expect 0 "usage: autotune tune --shapes FILE" -- tune --help
expect 0 "tune +tune every problem of a shape list" -- --help
reject 2 "tune needs --shapes FILE" -- tune
for s in 3/3 1 a/2 -1/2 1/0 1/2x /2 1/; do
  reject 2 "--shard '$s' is not I/N with 0 <= I < N" -- tune --shapes "$list" --shard "$s" --dry-run
done
reject 2 "--total-budget '0'" -- tune --shapes "$list" --total-budget 0
reject 2 "cannot read the shape list $work/none.yaml" -- tune --shapes "$work/none.yaml"
printf -- '- gemm: {m: 16, n: 16, k: 16}\n- gemm: {m: 16, n: 16, kk: 16}\n' >"$work/bad1.yaml"
reject 2 "bad1.yaml:2:24: unknown field 'kk' of gemm" -- tune --shapes "$work/bad1.yaml"
printf -- '- gemm: {m: 16, n: [8, 0], k: 16}\n' >"$work/bad2.yaml"
reject 2 "bad2.yaml:1:24: n '0' is not an integer" -- tune --shapes "$work/bad2.yaml" --dry-run
printf -- '- conv: {m: 16}\n' >"$work/bad3.yaml"
reject 2 "bad3.yaml:1:3: unknown operation 'conv'" -- tune --shapes "$work/bad3.yaml"
printf -- '[]\n' >"$work/bad4.yaml"
reject 2 "bad4.yaml:1:1: an empty list" -- tune --shapes "$work/bad4.yaml"
printf -- 'gemm: {m: 16}\n' >"$work/bad5.yaml"
reject 2 "bad5.yaml:1:1: not a list" -- tune --shapes "$work/bad5.yaml"
[ ! -e "$AUTOTUNE_DB" ] && ok "bad input opened no database" || bad "bad input made $AUTOTUNE_DB"

# An MPI launcher's environment without autotune-mpi next to autotune: a clear refusal.
mkdir -p "$work/bin" && cp "$AT" "$work/bin/autotune"
OMPI_COMM_WORLD_SIZE=2 AT="$work/bin/autotune" \
  expect 2 "started by an MPI launcher \(OMPI_COMM_WORLD_SIZE is set\), but this build has no MPI support: .*autotune-mpi is not there" -- tune --shapes "$list"
PMIX_RANK=0 AT="$work/bin/autotune" expect 0 "opencl +available" -- devices

# ---- the shipped LLM lists expand (too big to tune in a test) -----------------------------------
llama="$here/../../benchmarks/shapes/llama-3.1-8b.yaml"
"$AT" tune --shapes "$llama" --dry-run >"$work/llama.txt" 2>"$work/err"
want="gemm/f32/nt/16x4096x4096 gemm/f32/nt/128x4096x4096 gemm/f32/nt/16x1024x4096
gemm/f32/nt/128x1024x4096 gemm/f32/nt/16x14336x4096 gemm/f32/nt/128x14336x4096
gemm/f32/nt/16x4096x14336 gemm/f32/nt/128x4096x14336 attention/f32/bshd/d128/causal/1x32x8/2048x2048"
[ "$(cat "$work/llama.txt")" = "$(tr ' ' '\n' <<<"$want")" ] && grep -q "^9 problems" "$work/err" &&
  ok "llama-3.1-8b.yaml: 9 problems (q/o, k/v, gate/up, down at 16 and 128 tokens; attention)" ||
  bad "llama list: $(cat "$work/llama.txt" "$work/err")"
[ "$("$AT" tune --shapes "$llama" --dry-run --shard 1/2 2>/dev/null | tr '\n' ' ')" = \
  "gemm/f32/nt/128x4096x4096 gemm/f32/nt/128x1024x4096 gemm/f32/nt/128x14336x4096 gemm/f32/nt/128x4096x14336 " ] &&
  ok "--dry-run --shard 1/2: the odd indices" || bad "shard 1/2: $("$AT" tune --shapes "$llama" --dry-run --shard 1/2 2>&1)"
qwen=$("$AT" tune --shapes "$here/../../benchmarks/shapes/qwen2.5-7b.yaml" --dry-run 2>/dev/null)
[ "$(wc -l <<<"$qwen")" -eq 9 ] && grep -qx "gemm/f32/nt/128x18944x3584" <<<"$qwen" &&
  grep -qx "attention/f32/bshd/d128/causal/1x28x4/2048x2048" <<<"$qwen" &&
  ok "qwen2.5-7b.yaml: 9 problems" || bad "qwen list: $qwen"

# ---- the reference: one process, then a rerun that is all cache hits ----------------------------
rm -rf "$REF" && mkdir -p "$REF"
if "$AT" tune --shapes "$list" "${search[@]}" --db "$REF/db" --json >"$work/out.json" 2>"$work/err"; then
  ok "12 tiny GEMMs tuned in one process"
else
  bad "one process: $(cat "$work/err")"
fi
json 'd["complete"] and len(d["problems"]) == 12 and all(p["status"] == "ok" and p["cache"] == "miss" and p["evaluated"] == 3 and p["best"]["time_us"] > 0 for p in d["problems"]) and [p["index"] for p in d["problems"]] == list(range(12))' |
  grep -q True && ok "json: 12 problems tuned, 3 evaluations each" || bad "json: $(cat "$work/out.json")"
[ "$(grep -c '^\[[0-9]*/12\] gemm/f32/nn/[0-9x]*  best [0-9.]* us ([0-9.]* GFLOP/s)  tuned' "$work/err")" -eq 12 ] &&
  grep -q '^\[1/12\] gemm/f32/nn/16x16x16 .* list ETA [0-9]' "$work/err" &&
  ok "a progress line per problem on stderr (not a terminal)" || bad "progress: $(cat "$work/err")"
keys "$REF/db" results >"$REF/results.txt"
keys "$REF/db" best >"$REF/best.txt"
[ "$(wc -l <"$REF/results.txt")" -eq 36 ] && [ "$(wc -l <"$REF/best.txt")" -eq 12 ] &&
  ok "36 results, 12 best entries" || bad "reference: $(wc -l "$REF"/*.txt)"
"$AT" tune --shapes "$list" "${search[@]}" --db "$REF/db" --json >"$work/out.json" 2>"$work/err"
json 'd["complete"] and all(p["cache"] == "hit" and p["measured"] == 0 for p in d["problems"])' |
  grep -q True && [ "$(grep -c '  cache' "$work/err")" -eq 12 ] &&
  ok "a rerun: 12 cache hits, nothing measured" || bad "rerun: $(cat "$work/out.json" "$work/err")"

# ---- shards: three slices into three databases, whose union is the whole ------------------------
for i in 0 1 2; do
  "$AT" tune --shapes "$list" "${search[@]}" --shard "$i/3" --db "$work/shard$i" --json \
    >"$work/shard$i.json" 2>"$work/err" || bad "shard $i/3: $(cat "$work/err")"
done
python3 - "$work" <<'EOF' && ok "shards i/3 tune indices i, i+3, ... (4 each)" || bad "shard indices"
import json, sys
for i in range(3):
    d = json.load(open(f"{sys.argv[1]}/shard{i}.json"))
    assert [p["index"] for p in d["problems"]] == list(range(i, 12, 3)), d
EOF
# Merged with db merge, the shards are the whole: the same results and best keys.
"$AT" db merge "$work/shard0" "$work/shard1" "$work/shard2" --output "$work/merged" >/dev/null \
  2>"$work/err" || bad "db merge of the shards: $(cat "$work/err")"
for t in results best; do
  keys "$work/merged" $t >"$work/union.txt"
  cmp -s "$work/union.txt" "$REF/$t.txt" && ok "the shards merged (db merge) have the whole list's $t keys" ||
    bad "merged shards' $t differ: $(diff "$work/union.txt" "$REF/$t.txt" | head -5)"
done

# db stats --shapes: the coverage of the list in a shard and in the merged database.
"$AT" db stats --db "$work/shard1" --shapes "$list" --json >"$work/out.json" 2>"$work/err" &&
  python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["coverage"]
assert c["problems"] == 12 and c["covered"] == 4 and len(c["missing"]) == 8, c
assert len(c["devices"]) == 1 and c["devices"][0]["covered"] == 4, c' "$work/out.json" &&
  ok "db stats --shapes: shard 1/3 covers 4 of 12, 8 missing" || bad "stats shard1: $(cat "$work/out.json" "$work/err")"
"$AT" db stats --db "$work/merged" --shapes "$list" 2>&1 | grep -q "coverage of .*: 12 of 12 problems" &&
  ok "db stats --shapes: the merged shards cover the list" || bad "stats merged: $("$AT" db stats --db "$work/merged" --shapes "$list" 2>&1)"
reject 2 "not a list" -- db stats --db "$work/merged" --shapes "$work/out.json"

# ---- the total budget ---------------------------------------------------------------------------
"$AT" tune --shapes "$list" "${search[@]}" --total-budget 24 --db "$work/tb" --json >"$work/out.json" 2>/dev/null
json 'd["complete"] and d["measured"] == 24 and all(p["evaluated"] == 2 for p in d["problems"])' |
  grep -q True && ok "--total-budget 24 over 12 problems: 2 evaluations each" ||
  bad "total 24: $(cat "$work/out.json")"
"$AT" tune --shapes "$list" --strategy random --seed 1 --total-budget 5 --db "$work/tb5" --json >"$work/out.json" 2>"$work/err"
rc=$?
json 'not d["complete"] and d["measured"] == 5 and [p["status"] for p in d["problems"]] == ["ok"] * 5 + ["skipped"] * 7' |
  grep -q True && [ "$rc" -eq 1 ] && grep -q '^\[6/12\] .*skipped: the total budget is spent' "$work/err" &&
  ok "--total-budget 5: 5 problems get 1 evaluation, 7 are skipped, exit 1" ||
  bad "total 5: rc=$rc $(cat "$work/out.json" "$work/err")"
"$AT" tune --shapes "$list" "${search[@]}" --total-budget 5 --db "$work/tb5" --json >"$work/out.json" 2>/dev/null
json 'd["problems"][0]["cache"] == "hit" and d["problems"][4]["cache"] == "hit" and d["measured"] == 5' |
  grep -q True && ok "run again: the 5 tuned are hits, the budget goes to the next 5" ||
  bad "total 5 again: $(cat "$work/out.json")"
"$AT" tune --shapes "$list" --strategy random --seed 1 --budget 1 --total-budget 600s --db "$work/tbs" --json >"$work/out.json" 2>/dev/null
json 'd["complete"] and d["measured"] == 12' | grep -q True &&
  ok "--total-budget 600s with --budget 1" || bad "total 600s: $(cat "$work/out.json")"

# ---- a problem that fails is reported, and the list goes on -------------------------------------
printf -- '- gemm: {m: 16, n: 16, k: 16, dtype: f16}\n- gemm: {m: 16, n: 16, k: 16}\n' >"$work/mixed.yaml"
"$AT" tune --shapes "$work/mixed.yaml" "${search[@]}" --db "$work/mixed" --json >"$work/out.json" 2>"$work/err"
rc=$?
json '[p["status"] for p in d["problems"]] == ["failed", "ok"] and "f16" in d["problems"][0]["error"] and not d["complete"]' |
  grep -q True && [ "$rc" -eq 1 ] && grep -q '^\[1/2\] gemm/f16/nn/16x16x16  failed: not supported' "$work/err" &&
  ok "an f16 problem on OpenCL fails in its entry, the next is tuned, exit 1" ||
  bad "mixed: rc=$rc $(cat "$work/out.json" "$work/err")"

# ---- an interrupt stops after the candidate in hand; the rerun resumes --------------------------
db="$work/int"
"$AT" tune --shapes "$list" "${search[@]}" --db "$db" --json >"$work/int.json" 2>"$work/err" &
pid=$!
for _ in $(seq 1 600); do
  [ "$("$AT" db list --table results --db "$db" 2>/dev/null | wc -l)" -ge 7 ] && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
rc=$?
before=$("$AT" db list --table results --db "$db" | wc -l)
if [ "$before" -lt 36 ]; then
  python3 -c "
import json; d = json.load(open('$work/int.json'))
st = [p['status'] for p in d['problems']]
assert not d['complete'] and 'ok' in st and st[-1] == 'pending', st" && [ "$rc" -eq 1 ] &&
    ok "SIGINT after $before results: exit 1, complete:false, the rest pending" ||
    bad "SIGINT: rc=$rc $(cat "$work/int.json" "$work/err")"
  "$AT" tune --shapes "$list" "${search[@]}" --db "$db" --json >"$work/out.json" 2>/dev/null
  json 'd["complete"] and d["problems"][0]["cache"] == "hit" and d["measured"] == 36 - '"$before" |
    grep -q True && ok "the rerun resumes: hits for what was done, $((36 - before)) measured" ||
    bad "resume: $(cat "$work/out.json")"
  for t in results best; do
    [ "$(keys "$db" $t)" = "$(cat "$REF/$t.txt")" ] && ok "interrupted and resumed: the same $t keys" ||
      bad "interrupted and resumed: $t keys differ"
  done
else
  skip "the interrupt: the list was done before SIGINT"
fi

finish
