#!/usr/bin/env bash
# run.sh — the strategy benchmark: every search strategy of `autotune replay` and Kernel Tuner's
# strategies in its simulation mode, on the same recorded spaces, with many seeds; then
# analyze.py's tables and plot. See README.md.
#
#   benchmarks/search/run.sh OUTDIR [SPACE.json.gz ...]
#
# SPACEs default to every file in SHARED_SPACES and benchmarks/spaces/. Runs already in OUTDIR
# are kept (a second call with other spaces or TOOLS adds to them); analyze.py then summarises
# everything under OUTDIR/raw.
#
# Environment (defaults in brackets):
#   BUILD          build folder with `autotune` [build]
#   SHARED_SPACES  folder of real-GPU spaces [../shared/spaces beside the repository]
#   SEEDS          seeds per strategy and space [10]
#   BUDGET_FRAC    evaluation budget per run as a fraction of the space, at least
#                  BUDGET_MIN and at most the space [0.1, 200]
#   STRATEGIES     ours, space-separated [every strategy `autotune replay` names but exhaustive]
#   KT_STRATEGIES  Kernel Tuner's, comma-separated
#                  [random_sample,genetic_algorithm,simulated_annealing,dual_annealing,pso]
#   PYTHON         a python with kernel_tuner, numpy, matplotlib [a venv made in OUTDIR/venv]
#   TOOLS          ours, kt or both [both]
#   FAILED_BOTH    on a space with configs recorded as failed, also run the two other fair
#                  comparisons: Kernel Tuner paying for them (kt_sim.py --failed pay) and ours
#                  on the space without them (strip_failed.py), for FAILED_STRATEGIES [1]
#   FAILED_STRATEGIES  ours run without the failed configs [model]
#   JOBS           runs at once [2]
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: $0 OUTDIR [SPACE.json.gz ...]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
build=${BUILD:-$repo/build}
at=$(cd "$build" && pwd)/autotune
shared=${SHARED_SPACES:-$repo/../shared/spaces}
seeds=${SEEDS:-10}
frac=${BUDGET_FRAC:-0.1}
bmin=${BUDGET_MIN:-200}
kt=${KT_STRATEGIES:-random_sample,genetic_algorithm,simulated_annealing,dual_annealing,pso}
jobs=${JOBS:-2}
tools=${TOOLS:-both}
failed_both=${FAILED_BOTH:-1}
failed_strategies=${FAILED_STRATEGIES:-model}
[[ -x $at ]] || { echo "run.sh: no autotune in $build (set BUILD)" >&2; exit 2; }

# ---- Python with Kernel Tuner ----------------------------------------------------------------
if [[ -z ${PYTHON:-} ]]; then
    if [[ ! -x $out/venv/bin/python ]]; then
        python3 -m venv "$out/venv"
        "$out/venv/bin/pip" install -q kernel_tuner numpy matplotlib
    fi
    PYTHON=$out/venv/bin/python
fi
"$PYTHON" -c "import kernel_tuner, numpy, matplotlib" ||
    { echo "run.sh: $PYTHON lacks kernel_tuner, numpy or matplotlib" >&2; exit 1; }

# ---- spaces and strategies --------------------------------------------------------------------
spaces=()
if [[ $# -gt 1 ]]; then
    for f in "${@:2}"; do
        [[ -f $f ]] || { echo "run.sh: no space file $f" >&2; exit 2; }
        spaces+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")")
    done
else
    for f in "$shared"/*.json.gz "$repo"/benchmarks/spaces/*.json.gz; do
        [[ -f $f ]] && spaces+=("$f")
    done
fi
((${#spaces[@]})) || { echo "run.sh: no spaces in $shared or benchmarks/spaces" >&2; exit 1; }
if [[ -z ${STRATEGIES:-} ]]; then
    # The CLI names its strategies when given an unknown one.
    STRATEGIES=$( ("$at" replay "${spaces[0]}" --strategy '?' 2>&1 || true) |
        sed -n 's/.*(one of: \([^)]*\)).*/\1/p' | tr -d ',' | tr ' ' '\n' | grep -v '^exhaustive$' |
        tr '\n' ' ')
fi
[[ -n ${STRATEGIES// /} ]] || { echo "run.sh: no strategies found" >&2; exit 1; }

{
    echo "date: $(date -u +%FT%TZ)"
    echo "autotune: $("$at" version) ($(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
    echo "kernel_tuner: $("$PYTHON" -c 'import kernel_tuner; print(kernel_tuner.__version__)' 2>/dev/null || echo '?')"
    echo "seeds: $seeds  budget: max($bmin, $frac x space), at most the space  jobs: $jobs"
    echo "ours: $STRATEGIES"
    echo "kernel_tuner: $kt"
    echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "tools: $tools  spaces: ${spaces[*]##*/}"
} | tee -a "$out/run-info.txt"

# ---- one job per (space, strategy) -------------------------------------------------------------
joblist=$out/jobs.txt
: >"$joblist"
for f in "${spaces[@]}"; do
    name=$(basename "$f" .json.gz)
    dir=$out/raw/$name
    mkdir -p "$dir"
    read -r size nfailed < <("$at" replay "$f" --strategy random --budget 1 --json |
        "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d["space"], d["space_failed"])')
    budget=$("$PYTHON" -c "import math; print(min($size, max($bmin, math.ceil($frac * $size))))")
    echo "{\"space\": $size, \"failed\": $nfailed, \"budget\": $budget}" >"$dir/meta.json"
    if [[ $tools != kt ]]; then
        for s in $STRATEGIES; do echo "ours $f $dir $budget $s" >>"$joblist"; done
    fi
    if [[ $tools != ours ]]; then
        for s in ${kt//,/ }; do echo "kt $f $dir $budget $s" >>"$joblist"; done
    fi
    # The two other fair comparisons where configs failed: Kernel Tuner pays for them as ours
    # does, and ours searches the space without them as Kernel Tuner's simulation does.
    if [[ $failed_both == 1 && $nfailed -gt 0 ]]; then
        if [[ $tools != kt ]]; then
            mkdir -p "$out/stripped"
            stripped=$out/stripped/$name.json.gz
            [[ -f $stripped ]] || "$PYTHON" "$here/strip_failed.py" "$f" "$stripped" >/dev/null
            for s in $failed_strategies; do echo "oursskip $stripped $dir $budget $s" >>"$joblist"; done
        fi
        if [[ $tools != ours ]]; then
            for s in ${kt//,/ }; do echo "ktpay $f $dir $budget $s" >>"$joblist"; done
        fi
    fi
done

runjob() {
    local tool=$1 f=$2 dir=$3 budget=$4 s=$5 t0=$SECONDS
    if [[ $tool == ours || $tool == oursskip ]]; then
        local tag=$s
        [[ $tool == oursskip ]] && tag=$s@skip-failed
        for ((i = 1; i <= seeds; i++)); do
            "$at" replay "$f" --strategy "$s" --seed "$i" --budget "$budget" --json >"$dir/$tag-$i.json" ||
                echo "run.sh: autotune replay $f --strategy $s --seed $i failed" >&2
        done
    else
        local mode=skip
        [[ $tool == ktpay ]] && mode=pay
        "$PYTHON" "$here/kt_sim.py" "$f" "$dir" --strategies "$s" --seeds "$seeds" --budget "$budget" \
            --failed "$mode"
    fi
    echo "$(date -u +%T) $(basename "$dir") $tool $s: $((SECONDS - t0)) s"
}
export -f runjob
export at seeds PYTHON here
# Longest first: Kernel Tuner on the biggest spaces.
sort -k1,1r "$joblist" | xargs -P "$jobs" -L 1 bash -c 'runjob "$@"' _ 2>&1 | tee -a "$out/run.log"

"$PYTHON" "$here/analyze.py" "$out"
