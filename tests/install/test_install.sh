#!/usr/bin/env bash
# test_install.sh — installs the build to a scratch prefix (cmake --install: nothing is rebuilt),
# moves the prefix (the install must be relocatable), then builds the documented examples against
# it the ways README.md gives and runs them: pkg-config (shared), pkg-config --static, a CMake
# project with find_package(autotune 0.2 REQUIRED) (autotune::autotune and
# autotune::autotune_static), and plain cc -lautotune. Also checks the shared library's soname
# and exported symbols, and that the shipped databases are installed.
#   test_install.sh BUILD_DIR SOURCE_DIR CMAKE CC LIBDIR SHIPPED_DIR (the configured one)
build=$1 src=$2 cmake=$3 cc=$4 libdir=$5 configured_shipped=$6
# shellcheck source=tests/cli/lib.sh
source "$src/tests/cli/lib.sh"
ex=$src/docs/examples

first=$work/first
if "$cmake" --install "$build" --prefix "$first" >"$work/install.log" 2>&1; then
  ok "cmake --install to a scratch prefix"
else
  bad "cmake --install"; cat "$work/install.log"; finish; exit
fi

# ---- what is installed ----------------------------------------------------------------------
lib=$first/$libdir
so=$(readlink "$lib/libautotune.so")
if [ "$so" = libautotune.so.0 ] && [ -f "$lib/libautotune.so.0" ] && [ -f "$lib/libautotune.a" ]; then
  ok "libautotune.so -> $so -> $(readlink "$lib/libautotune.so.0"), libautotune.a"
else
  bad "shared library links: libautotune.so -> '$so'"
fi
if readelf -d "$lib/libautotune.so.0" | grep -q 'SONAME.*\[libautotune\.so\.0\]'; then
  ok "soname libautotune.so.0"
else
  bad "soname"; readelf -d "$lib/libautotune.so.0" | grep SONAME
fi
# Exported: exactly the functions autotune.h declares (an internal at_* function is not).
nm -D --defined-only "$lib/libautotune.so.0" | awk '{print $3}' | sort >"$work/exported"
grep -E '^[a-z]' "$first/include/autotune.h" | grep -vE '^(static|typedef)' |
  grep -oE '[ *]at_[a-z0-9_]+\(' | tr -d ' *(' | sort -u >"$work/declared"
if [ -s "$work/declared" ] && cmp -s "$work/exported" "$work/declared"; then
  ok "$(wc -l <"$work/exported") symbols exported, the functions of autotune.h"
else
  bad "exported symbols differ from autotune.h's functions (< exported, > declared):"
  diff "$work/exported" "$work/declared" | head -20
fi
n=$(find "$first/share/autotune/db" -name '*.jsonl.gz' | wc -l)
if [ "$n" -ge 1 ]; then ok "$n shipped databases in share/autotune/db"; else bad "no shipped database"; fi

# ---- man pages: one per command with a help of its own, autotune(1) with every variable -------
man1=$first/share/man/man1
for cmd in $("$first/bin/autotune" --help | awk '/^  [a-z]+ +[^ ]/ { print $1 }'); do
  "$first/bin/autotune" "$cmd" --help | head -1 | grep -q '^usage:' || continue
  if [ -s "$man1/autotune-$cmd.1" ] && grep -q "^\.SS autotune $cmd\$" "$man1/autotune.1"; then
    ok "autotune-$cmd(1), and $cmd in autotune(1)"
  else
    bad "no man page autotune-$cmd(1) or no section in autotune(1)"
  fi
done
if command -v groff >/dev/null; then
  warn=$(groff -man -Tutf8 -ww -z "$man1"/*.1 2>&1)
  if [ -z "$warn" ]; then ok "groff reads the man pages without a warning"; else bad "groff: $warn"; fi
else
  skip "groff not here: the man pages are not rendered"
fi
# Every variable the sources read (getenv("X"), or a name "AUTOTUNE_X") is in README.md's table
# and in autotune(1)'s ENVIRONMENT.
vars=$(grep -rhoE 'getenv\("[A-Z_]+"\)|"AUTOTUNE_[A-Z_]+"' "$src"/base "$src"/cache "$src"/search \
         "$src"/tuner | grep -oE '[A-Z][A-Z_]+' | sort -u)
table=$(sed -n '/^<!-- environment/,/^<!-- \/environment/p' "$src/README.md")
envman=$(sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$man1/autotune.1")
for v in $vars; do
  if grep -q "\`[^|]*\b$v\b" <<<"$table" && grep -q "\b$v\b" <<<"$envman"; then
    ok "$v in README.md's environment table and autotune(1)"
  else
    bad "$v is read by the sources but not in README.md's environment table or autotune(1)"
  fi
done

# ---- bash completion: what it offers comes from the installed command's help ----------------
comp=$first/share/bash-completion/completions/autotune
complete_words() { # WORDS... -> what the completion offers for the last one
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _autotune
           echo "${COMPREPLY[*]}"' _ "$comp" "$@"
}
for c in "ge|gemm" "gemm --bu|--budget" "gemm --backend o|opencl" "db ex|export" "space a|attention"; do
  IFS='|' read -r words want <<<"$c"
  # shellcheck disable=SC2086 # the words of a command line
  got=$(complete_words "$first/bin/autotune" $words)
  if [ "$got" = "$want" ]; then ok "completion: autotune $words -> $got"; else bad "completion: autotune $words -> '$got', not $want"; fi
done

# ---- moved: nothing may point at the old prefix ---------------------------------------------
prefix=$work/moved
mv "$first" "$prefix"
lib=$prefix/$libdir
if grep -rlF "$first" "$lib/pkgconfig" "$lib/cmake" >"$work/stale"; then
  bad "the old prefix is named in: $(cat "$work/stale")"
else
  ok "moved the prefix; its .pc and CMake files do not name the old one"
fi

db=$work/db # one database: the first run tunes, the others find the kernel tuned
# The examples tune on a device: without one (autotune devices says why) they are built, not run.
device=$("$prefix/bin/autotune" devices | grep -c '^  \[[0-9]*\]')
run() { # NAME BINARY [ENV...] — runs an example, its check must pass
  local name=$1 bin=$2
  shift 2
  if [ "$device" -eq 0 ]; then
    skip "$name runs: no device (autotune devices says why)"
  elif env "$@" timeout -k 10 300 "$bin" "$db" >"$work/run.log" 2>&1; then
    ok "$name runs"
  else
    bad "$name runs"; tail -20 "$work/run.log"
  fi
}
built() { # NAME LOG — the build before succeeded ($? of it in $rc)
  if [ "$rc" -eq 0 ]; then ok "$1 builds"; else bad "$1 builds"; tail -20 "$2"; fi
}
linked() { # WHAT BINARY shared|static — the binary needs libautotune.so.0, or does not
  local got=static
  readelf -d "$2" | grep -q 'NEEDED.*libautotune\.so\.0' && got=shared
  if [ "$got" = "$3" ]; then ok "$1: $got"; else bad "$1: $got, not $3"; fi
}

export PKG_CONFIG_PATH=$lib/pkgconfig
# pkg-config, shared: the build line at the top of gemm_example.c, as written there.
line=$(sed -n 's/^ \*   \(cc gemm_example\.c .*\)/\1/p' "$ex/gemm_example.c")
[ -n "$line" ] || bad "no build line at the top of gemm_example.c"
(cd "$ex" && eval "${line/#cc/\"\$cc\"} -o \"\$work/pc_shared\"" >"$work/cc.log" 2>&1)
rc=$?; built "pkg-config --libs autotune" "$work/cc.log"
[ $rc -ne 0 ] || linked "... libautotune" "$work/pc_shared" shared
[ $rc -ne 0 ] || run "pkg-config (shared) gemm_example" "$work/pc_shared" LD_LIBRARY_PATH="$lib"

# pkg-config --static: libautotune.a and every dependency it names (-l:libautotune.a, as the
# linker takes the .so when both are there).
libs=$(pkg-config --static --libs autotune | sed 's/-lautotune/-l:libautotune.a/')
# shellcheck disable=SC2046,SC2086 # the flags are words
"$cc" "$ex/gemm_example.c" $(pkg-config --cflags autotune) $libs -o "$work/pc_static" \
  >"$work/cc.log" 2>&1
rc=$?; built "pkg-config --static --libs autotune" "$work/cc.log"
[ $rc -ne 0 ] || linked "... libautotune" "$work/pc_static" static
[ $rc -ne 0 ] || run "pkg-config --static gemm_example" "$work/pc_static"

# Plain cc against the shared library.
"$cc" "$ex/gemm_example.c" -I"$prefix/include" -L"$lib" -lautotune -lm -o "$work/plain" \
  >"$work/cc.log" 2>&1
rc=$?; built "cc -I\$prefix/include -L\$prefix/lib -lautotune" "$work/cc.log"
[ $rc -ne 0 ] || run "plain cc gemm_example" "$work/plain" LD_LIBRARY_PATH="$lib"

# CMake: find_package with the installed package only, both targets.
mkdir -p "$work/proj"
cat >"$work/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(autotune 0.2 REQUIRED)
add_executable(gemm_shared "$ex/gemm_example.c")
target_link_libraries(gemm_shared PRIVATE autotune::autotune m)
add_executable(attention_shared "$ex/attention_example.c")
target_link_libraries(attention_shared PRIVATE autotune::autotune m)
add_executable(gemm_static "$ex/gemm_example.c")
target_link_libraries(gemm_static PRIVATE autotune::autotune_static m)
CM
{ "$cmake" -S "$work/proj" -B "$work/proj/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release &&
    "$cmake" --build "$work/proj/build" -j2; } >"$work/cmake.log" 2>&1
rc=$?; built "find_package(autotune 0.2 REQUIRED) project" "$work/cmake.log"
if [ $rc -eq 0 ]; then
  linked "autotune::autotune" "$work/proj/build/gemm_shared" shared
  linked "autotune::autotune_static" "$work/proj/build/gemm_static" static
  run "CMake autotune::autotune gemm_example (its RPATH)" "$work/proj/build/gemm_shared"
  run "CMake autotune::autotune attention_example" "$work/proj/build/attention_shared"
  run "CMake autotune::autotune_static gemm_example" "$work/proj/build/gemm_static"
fi
# The shipped databases of the moved install are found from where the library and the command
# are (the configured folder does not exist here), with AUTOTUNE_SHIPPED_DB unset.
shipped() { # COMMAND... — how many read-only layers it names under the moved prefix
  env -u AUTOTUNE_SHIPPED_DB XDG_CACHE_HOME="$work/cache" AUTOTUNE_DB="$db" "$@" 2>&1 |
    grep -c "^\(== \)\?$prefix/share/autotune/db/"
}
cat >"$work/layers.c" <<'C'
#include <autotune.h>
#include <stdio.h>
int main(void)
{
    at_context *ctx;
    if (at_context_create(NULL, &ctx) != AT_OK) return 1;
    for (size_t i = 1; at_context_database(ctx, i); i++) puts(at_context_database(ctx, i));
    at_context_destroy(ctx);
    return 0;
}
C
if [ -e "$configured_shipped" ]; then
  skip "the shipped folder of a moved install: $configured_shipped exists here"
elif [ "$device" -eq 0 ]; then
  skip "the shipped folder of a moved install: no device"
else
  n=$(shipped "$prefix/bin/autotune" db show gemm)
  if [ "$n" -ge 1 ]; then ok "autotune finds the moved install's shipped databases"; else bad "autotune: no shipped layer under $prefix"; fi
  # shellcheck disable=SC2046 # the flags are words
  if "$cc" "$work/layers.c" $(pkg-config --cflags --libs autotune) -o "$work/layers" >"$work/cc.log" 2>&1 &&
     [ "$(shipped env LD_LIBRARY_PATH="$lib" "$work/layers")" -ge 1 ]; then
    ok "libautotune.so finds the moved install's shipped databases"
  else
    bad "libautotune.so: no shipped layer under $prefix"; cat "$work/cc.log"
  fi
fi

# The version file: 0.x minors are not compatible, so asking for 0.1 or 0.3 finds nothing.
for v in 0.1 0.3; do
  sed -i "s/find_package(autotune [0-9.]* REQUIRED)/find_package(autotune $v REQUIRED)/" "$work/proj/CMakeLists.txt"
  if "$cmake" -S "$work/proj" -B "$work/proj/build-$v" -DCMAKE_PREFIX_PATH="$prefix" >"$work/v.log" 2>&1; then
    bad "find_package(autotune $v) accepted version $(pkg-config --modversion autotune)"
  else
    ok "find_package(autotune $v) refuses $(pkg-config --modversion autotune)"
  fi
done
finish || exit 1
[ "$skipped" -eq 0 ] || exit 77 # ctest: skipped, some checks could not run here
