#!/usr/bin/env bash
# test_nvrtc_search.sh — NVRTC found outside the loader's path: in the pip-wheel layout of a
# Python environment on PATH (<venv>/lib/python3.*/site-packages/nvidia/cu13/lib, as on the GPU
# machine's /opt/torch/.venv), and the message saying where it looked when it is nowhere.
# AUTOTUNE_LIBRARY_SEARCH=python limits the search to those folders, so the test does not pass
# by the real NVRTC in ld.so.cache.
#   tests/cli/test_nvrtc_search.sh path/to/autotune
set -uo pipefail
AT=${1:?usage: test_nvrtc_search.sh path/to/autotune}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
export AUTOTUNE_DB="$work/db"

# the real NVRTC: AUTOTUNE_NVRTC_LIBRARY if it is a path, else the linker cache's
real=${AUTOTUNE_NVRTC_LIBRARY:-}
[[ $real == */* ]] || real=$(ldconfig -p | awk '$1 == "libnvrtc.so.13" || $1 == "libnvrtc.so.12" { print $NF; exit }')
if [ -z "$real" ] || [ ! -e "$real" ]; then
  skip "no NVRTC here"
  finish
  exit 77
fi
soname=$(basename "$real")
case "$soname" in *.so.13) sub=cu13 ;; *) sub=cuda_nvrtc ;; esac
unset AUTOTUNE_NVRTC_LIBRARY VIRTUAL_ENV CONDA_PREFIX CUDA_HOME CUDA_PATH

# a fake virtual environment: bin/python3 and NVIDIA's wheel layout holding links to the real
# NVRTC and its builtins (which NVRTC loads from its own folder)
venv="$work/venv"
lib="$venv/lib/python3.12/site-packages/nvidia/$sub/lib"
mkdir -p "$venv/bin" "$lib" "$work/empty/bin"
ln -s "$(command -v python3 || echo /usr/bin/python3)" "$venv/bin/python3"
ln -s "$(command -v python3 || echo /usr/bin/python3)" "$work/empty/bin/python3"
for f in "$(dirname "$(readlink -f "$real")")"/libnvrtc*.so*; do ln -s "$f" "$lib/"; done
ln -sf "$(readlink -f "$real")" "$lib/$soname"

# LD_LIBRARY_PATH must not hold it either
LD_LIBRARY_PATH=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v -e cuda -e nvrtc | paste -sd: -)
export LD_LIBRARY_PATH

export AUTOTUNE_LIBRARY_SEARCH=python
PATH="$venv/bin:$PATH" expect 0 '"compiled":1' -- space gemm --backend cuda --arch sm_90a --compile --limit 1 --json
# NVRTC opens its builtins by their bare name: they are loaded first from its own folder
loads=$(PATH="$venv/bin:$PATH" LD_DEBUG=files "$AT" space gemm --backend cuda --arch sm_90a --compile --limit 1 2>&1)
if grep -q "file=$(re "$lib")/libnvrtc-builtins" <<<"$loads"; then
  ok "NVRTC's builtins loaded from the wheel folder"
else
  bad "NVRTC's builtins not loaded from $lib"
fi
# nowhere: the message names the folders it looked in
PATH="$work/empty/bin:/usr/bin:/bin" expect 1 "looked in: .*$(re "$work/empty")/lib/python3\*/\*-packages/nvidia/cu13/lib" -- \
  space gemm --backend cuda --arch sm_90a --compile --limit 1
# the loader alone (a bare name) is not searched: the message says so
PATH="$work/empty/bin:/usr/bin:/bin" expect 1 "libnvrtc.so.13 not found" -- \
  space gemm --backend cuda --arch sm_90a --compile --limit 1
# devices says where it looked for the driver (none here) or, with one, which NVRTC it loaded
unset AUTOTUNE_LIBRARY_SEARCH
expect 0 "cuda +(unavailable: .*looked in|available \(CUDA: .*; nvrtc [0-9.]+: /)" -- devices
finish
