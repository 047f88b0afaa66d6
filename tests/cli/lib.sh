# lib.sh — what the CLI test scripts share (sourced): a scratch folder, pass/fail/skip counts, and
#   expect RC PATTERN -- ARGS...   the command $AT exits with RC and its output matches PATTERN
#   json EXPRESSION                a Python expression on the JSON in $work/out.json
#   skip WHAT                      checks not run because what they need is not here: counted
#                                  apart, never as passed
#   have_lib VAR PATTERN           the library a backend would load is here: the file VAR names
#                                  when it is set (the backend then tries only that), else a
#                                  soname matching PATTERN in the linker cache
#   finish                         prints the counts; the script's status is the verdict
work=$(mktemp -d /tmp/at-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 skipped=0

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
skip() { skipped=$((skipped + 1)); echo "skip $*"; }

have_lib() {
  local path=${!1:-}
  if [ -z "$path" ]; then
    ldconfig -p | grep -q "$2"
  elif [[ $path == */* ]]; then
    [ -e "$path" ]
  else
    ldconfig -p | awk '{print $1}' | grep -qxF "$path"
  fi
}

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

json() { python3 -c "import json,sys; d=json.load(open('$work/out.json')); print($1)"; }

finish() {
  echo
  echo "$pass passed, $fail failed, $skipped skipped"
  [ "$fail" -eq 0 ]
}
