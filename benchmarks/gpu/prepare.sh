#!/usr/bin/env bash
# Prepares, HERE (with network, no GPU needed), what a GPU run carries: the dependency folder
# build-deps/ (fetch-deps.sh) and a Release build in build-gpu/ made against it without
# pkg-config (the proof that building there works too); then checks that the carried binary and
# library load with only the carried folders and the base system (ldd), and that the tree plus
# the carried folders fit the 64 MiB a run takes. Exits non-zero when anything is missing.
#
# Usage: benchmarks/gpu/prepare.sh
# Environment (optional):
#   DEPS_DIR=build-deps     the dependency folder (fetched when it lacks msgpack-c)
#   CARRY_BUILD=build-gpu   the build folder to carry (built when its autotune is missing or
#                           older than the sources)
#   CARRY_LIMIT_MB=64       the size limit of what travels
#   BASE_LIBS="..."         sonames the GPU machine's base system has (default below)
#   NPROC                   build jobs (default: all cores)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
DEPS_DIR=${DEPS_DIR:-build-deps}
CARRY_BUILD=${CARRY_BUILD:-build-gpu}
CARRY_LIMIT_MB=${CARRY_LIMIT_MB:-64}
# glibc's, the compiler runtime's and zlib: on every Debian/Ubuntu image (the GPU machine's
# is Ubuntu with Python 3.12, glibc newer than Debian 12's)
BASE_LIBS=${BASE_LIBS:-"linux-vdso.so.1 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 libgcc_s.so.1 libstdc++.so.6 libz.so.1"}
NPROC=${NPROC:-$(nproc 2> /dev/null || echo 2)}
log() { printf '[prepare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

# ---- 1. the dependency folder ------------------------------------------------------------
if ! grep -q '^libmsgpackc2 ' "$DEPS_DIR/packages.txt" 2> /dev/null; then
    log "fetching the dependencies into $DEPS_DIR"
    "$HERE/fetch-deps.sh" "$DEPS_DIR"
fi
DL="$ROOT/$DEPS_DIR/usr/lib/x86_64-linux-gnu"
[ -d "$DL" ] || fail "$DEPS_DIR has no usr/lib/x86_64-linux-gnu"

# ---- 2. the Release build, against the folder, without pkg-config ------------------------
newest_src=$(find CMakeLists.txt cmake include base tuner templates search cache -type f -newer \
    "$CARRY_BUILD/autotune" 2> /dev/null | head -1 || true)
if [ ! -x "$CARRY_BUILD/autotune" ] || [ -n "$newest_src" ]; then
    log "building $CARRY_BUILD (Release, no pkg-config, dependencies from $DEPS_DIR)"
    nice -n 10 cmake -S . -B "$CARRY_BUILD" -DCMAKE_BUILD_TYPE=Release \
        -DPKG_CONFIG_EXECUTABLE=/nonexistent/pkg-config -DCMAKE_PREFIX_PATH="$ROOT/$DEPS_DIR/usr" \
        > "$CARRY_BUILD.configure.log" 2>&1 || { cat "$CARRY_BUILD.configure.log" >&2; fail "configure"; }
    nice -n 10 cmake --build "$CARRY_BUILD" -j "$NPROC" --target autotune_cli autotune_shared test_splitk test_tma \
        > "$CARRY_BUILD.build.log" 2>&1 || { tail -30 "$CARRY_BUILD.build.log" >&2; fail "build"; }
    rm -f "$CARRY_BUILD.configure.log" "$CARRY_BUILD.build.log"
fi
grep -q '(no pkg-config)' "$CARRY_BUILD/CMakeCache.txt" 2> /dev/null ||
    grep -q 'PKG_CONFIG_EXECUTABLE:FILEPATH=/nonexistent' "$CARRY_BUILD/CMakeCache.txt" ||
    log "note: $CARRY_BUILD was configured with pkg-config"

# ---- 3. it loads with only the carried folders and the base system -----------------------
missing=0
for bin in "$CARRY_BUILD/autotune" "$CARRY_BUILD/libautotune.so.0"; do
    [ -e "$bin" ] || fail "$bin is missing"
    # the loader's view on the GPU machine: the dependency folder first (run.sh sets
    # LD_LIBRARY_PATH so), then the system; anything found elsewhere is not carried
    out=$(LD_LIBRARY_PATH="$DL" ldd "$bin") || fail "ldd $bin"
    while read -r line; do
        name=${line%% *}
        path=$(sed -n 's/.*=> \([^ ]*\) .*/\1/p' <<< "$line")
        case "$line" in *"not found"*) log "MISSING: $bin needs $name: not found"; missing=1; continue ;; esac
        case " $BASE_LIBS " in *" $name "* | *" $(basename "$name") "*) continue ;; esac
        case "$path" in
            "$DL"/* | "$ROOT/$CARRY_BUILD"/*) ;;
            *) log "MISSING: $bin needs $name, found only in $path (not carried, not base)"; missing=1 ;;
        esac
    done < <(grep -v '^\s*$' <<< "$out" | sed 's/^\s*//')
done
[ "$missing" = 0 ] || fail "runtime libraries missing from $DEPS_DIR (add their packages to fetch-deps.sh)"
log "ldd: $CARRY_BUILD/autotune and libautotune.so.0 need only $DEPS_DIR and the base system"

# ---- 4. what travels fits -----------------------------------------------------------------
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2> /dev/null | tail -1 | cut -f1)
carry=$(du -sb "$DEPS_DIR" "$CARRY_BUILD" | awk '{ s += $1 } END { print s }')
total=$(((tree + carry) / 1048576))
log "travels: tree $((tree / 1048576)) MiB + carried $DEPS_DIR $CARRY_BUILD $((carry / 1048576)) MiB = $total MiB (limit $CARRY_LIMIT_MB)"
[ "$total" -lt "$CARRY_LIMIT_MB" ] || fail "over $CARRY_LIMIT_MB MiB"
echo "carry: $DEPS_DIR $CARRY_BUILD ($total MiB with the tree)"
