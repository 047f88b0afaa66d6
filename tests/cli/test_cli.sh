#!/usr/bin/env bash
# test_cli.sh — end-to-end tests of the `autotune` command: every command, the JSON contract,
# the database cache and resume, and every bad input with its exit code and message.
#   tests/cli/test_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_cli.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, have_lib, expect RC PATTERN -- ARGS, json EXPR, finish
export AUTOTUNE_DB="$work/default-db"
unset AUTOTUNE_BACKEND

# ---- help and discovery -------------------------------------------------------------------
expect 0 "usage: autotune COMMAND" -- --help
expect 0 "^autotune [0-9.]+ \(library [0-9.]+, database schema [0-9]+\.[0-9]+\)" -- --version
for c in gemm space devices db; do expect 0 "usage: autotune $c" -- "$c" --help; done
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 0 "opencl +available" -- devices
expect 0 '"backends"' -- devices --json
expect 0 '"cpu":true,"tma":false,"cluster":false' -- devices --json # PoCL: a CPU, no TMA, no clusters
expect 0 "cuda +unavailable" -- devices
expect 0 "configurations, [0-9]+ valid" -- space gemm --m 64 --n 64 --db "$work/db0"
expect 0 '"valid":[1-9]' -- space gemm --json --db "$work/db0"
n_listed=$("$AT" space gemm --list --m 100 --n 50 --k 30 --db "$work/db0" | wc -l)
n_valid=$("$AT" space gemm --json --m 100 --n 50 --k 30 --db "$work/db0" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["valid"])')
[ "$n_listed" -eq "$n_valid" ] && ok "space --list prints every valid config ($n_valid)" ||
  bad "space --list printed $n_listed, --json says $n_valid"

# ---- bad input: exit 2 and a message naming the argument ----------------------------------
expect 2 "--m '0' is not an integer from 1 to" -- gemm --m 0 --n 8
expect 2 "--m '-5' is not an integer" -- gemm --m -5 --n 8
expect 2 "--m 'abc' is not an integer" -- gemm --m abc --n 8
expect 2 "--m '99999999999' is not an integer from 1 to 2147483647" -- gemm --m 99999999999 --n 8
expect 2 "--n '' is not an integer|--n.*needs a value" -- gemm --m 8 --n=
expect 2 "option '--m' needs a value" -- gemm --m
expect 2 "option '--m' needs a value" -- gemm --m --n 8
expect 2 "gemm needs --n" -- gemm --m 8
expect 2 "unknown option '--frob'" -- gemm --m 8 --n 8 --frob
expect 2 "unknown dtype 'f64'" -- gemm --m 8 --n 8 --dtype f64
expect 2 "unknown layout 'xy'" -- gemm --m 8 --n 8 --layout xy
expect 2 "unknown backend 'metal'" -- gemm --m 8 --n 8 --backend metal
expect 2 "unknown strategy 'magic'" -- gemm --m 8 --n 8 --strategy magic
expect 2 "--budget '0'" -- gemm --m 8 --n 8 --budget 0
expect 2 "--budget '5x'" -- gemm --m 8 --n 8 --budget 5x
expect 2 "--seed '-1'" -- gemm --m 8 --n 8 --seed -1
expect 2 "--device '-1'" -- gemm --m 8 --n 8 --device -1
expect 2 "dtype f16 is not supported on the opencl backend" -- gemm --m 8 --n 8 --dtype f16 --db "$work/db0"
expect 2 "unexpected argument" -- gemm --m 8 --n 8 extra
expect 2 "unknown template 'conv'" -- space conv
expect 2 "unknown template 'nope' \(gemm templates: " -- gemm --m 8 --n 8 --template nope --db "$work/db0"
expect 2 "template 'gemm_mma' cannot serve .*does not run on the opencl backend" -- gemm --m 8 --n 8 --template gemm_mma --db "$work/db0"
expect 0 '"template":"gemm"' -- space gemm --json --template gemm --db "$work/db0"
expect 2 "unknown db command" -- db frob
expect 2 "--compile needs --arch" -- space gemm --compile
expect 2 "--arch is for --compile" -- space gemm --arch sm_90a
expect 2 "unknown CUDA target 'sm_75'|backend" -- space gemm --arch sm_75 --compile
expect 2 "opencl backend compiles only for a present device" -- space gemm --backend opencl --arch sm_80 --compile
if have_lib AUTOTUNE_NVRTC_LIBRARY 'libnvrtc\.so\.1[23] '; then
  expect 0 "2 ok, 0 compile errors" -- space gemm --backend cuda --arch sm_80 --compile --limit 2
  expect 0 '"compiled":2' -- space gemm --arch sm_90a --compile --limit 2 --dtype bf16 --json
  expect 0 '"template":"gemm_wgmma"' -- space gemm --arch sm_90a --compile --limit 1 --dtype bf16 --json
  expect 0 '"template":"gemm_mma".*"compiled":1' -- space gemm --arch sm_90a --compile --limit 1 --dtype f16 --template gemm_mma --json
  # TMA (gemm_wgmma's LOAD 1 and 2) on a compile-only sm_90a target: three times the configs
  # where the rows of A and B are 16-byte multiples (k = 1000 halves) but C's are not (nt,
  # n = 1004: no TMA store), and more with the 2x1 clusters (CLUSTER 2, TMA only); only LOAD 0
  # where A's are not (k = 1001: lda); and more again where C's rows map too (nn, n = 1024:
  # STORE 1 as well)
  wgmma_space() {
    "$AT" space gemm --arch sm_90a --compile --limit 1 --dtype bf16 --m 1024 --n "$2" --k "$1" \
      --layout "$3" --json >"$work/out.json" 2>&1 && json 'd["space"]' || echo 0
  }
  space_1001=$(wgmma_space 1001 1024 nn) space_1000=$(wgmma_space 1000 1004 nt)
  space_store=$(wgmma_space 1000 1024 nn)
  if [ "$space_1001" -gt 0 ] && [ "$space_1000" -gt $((3 * space_1001)) ] &&
    [ "$space_store" -gt "$space_1000" ]; then
    ok "gemm_wgmma on sm_90a: $space_1000 configs with TMA rows, $space_1001 without, $space_store with C's too"
  else
    bad "gemm_wgmma on sm_90a: $space_1000 configs at k = 1000 (nt n = 1004), $space_1001 at k = 1001 (want over 3x), $space_store with C's rows (want more)"
  fi
else
  skip "the CUDA compile checks: no NVRTC on this machine"
fi
expect 2 "unknown HIP target 'gfx90b'" -- space gemm --arch gfx90b --compile
if have_lib AUTOTUNE_HIPRTC_LIBRARY 'libamdhip64\.so\.5 \|libhiprtc\.so'; then
  expect 0 '"compiled":1' -- space gemm --arch gfx90a --compile --limit 1 --dtype bf16 --json
  if ldconfig -p | grep -q 'libamdhip64\.so\.5 '; then # ROCm 5.2's hipRTC aborts on gfx942
    expect 2 "compiler does not support this target" -- space gemm --arch gfx942 --compile --limit 1
  fi
else
  skip "the HIP compile checks: no hipRTC on this machine"
fi
# Runtime failures: exit 1.
expect 1 "backend 'cuda' is not available" -- gemm --m 8 --n 8 --backend cuda --db "$work/db0"
expect 1 "backend 'hip' is not available" -- gemm --m 8 --n 8 --backend hip --db "$work/db0"
AUTOTUNE_BACKEND=cuda expect 1 "backend 'cuda' is not available" -- gemm --m 8 --n 8 --db "$work/db0"
expect 1 "device 7 does not exist" -- gemm --m 8 --n 8 --device 7 --db "$work/db0"
touch "$work/file"
expect 1 "database.*$work/file/db" -- gemm --m 8 --n 8 --db "$work/file/db"
expect 1 "database" -- gemm --m 8 --n 8 --db /proc/autotune-db

# ---- a real tuning run, JSON contract, cache hit, resume -----------------------------------
db="$work/db1"
if "$AT" gemm --m 37 --n 29 --k 53 --budget 6 --db "$db" --json >"$work/out.json" 2>"$work/err"; then
  ok "gemm tunes 37x29x53"
else
  bad "gemm tune failed: $(cat "$work/err")"
fi
fields=$(json '" ".join(sorted(d.keys()))' 2>&1)
for f in backend device problem template best candidates cache seconds; do
  grep -qw "$f" <<<"$fields" && ok "json has $f" || bad "json lacks $f ($fields)"
done
[ "$(json 'd["cache"]')" = miss ] && ok "first run is a miss" || bad "first run cache=$(json 'd["cache"]')"
[ "$(json 'd["candidates"]["evaluated"]')" = 6 ] && ok "budget 6 evaluates 6" || bad "evaluated $(json 'd["candidates"]')"
json 'd["best"]["gflops"] > 0 and d["best"]["time_us"] > 0 and d["best"]["max_rel_error"] < 1e-4 and "=" in d["best"]["config"]' |
  grep -q True && ok "best has config, time, gflops, error" || bad "best: $(json 'd["best"]')"
json 'd["problem"]["m"]==37 and d["problem"]["n"]==29 and d["problem"]["k"]==53 and d["problem"]["layout"]=="nn"' |
  grep -q True && ok "problem echoed" || bad "problem: $(json 'd["problem"]')"

start=$(date +%s.%N)
"$AT" gemm --m 37 --n 29 --k 53 --budget 6 --db "$db" --json >"$work/out.json"
elapsed=$(python3 -c "print($(date +%s.%N) - $start)")
[ "$(json 'd["cache"]')" = hit ] && ok "second run is a cache hit" || bad "second run cache=$(json 'd["cache"]')"
# (the template: gemm_cpu on a CPU device such as PoCL, gemm elsewhere)
json 'd["template"] in ("gemm", "gemm_cpu") and d["candidates"]["space"] > 0 and d["candidates"]["evaluated"] == 0' |
  grep -q True && ok "a hit names its template and the space it was tuned in" || bad "hit: $(cat "$work/out.json")"
# A hit takes ~0.1 s here; 10 s only catches a hit that tunes again (a loaded CI machine has
# taken 2.6 s), the JSON's cache field above is the real check.
python3 -c "import sys; sys.exit(0 if $elapsed < 10.0 else 1)" && ok "cache hit in ${elapsed}s" ||
  bad "cache hit took ${elapsed}s"
expect 0 "from the database" -- gemm --m 37 --n 29 --k 53 --db "$db"

# Without --db the database is $AUTOTUNE_DB.
"$AT" gemm --m 5 --n 3 --budget 1 >/dev/null 2>&1
[ -f "$AUTOTUNE_DB/data.mdb" ] && "$AT" db list | grep -q "gemm/f32/nn/5x3x5" &&
  ok "default database is \$AUTOTUNE_DB" || bad "no database at \$AUTOTUNE_DB"

# --k defaults to --m
"$AT" gemm --m 19 --n 23 --budget 2 --db "$db" --json >"$work/out.json"
[ "$(json 'd["problem"]["k"]')" = 19 ] && ok "--k defaults to --m" || bad "k=$(json 'd["problem"]["k"]')"

# Resume: measurements are kept per config; --force measures again.
"$AT" gemm --m 37 --n 29 --k 53 --budget 10 --force --db "$db" --json >"$work/out.json"
[ "$(json 'd["candidates"]["measured"]')" = 10 ] && ok "--force measures everything again" ||
  bad "force measured $(json 'd["candidates"]')"
"$AT" gemm --m 41 --n 29 --k 53 --budget 4 --seed 5 --db "$db" --json >/dev/null
expect 0 "gemm/f32/nn/41x29x53" -- db list --db "$db"
expect 0 "best +gemm/f32/nn/37x29x53" -- db show gemm/f32/nn/37x29x53 --db "$db"
expect 0 "status=ok" -- db show gemm/f32/nn/37x29x53 --db "$db"
expect 0 "^[0-9a-f]{16}$" -- db list --table binaries --db "$db"
expect 2 "unknown table" -- db list --table nope --db "$db"

# Every layout tunes and verifies.
for l in nt tn tt; do
  expect 0 "best" -- gemm --m 17 --n 9 --k 33 --layout "$l" --budget 2 --db "$db"
done

# ---- interrupted run resumes without re-measuring -------------------------------------------
db2="$work/db2"
"$AT" gemm --m 45 --n 31 --k 20 --strategy exhaustive --budget 300 --db "$db2" --json >"$work/int.json" 2>"$work/err" &
pid=$!
for _ in $(seq 1 300); do
  n=$("$AT" db list --table results --db "$db2" 2>/dev/null | wc -l)
  [ "$n" -ge 8 ] && break
  sleep 0.2
done
kill -INT "$pid"
wait "$pid"
rc=$?
measured_before=$("$AT" db list --table results --db "$db2" | wc -l)
[ "$rc" -eq 1 ] && grep -q "interrupted" "$work/err" && ok "SIGINT stops with exit 1 ($measured_before saved)" ||
  bad "SIGINT: rc=$rc $(cat "$work/err")"
python3 -c "import json; d=json.load(open('$work/int.json')); assert d['complete'] is False and d['best']['time_us'] > 0" &&
  ok "an interrupted --json run still prints what it measured" || bad "interrupted json: $(cat "$work/int.json")"
"$AT" db list --db "$db2" | grep -q 45x31x20 && bad "interrupted run wrote a best entry" ||
  ok "interrupted run wrote no best entry"
"$AT" gemm --m 45 --n 31 --k 20 --strategy exhaustive --budget "$measured_before" --db "$db2" --json >"$work/out.json"
[ "$(json 'd["candidates"]["measured"]')" = 0 ] && [ "$(json 'd["candidates"]["evaluated"]')" = "$measured_before" ] &&
  ok "resume re-measures nothing of $measured_before" || bad "resume: $(json 'd["candidates"]')"

# ---- damaged databases: exit 1, file untouched ------------------------------------------------
for kind in garbage truncated newer; do
  d="$work/bad-$kind"
  mkdir -p "$d"
  case $kind in
  garbage) head -c 65536 /dev/urandom >"$d/data.mdb" ;;
  truncated) head -c 3000 "$db/data.mdb" >"$d/data.mdb" ;;
  newer)
    cp "$db/data.mdb" "$d/data.mdb"
    printf 'VERSION=3\nformat=print\ntype=btree\nHEADER=END\n schema\n 99\nDATA=END\n' |
      mdb_load -s meta "$d" ;;
  esac
  sum=$(md5sum <"$d/data.mdb")
  case $kind in
  newer) pat="newer" ;;
  *) pat="not an autotune database|corrupt" ;;
  esac
  expect 1 "$pat" -- gemm --m 8 --n 8 --db "$d"
  expect 1 "$pat" -- db list --db "$d"
  [ "$(md5sum <"$d/data.mdb")" = "$sum" ] && ok "$kind database left untouched" || bad "$kind database was modified"
done

# ---- a template that fails to compile or computes wrong numbers: recorded, the run goes on ----
# A copy of the templates with a tiny space (8 configs): BM=16,BN=16 does not compile and
# BM=16,BN=32 writes a wrong C[0] (two configs each, SA=0 and SA=1).
tpl="$work/templates"
mkdir -p "$tpl/common" "$tpl/gemm"
cp "$here/../../templates/common/opencl.h" "$tpl/common/"
cp "$here/../../templates/gemm/gemm_problem.h" "$tpl/gemm/"
python3 - "$here/../../templates/gemm" "$tpl/gemm" <<'PY'
import re, sys
src, dst = sys.argv[1], sys.argv[2]
y = open(src + "/gemm.yaml").read()
small = {"BM": "[16, 32]", "BN": "[16, 32]", "BK": "[8]", "TM": "[2]", "TN": "[2]", "VW": "[1]",
         "STRN": "[0]", "SA": "[0, 1]", "SB": "[0]", "PAD": "[0]", "UNROLL": "[1]"}
for name, values in small.items():
    y, n = re.subn(r"(?m)^(  %s:\s*)\[[^\]]*\]" % name, r"\g<1>" + values, y)
    assert n == 1, name
y = y[:y.index("defaults:")] + "defaults:\n  - {BM: 32, BN: 32, BK: 8, TM: 2, TN: 2, VW: 1, STRN: 0, SA: 0, SB: 0, PAD: 0, UNROLL: 1}\n"
open(dst + "/gemm.yaml", "w").write(y)
k = open(src + "/gemm.cl").read()
end = k.rstrip().rindex("}")
k = ("#if BM == 16 && BN == 16\n#error deliberately broken candidate\n#endif\n" + k[:end] +
     "#if BM == 16 && BN == 32\n    if (GROUP_ID(0) == 0 && GROUP_ID(1) == 0 && LOCAL_ID(0) == 0 && LOCAL_ID(1) == 0)\n"
     "        C[0] = 12345.0f;\n#endif\n" + k[end:])
open(dst + "/gemm.cl", "w").write(k)
PY
db3="$work/db3"
if AUTOTUNE_TEMPLATE_PATH="$tpl" "$AT" gemm --m 45 --n 39 --k 17 --strategy exhaustive --db "$db3" --json \
  >"$work/out.json" 2>"$work/err"; then
  ok "a run with a broken and a wrong candidate completes"
else
  bad "sabotaged run failed: $(cat "$work/err")"
fi
json 'd["candidates"]["evaluated"] == 8 and d["candidates"]["failed"] == 4 and d["candidates"]["space"] == 8' |
  grep -q True && ok "8 evaluated, 4 failed" || bad "sabotaged candidates: $(json 'd["candidates"]')"
json '"BM=16,BN=16" not in d["best"]["config"] and "BM=16,BN=32" not in d["best"]["config"]' | grep -q True &&
  ok "best is neither failed candidate" || bad "best: $(json 'd["best"]')"
shown=$("$AT" db show gemm/f32/nn/45x39x17 --db "$db3")
grep -A1 "BM=16,BN=16," <<<"$shown" | grep -q "status=compile_error.*deliberately broken" &&
  ok "compile error recorded with the compiler's message" || bad "no compile_error: $shown"
grep -A1 "BM=16,BN=32," <<<"$shown" | grep -q "status=wrong_result" &&
  ok "wrong result recorded" || bad "no wrong_result: $shown"

cp "$work/out.json" "$work/sabotaged.json" # the recorded run, for the replay and export tests

# ---- replay: a recorded run answered from its database --------------------------------------
# Exhaustive replay of the sabotaged run reproduces its best exactly, failures included.
if AUTOTUNE_TEMPLATE_PATH="$tpl" "$AT" gemm --m 45 --n 39 --k 17 --strategy exhaustive \
  --replay "$db3" --db "$work/db-replay" --json >"$work/replay.json" 2>"$work/err"; then
  python3 - "$work/out.json" "$work/replay.json" <<'PY' && ok "gemm --replay reproduces the recorded best" ||
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["best"]["config"] == b["best"]["config"], (a["best"], b["best"])
assert abs(a["best"]["time_us"] - b["best"]["time_us"]) < 1e-3, (a["best"], b["best"])
assert b["candidates"]["evaluated"] == 8 and b["candidates"]["failed"] == 4 and b["candidates"]["measured"] == 0
PY
    bad "replayed best differs: $(cat "$work/out.json") vs $(cat "$work/replay.json")"
else
  bad "gemm --replay failed: $(cat "$work/err")"
fi
# The same for a tiny real run on the full space: its best is found again by an exhaustive
# replay (every other config is "not recorded").
"$AT" gemm --m 21 --n 13 --k 9 --budget 3 --db "$work/db-tiny" --json >"$work/tiny.json" 2>"$work/err" &&
  "$AT" gemm --m 21 --n 13 --k 9 --strategy exhaustive --replay "$work/db-tiny" --db "$work/db-replay" \
    --json >"$work/tiny-replay.json" 2>>"$work/err"
python3 - "$work/tiny.json" "$work/tiny-replay.json" <<'PY' && ok "exhaustive replay of a 3-candidate run: same best" ||
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["best"]["config"] == b["best"]["config"] and a["best"]["time_us"] == b["best"]["time_us"], (a, b)
assert b["candidates"]["evaluated"] == b["candidates"]["space"] and b["candidates"]["measured"] == 0, b
PY
  bad "tiny replay: $(cat "$work/tiny.json" "$work/tiny-replay.json" "$work/err")"
[ ! -e "$work/db-replay/data.mdb" ] || ! "$AT" db list --table results --db "$work/db-replay" | grep -q . &&
  ok "a replay stores nothing" || bad "a replay stored results"
AUTOTUNE_TEMPLATE_PATH="$tpl" expect 2 "has no results for gemm/f32/nn/45x39x18 on device" -- \
  gemm --m 45 --n 39 --k 18 --replay "$db3" --db "$work/db-replay"
expect 2 "--replay $work/nope: no such database" -- gemm --m 8 --n 8 --replay "$work/nope" --db "$work/db-replay"
# The generic replay on our own database: the same best, the recorded failures.
AUTOTUNE_TEMPLATE_PATH="$tpl" "$AT" replay "$db3" --strategy exhaustive --json >"$work/out2.json" 2>"$work/err"
python3 - "$work/out.json" "$work/out2.json" <<'PY' && ok "replay DB reproduces the recorded best" ||
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["format"] == "autotune" and b["space"] == 8 and b["space_failed"] == 4, b
assert b["evaluated"] == 8 and b["best"]["config"] == a["best"]["config"], (a["best"], b)
assert abs(b["best"]["time"] - a["best"]["time_us"]) < 1e-3 and b["optimum_time"] == b["best"]["time"], b
assert b["trajectory"][-1][1] == b["best"]["time"], b
PY
  bad "replay of the database: $(cat "$work/out2.json" "$work/err")"
expect 0 "usage: autotune replay FILE" -- replay --help
expect 2 "replay needs a recorded space" -- replay
expect 2 "unknown strategy 'magic' \(one of: model, random" -- replay "$db3" --strategy magic
expect 2 "cannot open $work/missing.json" -- replay "$work/missing.json"
printf '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "cache": {' >"$work/bad.json"
expect 2 "bad.json: malformed JSON near byte" -- replay "$work/bad.json"
printf '{"cache": {}}' >"$work/bad.json"
expect 2 "not a Kernel Tuner cache file: no \"tune_params_keys\"" -- replay "$work/bad.json"
printf 'hello' >"$work/bad.json"
expect 2 "neither Kernel Tuner cache JSON" -- replay "$work/bad.json"
expect 2 "has no results" -- replay "$work/db0"
# A Kernel Tuner cache file, plain and gzip'd: JSON contract, budgets, determinism per seed.
cat >"$work/kt.json" <<'JSON'
{"device_name": "Test GPU", "kernel_name": "k", "tune_params_keys": ["bx", "t"],
 "tune_params": {"bx": [16, 32, 64], "t": [1, 2]}, "objective": "time",
 "cache": {"16,1": {"bx": 16, "t": 1, "time": 3.0, "compile_time": 1000, "benchmark_time": 500},
           "16,2": {"bx": 16, "t": 2, "time": 2.0}, "32,1": {"bx": 32, "t": 1, "time": "RuntimeFailedConfig"},
           "32,2": {"bx": 32, "t": 2, "time": 1.5}, "64,1": {"bx": 64, "t": 1, "time": "InvalidConfig"},
           "64,2": {"bx": 64, "t": 2, "time": 4.0}}}
JSON
gzip -c "$work/kt.json" >"$work/kt.json.gz"
for f in kt.json kt.json.gz; do
  "$AT" replay "$work/$f" --strategy exhaustive --json >"$work/out.json" 2>"$work/err"
  json 'd["space"] == 5 and d["space_failed"] == 1 and d["optimum_time"] == 1.5 and d["evaluated"] == 5 and d["best"] == {"config": "bx=32,t=2", "time": 1.5} and d["trajectory"] == [[1, 3.0], [2, 2.0], [4, 1.5]] and d["device"] == "Test GPU" and abs(d["simulated_seconds"] - 1.5) < 1e-9' |
    grep -q True && ok "replay $f: contract and trajectory" || bad "replay $f: $(cat "$work/out.json" "$work/err")"
done
"$AT" replay "$work/kt.json" --budget 2 --json >"$work/out.json"
[ "$(json 'd["evaluated"]')" = 2 ] && ok "replay --budget 2" || bad "replay budget: $(cat "$work/out.json")"
"$AT" replay "$work/kt.json" --strategy exhaustive --budget 1.2s --json >"$work/out.json"
[ "$(json 'd["evaluated"]')" = 1 ] && ok "replay --budget 1.2s counts recorded seconds" ||
  bad "replay seconds budget: $(cat "$work/out.json")"
for s in model random annealing genetic; do
  a=$("$AT" replay "$work/kt.json" --strategy $s --seed 7 --json)
  b=$("$AT" replay "$work/kt.json" --strategy $s --seed 7 --json)
  [ "$(sed 's/"seconds":[0-9.]*//' <<<"$a")" = "$(sed 's/"seconds":[0-9.]*//' <<<"$b")" ] &&
    grep -q '"evaluated":5' <<<"$a" && ok "replay $s: whole space, same per seed" || bad "replay $s: $a / $b"
done
printf '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "cache": {"1": {"a": 1, "time": "RuntimeFailedConfig"}}}' >"$work/failed.json"
expect 0 "optimum +none \(every recorded configuration failed\)" -- replay "$work/failed.json"
# A real GPU recording (CI has ../shared beside the repository; AUTOTUNE_SPACES overrides).
real="${AUTOTUNE_SPACES:-$here/../../../shared/spaces}/convolution-A100.json.gz"
if [ -f "$real" ]; then
  "$AT" replay "$real" --budget 218 --seed 3 --json >"$work/out.json"
  json 'd["space"] == 4362 and d["space_failed"] == 161 and abs(d["optimum_time"] - 0.5536) < 1e-3 and d["evaluated"] == 218' |
    grep -q True && ok "replay of a Kernel Tuner recording" || bad "real replay: $(head -c 600 "$work/out.json")"
else
  skip "replay of a real recording: $real is absent"
fi

# Warm starts (docs/search.md, "Transfer"): a recording of the same kernel on another GPU is
# used, its best config measured first; one of another kernel is refused with a warning.
sed -e 's/Test GPU/Other GPU/' -e 's/"time": 4.0/"time": 0.5/' "$work/kt.json" >"$work/kt-other.json"
"$AT" replay "$work/kt.json" --transfer "$work/kt-other.json" --transfer "$work/failed.json" --seed 2 \
  --json >"$work/out.json" 2>"$work/err"
json 'd["transfer"]["sources"][0] == {"file": "'"$work"'/kt-other.json", "used": True, "configs": 4, "pairs": 4, "weight": d["transfer"]["sources"][0]["weight"]} and d["transfer"]["sources"][1]["used"] is False and "parameters" in d["transfer"]["sources"][1]["reason"] and d["transfer"]["first_picks_from_sources"] == 3 and d["transfer"]["probe_picks"] == 2 and d["trajectory"][0] == [1, 4.0] and d["evaluated"] == 5' |
  grep -q True && grep -q "warning: --transfer $work/failed.json is not used: its parameters" "$work/err" &&
  ok "replay --transfer: the other GPU's best first, another kernel refused" ||
  bad "replay --transfer: $(cat "$work/out.json" "$work/err")"
# The probe (one-parameter moves around the sources' best, the two configs left) is the model's.
"$AT" replay "$work/kt.json" --transfer "$work/kt-other.json" --seed 2 --strategy random --json >"$work/out.json"
json 'd["transfer"]["first_picks_from_sources"] == 3 and d["transfer"]["probe_picks"] == 0' | grep -q True &&
  ok "replay --transfer: no probe but the model's" || bad "probe picks: $(cat "$work/out.json")"
a=$("$AT" replay "$work/kt.json" --transfer "$work/kt-other.json" --seed 4 --json | sed 's/"seconds":[0-9.]*//')
b=$("$AT" replay "$work/kt.json" --transfer "$work/kt-other.json" --seed 4 --json | sed 's/"seconds":[0-9.]*//')
[ "$a" = "$b" ] && ok "replay --transfer: the same per seed" || bad "replay --transfer: $a / $b"
"$AT" replay "$work/kt.json" --transfer "$work/kt-other.json" --no-transfer --json >"$work/out.json"
json 'd["transfer"]["sources"][0]["used"] is False and d["transfer"]["first_picks_from_sources"] == 0 and d["transfer"]["probe_picks"] == 0' |
  grep -q True && ok "replay --no-transfer: the source is not used" || bad "--no-transfer: $(cat "$work/out.json")"
reject 2 "option '--transfer' needs a value" -- replay "$work/kt.json" --transfer

# ---- a database written by 0.1 (schema 1) still answers ---------------------------------------
cp -r "$here/../fixtures/db-v1" "$work/v1"
chmod -R u+w "$work/v1"
expect 0 "^gemm/f32/nn/24x20x16\|" -- db list --db "$work/v1"
expect 0 "status=ok" -- db show gemm/f32/nn/40x36x16 --db "$work/v1"
expect 0 '"format":"autotune".*"space":6' -- replay "$work/v1" --select gemm/f32/nn/24x20x16 --json
expect 0 '"cache"' -- db export --kernel-tuner --problem gemm/f32/nn/40x36x16 --db "$work/v1"

# ---- db export --kernel-tuner: the recorded space as a Kernel Tuner cache file ----------------
kt="$work/kt-export.json"
best_us=$(python3 -c "import json; print(json.load(open('$work/sabotaged.json'))['best']['time_us'])")
expect 0 "^$" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --db "$db3" --output "$kt"
python3 -m json.tool "$kt" >/dev/null && ok "export is valid JSON" || bad "export is not JSON: $(head -c 300 "$kt")"
python3 - "$kt" "$best_us" <<'PY' && ok "export: 8 configs, 2 compile and 2 runtime failures, the run's best" || bad "export content"
import json, sys
d = json.load(open(sys.argv[1]))
keys = d["tune_params_keys"]
assert keys == ["BM", "BN", "BK", "TM", "TN", "VW", "STRN", "SA", "SB", "PAD", "UNROLL"], keys
assert d["tune_params"]["BM"] == [16, 32] and d["tune_params"]["SA"] == [0, 1], d["tune_params"]
assert d["problem_size"] == [45, 39, 17] and d["kernel_name"] == "gemm" and d["objective"] == "time"
c = d["cache"]
assert len(c) == 8, len(c)
for k, r in c.items():
    assert k == ",".join(str(r[p]) for p in keys), k
times = [r["time"] for r in c.values()]
assert times.count("CompilationFailedConfig") == 2 and times.count("RuntimeFailedConfig") == 2, times
ok = [t for t in times if isinstance(t, float)]
assert len(ok) == 4 and abs(min(ok) * 1e3 - float(sys.argv[2])) <= 1e-6 * min(ok) * 1e3, (ok, sys.argv[2])
PY
"$AT" db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --db "$db3" | cmp -s - "$kt" &&
  ok "export without --output writes the same to stdout" || bad "stdout export differs"
"$AT" replay "$kt" --strategy exhaustive --json >"$work/out.json" &&
  json 'abs(d["best"]["time"] * 1e3 - '"$best_us"') <= 1e-6 * '"$best_us"' and d["space"] == 8' | grep -q True &&
  ok "autotune replay of the export finds the run's best" || bad "replay of export: $(head -c 300 "$work/out.json")"
expect 2 "needs a format: --kernel-tuner" -- db export --problem gemm/f32/nn/45x39x17 --db "$db3"
expect 2 "needs --problem" -- db export --kernel-tuner --db "$db3"
expect 2 "no results for problem 'gemm/f32/nn/45x39x1'" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x1 --db "$db3"
expect 2 "no results .* on device 'nope'" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --device nope --db "$db3"
expect 1 "cannot write" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --db "$db3" --output "$work/no/such/dir/x.json"
# The same problem tuned with the built-in gemm template too (a CPU device's default is
# gemm_cpu, so named): two versions of one template, pick one.
"$AT" gemm --m 45 --n 39 --k 17 --budget 2 --template gemm --db "$db3" >/dev/null 2>&1
expect 2 "several template versions .*--template HASH" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --db "$db3"
h=$("$AT" db list --table results --prefix "gemm/f32/nn/45x39x17|" --db "$db3" | grep "BM=16,BN=16," | head -1 | cut -d'|' -f3)
expect 0 "^$" -- db export --kernel-tuner --problem gemm/f32/nn/45x39x17 --template "$h" --db "$db3" --output "$work/kt-export2.json"
cmp -s "$kt" "$work/kt-export2.json" && ok "--template picks the recorded space" || bad "--template export differs"

# ---- every option of every command: bad values are refused, none ends with a signal -----------
# Exit 2 with a message naming the argument; 1 where the input is fine and the run fails (a
# database that cannot be opened or a file that cannot be written). Strict numbers: decimal
# digits only, no spaces, '+', hex, fraction or exponent where an integer is wanted.
bad_ints=(' 5' '5 ' $'5\t' '+5' 0x2 1e3 1.5 '' abc 5abc - '1 2' 99999999999999999999 '５')
bad_seeds=("${bad_ints[@]}" -1 ' -1' -0 18446744073709551616)
bad_budgets=(0 0s 0.0s -1 -1s 5x 5S 5ms 1e3 1e3s 1.5 ' 5' '5 ' +5 0x2 .5s 5.s s '1,5s' 1.5.5s
  1000000001 '' inf nan)
bad_choices=('' ' x' 'x ' NOPE)
mkfifo "$work/fifo"
mkdir -p "$work/emptydir"
t="$work/dbt" # a database holding one tuned problem
"$AT" gemm --m 5 --n 3 --budget 1 --db "$t" >/dev/null 2>&1
x=--backend=auto # a valid option that ends a command line where the bad one is not last

for c in gemm space; do
  s=() # what `space` needs before its options: the operation
  [ $c = space ] && s=(gemm)
  for v in "${bad_ints[@]}"; do
    reject 2 "--m '$(re "$v")' is not an integer from 1 to 2147483647" -- $c "${s[@]}" --n 8 --m="$v"
    reject 2 "--n '$(re "$v")' is not an integer from 1 to 2147483647" -- $c "${s[@]}" --m 8 --n "$v" $x
    reject 2 "--k '$(re "$v")' is not an integer from 1 to 2147483647" -- $c "${s[@]}" --m 8 --n 8 --k "$v"
    reject 2 "--device '$(re "$v")' is not an integer from 0 to 1023" -- $c "${s[@]}" --m 8 --n 8 --device "$v" $x
  done
  for v in -1 1024 -0x1; do
    reject 2 "--device '$(re "$v")' is not an integer from 0 to 1023" -- $c "${s[@]}" --m 8 --n 8 --device "$v"
  done
  for v in "${bad_choices[@]}" f64 F32 f32,f16; do
    reject 2 "unknown dtype '$(re "$v")' \(one of: f32, f16, bf16\)" -- $c "${s[@]}" --m 8 --n 8 --dtype "$v"
  done
  for v in "${bad_choices[@]}" NN xy; do
    reject 2 "unknown layout '$(re "$v")' \(one of: nn, nt, tn, tt\)" -- $c "${s[@]}" --m 8 --n 8 --layout "$v"
  done
  for v in "${bad_choices[@]}" metal CUDA; do
    reject 2 "unknown backend '$(re "$v")' \(one of: auto, cuda, hip, opencl\)" -- $c "${s[@]}" --m 8 --n 8 --backend "$v"
  done
  for o in template db; do
    reject 2 "option '--$o' needs a value" -- $c "${s[@]}" --m 8 --n 8 --$o ''
    reject 2 "option '--$o' needs a value" -- $c "${s[@]}" --m 8 --n 8 --$o
    reject 2 "option '--$o' needs a value" -- $c "${s[@]}" --m 8 --n 8 --$o --json
  done
  reject 2 "unknown template 'nope' \(gemm templates: " -- $c "${s[@]}" --m 8 --n 8 --template nope --db "$t"
  reject 1 "database.*$work/file/db" -- $c "${s[@]}" --m 8 --n 8 --db "$work/file/db"
  reject 1 "database.*$work/fifo" -- $c "${s[@]}" --m 8 --n 8 --db "$work/fifo"
  reject 1 "database" -- $c "${s[@]}" --m 8 --n 8 --db /proc/autotune-db
  for o in json alpha beta lda frob; do
    [ $o = json ] && reject 2 "option '--json' takes no value" -- $c "${s[@]}" --m 8 --n 8 --json=1 && continue
    reject 2 "unknown option '--$o'" -- $c "${s[@]}" --m 8 --n 8 --$o 1
  done
  reject 2 "option '--m' is given twice" -- $c "${s[@]}" --m 8 --n 8 --m 9
  reject 2 "option '--json' is given twice" -- $c "${s[@]}" --m 8 --n 8 --json --json
  reject 2 "option '--dtype' is given twice" -- $c "${s[@]}" --m 8 --n 8 --dtype f32 --dtype=f32
  reject 2 "unexpected argument '-m'" -- $c "${s[@]}" -m 8 --n 8
  reject 2 "unexpected argument 'extra'" -- $c "${s[@]}" --m 8 --n 8 extra
done

# gemm: the search, --replay, --force.
for v in "${bad_seeds[@]}"; do
  reject 2 "--seed '$(re "$v")' is not an integer from 0 to 18446744073709551615" -- gemm --m 8 --n 8 --seed "$v" $x
done
for v in "${bad_ints[@]}" 0 -1; do
  reject 2 "--no-improve '$(re "$v")' is not an integer from 1 to 9223372036854775807" -- gemm --m 8 --n 8 --no-improve "$v" $x
done
for v in "${bad_budgets[@]}"; do
  reject 2 "--budget '$(re "$v")' is not a count of evaluations \(N >= 1\) or of seconds" -- gemm --m 8 --n 8 --budget "$v" $x
done
for v in "${bad_choices[@]}" magic MODEL; do
  reject 2 "unknown strategy '$(re "$v")' \(one of: model, random" -- gemm --m 8 --n 8 --strategy "$v"
done
for o in seed budget no-improve strategy replay; do
  reject 2 "option '--$o' needs a value" -- gemm --m 8 --n 8 --$o
done
reject 2 "option '--replay' needs a value" -- gemm --m 8 --n 8 --replay ''
reject 2 "--replay $work/nope: no such database" -- gemm --m 8 --n 8 --replay "$work/nope" --db "$t"
reject 2 "--replay $work/fifo: no such database" -- gemm --m 8 --n 8 --replay "$work/fifo" --db "$t"
reject 2 "--replay $work/file: no such database" -- gemm --m 8 --n 8 --replay "$work/file" --db "$t"
reject 2 "no database at $work/emptydir" -- gemm --m 8 --n 8 --replay "$work/emptydir" --db "$t"
reject 2 "option '--force' takes no value" -- gemm --m 8 --n 8 --force=1
reject 2 "option '--force' takes no value" -- gemm --m 8 --n 8 --force=
reject 2 "gemm needs --m" -- gemm --n 8
reject 2 "unknown option '--arch'" -- gemm --m 8 --n 8 --arch sm_80

# space: --arch, --compile, --limit, --seed, --list.
for v in "${bad_ints[@]}" 0 -1; do
  reject 2 "--limit '$(re "$v")' is not an integer from 1 to 9223372036854775807" -- space gemm --limit "$v" $x
done
for v in "${bad_seeds[@]}"; do
  reject 2 "--seed '$(re "$v")' is not an integer from 0 to 18446744073709551615" -- space gemm --seed "$v" $x
done
reject 2 "option '--arch' needs a value" -- space gemm --arch '' --compile
reject 2 "option '--arch' needs a value" -- space gemm --compile --arch
reject 2 "unknown CUDA target 'sm_7'|backend" -- space gemm --arch sm_7 --compile
reject 2 "unknown HIP target 'gfx'" -- space gemm --arch gfx --compile
for o in compile list json; do
  reject 2 "option '--$o' takes no value" -- space gemm --$o=yes
done
for o in budget strategy no-improve replay select; do
  reject 2 "unknown option '--$o'" -- space gemm --$o 1
done
reject 2 "space needs an operation" -- space
reject 2 "unknown option '--m'" -- space --m 8
reject 2 "unknown template '' \(one of: gemm, attention\)" -- space ''
reject 2 "unexpected argument 'gemm'" -- space gemm gemm

# replay: the search options, --select, the file.
printf '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "cache": {"1": {"a": 1, "time": 1.0}}}' >"$work/kt1.json"
k="$work/kt1.json"
for v in "${bad_seeds[@]}"; do
  reject 2 "--seed '$(re "$v")' is not an integer from 0 to 18446744073709551615" -- replay "$k" --seed "$v" $x
done
for v in "${bad_ints[@]}" 0 -1; do
  reject 2 "--no-improve '$(re "$v")' is not an integer from 1 to 9223372036854775807" -- replay "$k" --no-improve "$v"
done
for v in "${bad_budgets[@]}"; do
  reject 2 "--budget '$(re "$v")' is not a count of evaluations" -- replay "$k" --budget "$v"
done
for v in "${bad_choices[@]}" magic; do
  reject 2 "unknown strategy '$(re "$v")'" -- replay "$k" --strategy "$v"
done
reject 2 "option '--select' needs a value" -- replay "$t" --select ''
reject 2 "option '--select' needs a value" -- replay "$t" --select
reject 2 "the database $t has no results starting with 'nope'" -- replay "$t" --select nope
reject 2 "option '--json' takes no value" -- replay "$k" --json=true
reject 2 "unexpected argument '$k'" -- replay "$k" "$k"
for o in backend device db m arch; do
  reject 2 "unknown option '--$o'" -- replay "$k" --$o 1
done
# Files that are not recorded spaces: refused before they are read, never waited on.
reject 2 "$work/fifo is a FIFO" -- replay "$work/fifo"
reject 2 "/dev/null is a device" -- replay /dev/null
reject 2 "/dev/zero is a device" -- replay /dev/zero
reject 2 "no database at $work/emptydir" -- replay "$work/emptydir"
reject 2 "cannot open $work/nope: no such file" -- replay "$work/nope"
head -c 270000000 /dev/zero | gzip -1 >"$work/huge.json.gz" # 1 MB expanding to 270 MB
reject 2 "$work/huge.json.gz holds more than 256 MiB of text \(decompressed\)" -- replay "$work/huge.json.gz"
python3 -c "import sys; sys.stdout.write('{\"a\": [' + '0,' * 16000000 + '0]}')" >"$work/many.json"
reject 2 "$work/many.json holds more than 16 million JSON values" -- replay "$work/many.json"
rm -f "$work/huge.json.gz" "$work/many.json"
printf '\037\213\010\000garbage' >"$work/trunc.gz"
reject 2 "trunc.gz" -- replay "$work/trunc.gz"
head -c 20 "$work/kt.json.gz" >"$work/short.json.gz"
reject 2 "short.json.gz" -- replay "$work/short.json.gz"
python3 -c "print('{\"a\": ' + '[' * 100000)" >"$work/deep.json"
reject 2 "deep.json: malformed JSON" -- replay "$work/deep.json"
for body in '"tune_params_keys": [1], "tune_params": {}, "cache": {}' \
  '"tune_params_keys": ["a"], "tune_params": {"a": [[1]]}, "cache": {}' \
  '"tune_params_keys": ["a"], "tune_params": {"a": []}, "cache": {}' \
  '"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"1": 5}' \
  '"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"1": {"a": 2, "time": 1}}' \
  '"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"1": {"time": "InvalidConfig"}}' \
  '"tune_params_keys": "a", "tune_params": {"a": [1]}, "cache": {}'; do
  printf '{%s}' "$body" >"$work/bad-kt.json"
  reject 2 "bad-kt.json" -- replay "$work/bad-kt.json"
done

# db list / show / export.
reject 2 "usage: autotune db list" -- db
reject 2 "unknown db command 'frob'" -- db frob
reject 2 "unknown db command ''" -- db ''
for v in "${bad_choices[@]}" BEST best,results; do
  reject 2 "unknown table '$(re "$v")' \(one of: best, results, binaries, meta, devices, checks\)" -- db list --table "$v" --db "$t"
done
for o in table prefix db; do
  [ $o = table ] || reject 2 "option '--$o' needs a value" -- db list --$o ''
  reject 2 "option '--$o' needs a value" -- db list --$o
done
reject 2 "db list takes no argument" -- db list x --db "$t"
reject 2 "unexpected argument 'y'" -- db list x y --db "$t"
reject 2 "option '--kernel-tuner' takes no value" -- db list --kernel-tuner=1
reject 2 "option '--table' is given twice" -- db list --table best --table meta --db "$t"
reject 2 "unknown option '--json'" -- db list --json
for d in "$work/fifo" "$work/file" "$work/emptydir" "$work/file/db" /proc/autotune-db; do
  reject 1 "no database at $d" -- db list --db "$d"
  reject 1 "no database at $d" -- db show gemm --db "$d"
  reject 1 "no database at $d" -- db export --kernel-tuner --problem gemm/f32/nn/5x3x5 --db "$d"
done
reject 2 "db show needs a key prefix" -- db show --db "$t"
reject 2 "option '--prefix' needs a value" -- db show --prefix
p=gemm/f32/nn/5x3x5
for o in problem device template output; do
  reject 2 "option '--$o' needs a value" -- db export --kernel-tuner --db "$t" --$o ''
  reject 2 "option '--$o' needs a value" -- db export --kernel-tuner --db "$t" --$o
done
reject 2 "db export takes no argument" -- db export x --kernel-tuner --problem $p --db "$t"
reject 2 "no results for problem 'gemm'" -- db export --kernel-tuner --problem gemm --db "$t"
reject 2 "no results .* on device 'nope'" -- db export --kernel-tuner --problem $p --device nope --db "$t"
reject 2 "no results .*template.*'ffff'" -- db export --kernel-tuner --problem $p --template ffff --db "$t"
reject 1 "cannot write $work/emptydir: Is a directory" -- db export --kernel-tuner --problem $p --db "$t" --output "$work/emptydir"
reject 1 "cannot write $work/file/x.json" -- db export --kernel-tuner --problem $p --db "$t" --output "$work/file/x.json"
reject 1 "cannot write /proc/nope/x.json" -- db export --kernel-tuner --problem $p --db "$t" --output /proc/nope/x.json
reject 1 "cannot write /dev/full" -- db export --kernel-tuner --problem $p --db "$t" --output /dev/full

# devices, and the command itself.
reject 2 "option '--json' takes no value" -- devices --json=1
reject 2 "option '--json' is given twice" -- devices --json --json
reject 2 "unexpected argument 'x'" -- devices x
reject 2 "unknown option '--backend'" -- devices --backend opencl
reject 2 "unknown command ''" -- ''
AUTOTUNE_BACKEND=metal reject 2 "unknown backend 'metal' \(AUTOTUNE_BACKEND or --backend" -- gemm --m 8 --n 8 --db "$t"
AUTOTUNE_BACKEND=' opencl' reject 2 "unknown backend ' opencl'" -- space gemm --db "$t"
reject 2 "unknown command '-x'" -- -x
reject 2 "unknown command 'GEMM'" -- GEMM --m 8 --n 8
# The environment's controls: AUTOTUNE_LOG's lines, AUTOTUNE_TUNING=0, bad values (exit 2).
if "$AT" devices | grep -qE "opencl +available"; then
  AUTOTUNE_LOG=2 "$AT" gemm --m 9 --n 7 --k 5 --budget 2 --strategy random --db "$work/envdb" \
    >/dev/null 2>"$work/log"
  [ "$(grep -c '^autotune: candidate ' "$work/log")" -eq 2 ] &&
    grep -q '^autotune: tune gemm/f32/nn/9x7x5: template gemm' "$work/log" &&
    grep -q '^autotune: tuned: .* (2 evaluated, 2 measured' "$work/log" &&
    ok "AUTOTUNE_LOG=2: the run, each candidate, the result" || bad "AUTOTUNE_LOG=2: $(cat "$work/log")"
  AUTOTUNE_LOG=1 "$AT" gemm --m 9 --n 8 --k 5 --no-tune --db "$work/envdb" 2>&1 >/dev/null |
    grep -q '^autotune: lookup gemm/f32/nn/9x8x5: nearest-shape gemm/f32/nn/9x7x5' &&
    ok "AUTOTUNE_LOG=1: a lookup and where it came from" || bad "AUTOTUNE_LOG=1 lookup"
  AUTOTUNE_TUNING=0 reject 1 "tuning is off \(AUTOTUNE_TUNING=0\)" -- gemm --m 9 --n 8 --k 5 --db "$work/envdb"
  AUTOTUNE_TUNING=0 expect 0 "9x7x5" -- gemm --m 9 --n 7 --k 5 --db "$work/envdb"
else
  skip "AUTOTUNE_LOG and AUTOTUNE_TUNING: no OpenCL device"
fi
AUTOTUNE_LOG=3 reject 2 "AUTOTUNE_LOG='3' is not 0" -- gemm --m 8 --n 8 --db "$t"
AUTOTUNE_TUNING=no reject 2 "AUTOTUNE_TUNING='no'" -- gemm --m 8 --n 8 --db "$t"
AUTOTUNE_BUDGET=1.5 reject 2 "AUTOTUNE_BUDGET='1.5'" -- gemm --m 8 --n 8 --db "$t"
[ "$signalled" -eq 0 ] && ok "none of $rejected bad inputs ended with a signal" ||
  bad "$signalled of $rejected bad inputs ended with a signal"

finish
