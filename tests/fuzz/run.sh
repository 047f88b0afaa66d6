#!/usr/bin/env bash
# run.sh — runs one libFuzzer target for a bounded time from its committed seed corpus (the
# ctest tests fuzz_*): new inputs go to WORK/corpus (kept between runs), a crash to
# WORK/crash-*, and the number of executions is printed. Without a target (no clang with
# libFuzzer when the build was configured) it says why and exits 77: ctest reports Skipped.
#   tests/fuzz/run.sh TARGET SEEDS WORK SECONDS [WHY-MISSING]
set -uo pipefail
bin=$1 seeds=$2 work=$3 secs=$4
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "SKIPPED: ${5:-no fuzz target at '$bin'}"
  exit 77
fi
mkdir -p "$work/corpus"
dict=$(dirname "$0")/$(basename "$seeds").dict # the language's tokens, when there is a list
args=()
[ -f "$dict" ] && args=(-dict="$dict")
# -rss_limit_mb: a loader that takes more than 2 GB on a small input is a finding too.
"$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "${args[@]}" "$work/corpus" "$seeds" >"$work/log" 2>&1
rc=$?
grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|runtime error|Test unit written" "$work/log"
grep -E "stat::number_of_executed_units" "$work/log" | sed 's/.*: */executions: /'
[ "$rc" -eq 0 ] || echo "FAILED (exit $rc): the log is $work/log"
exit "$rc"
