# lib.sh — what the CLI test scripts share (sourced): a scratch folder, pass/fail/skip counts, and
#   expect RC PATTERN -- ARGS...   the command $AT exits with RC and its output matches PATTERN
#                                  (a run that hangs for 5 minutes or ends with a signal fails)
#   reject RC PATTERN -- ARGS...   the same for a bad input (RC 2 usage, 1 runtime), counted:
#                                  finish says how many were tried and how many ended with a
#                                  signal
#   re TEXT                        TEXT with the extended regular expression's specials escaped
#   json EXPRESSION                a Python expression on the JSON in $work/out.json
#   skip WHAT                      checks not run because what they need is not here: counted
#                                  apart, never as passed
#   have_lib VAR PATTERN           the library a backend would load is here: the file VAR names
#                                  when it is set (the backend then tries only that), else a
#                                  soname matching PATTERN in the linker cache
#   finish                         prints the counts; the script's status is the verdict
work=$(mktemp -d /tmp/at-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 skipped=0 rejected=0 signalled=0

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
  out=$(timeout -k 10 300 "$AT" "$@" 2>&1)
  local got=$?
  if [ "$got" -ge 128 ] && [ "$rc" -lt 128 ]; then
    signalled=$((signalled + 1))
    bad "autotune $* -> ended with signal $((got - 128)) (want $rc): $(head -c 400 <<<"$out")"
  elif [ "$got" -eq "$rc" ] && grep -qiE -- "$pat" <<<"$out"; then
    ok "autotune $* -> $rc"
  else
    bad "autotune $* -> $got (want $rc matching '$pat'): $(head -c 400 <<<"$out")"
  fi
}

reject() {
  rejected=$((rejected + 1))
  expect "$@"
}

re() { sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$1"; }

json() { python3 -c "import json,sys; d=json.load(open('$work/out.json')); print($1)"; }

finish() {
  echo
  [ "$rejected" -eq 0 ] || echo "$rejected bad inputs tried, $signalled ended with a signal"
  echo "$pass passed, $fail failed, $skipped skipped"
  [ "$fail" -eq 0 ]
}
