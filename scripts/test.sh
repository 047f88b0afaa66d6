#!/usr/bin/env bash
# test.sh — sets up, builds with -Werror and runs the whole test suite (ctest), then the unit
# tests once more under AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
CMAKE_ARGS="-DAT_WERROR=ON ${CMAKE_ARGS:-}" scripts/setup.sh
# `ctest -L slow` (larger compile sweeps for the GPU targets) is left out here; run it by hand.
ctest --test-dir build --output-on-failure -j2 -LE slow

# The sanitizer build runs the modules' unit tests (the OpenCL runtime itself is not
# instrumented, so device tests stay in the plain build).
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DAT_WERROR=ON -DAT_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -L unit
