#!/usr/bin/env bash
# test_tune_mpi.sh — fleet tuning under MPI: `mpirun -n 3 autotune tune --shapes` over the 12 tiny
# GEMMs of tiny-gemms.yaml stores the same set of results and best keys as one process did (REF,
# made by test_tune_cli.sh), spreads the problems over the ranks, leaves no temporary database;
# a job whose ranks are killed half way, run again, ends with the same sets. Exit 77 (skipped)
# without mpirun or autotune-mpi.
#   tests/cli/test_tune_mpi.sh path/to/autotune REF
set -uo pipefail
AT=${1:?usage: test_tune_mpi.sh path/to/autotune REF}
REF=${2:?usage: test_tune_mpi.sh path/to/autotune REF}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v mpirun >/dev/null || [ ! -x "$(dirname "$AT")/autotune-mpi" ]; then
  echo "skipped: needs mpirun and autotune-mpi next to $AT (CMake builds it when it finds MPI)"
  exit 77
fi
if [ ! -s "$REF/results.txt" ] || [ ! -s "$REF/best.txt" ]; then
  echo "FAIL: no reference in $REF (test_tune_cli.sh makes it: ctest runs cli_tune first)"
  exit 1
fi
# shellcheck source=lib.sh
. "$here/lib.sh" # $work, ok, bad, skip, json EXPR, finish
export AUTOTUNE_DB="$work/default-db" AUTOTUNE_SHIPPED_DB='' AUTOTUNE_DB_PATH='' TMPDIR="$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset AUTOTUNE_BACKEND
list="$here/tiny-gemms.yaml"
search=(--strategy random --seed 1 --budget 3)
keys() { "$AT" db list --table "$2" --db "$1" | sort; }
# Runs the plain autotune under mpirun: it hands over to autotune-mpi.
fleet() { timeout -k 10 300 mpirun -n 3 "$AT" tune --shapes "$list" "${search[@]}" "$@"; }

# ---- 3 ranks: the same records as one process ----------------------------------------------------
[ "$(fleet --dry-run 2>/dev/null | wc -l)" -eq 12 ] && ok "--dry-run under mpirun: rank 0 lists 12" ||
  bad "dry run: $(fleet --dry-run 2>&1 | head -20)"
if fleet --db "$work/db" --json >"$work/out.json" 2>"$work/err"; then
  ok "mpirun -n 3 tunes the list"
else
  bad "mpirun -n 3: $(cat "$work/err")"
fi
json 'd["complete"] and d["ranks"] == 3 and len(d["problems"]) == 12 and all(p["status"] == "ok" and p["evaluated"] == 3 for p in d["problems"])' |
  grep -q True && ok "one JSON object from rank 0: 12 problems, 3 evaluations each" ||
  bad "json: $(cat "$work/out.json")"
ranks=$(json 'len(set(p["rank"] for p in d["problems"]))')
[ "$ranks" -ge 2 ] && ok "the problems were spread over $ranks ranks" || bad "one rank tuned everything"
[ "$(grep -c '^\[[0-9]*/12\] gemm/f32/nn/.*  tuned  rank [012]' "$work/err")" -eq 12 ] &&
  ok "rank 0 prints a line per problem, naming its rank" || bad "progress: $(cat "$work/err")"
for t in results best; do
  [ "$(keys "$work/db" $t)" = "$(cat "$REF/$t.txt")" ] && ok "3 ranks store the same $t keys as 1 process" ||
    bad "3 ranks, $t keys: $(diff <(keys "$work/db" $t) "$REF/$t.txt" | head -5)"
done
ls -d "$work"/autotune-rank* >/dev/null 2>&1 && bad "temporary databases left: $(ls -d "$work"/autotune-rank*)" ||
  ok "the ranks' temporary databases are removed"
fleet --db "$work/db" --json >"$work/out.json" 2>/dev/null
json 'd["complete"] and all(p["cache"] == "hit" for p in d["problems"]) and d["measured"] == 0' |
  grep -q True && ok "run again under mpirun: 12 cache hits" || bad "rerun: $(cat "$work/out.json")"

fleet --total-budget 24 --db "$work/tb" --json >"$work/out.json" 2>/dev/null
json 'd["complete"] and d["measured"] == 24 and all(p["evaluated"] == 2 for p in d["problems"])' |
  grep -q True && ok "--total-budget 24 over 3 ranks: 2 evaluations each" || bad "total: $(cat "$work/out.json")"
out=$(timeout -k 10 120 mpirun -n 2 "$AT" tune --shapes "$list" --device 0 --db "$work/dev" 2>&1)
rc=$?
[ "$rc" -eq 2 ] && grep -q "autotune tune: --device is not for MPI: each rank takes device local rank % devices" <<<"$out" &&
  [ ! -e "$work/dev" ] && ok "--device under mpirun: exit 2, nothing opened" || bad "--device: rc=$rc $out"

# A rank whose list is not rank 0's (another file at that path on its node) takes no problem.
printf -- '- gemm: {m: [16, 32], n: 16, k: 16}\n' >"$work/list-0.yaml"
printf -- '- gemm: {m: [16, 32], n: 32, k: 16}\n' >"$work/list-1.yaml"
# shellcheck disable=SC2016 # the rank is read in each rank's shell
out=$(timeout -k 10 120 mpirun -n 2 sh -c 'exec "$0" tune --shapes "$1/list-$OMPI_COMM_WORLD_RANK.yaml" --strategy random --budget 1 --db "$1/lists" --json' "$AT" "$work" 2>&1)
rc=$?
[ "$rc" -eq 0 ] && grep -q "rank 1 read another list than rank 0 .*it takes no problem" <<<"$out" &&
  [ "$(grep -c '  tuned  rank 0' <<<"$out")" -eq 2 ] && ok "a rank that read another list takes no problem" ||
  bad "lists: rc=$rc $out"

# ---- a killed job, run again: the same sets ------------------------------------------------------
db="$work/killed"
timeout -k 10 300 mpirun -n 3 "$AT" tune --shapes "$list" "${search[@]}" --db "$db" >/dev/null 2>"$work/err" &
pid=$!
for _ in $(seq 1 600); do
  [ "$("$AT" db list --table results --db "$db" 2>/dev/null | wc -l)" -ge 8 ] && break
  sleep 0.05
done
# The ranks die at once (a lost node): SIGKILL, nothing saved on the way out. mpirun then ends.
mpi=$(pgrep -P "$pid") # timeout's child
for rank in $(pgrep -P "$mpi"); do kill -KILL "$rank" 2>/dev/null; done
wait "$pid"
before=$("$AT" db list --table results --db "$db" | wc -l)
if [ "$before" -lt 36 ]; then
  ok "ranks killed with $before of 36 results stored"
  rm -rf "$work"/autotune-rank*
  if fleet --db "$db" --json >"$work/out.json" 2>"$work/err"; then
    json 'd["complete"] and d["measured"] < 36' | grep -q True &&
      ok "run again: complete, resumed ($(json 'd["measured"]') measured)" || bad "rerun: $(cat "$work/out.json")"
  else
    bad "rerun after the kill: $(cat "$work/err")"
  fi
  for t in results best; do
    [ "$(keys "$db" $t)" = "$(cat "$REF/$t.txt")" ] && ok "killed and run again: the same $t keys" ||
      bad "killed and run again, $t keys: $(diff <(keys "$db" $t) "$REF/$t.txt" | head -5)"
  done
else
  skip "the killed job: the list was done before the kill"
fi

finish
