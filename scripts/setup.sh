#!/usr/bin/env bash
# setup.sh — installs the Debian 12 packages autotune needs and builds it into build/.
# Extra CMake options go in CMAKE_ARGS (e.g. CMAKE_ARGS=-DAT_WERROR=ON); AT_SKIP_APT=1 skips the
# packages. apt-get runs as root, else through sudo; without either, the packages must already be
# there. Another apt or dpkg at work (unattended-upgrades, a second setup) is waited for, up to
# 10 minutes, instead of failing on its lock.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(
  build-essential cmake pkg-config liblmdb-dev lmdb-utils libyaml-dev ocl-icd-opencl-dev
  opencl-headers pocl-opencl-icd clinfo libcmocka-dev libcjson-dev zlib1g-dev libmsgpack-dev
  libamdhip64-dev libhiprtc-builtins5 libamd-comgr2 rocm-device-libs clang libclang-rt-14-dev
  libopenmpi-dev openmpi-bin groff-base python3-venv python3-pip
)
LOCK_WAIT=600 # seconds

missing() { # the packages of PACKAGES that are not installed
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || echo "$p"
  done
}

# apt-get waits for dpkg's lock itself (DPkg::Lock::Timeout); `apt-get update` also takes the
# package lists' lock, which it does not wait for: that failure is retried here.
apt_get() {
  local out start=$SECONDS
  while ! out=$($SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=$LOCK_WAIT \
                -qq "$@" 2>&1 >/dev/null); do
    if ! grep -qE 'Could not get lock|Unable to (lock|acquire)' <<<"$out" ||
       [ $((SECONDS - start)) -ge $LOCK_WAIT ]; then
      echo "$out" >&2
      return 1
    fi
    echo "setup.sh: waiting for the package manager's lock (another apt or dpkg is running)" >&2
    sleep 10
  done
}

if [ -z "${AT_SKIP_APT:-}" ]; then
  mapfile -t need < <(missing)
  if [ "${#need[@]}" -gt 0 ]; then
    SUDO=
    if [ "$(id -u)" -ne 0 ]; then
      if ! command -v sudo >/dev/null; then
        echo "setup.sh: not root and no sudo; as root, install: ${need[*]}" >&2
        echo "  (or set AT_SKIP_APT=1 to build with what is here)" >&2
        exit 1
      fi
      SUDO=sudo
    fi
    apt_get update
    apt_get install -y --no-install-recommends "${need[@]}"
  fi
fi
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
