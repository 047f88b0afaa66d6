#!/usr/bin/env bash
# test_faulty.sh — candidates that misbehave (templates/gemm/gemm_faulty: a compile error, a
# wrong result, a hang, writes and reads far out of bounds and just past a buffer, a slow one,
# one that writes its input) are tuned end to end on the OpenCL device: each ends as its own
# recorded outcome, the correct candidate wins, and SIGTERM during a hang ends the run within a
# second with everything measured stored and resumed from.
#   tests/faulty/test_faulty.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_faulty.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../cli/lib.sh
. "$here/../cli/lib.sh" # $work, ok, bad, expect, json, finish
export AUTOTUNE_TEMPLATE_PATH="$here/templates:$here/../../templates"
db="$work/db"
# No slowdown limit (tests/cli/test_budget_cli.sh has it): the slow one succeeds and the hang is
# stopped by the absolute limit of 1 s (plus the watchdog's second).
limits=(--slowdown-limit 0 --run-limit 1)
tune=(gemm --m 33 --n 17 --k 9 --template gemm_faulty --strategy exhaustive --db "$db" --json
  "${limits[@]}")

start=$(date +%s.%N)
"$AT" "${tune[@]}" >"$work/out.json" 2>"$work/err"
rc=$?
secs=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
[ "$rc" -eq 0 ] && ok "the faulty space tunes to the end (exit 0, ${secs}s)" ||
  bad "exit $rc: $(tail -c 400 "$work/err")"
json 'd["best"]["config"] == "FAULT=0" and d["candidates"]["evaluated"] == 10 and d["candidates"]["failed"] == 8' |
  grep -q True && ok "the correct candidate wins; 8 of 10 fail" || bad "$(cat "$work/out.json")"

shown=$("$AT" db show gemm/f32/nn/33x17x9 --db "$db")
want() { # FAULT STATUS REASON-PATTERN
  grep -A1 "|FAULT=$1\$" <<<"$shown" | grep -qE "status=$2 .*$3" && ok "FAULT=$1 recorded as $2" ||
    bad "FAULT=$1: $(grep -A1 "|FAULT=$1\$" <<<"$shown" | tail -1)"
}
want 0 ok ''
want 1 compile_error 'does not compile'
want 2 wrong_result 'max relative error'
want 3 timeout 'no answer within'
want 4 crashed 'killed by SIGSEGV|exited with' # (ASan catches the fault and exits)
want 5 wrong_result 'outside buffer C \(its guard zones\)'
want 6 crashed 'killed by SIGSEGV|exited with'
want 7 wrong_result 'max relative error inf'
want 8 ok ''
want 9 wrong_result 'changed its input A'

# SIGTERM while a candidate hangs: out within a second, what was measured stored; a rerun
# resumes from it.
db2="$work/db2"
"$AT" gemm --m 31 --n 15 --k 9 --template gemm_faulty --strategy exhaustive --db "$db2" --json \
  "${limits[@]}" \
  >"$work/int.json" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do # until FAULT=0..2 are stored and FAULT=3 hangs
  n=$("$AT" db list --table results --db "$db2" 2>/dev/null | wc -l)
  [ "$n" -ge 3 ] && break
  sleep 0.1
done
sleep 0.3
# This run's worker processes (not those of other tests running at the same time).
workers=$(pgrep -P "$pid" -f autotune-worker | tr '\n' ' ')
start=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid"
rc=$?
secs=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
python3 -c "import sys; sys.exit(0 if $secs < 1.5 else 1)" && ok "SIGTERM ends the run in ${secs}s" ||
  bad "SIGTERM took ${secs}s"
[ "$rc" -eq 1 ] && python3 -c "import json; d=json.load(open('$work/int.json')); assert d['complete'] is False and d['best']['config'] == 'FAULT=0'" &&
  ok "an interrupted run reports what it measured (exit 1)" || bad "interrupted: rc $rc $(cat "$work/int.json" "$work/err")"
n=$("$AT" db list --table results --db "$db2" | wc -l)
[ "$n" -ge 3 ] && ok "its $n measured candidates are stored" || bad "stored $n"
left=""
for w in $workers; do kill -0 "$w" 2>/dev/null && left="$left $w"; done
[ -n "$workers" ] && [ -z "$left" ] && ok "no worker left behind (of:$workers)" ||
  bad "a worker outlived its tuner (workers: '$workers', alive:$left)"

# The rerun resumes: what was recorded (crashes included) is answered from the database.
"$AT" gemm --m 31 --n 15 --k 9 --template gemm_faulty --strategy exhaustive --db "$db2" --json \
  "${limits[@]}" \
  >"$work/out.json" 2>"$work/err"
json "d['candidates']['evaluated'] == 10 and d['candidates']['measured'] == 10 - $n and d['best']['config'] == 'FAULT=0'" |
  grep -q True && ok "the rerun measures only the $((10 - n)) it had not reached" ||
  bad "resume: $(cat "$work/out.json")"

finish
