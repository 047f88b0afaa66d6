#!/usr/bin/env bash
# record.sh — records the GEMM recording sub-space (subspace/gemm/gemm.yaml) exhaustively on the
# OpenCL (PoCL) device for the four shapes of benchmarks/spaces/, one database per shape, and
# exports each to Kernel Tuner's cache JSON (gzipped) beside the databases.
#
#   benchmarks/spaces/record.sh BUILD OUTDIR [JOBS [NAME...]]
#
# BUILD: a build folder with `autotune`. OUTDIR gets <shape>.db/, <shape>.log, <shape>.json
# (the tuning run's --json), and pocl-gemm-<shape>.json.gz. JOBS (default 1): shapes recorded at
# once; each recording compiles every config again (binaries of the sweep are not reused). NAMEs
# (e.g. small-48x40x33) record only those shapes. The run resumes: a shape whose database already
# holds results continues where it stopped. Every config is timed to the end (--slowdown-limit 0:
# the tuner's default stops one 10x slower than the best and records it as a timeout, a failure
# the recorded space would then hold).
set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 BUILD OUTDIR [JOBS [NAME...]]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
at=$(cd "$1" && pwd)/autotune
out=$2
jobs=${3:-1}
only=("${@:4}")
[[ -x $at ]] || { echo "record.sh: no autotune in $1" >&2; exit 2; }
mkdir -p "$out"
export AUTOTUNE_TEMPLATE_PATH=$here/subspace

# name m n k
shapes=(
    "square-256 256 256 256"
    "tall-2048x32x256 2048 32 256"
    "small-48x40x33 48 40 33"
    "largek-64x64x4096 64 64 4096"
)

record() {
    local name=$1 m=$2 n=$3 k=$4
    local db=$out/$name.db
    echo "$(date -u +%FT%TZ) start $name" >>"$out/$name.log"
    "$at" gemm --backend opencl --m "$m" --n "$n" --k "$k" --strategy exhaustive --db "$db" \
        --slowdown-limit 0 --no-transfer --json >"$out/$name.json" 2>>"$out/$name.log" || return 1
    echo "$(date -u +%FT%TZ) done $name" >>"$out/$name.log"
    "$at" db export --kernel-tuner --problem "gemm/f32/nn/${m}x${n}x${k}" --db "$db" \
        --output "$out/pocl-gemm-$name.json" 2>>"$out/$name.log" || return 1
    gzip -9f "$out/pocl-gemm-$name.json"
}

running=0 failed=0
for s in "${shapes[@]}"; do
    if ((${#only[@]})) && [[ " ${only[*]} " != *" ${s%% *} "* ]]; then continue; fi
    # shellcheck disable=SC2086
    record $s &
    running=$((running + 1))
    if ((running >= jobs)); then
        wait -n || failed=1
        running=$((running - 1))
    fi
done
while ((running > 0)); do
    wait -n || failed=1
    running=$((running - 1))
done
((failed == 0)) || { echo "record.sh: a recording or export failed (see $out/*.log)" >&2; exit 1; }
