#!/usr/bin/env bash
# Side-by-side SGEMM benchmark on the PoCL (OpenCL-on-CPU) device:
#   autotune (tuned best + tuning wall time), CLBlast with shipped parameters,
#   CLBlast's own tuner (clblast_tuner_xgemm), and OpenBLAS natively as the CPU ceiling.
# Problem: C = A*B, f32, row-major, nn, alpha=1, beta=0, m=n=k=S for S in $SIZES.
#
# Usage: benchmarks/pocl/run.sh OUTDIR
# Environment (all optional):
#   SIZES="1024 2048"            problem sizes
#   AUTOTUNE=build/autotune      autotune binary (relative paths are relative to the repo root)
#   AUTOTUNE_FLAGS=""            extra flags for `autotune gemm` (e.g. "--backend opencl --budget 120s")
#   CL_PLATFORM=0 CL_DEVICE=0    OpenCL platform/device index (PoCL on this machine)
#   CLBLAST_TUNER=clblast_tuner_xgemm
#   CLBLAST_TUNER_FRACTION=F     tuner's -fraction for every size (it explores 1/F of each of
#                                its 4 spaces); default per size: S^3/2^20 (1024 -> 1024,
#                                2048 -> 8192), at least 1
#   CLBLAST_TUNER_RUNS=1         tuner's -runs (timed runs per config after one warm-up)
#   CLBLAST_TUNER_TIMEOUT=900    seconds; a tuner run past it is stopped and its partial
#                                stdout table is parsed (marked "timeout" in the summary).
#                                At 2048 on PoCL the tuner's 4 reference-kernel runs alone
#                                take ~4 x 2 x 110 s here, so 2048 normally ends this way.
#   PEERS_MIN_SECONDS=1 PEERS_MAX_RUNS=10   timing rule of peers.c
#   SKIP="..."                   space-separated steps to skip: autotune peers clblast_tuner
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)

SIZES=${SIZES:-"1024 2048"}
AUTOTUNE=${AUTOTUNE:-build/autotune}
case "$AUTOTUNE" in /*) ;; *) AUTOTUNE="$ROOT/$AUTOTUNE" ;; esac
AUTOTUNE_FLAGS=${AUTOTUNE_FLAGS:-}
CL_PLATFORM=${CL_PLATFORM:-0}
CL_DEVICE=${CL_DEVICE:-0}
CLBLAST_TUNER=${CLBLAST_TUNER:-clblast_tuner_xgemm}
CLBLAST_TUNER_FRACTION=${CLBLAST_TUNER_FRACTION:-}
CLBLAST_TUNER_RUNS=${CLBLAST_TUNER_RUNS:-1}
CLBLAST_TUNER_TIMEOUT=${CLBLAST_TUNER_TIMEOUT:-900}
PEERS_MIN_SECONDS=${PEERS_MIN_SECONDS:-1}
PEERS_MAX_RUNS=${PEERS_MAX_RUNS:-10}
SKIP=${SKIP:-}
CC=${CC:-cc}

# The peers come from Debian: install what is missing (as root, or with sudo).
PEER_PACKAGES="libclblast-dev clblast-utils libopenblas-dev pocl-opencl-icd ocl-icd-opencl-dev clinfo"
# shellcheck disable=SC2086  # the package list is split on purpose
if ! dpkg-query -W $PEER_PACKAGES >/dev/null 2>&1; then
    SUDO=
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $PEER_PACKAGES >/dev/null
fi

STEPS="$OUTDIR/steps"
mkdir -p "$STEPS"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/autotune-pocl-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUTDIR/run.log" >&2; }
now() { date +%s.%N; }
skipped() { case " $SKIP " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Quote a command for the record (summary shows it exactly as run).
quote() { local out="" a; for a in "$@"; do out+="$(printf '%q' "$a") "; done; printf '%s' "${out% }"; }
# step_record NAME key=value...  -> $STEPS/NAME.env (read by summarize.py)
step_record() {
    local name=$1; shift
    : > "$STEPS/$name.env"
    local kv
    for kv in "$@"; do printf '%s\n' "$kv" >> "$STEPS/$name.env"; done
}

# run_step NAME CMD...: runs a measured step with an empty PoCL kernel cache of its own (so no
# tool's time benefits from kernels another compiled), stdout to NAME.json, stderr to
# NAME.stderr.log, and records it; sets rc, t0, t1.
run_step() {
    local name=$1; shift
    export POCL_CACHE_DIR="$WORK/pocl-cache-$name"; mkdir -p "$POCL_CACHE_DIR"
    t0=$(now); rc=0
    "$@" > "$OUTDIR/$name.json" 2> "$OUTDIR/$name.stderr.log" || rc=$?
    t1=$(now)
    rm -rf "$POCL_CACHE_DIR"; unset POCL_CACHE_DIR
    step_record "$name" status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "$@")" \
        "stdout=$name.json" "stderr=$name.stderr.log"
}

# ---- environment -------------------------------------------------------------------------
log "output in $OUTDIR; sizes: $SIZES"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUTDIR/date.txt"
{ clinfo -l 2>&1 || echo "clinfo -l failed"; } > "$OUTDIR/clinfo-l.txt"
{ clinfo 2>&1 || true; } > "$OUTDIR/clinfo.txt"
{ lscpu 2>&1 || true; } > "$OUTDIR/lscpu.txt"
{ nproc; uptime; } > "$OUTDIR/load.txt" 2>&1 || true
{ dpkg-query -W -f='${Package} ${Version}\n' pocl-opencl-icd libpocl2 libclblast1 \
      libclblast-dev clblast-utils libopenblas0 libopenblas0-pthread 2>/dev/null || true; } \
    > "$OUTDIR/packages.txt"
{ git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown; } > "$OUTDIR/git-rev.txt"
{
    echo "SIZES=$SIZES"
    echo "AUTOTUNE=$AUTOTUNE"
    echo "AUTOTUNE_FLAGS=$AUTOTUNE_FLAGS"
    echo "CL_PLATFORM=$CL_PLATFORM CL_DEVICE=$CL_DEVICE"
    echo "CLBLAST_TUNER=$CLBLAST_TUNER CLBLAST_TUNER_FRACTION=${CLBLAST_TUNER_FRACTION:-default} CLBLAST_TUNER_RUNS=$CLBLAST_TUNER_RUNS CLBLAST_TUNER_TIMEOUT=$CLBLAST_TUNER_TIMEOUT"
    echo "PEERS_MIN_SECONDS=$PEERS_MIN_SECONDS PEERS_MAX_RUNS=$PEERS_MAX_RUNS"
    echo "OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
    echo "SKIP=$SKIP"
} > "$OUTDIR/settings.txt"

# ---- build peers.c -----------------------------------------------------------------------
PEERS="$OUTDIR/peers"
PEERS_OK=1
build_cmd=("$CC" -O2 -std=c11 -Wall "$HERE/peers.c" -o "$PEERS" -lclblast -lOpenCL -lopenblas -lm)
{ quote "${build_cmd[@]}"; echo; } > "$OUTDIR/peers-build.cmd"
if ! skipped peers; then
    log "building peers: $(quote "${build_cmd[@]}")"
    if ! "${build_cmd[@]}" > "$OUTDIR/peers-build.log" 2>&1; then
        PEERS_OK=0
        log "ERROR: building peers.c failed, see $OUTDIR/peers-build.log"
    fi
fi

# ---- per size ----------------------------------------------------------------------------
for S in $SIZES; do
    # fresh PoCL kernel cache per tool and size, so every tool pays its own compilations
    # (otherwise PoCL's on-disk cache from an earlier run makes tuning look faster)

    # (a) autotune
    name="autotune_$S"
    if skipped autotune; then
        step_record "$name" status=skipped
    elif [ ! -x "$AUTOTUNE" ]; then
        log "autotune: MISSING binary $AUTOTUNE (build it, or set AUTOTUNE=...); skipping it"
        step_record "$name" status=missing "binary=$AUTOTUNE"
    else
        db="$OUTDIR/$name.db"
        rm -rf "$db"; mkdir -p "$db"
        # shellcheck disable=SC2206  # AUTOTUNE_FLAGS is split on purpose
        cmd=("$AUTOTUNE" gemm --m "$S" --n "$S" --k "$S" --db "$db" --json $AUTOTUNE_FLAGS)
        log "autotune S=$S: $(quote "${cmd[@]}")"
        run_step "$name" "${cmd[@]}"
        log "autotune S=$S: rc=$rc, wall $(python3 -c "print(round($t1-$t0,1))") s"
    fi

    # (b)+(d) CLBlast shipped parameters and OpenBLAS
    name="peers_$S"
    if skipped peers; then
        step_record "$name" status=skipped
    elif [ "$PEERS_OK" != 1 ]; then
        step_record "$name" status=build_failed "stderr=peers-build.log"
    else
        cmd=("$PEERS" "$S" --platform "$CL_PLATFORM" --device "$CL_DEVICE"
             --min-seconds "$PEERS_MIN_SECONDS" --max-runs "$PEERS_MAX_RUNS")
        log "peers S=$S: $(quote "${cmd[@]}")"
        run_step "$name" "${cmd[@]}"
        log "peers S=$S: rc=$rc"
        sed 's/^/    /' "$OUTDIR/$name.stderr.log" >&2 || true
    fi

    # (c) CLBlast's tuner
    name="clblast_tuner_$S"
    if skipped clblast_tuner; then
        step_record "$name" status=skipped
    elif ! command -v "$CLBLAST_TUNER" > /dev/null 2>&1; then
        log "clblast tuner: MISSING ($CLBLAST_TUNER not found; Debian package clblast-utils)"
        step_record "$name" status=missing "binary=$CLBLAST_TUNER"
    else
        # default: the explored share shrinks with the cost of one kernel run (~S^3), so the
        # tuner takes a similar time at every size (~130 configs at 1024, ~16 at 2048)
        frac=${CLBLAST_TUNER_FRACTION:-$(( S * S * S / 1048576 ))}
        [ "$frac" = 0 ] && frac=1
        dir="$OUTDIR/$name"   # the tuner writes clblast_xgemm_*_32.json into its cwd
        rm -rf "$dir"; mkdir -p "$dir"
        cmd=("$CLBLAST_TUNER" -platform "$CL_PLATFORM" -device "$CL_DEVICE" -precision 32
             -m "$S" -n "$S" -k "$S" -alpha 1 -beta 0 -fraction "$frac" -runs "$CLBLAST_TUNER_RUNS")
        log "clblast tuner S=$S (timeout ${CLBLAST_TUNER_TIMEOUT}s): $(quote "${cmd[@]}")"
        TIMEV=(env)
        [ -x /usr/bin/time ] && TIMEV=(/usr/bin/time -v -o "$dir/time-v.txt")
        export POCL_CACHE_DIR="$WORK/pocl-cache-$name"; mkdir -p "$POCL_CACHE_DIR"
        t0=$(now); rc=0
        # stdbuf: line-buffered stdout, so a run stopped by the timeout leaves its table behind
        ( cd "$dir" && exec timeout --signal=TERM --kill-after=30 "$CLBLAST_TUNER_TIMEOUT" \
              "${TIMEV[@]}" stdbuf -oL -eL "${cmd[@]}" ) \
            > "$dir/stdout.log" 2> "$dir/stderr.log" || rc=$?
        t1=$(now)
        rm -rf "$POCL_CACHE_DIR"; unset POCL_CACHE_DIR
        step_record "$name" status=ran "rc=$rc" "t0=$t0" "t1=$t1" "fraction=$frac" \
            "runs=$CLBLAST_TUNER_RUNS" "timeout=$CLBLAST_TUNER_TIMEOUT" \
            "cmd=cd $name && $(quote "${cmd[@]}")" "stdout=$name/stdout.log" "stderr=$name/stderr.log"
        log "clblast tuner S=$S: rc=$rc, wall $(python3 -c "print(round($t1-$t0,1))") s"
    fi
done

# ---- summary -----------------------------------------------------------------------------
log "writing summary"
python3 "$HERE/summarize.py" "$OUTDIR" "$SIZES"
cat "$OUTDIR/summary.txt"
