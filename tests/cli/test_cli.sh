#!/usr/bin/env bash
# test_cli.sh — end-to-end tests of the `autotune` command: every command, the JSON contract,
# the database cache and resume, and every bad input with its exit code and message.
#   tests/cli/test_cli.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_cli.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/at-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
export AUTOTUNE_DB="$work/default-db"
unset AUTOTUNE_BACKEND
pass=0 fail=0

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# expect RC PATTERN -- ARGS...: the command exits with RC and stderr+stdout match PATTERN.
expect() {
  local rc=$1 pat=$2
  shift 3
  local out
  out=$("$AT" "$@" 2>&1)
  local got=$?
  if [ "$got" -eq "$rc" ] && grep -qiE -- "$pat" <<<"$out"; then
    ok "autotune $* -> $rc"
  else
    bad "autotune $* -> $got (want $rc matching '$pat'): $(head -c 400 <<<"$out")"
  fi
}

# json FIELD-EXPRESSION: evaluates a Python expression on the JSON in $work/out.json.
json() { python3 -c "import json,sys; d=json.load(open('$work/out.json')); print($1)"; }

# ---- help and discovery -------------------------------------------------------------------
expect 0 "usage: autotune COMMAND" -- --help
for c in gemm space devices db; do expect 0 "usage: autotune $c" -- "$c" --help; done
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 0 "opencl +available" -- devices
expect 0 '"backends"' -- devices --json
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
expect 2 "unknown db command" -- db frob
expect 2 "--compile needs --arch" -- space gemm --compile
expect 2 "--arch is for --compile" -- space gemm --arch sm_90a
expect 2 "unknown CUDA target 'sm_75'|backend" -- space gemm --arch sm_75 --compile
expect 2 "opencl backend compiles only for a present device" -- space gemm --backend opencl --arch sm_80 --compile
if ldconfig -p | grep -q 'libnvrtc\.so\.1[23] '; then
  expect 0 "2 ok, 0 compile errors" -- space gemm --backend cuda --arch sm_80 --compile --limit 2
  expect 0 '"compiled":2' -- space gemm --arch sm_90a --compile --limit 2 --dtype bf16 --json
else
  echo "skip the CUDA compile checks: no NVRTC on this machine"
fi
expect 2 "unknown HIP target 'gfx90b'" -- space gemm --arch gfx90b --compile
if ldconfig -p | grep -q 'libamdhip64\.so\.5 \|libhiprtc\.so'; then
  expect 0 '"compiled":1' -- space gemm --arch gfx90a --compile --limit 1 --dtype bf16 --json
  if ldconfig -p | grep -q 'libamdhip64\.so\.5 '; then # ROCm 5.2's hipRTC aborts on gfx942
    expect 2 "compiler does not support this target" -- space gemm --arch gfx942 --compile --limit 1
  fi
else
  echo "skip the HIP compile checks: no hipRTC on this machine"
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
for f in backend device problem best candidates cache seconds; do
  grep -qw "$f" <<<"$fields" && ok "json has $f" || bad "json lacks $f ($fields)"
done
[ "$(json 'd["cache"]')" = miss ] && ok "first run is a miss" || bad "first run cache=$(json 'd["cache"]')"
[ "$(json 'd["candidates"]["evaluated"]')" = 6 ] && ok "budget 6 evaluates 6" || bad "evaluated $(json 'd["candidates"]')"
json 'd["best"]["gflops"] > 0 and d["best"]["time_us"] > 0 and d["best"]["max_rel_error"] < 1e-4 and "BM=" in d["best"]["config"]' |
  grep -q True && ok "best has config, time, gflops, error" || bad "best: $(json 'd["best"]')"
json 'd["problem"]["m"]==37 and d["problem"]["n"]==29 and d["problem"]["k"]==53 and d["problem"]["layout"]=="nn"' |
  grep -q True && ok "problem echoed" || bad "problem: $(json 'd["problem"]')"

start=$(date +%s.%N)
"$AT" gemm --m 37 --n 29 --k 53 --budget 6 --db "$db" --json >"$work/out.json"
elapsed=$(python3 -c "print($(date +%s.%N) - $start)")
[ "$(json 'd["cache"]')" = hit ] && ok "second run is a cache hit" || bad "second run cache=$(json 'd["cache"]')"
python3 -c "import sys; sys.exit(0 if $elapsed < 1.0 else 1)" && ok "cache hit in ${elapsed}s" ||
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
mkdir -p "$tpl"
cp "$here/../../templates/opencl.h" "$tpl/"
python3 - "$here/../../templates" "$tpl" <<'PY'
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

echo
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
