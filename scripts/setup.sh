#!/usr/bin/env bash
# setup.sh — installs the Debian 12 packages autotune needs and builds it into build/.
# Extra CMake options go in CMAKE_ARGS (e.g. CMAKE_ARGS=-DAT_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -z "${AT_SKIP_APT:-}" ]; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config liblmdb-dev lmdb-utils libyaml-dev ocl-icd-opencl-dev \
    opencl-headers pocl-opencl-icd clinfo libcmocka-dev libcjson-dev zlib1g-dev libmsgpack-dev \
    libamdhip64-dev libhiprtc-builtins5 libamd-comgr2 rocm-device-libs clang libclang-rt-14-dev \
    libopenmpi-dev openmpi-bin \
    >/dev/null
fi
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
