#!/usr/bin/env bash
# Fetch the few build/run dependencies of autotune as Debian packages and unpack them into DIR,
# for a machine without a package registry (the GPU machine): run this HERE (with network),
# carry DIR along, and point benchmarks/gpu/run.sh at it with AT_DEPS=DIR (or name DIR
# build-deps/ at the repository root: run.sh picks that up by itself, and build*/ is ignored
# by git, so it can be carried as an ignored path).
#
# Usage: benchmarks/gpu/fetch-deps.sh DIR
# Environment (optional):
#   DEPS_PACKAGES="..."   the packages (default below)
#
# What you get in DIR: DIR/usr/{include,lib/x86_64-linux-gnu,share} from `dpkg -x` of every
# package, the downloaded .deb files in DIR/debs/, DIR/packages.txt (name, version, file),
# and the .pc files rewritten to be relocatable: every /usr in them becomes
# ${pcfiledir}/<relative path to DIR/usr>, so pkg-config points into DIR wherever DIR is moved.
# Nothing is installed on this machine (no root needed: apt-get download only).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
mkdir -p "$1"
DIR=$(cd "$1" && pwd)

# opencl-headers is a metapackage: CL/cl.h is in opencl-c-headers (C++ headers in clhpp).
DEPS_PACKAGES=${DEPS_PACKAGES:-"liblmdb0 liblmdb-dev libyaml-0-2 libyaml-dev libcmocka0 libcmocka-dev libcjson1 libcjson-dev libmsgpackc2 libmsgpack-dev zlib1g-dev opencl-headers opencl-c-headers opencl-clhpp-headers"}

command -v apt-get > /dev/null || { echo "$0: needs apt-get (Debian/Ubuntu)" >&2; exit 1; }
command -v dpkg > /dev/null || { echo "$0: needs dpkg" >&2; exit 1; }

mkdir -p "$DIR/debs"
echo "[fetch-deps] downloading into $DIR/debs: $DEPS_PACKAGES" >&2
# shellcheck disable=SC2086  # the package list is split on purpose
if ! (cd "$DIR/debs" && apt-get download $DEPS_PACKAGES); then
    echo "[fetch-deps] apt-get download failed; trying 'apt-get update' first" >&2
    SUDO=
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086
    (cd "$DIR/debs" && apt-get download $DEPS_PACKAGES)
fi

: > "$DIR/packages.txt"
for deb in "$DIR"/debs/*.deb; do
    [ -e "$deb" ] || { echo "[fetch-deps] no .deb downloaded" >&2; exit 1; }
    dpkg -x "$deb" "$DIR"
    printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
        "debs/$(basename "$deb")" >> "$DIR/packages.txt"
done

# Make the .pc files point into DIR: Debian's say prefix=/usr (cmocka's even -L/usr/lib/...,
# -I/usr/include). Replace every /usr path with ${pcfiledir}/<relative path to DIR/usr>, which
# pkg-config (and pkgconf) expand to the folder of the .pc file itself.
n=0
while IFS= read -r -d '' pc; do
    rel=$(realpath --relative-to="$(dirname "$pc")" "$DIR/usr")
    # /usr at the start of a value (after = or a -I/-L flag), followed by / or the end of a word
    sed -i -E "s#(=|-I|-L)/usr(/|[[:space:]]|\$)#\\1\${pcfiledir}/$rel\\2#g" "$pc"
    n=$((n + 1))
done < <(find "$DIR/usr" -name '*.pc' -print0)

# Sanity check: the two that the build cannot do without.
PCDIRS="$DIR/usr/lib/x86_64-linux-gnu/pkgconfig:$DIR/usr/share/pkgconfig"
for mod in lmdb yaml-0.1; do
    if ! PKG_CONFIG_PATH=$PCDIRS PKG_CONFIG_LIBDIR=$PCDIRS pkg-config --exists "$mod" 2>/dev/null \
        && command -v pkg-config > /dev/null; then
        echo "[fetch-deps] WARNING: pkg-config does not find $mod in $DIR" >&2
    fi
done
echo "[fetch-deps] unpacked $(wc -l < "$DIR/packages.txt") packages into $DIR ($n .pc files made relocatable)" >&2
echo "[fetch-deps] use it with: AT_DEPS=$DIR benchmarks/gpu/run.sh OUTDIR" >&2
