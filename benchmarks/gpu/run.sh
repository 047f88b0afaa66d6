#!/usr/bin/env bash
# GPU benchmark (reference: one NVIDIA H200), in order of value, each step with a deadline and
# its partial results kept when the deadline cuts it: preflight (clocks, `autotune devices`,
# the NVRTC it loads), a smoke test of each tensor-core GEMM template on two shapes (when
# gemm_wgmma fails it, f16/bf16 use gemm_mma from then on, by --template), autotune.torch's
# pytest, torch.matmul (cuBLAS) on every tuning shape, bf16/f16/f32 GEMM tuning at 8192^3 and
# LLM shapes, PyTorch SDPA and f16 attention tuning, then the whole correctness matrix; raw logs
# and a JSON summary of ratios in OUTDIR. Finishes in under 8 minutes (TIME_LIMIT_S).
# Without a GPU it still finds or builds autotune, runs the compile-only check (NVRTC, no
# device), writes a summary saying so, and exits 0.
#
# Usage: benchmarks/gpu/run.sh [--record-space | --dry-run | --rehearse] [--pack DIR] OUTDIR
#   --dry-run       check the settings (ATTN_SHAPES too) and print the plan, every command
#                   the run would start, into OUTDIR/plan.txt; runs nothing, needs no GPU
#   --rehearse      every step up to the first device call (environment, the binary, devices,
#                   the compile-only check), the time model of each step in
#                   OUTDIR/time-model.txt, the summary and the pack; no device step runs
#   --record-space  instead of the benchmark: record exhaustive CUDA spaces (RECORD_SHAPES) into
#                   OUTDIR/record.db and export each as a Kernel Tuner cache file
#                   OUTDIR/spaces/cuda-gemm-<dtype>-<MxNxK>.json.gz (benchmarks/spaces/README.md)
#   --pack DIR      at the end, and when stopped (TERM, INT), put OUTDIR in one archive
#                   DIR/gpu-run.tar.gz with summary.json, summary.txt and run.log beside it:
#                   what a machine that returns few files (the device tool's $OUT: at most 8)
#                   brings back
# Environment (all optional):
#   AUTOTUNE=path          use this autotune binary (no probing of build dirs, no build)
#   BUILD_DIR=build        prebuilt build folder tried first (used if its autotune runs and has
#                          the cuda backend compiled in)
#   GPU_BUILD_DIR=build-gpu  where to configure and build when the prebuilt one is not usable
#   FORCE_BUILD=1          always build into GPU_BUILD_DIR
#   AT_DEPS=DIR            LMDB/libyaml/cmocka/OpenCL headers unpacked by fetch-deps.sh
#                          (default: ROOT/build-deps if it exists)
#   DTYPES="bf16 f16 f32"  tuning dtypes, in priority order
#   SHAPES="8192x8192x8192 4096x4096x4096 8192x28672x8192 16x8192x8192 4096x1024x14336"
#                          tuning shapes MxNxK, in priority order (within each dtype)
#   TUNE_BUDGET=40         --budget of each tuning run (N evaluations or Ns)
#   TUNE_RUN_TIMEOUT_S=40  a tuning run is stopped (SIGTERM: it saves what it measured) after it
#   CORRECT_DTYPES="f32 f16 bf16" CORRECT_LAYOUTS="nn nt tn tt"
#   CORRECT_SHAPES="1x1x1 7x5x3 127x129x65 16x8192x1000 200x256x8200 1000x999x77 16x8192x128"
#                          (16x8192x1000 and 200x256x8200: the split-K defaults of gemm_mma are
#                          valid there, so budget 3 checks two split-K configs)
#   CORRECT_BUDGET=3 CORRECT_JOBS=8 CORRECT_TIMEOUT_S=30
#   TIME_LIMIT_S=450       the whole run's target (seconds since start): every step's timeout
#                          is cut to end before it; the summary and the pack come after
#   PREFLIGHT_S=10         the preflight's limit
#   SMOKE_S=40 SMOKE_TEMPLATES="gemm_wgmma gemm_mma" SMOKE_SHAPES="1024x1024x1024 127x129x65"
#                          the smoke test: each template (bf16, the first shape also f16) on each
#                          shape, --budget 2, all within SMOKE_S
#   GEMM_TEMPLATE=         --template of every f16/bf16 tuning and correctness run (default:
#                          the library's choice; gemm_mma when gemm_wgmma failed the smoke test)
#   PYTORCH_S=60 CUBLAS_S=60 SDPA_S=30   limits of those steps
#   TUNE_DEADLINE_S=330    no new GEMM tuning run starts after this (since start)
#   CORRECT_DEADLINE_S=430 no new correctness case starts after this (since start)
#   TORCH_ARGS=""          extra arguments for torch_bench.py
#   ATTN_SHAPES="B,H,G,S,S2,D,C ..."  attention problems: batch, heads, kv-heads, seq, seq-kv,
#                          head-dim, causal (0/1); default batch 4, heads 32, seq 4096 and
#                          16384, head-dim 64 and 128, causal and not, then the decode shape
#                          1,32,8,1,8192,128,0 (batch 1: 32 query heads over 8 kv heads)
#   ATTN_DTYPE=f16         dtype of the attention runs (f16 or bf16)
#   ATTN_BUDGET=15         --budget of each attention tuning run
#   ATTN_RUN_TIMEOUT_S=25  an attention tuning run is stopped (SIGTERM) after it
#   ATTN_DEADLINE_S=385    no new attention tuning run starts after this (since start); the
#                          attention runs come after the GEMM tuning
#   ARCH=sm_90a            target of the compile-only check
#   PYTHON=python3
#   SKIP="..."             steps to skip: smoke ctest pytorch correctness cublas tune compile sdpa
#                          attention (pytorch: autotune.torch.matmul's tests, test_torch.py)
#                          (sdpa: PyTorch's attention; attention: autotune's attention tuning)
#                          (--record-space: default all of them but compile)
#   RECORD_SHAPES="f16:4096x4096x4096 bf16:2048x2048x2048 f16:16x8192x8192"
#                          --record-space: dtype:MxNxK of each recorded space
#   RECORD_TIMEOUT_S=240   --record-space: a recording is stopped after it (what it measured is
#                          exported, marked incomplete; a second run resumes it)
set -euo pipefail
SECONDS=0

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

RECORD=0
DRY_RUN=0
REHEARSE=0
PACK=
while [ $# -gt 1 ]; do
    case "$1" in
        --record-space) RECORD=1 ;;
        --dry-run) DRY_RUN=1 ;;
        --rehearse) REHEARSE=1 ;;
        --pack) PACK=${2:?--pack needs a folder}; shift ;;
        *) break ;;
    esac
    shift
done
if [ $# -ne 1 ] || [[ $1 == --* ]]; then
    echo "usage: $0 [--record-space | --dry-run | --rehearse] [--pack DIR] OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)
if [ -n "$PACK" ]; then
    mkdir -p "$PACK"
    PACK=$(cd "$PACK" && pwd)
    case "$PACK/" in "$OUTDIR"/*) echo "$0: --pack $PACK is inside OUTDIR $OUTDIR" >&2; exit 2 ;; esac
fi

abspath() { case "$1" in /*) printf '%s' "$1" ;; *) printf '%s' "$ROOT/$1" ;; esac; }
AUTOTUNE=${AUTOTUNE:-}
[ -n "$AUTOTUNE" ] && AUTOTUNE=$(abspath "$AUTOTUNE")
BUILD_DIR=$(abspath "${BUILD_DIR:-build}")
GPU_BUILD_DIR=$(abspath "${GPU_BUILD_DIR:-build-gpu}")
FORCE_BUILD=${FORCE_BUILD:-0}
AT_DEPS=${AT_DEPS:-}
if [ -z "$AT_DEPS" ] && [ -d "$ROOT/build-deps/usr" ]; then AT_DEPS="$ROOT/build-deps"; fi
[ -n "$AT_DEPS" ] && AT_DEPS=$(abspath "$AT_DEPS")
DTYPES=${DTYPES:-"bf16 f16 f32"}
SHAPES=${SHAPES:-"8192x8192x8192 4096x4096x4096 8192x28672x8192 16x8192x8192 4096x1024x14336"}
TUNE_BUDGET=${TUNE_BUDGET:-40}
TUNE_RUN_TIMEOUT_S=${TUNE_RUN_TIMEOUT_S:-40}
CORRECT_DTYPES=${CORRECT_DTYPES:-"f32 f16 bf16"}
CORRECT_LAYOUTS=${CORRECT_LAYOUTS:-"nn nt tn tt"}
CORRECT_SHAPES=${CORRECT_SHAPES:-"1x1x1 7x5x3 127x129x65 16x8192x1000 200x256x8200 1000x999x77 16x8192x128"}
CORRECT_BUDGET=${CORRECT_BUDGET:-3}
CORRECT_JOBS=${CORRECT_JOBS:-8}
CORRECT_TIMEOUT_S=${CORRECT_TIMEOUT_S:-30}
TIME_LIMIT_S=${TIME_LIMIT_S:-450}
PREFLIGHT_S=${PREFLIGHT_S:-10}
SMOKE_S=${SMOKE_S:-40}
SMOKE_TEMPLATES=${SMOKE_TEMPLATES:-"gemm_wgmma gemm_mma"}
SMOKE_SHAPES=${SMOKE_SHAPES:-"1024x1024x1024 127x129x65"}
PYTORCH_S=${PYTORCH_S:-60}
CUBLAS_S=${CUBLAS_S:-60}
TUNE_DEADLINE_S=${TUNE_DEADLINE_S:-330}
SDPA_S=${SDPA_S:-30}
CORRECT_DEADLINE_S=${CORRECT_DEADLINE_S:-430}
GEMM_TEMPLATE=${GEMM_TEMPLATE:-}
TORCH_ARGS=${TORCH_ARGS:-}
if [ -z "${ATTN_SHAPES:-}" ]; then
    ATTN_SHAPES=""
    for S in 4096 16384; do for D in 64 128; do for C in 0 1; do
        ATTN_SHAPES+="4,32,32,$S,$S,$D,$C "
    done; done; done
    ATTN_SHAPES+="1,32,8,1,8192,128,0"
fi
ATTN_DTYPE=${ATTN_DTYPE:-f16}
ATTN_BUDGET=${ATTN_BUDGET:-15}
ATTN_RUN_TIMEOUT_S=${ATTN_RUN_TIMEOUT_S:-25}
ATTN_DEADLINE_S=${ATTN_DEADLINE_S:-385}
ARCH=${ARCH:-sm_90a}
PYTHON=${PYTHON:-python3}
SKIP=${SKIP:-}
[ "$RECORD" = 1 ] && SKIP=${SKIP:-"smoke ctest pytorch correctness cublas tune sdpa attention"}
RECORD_SHAPES=${RECORD_SHAPES:-"f16:4096x4096x4096 bf16:2048x2048x2048 f16:16x8192x8192"}
RECORD_TIMEOUT_S=${RECORD_TIMEOUT_S:-240}
NPROC=$(nproc 2> /dev/null || echo 4)

STEPS="$OUTDIR/steps"
rm -rf "$STEPS" "$OUTDIR/correctness" "$OUTDIR/tune" "$OUTDIR/summary.json" "$OUTDIR/summary.txt"
mkdir -p "$STEPS" "$OUTDIR/correctness" "$OUTDIR/tune"
: > "$OUTDIR/run.log"
: > "$OUTDIR/skipped.txt"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/autotune-gpu-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log() { printf '[run.sh %s +%ds] %s\n' "$(date +%H:%M:%S)" "$SECONDS" "$*" | tee -a "$OUTDIR/run.log" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
skipped() { case " $SKIP " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
quote() { local out="" a; for a in "$@"; do out+="$(printf '%q' "$a") "; done; printf '%s' "${out% }"; }
# step_record NAME key=value...  -> $STEPS/NAME.env (read by summarize.py)
step_record() {
    local name=$1 kv
    shift
    : > "$STEPS/$name.env"
    for kv in "$@"; do printf '%s\n' "$kv" >> "$STEPS/$name.env"; done
}
skip_note() { printf '%s\n' "$*" >> "$OUTDIR/skipped.txt"; log "SKIPPED: $*"; }
# pack: OUTDIR as one archive in PACK (at most PACK_MAX_MB; without the LMDB database, whose
# measurements are also in tune.jsonl.gz and tune/*.db-show.log, when it would not fit), with
# summary.json, summary.txt and run.log beside it: 4 files
PACK_MAX_MB=${PACK_MAX_MB:-15}
pack() {
    [ -n "$PACK" ] || return 0
    local a="$PACK/gpu-run.tar.gz" f
    rm -f "$a"
    tar -C "$(dirname "$OUTDIR")" -czf "$a" "$(basename "$OUTDIR")" 2> "$WORK/tar.log" || true
    if [ ! -s "$a" ] || [ "$(stat -c %s "$a")" -gt $((PACK_MAX_MB * 1048576)) ]; then
        log "pack: over ${PACK_MAX_MB} MiB with the database; again without tune.db/*.mdb"
        echo "tune.db left out of the archive (over ${PACK_MAX_MB} MiB): tune.jsonl.gz has its measurements" \
            >> "$OUTDIR/skipped.txt"
        tar -C "$(dirname "$OUTDIR")" --exclude='*.mdb' -czf "$a" "$(basename "$OUTDIR")" 2>> "$WORK/tar.log" || true
    fi
    for f in summary.json summary.txt run.log; do
        [ -f "$OUTDIR/$f" ] && cp "$OUTDIR/$f" "$PACK/$f"
    done
    log "packed $OUTDIR into $a ($(du -h "$a" | cut -f1))"
    cp "$OUTDIR/run.log" "$PACK/run.log" 2> /dev/null || true
}
# finish_run: the summary and the pack, once (also when a signal stops the run)
FINISHED=0
finish_run() {
    [ "$FINISHED" = 0 ] || return 0
    FINISHED=1
    log "writing summary (total ${SECONDS}s so far)"
    echo "$SECONDS" > "$OUTDIR/total-seconds.txt"
    if ! "$PYTHON" "$HERE/summarize.py" "$OUTDIR" > "$OUTDIR/summarize.log" 2>&1; then
        log "ERROR: summarize.py failed, see $OUTDIR/summarize.log"
        cat "$OUTDIR/summarize.log" >&2
    fi
    pack
}
# shellcheck disable=SC2317  # run by the trap below
on_signal() {
    [ "$BASHPID" = "$$" ] || exit 143 # a background case: the main shell packs
    trap '' TERM INT
    local j # the cases running in the background: their timeout (and so autotune) first
    for j in $(jobs -p); do
        pkill -TERM -P "$j" 2> /dev/null || true
        kill -TERM "$j" 2> /dev/null || true
    done
    log "stopped by a signal at ${SECONDS}s: summary and pack of what there is"
    finish_run
    exit 143
}
trap on_signal TERM INT
# logged LOGFILE cmd...: appends "$ cmd", its output, and "# rc=.. wall=..s" to LOGFILE;
# returns the command's exit status.
logged() {
    local logf=$1 rc=0 t0 t1
    shift
    t0=$(now)
    { printf '$ %s\n' "$(quote "$@")"; } >> "$logf"
    "$@" >> "$logf" 2>&1 || rc=$?
    t1=$(now)
    printf '# rc=%s wall=%ss\n\n' "$rc" "$(elapsed "$t0" "$t1")" >> "$logf"
    return "$rc"
}

# ---- dependencies unpacked from .deb files (fetch-deps.sh) --------------------------------
if [ -n "$AT_DEPS" ]; then
    if [ -d "$AT_DEPS/usr" ]; then
        DL="$AT_DEPS/usr/lib/x86_64-linux-gnu"
        export PKG_CONFIG_PATH="$DL/pkgconfig:$AT_DEPS/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        export CMAKE_PREFIX_PATH="$AT_DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
        export CMAKE_INCLUDE_PATH="$AT_DEPS/usr/include${CMAKE_INCLUDE_PATH:+:$CMAKE_INCLUDE_PATH}"
        export CMAKE_LIBRARY_PATH="$DL${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}"
        export LIBRARY_PATH="$DL${LIBRARY_PATH:+:$LIBRARY_PATH}"
        export LD_LIBRARY_PATH="$DL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
        log "WARNING: AT_DEPS=$AT_DEPS has no usr/ folder; ignored"
        AT_DEPS=
    fi
fi

# ---- settings ----------------------------------------------------------------------------
{
    echo "OUTDIR=$OUTDIR"
    echo "ROOT=$ROOT"
    echo "AUTOTUNE=${AUTOTUNE:-auto}"
    echo "BUILD_DIR=$BUILD_DIR GPU_BUILD_DIR=$GPU_BUILD_DIR FORCE_BUILD=$FORCE_BUILD"
    echo "AT_DEPS=${AT_DEPS:-none}"
    echo "DTYPES=$DTYPES"
    echo "SHAPES=$SHAPES"
    echo "TUNE_BUDGET=$TUNE_BUDGET TUNE_RUN_TIMEOUT_S=$TUNE_RUN_TIMEOUT_S"
    echo "CORRECT_DTYPES=$CORRECT_DTYPES CORRECT_LAYOUTS=$CORRECT_LAYOUTS"
    echo "CORRECT_SHAPES=$CORRECT_SHAPES"
    echo "CORRECT_BUDGET=$CORRECT_BUDGET CORRECT_JOBS=$CORRECT_JOBS CORRECT_TIMEOUT_S=$CORRECT_TIMEOUT_S"
    echo "TIME_LIMIT_S=$TIME_LIMIT_S CORRECT_DEADLINE_S=$CORRECT_DEADLINE_S TUNE_DEADLINE_S=$TUNE_DEADLINE_S"
    echo "TORCH_ARGS=$TORCH_ARGS ARCH=$ARCH PYTHON=$PYTHON SKIP=$SKIP"
    echo "ATTN_SHAPES=$ATTN_SHAPES"
    echo "ATTN_DTYPE=$ATTN_DTYPE ATTN_BUDGET=$ATTN_BUDGET ATTN_RUN_TIMEOUT_S=$ATTN_RUN_TIMEOUT_S ATTN_DEADLINE_S=$ATTN_DEADLINE_S"
    echo "RECORD=$RECORD RECORD_SHAPES=$RECORD_SHAPES RECORD_TIMEOUT_S=$RECORD_TIMEOUT_S"
    echo "PKG_CONFIG_PATH=${PKG_CONFIG_PATH:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} > "$OUTDIR/settings.txt"
log "output in $OUTDIR"

# attn_spec SPEC: for one ATTN_SHAPES entry B,H,G,S,S2,D,C sets A_ARGS (the problem's options
# of `autotune attention`), A_TAG (file names) and A_KEY (its database key, for `db show`).
attn_spec() {
    local B H G S S2 D C mode=full
    IFS=, read -r B H G S S2 D C <<< "$1"
    A_ARGS=(--batch "$B" --heads "$H" --kv-heads "$G" --seq "$S" --seq-kv "$S2" --head-dim "$D")
    A_TAG="${B}x${H}x${G}_${S}x${S2}_d${D}"
    if [ "$C" = 1 ]; then
        A_ARGS+=(--causal)
        A_TAG+=_causal
        mode=causal
    fi
    A_KEY="attention/$ATTN_DTYPE/bshd/d$D/$mode/${B}x${H}x${G}/${S}x${S2}"
}
attn_cmd() {   # the tuning command of the current A_ARGS
    A_CMD=("${AUTOTUNE:-autotune}" attention --backend cuda --dtype "$ATTN_DTYPE" "${A_ARGS[@]}"
           --budget "$ATTN_BUDGET" --db "$OUTDIR/tune.db" --json)
}
sdpa_cmd() {
    SDPA_CMD=("$PYTHON" "$HERE/torch_bench.py" --dtypes "" --shapes "" --attention "$ATTN_SHAPES"
              --attn-dtype "$ATTN_DTYPE" "$@")
}

# ---- --dry-run: check the settings, print the plan, stop --------------------------------
if [ "$DRY_RUN" = 1 ]; then
    PLAN="$OUTDIR/plan.txt"
    rc=0
    # the attention specs are checked by torch_bench.py's own parser (no torch imported)
    sdpa_cmd --dry-run
    if ! "${SDPA_CMD[@]}" > "$OUTDIR/plan-sdpa.jsonl" 2>&1; then
        log "ERROR: ATTN_SHAPES: $(tail -1 "$OUTDIR/plan-sdpa.jsonl")"
        rc=2
    fi
    for s in $SHAPES $CORRECT_SHAPES; do
        case "$s" in *[!0-9x]* | x* | *x | *xx*) log "ERROR: shape '$s' is not MxNxK"; rc=2 ;; esac
    done
    {
        echo "plan of benchmarks/gpu/run.sh (dry run: nothing below was started)"
        echo "0. environment: nvidia-smi, python/torch/cmake versions, git revision; autotune:"
        echo "   ${AUTOTUNE:-$BUILD_DIR/autotune if usable, else built into $GPU_BUILD_DIR}"
        echo "1. preflight (${PREFLIGHT_S}s): clocks, autotune devices --json, the NVRTC it loads"
        echo "2. smoke (${SMOKE_S}s): $SMOKE_TEMPLATES on $SMOKE_SHAPES, --budget 2 (gemm_wgmma failing: f16/bf16 by gemm_mma)"
        echo "3. pytorch (${PYTORCH_S}s): pytest python/tests/test_torch.py (autotune.torch on CUDA tensors)"
        echo "4. cuBLAS (${CUBLAS_S}s): $PYTHON $HERE/torch_bench.py --dtypes '$DTYPES' --shapes '$SHAPES' ..."
        echo "5. GEMM tuning (until ${TUNE_DEADLINE_S}s, each stopped after ${TUNE_RUN_TIMEOUT_S}s):"
        for d in $DTYPES; do for s in $SHAPES; do
            echo "   ${AUTOTUNE:-autotune} gemm --backend cuda --dtype $d${GEMM_TEMPLATE:+ --template $GEMM_TEMPLATE} --m/n/k $s --budget $TUNE_BUDGET"
        done; done
        sdpa_cmd
        echo "6. PyTorch SDPA (${SDPA_S}s; flash, efficient for grouped-query when flash refuses): $(quote "${SDPA_CMD[@]}")"
        echo "7. attention tuning (until ${ATTN_DEADLINE_S}s, each stopped after ${ATTN_RUN_TIMEOUT_S}s):"
        for spec in $ATTN_SHAPES; do
            attn_spec "$spec"
            attn_cmd
            echo "   $(quote "${A_CMD[@]}")"
        done
        n=0
        for s in $CORRECT_SHAPES; do for l in $CORRECT_LAYOUTS; do for d in $CORRECT_DTYPES; do n=$((n + 1)); done; done; done
        echo "8. correctness (until ${CORRECT_DEADLINE_S}s): ctest -L gpu; $n x autotune gemm --backend cuda --budget $CORRECT_BUDGET"
        echo "9. summary: summarize.py OUTDIR (GEMM ratios autotune/cuBLAS, attention ratios autotune/SDPA)${PACK:+; pack into $PACK}"
        echo "torch_bench.py --dry-run:"
        sed 's/^/   /' "$OUTDIR/plan-sdpa.jsonl"
    } > "$PLAN"
    cat "$PLAN"
    log "dry run: rc=$rc (plan in $PLAN)"
    exit "$rc"
fi

# ---- 1. environment ----------------------------------------------------------------------
ENVLOG="$OUTDIR/env.log"
: > "$ENVLOG"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUTDIR/date.txt"
logged "$ENVLOG" date -u || true
logged "$ENVLOG" uname -a || true
logged "$ENVLOG" nproc || true
HAVE_SMI=0
if command -v nvidia-smi > /dev/null 2>&1; then
    if logged "$ENVLOG" nvidia-smi; then HAVE_SMI=1; fi
    logged "$ENVLOG" nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv || true
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUTDIR/gpu.txt" 2>&1 || true
else
    echo "nvidia-smi: not found" >> "$ENVLOG"
    echo "none (nvidia-smi not found)" > "$OUTDIR/gpu.txt"
fi
logged "$ENVLOG" "$PYTHON" --version || true
logged "$ENVLOG" "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' || true
logged "$ENVLOG" cmake --version || true
if git -C "$ROOT" rev-parse HEAD > "$OUTDIR/git-rev.txt" 2> /dev/null; then
    git -C "$ROOT" status --short > "$OUTDIR/git-status.txt" 2>&1 || true
else
    echo "unknown (no git repository)" > "$OUTDIR/git-rev.txt"
fi
# content digest of the sources, so a run on a copy of the tree without .git is identified too
(cd "$ROOT" && find CMakeLists.txt include base tuner templates search cache -type f \
     \( -name '*.c' -o -name '*.h' -o -name '*.cl' -o -name '*.cu' -o -name '*.hip' -o -name '*.yaml' -o -name '*.cmake' -o -name CMakeLists.txt \) \
     2> /dev/null | LC_ALL=C sort | xargs sha256sum 2> /dev/null | sha256sum | cut -c1-16) \
    > "$OUTDIR/source-digest.txt" || true
{ echo "git rev: $(cat "$OUTDIR/git-rev.txt")"; echo "source digest: $(cat "$OUTDIR/source-digest.txt")"; } >> "$ENVLOG"

# ---- find or build autotune --------------------------------------------------------------
BUILDLOG="$OUTDIR/build.log"
: > "$BUILDLOG"
AUTOTUNE_FROM=
# usable BIN: runs (devices exits 0) and has the cuda backend compiled in
usable() {
    local bin=$1 out
    [ -x "$bin" ] || { echo "# $bin: missing" >> "$BUILDLOG"; return 1; }
    logged "$BUILDLOG" "$bin" devices --json || return 1
    out=$("$bin" devices --json 2> /dev/null) || return 1
    case "$out" in
        *'"name":"cuda"'*) ;;
        *) echo "# $bin: no cuda entry in 'devices'" >> "$BUILDLOG"; return 1 ;;
    esac
    case "$out" in
        *'has no cuda backend'*) echo "# $bin: built without the cuda backend" >> "$BUILDLOG"; return 1 ;;
    esac
    return 0
}
build_autotune() {
    local dir=$GPU_BUILD_DIR home
    # a build folder carried from another machine names another source path: start afresh
    if [ -f "$dir/CMakeCache.txt" ]; then
        home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$dir/CMakeCache.txt")
        if [ "$home" != "$ROOT" ]; then
            echo "# $dir was configured for '$home', not '$ROOT': removing it" >> "$BUILDLOG"
            rm -rf "$dir"
        fi
    fi
    local cfg=(cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release)
    if [ -n "$AT_DEPS" ]; then
        cfg+=(-DCMAKE_PREFIX_PATH="$AT_DEPS/usr" -DCMAKE_INCLUDE_PATH="$AT_DEPS/usr/include")
    fi
    log "configuring: $(quote "${cfg[@]}")"
    if ! logged "$BUILDLOG" "${cfg[@]}"; then
        log "configure failed (cmocka missing?); again without the tests"
        rm -rf "$dir"
        logged "$BUILDLOG" "${cfg[@]}" -DAT_BUILD_TESTS=OFF || return 1
    fi
    log "building: cmake --build $dir -j $NPROC"
    if ! logged "$BUILDLOG" cmake --build "$dir" -j "$NPROC"; then
        log "full build failed; building only the autotune command"
        logged "$BUILDLOG" cmake --build "$dir" -j "$NPROC" --target autotune_cli || return 1
    fi
    [ -x "$dir/autotune" ]
}
t0=$(now)
if [ -n "$AUTOTUNE" ]; then
    logged "$BUILDLOG" "$AUTOTUNE" devices --json || true
    AUTOTUNE_FROM="AUTOTUNE (given)"
elif [ "$FORCE_BUILD" != 1 ] && usable "$BUILD_DIR/autotune"; then
    AUTOTUNE="$BUILD_DIR/autotune"
    AUTOTUNE_FROM="prebuilt $BUILD_DIR"
else
    [ "$FORCE_BUILD" = 1 ] || log "$BUILD_DIR/autotune is missing, does not run here, or has no cuda backend: building"
    if ! command -v cmake > /dev/null; then
        log "ERROR: cmake not found; cannot build"
    elif build_autotune && usable "$GPU_BUILD_DIR/autotune"; then
        AUTOTUNE="$GPU_BUILD_DIR/autotune"
        AUTOTUNE_FROM="built into $GPU_BUILD_DIR"
    elif [ -x "$GPU_BUILD_DIR/autotune" ]; then
        AUTOTUNE="$GPU_BUILD_DIR/autotune"
        AUTOTUNE_FROM="built into $GPU_BUILD_DIR (no usable cuda backend)"
    fi
fi
t1=$(now)
if [ -z "$AUTOTUNE" ] || [ ! -x "$AUTOTUNE" ]; then
    log "ERROR: no autotune binary (see $BUILDLOG); autotune steps are skipped"
    step_record build status=failed "t0=$t0" "t1=$t1" "log=build.log"
    AUTOTUNE=
else
    log "autotune: $AUTOTUNE ($AUTOTUNE_FROM)"
    step_record build status=ok "t0=$t0" "t1=$t1" "binary=$AUTOTUNE" "from=$AUTOTUNE_FROM" "log=build.log"
    logged "$ENVLOG" "$AUTOTUNE" version || true
fi
# the build folder whose ctest runs: the one the binary came from
CTEST_DIR=
CTEST_WHY="no ctest folder next to the autotune binary"
if [ -n "$AUTOTUNE" ] && [ -f "$(dirname "$AUTOTUNE")/CTestTestfile.cmake" ]; then
    CTEST_DIR=$(dirname "$AUTOTUNE")
    # a build folder configured on another machine names test binaries by that machine's paths
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$CTEST_DIR/CMakeCache.txt" 2> /dev/null || true)
    if [ -n "$home" ] && [ "$home" != "$ROOT" ]; then
        CTEST_WHY="$CTEST_DIR was configured for '$home', not '$ROOT' (FORCE_BUILD=1 builds here)"
        CTEST_DIR=
    fi
fi

# ---- does autotune see a CUDA device? ----------------------------------------------------
AT_CUDA=0
AT_CUDA_WHY="no autotune binary"
if [ -n "$AUTOTUNE" ]; then
    logged "$ENVLOG" "$AUTOTUNE" devices || true
    "$AUTOTUNE" devices --json > "$OUTDIR/devices.json" 2> "$OUTDIR/devices.stderr.log" || true
    logged "$ENVLOG" cat "$OUTDIR/devices.json" || true
    AT_CUDA_WHY=$("$PYTHON" - "$OUTDIR/devices.json" << 'EOF' || echo "cannot read devices.json"
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("unreadable 'autotune devices --json': %s" % e); sys.exit(0)
for b in d.get("backends", []):
    if b.get("name") == "cuda":
        if b.get("available") and b.get("devices"):
            print("ok: %s" % b["devices"][0].get("name")); sys.exit(0)
        print(b.get("why") or "cuda available but no device"); sys.exit(0)
print("no cuda backend listed")
EOF
)
    case "$AT_CUDA_WHY" in ok:*) AT_CUDA=1 ;; esac
fi
if [ "$AT_CUDA" = 1 ]; then
    MODE=gpu
    MODE_NOTE="autotune cuda device: ${AT_CUDA_WHY#ok: }"
elif [ "$HAVE_SMI" = 1 ]; then
    MODE=gpu-no-autotune
    MODE_NOTE="GPU present (nvidia-smi) but autotune's cuda backend is unavailable: $AT_CUDA_WHY; autotune device steps skipped"
else
    MODE=no-gpu
    MODE_NOTE="no GPU: device steps skipped (nvidia-smi: $([ "$HAVE_SMI" = 1 ] && echo ok || echo 'missing or failing'); autotune cuda: $AT_CUDA_WHY)"
fi
step_record mode "mode=$MODE" "note=$MODE_NOTE" "have_smi=$HAVE_SMI" "at_cuda=$AT_CUDA"
log "mode: $MODE — $MODE_NOTE"

# ---- compile-only (NVRTC, no device): when autotune cannot run on the GPU ----------------
if [ "$AT_CUDA" != 1 ] && [ -n "$AUTOTUNE" ] && ! skipped compile; then
    cmd=("$AUTOTUNE" space gemm --backend cuda --arch "$ARCH" --compile --limit 20 --json)
    log "compile-only: $(quote "${cmd[@]}")"
    t0=$(now); rc=0
    { printf '$ %s\n' "$(quote "${cmd[@]}")"; } > "$OUTDIR/compile.log"
    timeout --signal=TERM --kill-after=10 300 "${cmd[@]}" > "$OUTDIR/compile.json" 2>> "$OUTDIR/compile.log" || rc=$?
    t1=$(now)
    cat "$OUTDIR/compile.json" >> "$OUTDIR/compile.log"
    printf '# rc=%s wall=%ss\n' "$rc" "$(elapsed "$t0" "$t1")" >> "$OUTDIR/compile.log"
    step_record compile status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" \
        "stdout=compile.json" "log=compile.log"
    log "compile-only: rc=$rc"
    # the attention template for f16 on sm_90a, at the largest head dim of ATTN_SHAPES' first
    cmd=("$AUTOTUNE" space attention --backend cuda --arch "$ARCH" --dtype "$ATTN_DTYPE"
         --heads 32 --seq 4096 --head-dim 128 --compile --limit 10 --json)
    log "compile-only (attention): $(quote "${cmd[@]}")"
    t0=$(now); rc=0
    { printf '$ %s\n' "$(quote "${cmd[@]}")"; } > "$OUTDIR/compile-attention.log"
    timeout --signal=TERM --kill-after=10 300 "${cmd[@]}" > "$OUTDIR/compile-attention.json" 2>> "$OUTDIR/compile-attention.log" || rc=$?
    t1=$(now)
    cat "$OUTDIR/compile-attention.json" >> "$OUTDIR/compile-attention.log"
    printf '# rc=%s wall=%ss\n' "$rc" "$(elapsed "$t0" "$t1")" >> "$OUTDIR/compile-attention.log"
    step_record compile_attention status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" \
        "stdout=compile-attention.json" "log=compile-attention.log"
    log "compile-only (attention): rc=$rc"
fi

# ---- time model: every step's limit, and when the run ends at worst ----------------------
time_model() {
    local t=$SECONDS
    # the worst case, cut at TIME_LIMIT_S as every step's timeout is
    by() { if [ "$1" -le "$TIME_LIMIT_S" ]; then echo "$1"; else echo "$TIME_LIMIT_S (cut; ${1} uncut)"; fi; }
    {
        printf '%-12s %-50s %s\n' step limit "ends by (s since start, worst case)"
        t=$((t + PREFLIGHT_S)); printf '%-12s %-50s %s\n' preflight "${PREFLIGHT_S}s" "$(by "$t")"
        t=$((t + SMOKE_S)); printf '%-12s %-50s %s\n' smoke "${SMOKE_S}s ($SMOKE_TEMPLATES on $SMOKE_SHAPES)" "$(by "$t")"
        t=$((t + PYTORCH_S)); printf '%-12s %-50s %s\n' pytorch "${PYTORCH_S}s (pytest test_torch.py)" "$(by "$t")"
        t=$((t + CUBLAS_S)); printf '%-12s %-50s %s\n' cublas "${CUBLAS_S}s (torch.matmul, every shape)" "$(by "$t")"
        [ "$t" -lt "$TUNE_DEADLINE_S" ] && t=$TUNE_DEADLINE_S
        t=$((t + TUNE_RUN_TIMEOUT_S + 15))
        printf '%-12s %-50s %s\n' tune "starts until ${TUNE_DEADLINE_S}s, each ${TUNE_RUN_TIMEOUT_S}s" "$(by "$t")"
        t=$((t + SDPA_S)); printf '%-12s %-50s %s\n' sdpa "${SDPA_S}s" "$(by "$t")"
        [ "$t" -lt "$ATTN_DEADLINE_S" ] && t=$ATTN_DEADLINE_S
        t=$((t + ATTN_RUN_TIMEOUT_S + 15))
        printf '%-12s %-50s %s\n' attention "starts until ${ATTN_DEADLINE_S}s, each ${ATTN_RUN_TIMEOUT_S}s" "$(by "$t")"
        [ "$t" -lt "$CORRECT_DEADLINE_S" ] && t=$CORRECT_DEADLINE_S
        t=$((t + CORRECT_TIMEOUT_S + 10))
        printf '%-12s %-50s %s\n' correctness "starts until ${CORRECT_DEADLINE_S}s, each ${CORRECT_TIMEOUT_S}s" "$(by "$t")"
        printf '%-12s %-50s %s\n' 'every step' "cut to end by TIME_LIMIT_S" "$TIME_LIMIT_S"
        printf '%-12s %-50s %s\n' summary "summarize.py, db export, pack" "$((TIME_LIMIT_S + 15))"
    } > "$OUTDIR/time-model.txt"
    sed 's/^/    /' "$OUTDIR/time-model.txt" | tee -a "$OUTDIR/run.log" >&2
}
log "time model (each step's limit; a deadline cuts a step, what it finished is kept):"
time_model
if [ "$REHEARSE" = 1 ]; then
    skip_note "rehearsal: stopped before the first device call (preflight)"
    step_record mode "mode=rehearsal" "note=rehearsal: stopped before the first device call; $MODE_NOTE" \
        "have_smi=$HAVE_SMI" "at_cuda=$AT_CUDA"
    finish_run
    log "rehearsal done in ${SECONDS}s"
    exit 0
fi
# the seconds of a step's limit, cut to end before TIME_LIMIT_S (at least 1)
cap() {
    local want=$1 left=$((TIME_LIMIT_S - SECONDS))
    [ "$left" -lt "$want" ] && want=$left
    [ "$want" -lt 1 ] && want=1
    echo "$want"
}

# ---- 1. preflight: clocks, the devices autotune sees, the NVRTC it loads ------------------
if [ "$HAVE_SMI" = 1 ]; then
    t0=$(now)
    timeout "$(cap "$PREFLIGHT_S")" nvidia-smi \
        --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,memory.used,memory.total \
        --format=csv > "$OUTDIR/preflight.txt" 2>&1 || true
    # which driver and NVRTC autotune loaded (devices: "CUDA: <path>; nvrtc X.Y: <path>")
    "$PYTHON" - "$OUTDIR/devices.json" >> "$OUTDIR/preflight.txt" 2>&1 << 'EOF' || true
import json, sys
for b in json.load(open(sys.argv[1])).get("backends", []):
    if b.get("name") == "cuda":
        print("autotune cuda:", "available" if b.get("available") else "unavailable", "-", b.get("why", ""))
EOF
    t1=$(now)
    step_record preflight status=ran "t0=$t0" "t1=$t1" "log=preflight.txt"
    log "preflight: $(tr '\n' ' ' < "$OUTDIR/preflight.txt" | cut -c1-400)"
fi

# ---- 2. smoke test: each tensor-core template on two shapes, within SMOKE_S ---------------
# bf16 on every shape, f16 on the first; a template that fails here is not used for the rest:
# when gemm_wgmma fails and gemm_mma passes, f16/bf16 go through gemm_mma (GEMM_TEMPLATE).
smoke_case() { # template dtype MxNxK timeout
    local tp=$1 d=$2 s=$3 tmo=$4 m n k name rc=0 t0 t1
    IFS=x read -r m n k <<< "$s"
    name="smoke_${tp}_${d}_${s}"
    mkdir -p "$WORK/smoke-db/$name"
    local cmd=("$AUTOTUNE" gemm --backend cuda --template "$tp" --dtype "$d" --m "$m" --n "$n" --k "$k"
        --budget 2 --db "$WORK/smoke-db/$name" --json)
    t0=$(now)
    timeout --signal=TERM --kill-after=5 "$tmo" "${cmd[@]}" > "$OUTDIR/smoke/$name.json" \
        2> "$OUTDIR/smoke/$name.stderr.log" || rc=$?
    t1=$(now)
    step_record "$name" status=ran kind=smoke "template=$tp" "dtype=$d" "shape=$s" "rc=$rc" "t0=$t0" \
        "t1=$t1" "timeout=$tmo" "cmd=$(quote "${cmd[@]}")" "stdout=smoke/$name.json" \
        "stderr=smoke/$name.stderr.log"
}
smoke_ok() { # template: 0 if its cases ended with a checked, measured best (one cut by the
    # smoke's deadline, rc 124/137, is no verdict: it fails the template only when none passed)
    "$PYTHON" - "$OUTDIR" "$1" << 'EOF'
import glob, json, os, sys
out, tp = sys.argv[1], sys.argv[2]
cases = glob.glob(os.path.join(out, "smoke", "smoke_%s_*.json" % tp))
def good(p):
    try:
        j = json.load(open(p))
    except Exception:
        return False
    b = j.get("best") or {}
    return b.get("max_rel_error") is not None and (j.get("candidates") or {}).get("measured", 0) > 0
def rc(p):
    env = os.path.join(out, "steps", os.path.basename(p)[:-5] + ".env")
    for line in open(env) if os.path.exists(env) else []:
        if line.startswith("rc="):
            return line[3:].strip()
    return ""
ok = [p for p in cases if good(p)]
bad = [p for p in cases if not good(p) and rc(p) not in ("124", "137")]
sys.exit(0 if ok and not bad else 1)
EOF
}
if [ "$AT_CUDA" = 1 ] && ! skipped smoke; then
    mkdir -p "$OUTDIR/smoke"
    end=$((SECONDS + SMOKE_S))
    log "smoke: $SMOKE_TEMPLATES on $SMOKE_SHAPES (bf16; f16 on the first), until ${end}s"
    first=1
    for s in $SMOKE_SHAPES; do
        for tp in $SMOKE_TEMPLATES; do
            dts="bf16"
            [ "$first" = 1 ] && dts="bf16 f16"
            for d in $dts; do
                left=$((end - SECONDS))
                if [ "$left" -lt 3 ]; then
                    skip_note "smoke $tp $d $s (SMOKE_S=$SMOKE_S passed)"
                    continue
                fi
                while [ "$(jobs -rp | wc -l)" -ge 4 ]; do wait -n || true; done
                smoke_case "$tp" "$d" "$s" "$(cap "$left")" &
            done
        done
        first=0
    done
    wait || true
    verdict=""
    for tp in $SMOKE_TEMPLATES; do
        if smoke_ok "$tp"; then verdict+="$tp=ok "; else verdict+="$tp=FAILED "; fi
    done
    if [ -z "$GEMM_TEMPLATE" ] && [[ " $verdict " == *" gemm_wgmma=FAILED "* ]] &&
        [[ " $verdict " == *" gemm_mma=ok "* ]]; then
        GEMM_TEMPLATE=gemm_mma
        log "smoke: gemm_wgmma failed its check; f16/bf16 use --template gemm_mma from here on"
    fi
    step_record smoke status=ran "verdict=${verdict% }" "gemm_template=${GEMM_TEMPLATE:-default}"
    for f in "$OUTDIR"/smoke/*.json; do
        [ -e "$f" ] || continue
        printf '== %s rc=%s\n' "$(basename "$f" .json)" "$(sed -n 's/^rc=//p' "$STEPS/$(basename "$f" .json).env")"
        head -c 600 "$f"
        echo
        tail -3 "${f%.json}.stderr.log"
    done > "$OUTDIR/smoke.log" 2>&1
    log "smoke: ${verdict% } (f16/bf16 template: ${GEMM_TEMPLATE:-default, the library chooses})"
fi
# --template for the f16/bf16 runs (TARGS), when one is forced
targs() {
    TARGS=()
    case "$1" in f16 | bf16) [ -n "$GEMM_TEMPLATE" ] && TARGS=(--template "$GEMM_TEMPLATE") ;; esac
    return 0
}
TUNE_DB="$OUTDIR/tune.db"
rm -rf "$TUNE_DB"
mkdir -p "$TUNE_DB"

# ---- 3. pytorch: autotune.torch.matmul on CUDA tensors (python/tests/test_torch.py) -------
# the package's Python files over the library built next to the binary, with the machine's
# PyTorch: cheap, and the first sign that the library works inside PyTorch
LIBAT="$(dirname "${AUTOTUNE:-.}")/libautotune.so.0"
if [ "$AT_CUDA" = 1 ] && ! skipped pytorch && [ -f "$LIBAT" ]; then
    rm -rf "$WORK/pypkg" && mkdir -p "$WORK/pypkg/autotune/lib"
    cp "$ROOT"/python/autotune/*.py "$WORK/pypkg/autotune/"
    cp "$LIBAT" "$WORK/pypkg/autotune/lib/"
    cmd=("$PYTHON" -m pytest -q -p no:cacheprovider "$ROOT/python/tests/test_torch.py")
    log "pytorch: $(quote "${cmd[@]}")"
    t0=$(now); rc=0
    PYTHONPATH="$WORK/pypkg" timeout --signal=TERM --kill-after=10 "$(cap "$PYTORCH_S")" "${cmd[@]}" \
        > "$OUTDIR/pytorch.log" 2>&1 || rc=$?
    t1=$(now)
    step_record pytorch status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" "log=pytorch.log"
    log "pytorch: rc=$rc ($(tail -1 "$OUTDIR/pytorch.log"))"
elif [ "$AT_CUDA" = 1 ] && ! skipped pytorch; then
    step_record pytorch status=none "note=no $LIBAT"
    skip_note "pytorch: no $LIBAT next to the binary"
fi

# ---- 4. cuBLAS through torch.matmul (before tuning: short, and never squeezed out) -------
if [ "$HAVE_SMI" = 1 ] && ! skipped cublas; then
    left=$((TIME_LIMIT_S - SECONDS - 20))
    [ "$left" -gt "$CUBLAS_S" ] && left=$CUBLAS_S
    [ "$left" -lt 20 ] && left=20
    # shellcheck disable=SC2206  # TORCH_ARGS is split on purpose
    cmd=("$PYTHON" "$HERE/torch_bench.py" --dtypes "$DTYPES" --shapes "$SHAPES" --deadline-s $((left - 15)) $TORCH_ARGS)
    log "cublas: $(quote "${cmd[@]}") (timeout ${left}s)"
    { printf '$ %s\n' "$(quote "${cmd[@]}")"; } > "$OUTDIR/cublas.log"
    t0=$(now); rc=0
    timeout --signal=TERM --kill-after=10 "$left" "${cmd[@]}" > "$OUTDIR/cublas.jsonl" 2>> "$OUTDIR/cublas.log" || rc=$?
    t1=$(now)
    cat "$OUTDIR/cublas.jsonl" >> "$OUTDIR/cublas.log"
    printf '# rc=%s wall=%ss\n' "$rc" "$(elapsed "$t0" "$t1")" >> "$OUTDIR/cublas.log"
    step_record cublas status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" \
        "stdout=cublas.jsonl" "log=cublas.log"
    log "cublas: rc=$rc, wall $(elapsed "$t0" "$t1") s"
else
    step_record cublas status=skipped "note=$([ "$HAVE_SMI" = 1 ] && echo 'SKIP' || echo 'no GPU (nvidia-smi)')"
    [ "$HAVE_SMI" = 1 ] || skip_note "cublas (torch.matmul): no GPU"
fi

# ---- 5. GEMM tuning: bf16 8192^3 and the LLM shapes, then f16, then f32 -----------------
if [ "$AT_CUDA" = 1 ] && ! skipped tune; then
    : > "$OUTDIR/tune.log"
    # priority: bf16 8192^3, bf16 LLM shapes, then f16, then f32 (DTYPES/SHAPES order)
    for d in $DTYPES; do
        for s in $SHAPES; do
            IFS=x read -r m n k <<< "$s"
            name="tune_${d}_${s}"
            left=$((TIME_LIMIT_S - 10 - SECONDS))
            if [ "$SECONDS" -ge "$TUNE_DEADLINE_S" ] || [ "$left" -lt 15 ]; then
                step_record "$name" status=skipped kind=tune "dtype=$d" "shape=$s" \
                    "note=time budget: ${SECONDS}s passed (TUNE_DEADLINE_S=$TUNE_DEADLINE_S)"
                skip_note "tune $d $s (time budget: ${SECONDS}s passed, TUNE_DEADLINE_S=$TUNE_DEADLINE_S)"
                continue
            fi
            tmo=$TUNE_RUN_TIMEOUT_S
            [ "$left" -lt "$tmo" ] && tmo=$left
            targs "$d"
            cmd=("$AUTOTUNE" gemm --backend cuda --dtype "$d" "${TARGS[@]}" --m "$m" --n "$n" --k "$k"
                 --budget "$TUNE_BUDGET" --db "$TUNE_DB" --json)
            log "tune $d $s (timeout ${tmo}s): $(quote "${cmd[@]}")"
            t0=$(now); rc=0
            timeout --signal=TERM --kill-after=15 "$tmo" "${cmd[@]}" \
                > "$OUTDIR/tune/$name.json" 2> "$OUTDIR/tune/$name.stderr.log" || rc=$?
            t1=$(now)
            # every measurement of this problem (also what an interrupted run saved)
            "$AUTOTUNE" db show "gemm/$d/nn/${m}x${n}x${k}|" --db "$TUNE_DB" \
                > "$OUTDIR/tune/$name.db-show.log" 2>&1 || true
            step_record "$name" status=ran kind=tune "dtype=$d" "shape=$s" "rc=$rc" "t0=$t0" "t1=$t1" \
                "timeout=$tmo" "cmd=$(quote "${cmd[@]}")" "stdout=tune/$name.json" \
                "stderr=tune/$name.stderr.log" "dbshow=tune/$name.db-show.log"
            {
                printf '$ %s\n' "$(quote "${cmd[@]}")"
                cat "$OUTDIR/tune/$name.json" "$OUTDIR/tune/$name.stderr.log"
                printf '# rc=%s wall=%ss timeout=%ss\n\n' "$rc" "$(elapsed "$t0" "$t1")" "$tmo"
            } >> "$OUTDIR/tune.log"
            log "tune $d $s: rc=$rc, wall $(elapsed "$t0" "$t1") s"
        done
    done
elif [ "$AT_CUDA" != 1 ]; then
    skip_note "tuning: $MODE_NOTE"
fi

# ---- 6. PyTorch SDPA (flash) on the attention shapes --------------------------------------
if [ "$HAVE_SMI" = 1 ] && ! skipped sdpa; then
    left=$((TIME_LIMIT_S - SECONDS - 20))
    [ "$left" -gt "$SDPA_S" ] && left=$SDPA_S
    [ "$left" -lt 20 ] && left=20
    sdpa_cmd --deadline-s $((left - 15))
    log "sdpa: $(quote "${SDPA_CMD[@]}") (timeout ${left}s)"
    { printf '$ %s\n' "$(quote "${SDPA_CMD[@]}")"; } > "$OUTDIR/sdpa.log"
    t0=$(now); rc=0
    timeout --signal=TERM --kill-after=10 "$left" "${SDPA_CMD[@]}" > "$OUTDIR/sdpa.jsonl" 2>> "$OUTDIR/sdpa.log" || rc=$?
    t1=$(now)
    cat "$OUTDIR/sdpa.jsonl" >> "$OUTDIR/sdpa.log"
    printf '# rc=%s wall=%ss\n' "$rc" "$(elapsed "$t0" "$t1")" >> "$OUTDIR/sdpa.log"
    step_record sdpa status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "${SDPA_CMD[@]}")" \
        "stdout=sdpa.jsonl" "log=sdpa.log"
    log "sdpa: rc=$rc, wall $(elapsed "$t0" "$t1") s"
else
    step_record sdpa status=skipped "note=$([ "$HAVE_SMI" = 1 ] && echo 'SKIP' || echo 'no GPU (nvidia-smi)')"
    [ "$HAVE_SMI" = 1 ] || skip_note "sdpa (PyTorch attention): no GPU"
fi

# ---- 7. attention tuning (after the GEMM tuning, which is worth more) -------------------
if [ "$AT_CUDA" = 1 ] && ! skipped attention; then
    : > "$OUTDIR/attention.log"
    for spec in $ATTN_SHAPES; do
        attn_spec "$spec"
        name="attn_${ATTN_DTYPE}_${A_TAG}"
        left=$((TIME_LIMIT_S - 10 - SECONDS))
        if [ "$SECONDS" -ge "$ATTN_DEADLINE_S" ] || [ "$left" -lt 15 ]; then
            step_record "$name" status=skipped kind=attention "dtype=$ATTN_DTYPE" "spec=$spec" \
                "note=time budget: ${SECONDS}s passed (ATTN_DEADLINE_S=$ATTN_DEADLINE_S)"
            skip_note "attention $ATTN_DTYPE $spec (time budget: ${SECONDS}s passed, ATTN_DEADLINE_S=$ATTN_DEADLINE_S)"
            continue
        fi
        tmo=$ATTN_RUN_TIMEOUT_S
        [ "$left" -lt "$tmo" ] && tmo=$left
        attn_cmd
        log "attention $ATTN_DTYPE $spec (timeout ${tmo}s): $(quote "${A_CMD[@]}")"
        t0=$(now); rc=0
        timeout --signal=TERM --kill-after=15 "$tmo" "${A_CMD[@]}" \
            > "$OUTDIR/tune/$name.json" 2> "$OUTDIR/tune/$name.stderr.log" || rc=$?
        t1=$(now)
        "$AUTOTUNE" db show "$A_KEY|" --db "$TUNE_DB" > "$OUTDIR/tune/$name.db-show.log" 2>&1 || true
        step_record "$name" status=ran kind=attention "dtype=$ATTN_DTYPE" "spec=$spec" "rc=$rc" \
            "t0=$t0" "t1=$t1" "timeout=$tmo" "cmd=$(quote "${A_CMD[@]}")" \
            "stdout=tune/$name.json" "stderr=tune/$name.stderr.log" "dbshow=tune/$name.db-show.log"
        {
            printf '$ %s\n' "$(quote "${A_CMD[@]}")"
            cat "$OUTDIR/tune/$name.json" "$OUTDIR/tune/$name.stderr.log"
            printf '# rc=%s wall=%ss timeout=%ss\n\n' "$rc" "$(elapsed "$t0" "$t1")" "$tmo"
        } >> "$OUTDIR/attention.log"
        log "attention $ATTN_DTYPE $spec: rc=$rc, wall $(elapsed "$t0" "$t1") s"
    done
elif [ "$AT_CUDA" != 1 ]; then
    skip_note "attention tuning: $MODE_NOTE"
fi

# ---- 8. correctness: ctest -L gpu and the whole matrix (the smoke test checked first) ---
# (a) ctest -L gpu
if [ "$AT_CUDA" = 1 ] && ! skipped ctest; then
    GPU_TEST="$(dirname "$AUTOTUNE")/tests/test_splitk"
    if [ -z "$CTEST_DIR" ] && [ -x "$GPU_TEST" ]; then
        # a build carried from another source path: its gpu-labelled tests (split-K, then TMA
        # when built), run directly, one after the other within the step's 60 s
        TMA_TEST="$(dirname "$AUTOTUNE")/tests/test_tma"
        cmd=("$GPU_TEST")
        log "ctest: $CTEST_WHY; running the gpu tests directly: $GPU_TEST${TMA_TEST:+ (and $TMA_TEST when built)}"
        t0=$(now); rc=0
        timeout --signal=TERM --kill-after=10 "$(cap 30)" "${cmd[@]}" > "$OUTDIR/ctest.log" 2>&1 || rc=$?
        ntests=1
        if [ -x "$TMA_TEST" ]; then
            ntests=2
            rc2=0
            timeout --signal=TERM --kill-after=10 "$(cap 30)" "$TMA_TEST" >> "$OUTDIR/ctest.log" 2>&1 || rc2=$?
            [ "$rc" = 0 ] && rc=$rc2
        fi
        t1=$(now)
        step_record ctest status=ran "rc=$rc" "tests=$ntests" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" "log=ctest.log"
        log "ctest (direct): rc=$rc"
    elif [ -z "$CTEST_DIR" ]; then
        step_record ctest status=none "note=$CTEST_WHY"
        skip_note "ctest -L gpu: $CTEST_WHY"
    else
        n=$(cd "$CTEST_DIR" && ctest -N -L gpu 2> /dev/null | sed -n 's/^Total Tests: //p')
        if [ "${n:-0}" = 0 ]; then
            step_record ctest status=none "note=no ctest tests labelled gpu in $CTEST_DIR"
            log "ctest: no tests labelled gpu in $CTEST_DIR (recorded)"
            { echo "no ctest tests labelled gpu in $CTEST_DIR"; (cd "$CTEST_DIR" && ctest -N 2>&1) || true; } > "$OUTDIR/ctest.log"
        else
            cmd=(ctest --test-dir "$CTEST_DIR" -L gpu --output-on-failure --timeout 50)
            log "ctest: $(quote "${cmd[@]}") ($n tests)"
            : > "$OUTDIR/ctest.log"
            t0=$(now); rc=0
            timeout --signal=TERM --kill-after=10 "$(cap 60)" "${cmd[@]}" >> "$OUTDIR/ctest.log" 2>&1 || rc=$?
            t1=$(now)
            step_record ctest status=ran "rc=$rc" "tests=$n" "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" "log=ctest.log"
            log "ctest: rc=$rc"
        fi
    fi
elif [ "$AT_CUDA" != 1 ]; then
    step_record ctest status=skipped "note=$MODE_NOTE"
fi

# (b) autotune gemm --backend cuda on awkward shapes, every dtype and layout
CORRECT_DB="$WORK/correct-db"
correct_case() {   # dtype layout MxNxK
    local d=$1 l=$2 s=$3 m n k name rc=0 t0 t1 budget_left
    IFS=x read -r m n k <<< "$s"
    name="correct_${d}_${l}_${s}"
    budget_left=$((TIME_LIMIT_S - SECONDS))
    [ "$budget_left" -lt "$CORRECT_TIMEOUT_S" ] || budget_left=$CORRECT_TIMEOUT_S
    local TARGS
    targs "$d"
    local cmd=("$AUTOTUNE" gemm --backend cuda --dtype "$d" "${TARGS[@]}" --layout "$l" --m "$m" --n "$n"
               --k "$k" --budget "$CORRECT_BUDGET" --db "$CORRECT_DB/$name" --json)
    mkdir -p "$CORRECT_DB/$name"
    t0=$(now)
    timeout --signal=TERM --kill-after=10 "$budget_left" "${cmd[@]}" \
        > "$OUTDIR/correctness/$name.json" 2> "$OUTDIR/correctness/$name.stderr.log" || rc=$?
    t1=$(now)
    step_record "$name" status=ran kind=correctness "dtype=$d" "layout=$l" "shape=$s" "rc=$rc" \
        "t0=$t0" "t1=$t1" "timeout=$budget_left" "cmd=$(quote "${cmd[@]}")" \
        "stdout=correctness/$name.json" "stderr=correctness/$name.stderr.log"
    rm -rf "${CORRECT_DB:?}/$name"
}
if [ "$AT_CUDA" = 1 ] && ! skipped correctness; then
    log "correctness: $CORRECT_DTYPES x $CORRECT_LAYOUTS x $CORRECT_SHAPES, budget $CORRECT_BUDGET, $CORRECT_JOBS at a time"
    mkdir -p "$CORRECT_DB"
    ncase=0
    # shapes outermost, so a deadline cuts whole shapes, never a dtype
    for s in $CORRECT_SHAPES; do
        for l in $CORRECT_LAYOUTS; do
            for d in $CORRECT_DTYPES; do
                name="correct_${d}_${l}_${s}"
                if [ "$SECONDS" -ge "$CORRECT_DEADLINE_S" ]; then
                    step_record "$name" status=skipped kind=correctness "dtype=$d" "layout=$l" "shape=$s" \
                        "note=time budget: ${CORRECT_DEADLINE_S}s passed"
                    skip_note "correctness $d $l $s (CORRECT_DEADLINE_S=$CORRECT_DEADLINE_S passed)"
                    continue
                fi
                while [ "$(jobs -rp | wc -l)" -ge "$CORRECT_JOBS" ]; do wait -n || true; done
                correct_case "$d" "$l" "$s" &
                ncase=$((ncase + 1))
            done
        done
    done
    wait || true
    # correctness.log: every case's command, output and exit status, in order
    : > "$OUTDIR/correctness.log"
    for s in $CORRECT_SHAPES; do for l in $CORRECT_LAYOUTS; do for d in $CORRECT_DTYPES; do
        name="correct_${d}_${l}_${s}"
        [ -f "$OUTDIR/correctness/$name.json" ] || continue
        {
            printf '$ %s\n' "$(sed -n 's/^cmd=//p' "$STEPS/$name.env")"
            cat "$OUTDIR/correctness/$name.json" "$OUTDIR/correctness/$name.stderr.log"
            printf '# rc=%s wall=%ss\n\n' "$(sed -n 's/^rc=//p' "$STEPS/$name.env")" \
                "$(elapsed "$(sed -n 's/^t0=//p' "$STEPS/$name.env")" "$(sed -n 's/^t1=//p' "$STEPS/$name.env")")"
        } >> "$OUTDIR/correctness.log"
    done; done; done
    log "correctness: $ncase cases run; $(grep -c '^# rc=0 ' "$OUTDIR/correctness.log" || true) exited 0"
elif [ "$AT_CUDA" != 1 ]; then
    skip_note "correctness: $MODE_NOTE"
fi

# ---- --record-space: exhaustive CUDA spaces as Kernel Tuner cache files -------------------
if [ "$RECORD" = 1 ] && [ "$AT_CUDA" = 1 ]; then
    RECORD_DB="$OUTDIR/record.db"
    mkdir -p "$RECORD_DB" "$OUTDIR/spaces"
    for spec in $RECORD_SHAPES; do
        d=${spec%%:*}
        s=${spec#*:}
        IFS=x read -r m n k <<< "$s"
        name="record_${d}_${s}"
        cmd=("$AUTOTUNE" gemm --backend cuda --dtype "$d" --m "$m" --n "$n" --k "$k"
             --strategy exhaustive --db "$RECORD_DB" --json)
        log "record $d $s (timeout ${RECORD_TIMEOUT_S}s): $(quote "${cmd[@]}")"
        t0=$(now); rc=0
        timeout --signal=TERM --kill-after=15 "$RECORD_TIMEOUT_S" "${cmd[@]}" \
            > "$OUTDIR/spaces/$name.json" 2> "$OUTDIR/spaces/$name.stderr.log" || rc=$?
        t1=$(now)
        # Exported also when stopped early: the file then holds part of the space.
        out="$OUTDIR/spaces/cuda-gemm-$d-$s.json"
        erc=0
        logged "$OUTDIR/record.log" "$AUTOTUNE" db export --kernel-tuner \
            --problem "gemm/$d/nn/${m}x${n}x${k}" --db "$RECORD_DB" --output "$out" || erc=$?
        [ "$erc" = 0 ] && gzip -9f "$out"
        step_record "$name" status=ran kind=record "dtype=$d" "shape=$s" "rc=$rc" "export_rc=$erc" \
            "t0=$t0" "t1=$t1" "cmd=$(quote "${cmd[@]}")" "stdout=spaces/$name.json"
        log "record $d $s: rc=$rc ($([ "$rc" = 0 ] && echo complete || echo 'incomplete: stopped or failed')), export rc=$erc, wall $(elapsed "$t0" "$t1") s"
    done
elif [ "$RECORD" = 1 ]; then
    skip_note "record-space: $MODE_NOTE"
fi

# ---- the tuned database as a bundle (docs/shipping.md): what share/autotune/db ships for this GPU
if [ -d "$TUNE_DB" ]; then
    logged "$OUTDIR/export.log" "$AUTOTUNE" db export "$OUTDIR/tune.jsonl.gz" --db "$TUNE_DB" ||
        log "db export of $TUNE_DB failed (see $OUTDIR/export.log)"
fi

# ---- 9. summary and archive ---------------------------------------------------------------
finish_run
[ -f "$OUTDIR/summary.txt" ] && cat "$OUTDIR/summary.txt"
log "done in ${SECONDS}s"
exit 0
