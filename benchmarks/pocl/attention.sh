#!/usr/bin/env bash
# Side-by-side f32 attention benchmark on the PoCL (OpenCL-on-CPU) device, in one run:
#   ours     autotune's fused attention, tuned with a budget (`autotune attention ... --json`),
#            then the best kernel timed through the library (attention_peers.c);
#   unfused  S = scale Q K^T and O = P V with our own tuned GEMM through the library (at_gemm,
#            nt and nn) around a softmax kernel on the same OpenCL queue (attention_peers.c);
#   PyTorch  torch.nn.functional.scaled_dot_product_attention on the same CPU, f32,
#            torch.set_num_threads(TORCH_THREADS) (torch_attention.py).
# All three are timed by one rule (warm-up, then host wall time per call until MIN_SECONDS or
# MAX_RUNS, median) and checked against a float64 reference on a spread of rows first.
#
# Usage: benchmarks/pocl/attention.sh OUTDIR
# Environment (all optional):
#   SHAPES="B,H,G,S,S2,D,C ..."  batch, heads, kv-heads, seq, seq-kv, head-dim, causal (0/1);
#                                default: batch 1, heads 8, seq 512 and 2048, head-dim 64 and
#                                128, causal and not, and the decode shape 1,32,8,1,8192,128,0
#   DRY_RUN=1                    tiny shapes and budgets: proves the pipeline end to end in ~2 min
#   TUNE_BUDGET=60s              `autotune attention --budget`
#   GEMM_BUDGET=30               seconds of at_gemm_tune per GEMM shape (the two GEMMs of each
#                                distinct (S, S2, D); later shapes answer from the database)
#   MIN_SECONDS=1 MAX_RUNS=10    the timing rule
#   TORCH_THREADS=2
#   AUTOTUNE=build/autotune      autotune binary (relative to the repo root)
#   PEERS=build/benchmarks/attention_peers
#   PYTHON=                      a python with torch; default: TORCH_VENV/bin/python, the venv
#                                created (pip install torch numpy) if it does not exist
#   TORCH_VENV=${XDG_CACHE_HOME:-~/.cache}/autotune/torch-venv
#   SKIP="..."                   steps to skip: autotune peers torch
# AUTOTUNE_TEMPLATE_PATH, AUTOTUNE_BACKEND and POCL_* pass through to every step.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)

abspath() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s' "$ROOT/$1" ;; esac; }
DRY_RUN=${DRY_RUN:-0}
if [ "$DRY_RUN" = 1 ]; then
    DEFAULT_SHAPES="1,2,2,33,40,64,1 1,2,2,64,64,32,0 1,4,2,1,300,128,0"
    TUNE_BUDGET=${TUNE_BUDGET:-5}
    GEMM_BUDGET=${GEMM_BUDGET:-3}
    MIN_SECONDS=${MIN_SECONDS:-0.2}
else
    DEFAULT_SHAPES=""
    for S in 512 2048; do for D in 64 128; do for C in 0 1; do
        DEFAULT_SHAPES+="1,8,8,$S,$S,$D,$C "
    done; done; done
    DEFAULT_SHAPES+="1,32,8,1,8192,128,0"
fi
SHAPES=${SHAPES:-$DEFAULT_SHAPES}
TUNE_BUDGET=${TUNE_BUDGET:-60s}
GEMM_BUDGET=${GEMM_BUDGET:-30}
MIN_SECONDS=${MIN_SECONDS:-1}
MAX_RUNS=${MAX_RUNS:-10}
TORCH_THREADS=${TORCH_THREADS:-2}
AUTOTUNE=$(abspath "${AUTOTUNE:-build/autotune}")
PEERS=$(abspath "${PEERS:-build/benchmarks/attention_peers}")
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/autotune/torch-venv}
PYTHON=${PYTHON:-}
SKIP=${SKIP:-}

STEPS="$OUTDIR/steps"
rm -rf "$STEPS"
mkdir -p "$STEPS"
: > "$OUTDIR/run.log"
DB="$OUTDIR/tune.db"
rm -rf "$DB"
mkdir -p "$DB"

log() { printf '[attention.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUTDIR/run.log" >&2; }
now() { date +%s.%N; }
skipped() { case " $SKIP " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
quote() { local out="" a; for a in "$@"; do out+="$(printf '%q' "$a") "; done; printf '%s' "${out% }"; }
# step_record NAME key=value...  -> $STEPS/NAME.env (read by summarize_attention.py)
step_record() {
    local name=$1 kv
    shift
    : > "$STEPS/$name.env"
    for kv in "$@"; do printf '%s\n' "$kv" >> "$STEPS/$name.env"; done
}
# run_step NAME OUTFILE CMD...: stdout to OUTFILE, stderr to NAME.stderr.log; records it.
run_step() {
    local name=$1 out=$2 t0 t1 rc=0
    shift 2
    t0=$(now)
    "$@" > "$OUTDIR/$out" 2> "$OUTDIR/$name.stderr.log" || rc=$?
    t1=$(now)
    step_record "$name" status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "$@")" \
        "stdout=$out" "stderr=$name.stderr.log"
    log "$name: rc=$rc, wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
}

# ---- environment -------------------------------------------------------------------------
log "output in $OUTDIR; shapes: $SHAPES"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUTDIR/date.txt"
{ clinfo -l 2>&1 || echo "clinfo -l failed"; } > "$OUTDIR/clinfo-l.txt"
{ lscpu 2>&1 || true; } > "$OUTDIR/lscpu.txt"
{ git -C "$ROOT" rev-parse HEAD 2> /dev/null || echo unknown; } > "$OUTDIR/git-rev.txt"
{
    echo "SHAPES=$SHAPES"
    echo "DRY_RUN=$DRY_RUN TUNE_BUDGET=$TUNE_BUDGET GEMM_BUDGET=$GEMM_BUDGET"
    echo "MIN_SECONDS=$MIN_SECONDS MAX_RUNS=$MAX_RUNS TORCH_THREADS=$TORCH_THREADS"
    echo "AUTOTUNE=$AUTOTUNE PEERS=$PEERS"
    echo "AUTOTUNE_TEMPLATE_PATH=${AUTOTUNE_TEMPLATE_PATH:-unset}"
    echo "TORCH_VENV=$TORCH_VENV PYTHON=${PYTHON:-venv} SKIP=$SKIP"
} > "$OUTDIR/settings.txt"
# The machine may be shared: the load before and after is part of the record.
{ echo "before: $(uptime)"; } > "$OUTDIR/load.txt"

# ---- PyTorch (CPU) -----------------------------------------------------------------------
if ! skipped torch && [ -z "$PYTHON" ]; then
    if [ ! -x "$TORCH_VENV/bin/python" ] || ! "$TORCH_VENV/bin/python" -c 'import torch' 2> /dev/null; then
        # PyPI's Linux torch wheel is the CUDA build and pulls the nvidia-* wheels (~5 GB in
        # all); a --no-deps install does not import (libcufile etc. missing), so this is the
        # smallest install that works from PyPI alone. The GPU is never used here.
        log "installing torch into $TORCH_VENV (pip install torch numpy)"
        python3 -m venv "$TORCH_VENV"
        "$TORCH_VENV/bin/pip" install --progress-bar off torch numpy > "$OUTDIR/torch-install.log" 2>&1 ||
            log "ERROR: pip install torch failed, see torch-install.log"
    fi
    PYTHON="$TORCH_VENV/bin/python"
fi
if ! skipped torch; then
    "$PYTHON" -c 'import torch; print("torch", torch.__version__)' > "$OUTDIR/torch-version.txt" 2>&1 || true
fi

# ---- per shape: tune ours, time ours and unfused -----------------------------------------
for spec in $SHAPES; do
    IFS=, read -r B H G S S2 D C <<< "$spec"
    tag="b${B}_h${H}_g${G}_s${S}_kv${S2}_d${D}"
    causal=()
    if [ "$C" = 1 ]; then
        tag+=_causal
        causal=(--causal)
    fi
    shape=(--batch "$B" --heads "$H" --kv-heads "$G" --seq "$S" --seq-kv "$S2" --head-dim "$D" "${causal[@]}")

    if skipped autotune; then
        step_record "autotune_$tag" status=skipped
    elif [ ! -x "$AUTOTUNE" ]; then
        log "autotune: MISSING binary $AUTOTUNE"
        step_record "autotune_$tag" status=missing "binary=$AUTOTUNE"
    else
        log "autotune $tag"
        run_step "autotune_$tag" "autotune_$tag.json" "$AUTOTUNE" attention "${shape[@]}" \
            --dtype f32 --layout bhsd --backend opencl --budget "$TUNE_BUDGET" --db "$DB" --json
    fi

    if skipped peers; then
        step_record "peers_$tag" status=skipped
    elif [ ! -x "$PEERS" ]; then
        log "peers: MISSING binary $PEERS (cmake --build build --target attention_peers)"
        step_record "peers_$tag" status=missing "binary=$PEERS"
    else
        log "ours (library) and unfused $tag"
        run_step "peers_$tag" "peers_$tag.json" "$PEERS" "${shape[@]}" --db "$DB" \
            --gemm-budget "$GEMM_BUDGET" --min-seconds "$MIN_SECONDS" --max-runs "$MAX_RUNS"
    fi
done

# ---- PyTorch, all shapes in one process ---------------------------------------------------
if skipped torch; then
    step_record torch status=skipped
else
    log "torch sdpa, $TORCH_THREADS threads"
    run_step torch torch.jsonl "$PYTHON" "$HERE/torch_attention.py" --shapes "$SHAPES" \
        --threads "$TORCH_THREADS" --min-seconds "$MIN_SECONDS" --max-runs "$MAX_RUNS"
fi
{ echo "after: $(uptime)"; } >> "$OUTDIR/load.txt"

# ---- summary -----------------------------------------------------------------------------
log "writing summary"
python3 "$HERE/summarize_attention.py" "$OUTDIR" "$SHAPES"
cat "$OUTDIR/summary.txt"
