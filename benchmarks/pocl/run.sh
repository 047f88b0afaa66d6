#!/usr/bin/env bash
# Side-by-side SGEMM benchmark on the PoCL (OpenCL-on-CPU) device:
#   autotune (tuned best + tuning wall time), CLBlast with shipped parameters,
#   OpenBLAS natively as the CPU ceiling (its best kernel for this CPU, forced: see below), and
#   optionally CLBlast's own tuner (clblast_tuner_xgemm; off by default).
# Problems: C = op(A)*op(B), f32, row-major, alpha=1, beta=0: m=n=k=S for S in $SIZES in every
# layout of $LAYOUTS, then $EXTRA (two LLM shapes by default); ~25 min with the defaults
# (18 tunes of autotune's default 60-s budget, plus the peers). The whole wall time is printed.
#
# Usage: benchmarks/pocl/run.sh OUTDIR
# Environment (all optional):
#   SIZES="512 1024 2048 4096"   square problem sizes
#   LAYOUTS="nn nt tn tt"        layouts of the square problems (nt: B stored N x K; tn: A K x M)
#   EXTRA="16x4096x4096:nt 512x4096x4096:nt"   more problems, MxNxK:LAYOUT (LLM linear layers:
#                                a batch of 16 or 512 tokens through a 4096 x 4096 weight stored
#                                out x in, as torch.nn.Linear keeps it)
#   PROBLEMS="..."               the whole list instead (MxNxK:LAYOUT ...)
#   OPENBLAS_CORETYPE            OpenBLAS kernel; default: SkylakeX when the CPU has AVX-512F,
#                                Haswell when it has AVX2 (OpenBLAS's own detection picks a slower
#                                kernel on a CPU whose name it does not know, e.g. a VM's generic
#                                "Intel Xeon Processor"); OPENBLAS_NUM_THREADS default: nproc
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
#   SKIP="clblast_tuner"         space-separated steps to skip: autotune peers clblast_tuner
#                                (default: the CLBlast tuner; SKIP="" runs it too, ~10 min a size)
set -euo pipefail
T_START=$(date +%s.%N)

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)

SIZES=${SIZES-"512 1024 2048 4096"}
LAYOUTS=${LAYOUTS:-"nn nt tn tt"}
EXTRA=${EXTRA-"16x4096x4096:nt 512x4096x4096:nt"}
if [ -z "${PROBLEMS:-}" ]; then
    PROBLEMS=""
    for S in $SIZES; do for L in $LAYOUTS; do PROBLEMS+="${S}x${S}x${S}:$L "; done; done
    PROBLEMS+="$EXTRA"
fi
PROBLEMS=$(echo $PROBLEMS) # one space between entries
for P in $PROBLEMS; do
    if ! [[ $P =~ ^[0-9]+x[0-9]+x[0-9]+:(nn|nt|tn|tt)$ ]]; then
        echo "$0: bad problem '$P' (MxNxK:LAYOUT, layout nn nt tn tt)" >&2
        exit 2
    fi
done
# OpenBLAS's best kernel for this CPU, forced (see the head of this file), on every core.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
        export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
        export OPENBLAS_CORETYPE=Haswell
    fi
fi
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$(nproc)}
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
SKIP=${SKIP-clblast_tuner}
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

# run_step NAME CACHE CMD...: runs a measured step with the PoCL kernel cache CACHE (autotune:
# an empty one of its own, so no tuning time benefits from kernels another step compiled; the
# peers share one, since only their kernel times are compared), stdout to NAME.json, stderr to
# NAME.stderr.log, and records it; sets rc, t0, t1.
run_step() {
    local name=$1 cache=$2; shift 2
    export POCL_CACHE_DIR="$WORK/pocl-cache-$cache"; mkdir -p "$POCL_CACHE_DIR"
    t0=$(now); rc=0
    "$@" > "$OUTDIR/$name.json" 2> "$OUTDIR/$name.stderr.log" || rc=$?
    t1=$(now)
    [ "$cache" = "$name" ] && rm -rf "$POCL_CACHE_DIR"
    unset POCL_CACHE_DIR
    step_record "$name" status=ran "rc=$rc" "t0=$t0" "t1=$t1" "cmd=$(quote "$@")" \
        "stdout=$name.json" "stderr=$name.stderr.log"
}

# ---- environment -------------------------------------------------------------------------
log "output in $OUTDIR; problems: $PROBLEMS"
log "OpenBLAS: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset (its own detection)}, OPENBLAS_NUM_THREADS=$OPENBLAS_NUM_THREADS"
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
    echo "PROBLEMS=$PROBLEMS"
    echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
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

# ---- per problem -------------------------------------------------------------------------
for P in $PROBLEMS; do
    dims=${P%%:*}; L=${P##*:}
    M=${dims%%x*}; rest=${dims#*x}; N=${rest%%x*}; K=${rest#*x}
    S="${dims}_$L"  # the steps' name suffix
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
        cmd=("$AUTOTUNE" gemm --m "$M" --n "$N" --k "$K" --layout "$L" --db "$db" --json
             $AUTOTUNE_FLAGS)
        log "autotune $P: $(quote "${cmd[@]}")"
        run_step "$name" "$name" "${cmd[@]}"
        best=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d['best']; print('%.1f GFLOP/s %s' % (b['gflops'], b['config']))" "$OUTDIR/$name.json" 2>/dev/null || echo "no result")
        log "autotune $P: rc=$rc, wall $(python3 -c "print(round($t1-$t0,1))") s, $best"
    fi

    # (b)+(d) CLBlast shipped parameters and OpenBLAS
    name="peers_$S"
    if skipped peers; then
        step_record "$name" status=skipped
    elif [ "$PEERS_OK" != 1 ]; then
        step_record "$name" status=build_failed "stderr=peers-build.log"
    else
        cmd=("$PEERS" "$M" --m "$M" --n "$N" --k "$K" --layout "$L" --platform "$CL_PLATFORM"
             --device "$CL_DEVICE" --min-seconds "$PEERS_MIN_SECONDS" --max-runs "$PEERS_MAX_RUNS")
        log "peers $P: $(quote "${cmd[@]}")"
        run_step "$name" peers "${cmd[@]}"
        log "peers $P: rc=$rc"
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
        frac=${CLBLAST_TUNER_FRACTION:-$(( M * N * K / 1073741824 ))}
        [ "$frac" = 0 ] && frac=1
        dir="$OUTDIR/$name"   # the tuner writes clblast_xgemm_*_32.json into its cwd
        rm -rf "$dir"; mkdir -p "$dir"
        cmd=("$CLBLAST_TUNER" -platform "$CL_PLATFORM" -device "$CL_DEVICE" -precision 32
             -m "$M" -n "$N" -k "$K" -alpha 1 -beta 0 -fraction "$frac" -runs "$CLBLAST_TUNER_RUNS")
        log "clblast tuner $P (timeout ${CLBLAST_TUNER_TIMEOUT}s): $(quote "${cmd[@]}")"
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
        log "clblast tuner $P: rc=$rc, wall $(python3 -c "print(round($t1-$t0,1))") s"
    fi
done

# ---- summary -----------------------------------------------------------------------------
wall=$(python3 -c "print(round($(now) - $T_START, 1))")
echo "$wall" > "$OUTDIR/wall.txt"
log "writing summary"
python3 "$HERE/summarize.py" "$OUTDIR" "$PROBLEMS"
cat "$OUTDIR/summary.txt"
log "whole run: $wall s wall"
