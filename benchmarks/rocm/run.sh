#!/usr/bin/env bash
# ROCm benchmark (for one AMD Instinct GPU, MI300X-class; never run by the authors, who had no
# AMD GPU): HIP correctness over awkward shapes and every dtype/layout, tuning of bf16/f16/f32
# GEMM at LLM shapes, and torch.matmul on ROCm (hipBLASLt) on the same shapes in the same run;
# raw logs and a summary of the ratios in OUTDIR. Without an AMD GPU it still builds autotune,
# runs the compile-only check (hipRTC, no device), says so in the summary, and exits 0.
#
# Usage: benchmarks/rocm/run.sh OUTDIR
# Environment (all optional):
#   AUTOTUNE=path        use this autotune binary (else BUILD_DIR/autotune, built if missing)
#   BUILD_DIR=build-rocm where to configure and build (needs cmake, a C compiler, liblmdb,
#                        libyaml, libmsgpack-c development files; no ROCm headers)
#   DTYPES="bf16 f16 f32"
#   SHAPES="8192x8192x8192 4096x4096x4096 8192x28672x8192 16x8192x8192 4096x1024x14336"
#   TUNE_BUDGET=60       --budget of each tuning run (N evaluations or Ns)
#   TUNE_TIMEOUT_S=300   a tuning run is stopped (SIGTERM: it saves what it measured) after it
#   CORRECT_SHAPES="1x1x1 7x5x3 127x129x65 1000x999x77 16x8192x128 1000x1000x72"
#                        (gemm_mfma: odd strides take the 16-bit path, strides that are
#                        multiples of 8 the 16-byte one; 1000x1000x72 is that with edges)
#   CORRECT_BUDGET=4     candidates checked per correctness case (each against the reference)
#   FLUSH_MB=512         cache flush of torch_bench.py (MI300X: 256 MB Infinity Cache)
#   ARCH=                target of the compile-only check (default: the device's gcnArchName,
#                        else gfx90a)
#   PYTHON=python3
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1" && OUTDIR=$(cd "$1" && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-rocm}
DTYPES=${DTYPES:-"bf16 f16 f32"}
SHAPES=${SHAPES:-"8192x8192x8192 4096x4096x4096 8192x28672x8192 16x8192x8192 4096x1024x14336"}
TUNE_BUDGET=${TUNE_BUDGET:-60}
TUNE_TIMEOUT_S=${TUNE_TIMEOUT_S:-300}
CORRECT_SHAPES=${CORRECT_SHAPES:-"1x1x1 7x5x3 127x129x65 1000x999x77 16x8192x128 1000x1000x72"}
CORRECT_BUDGET=${CORRECT_BUDGET:-4}
FLUSH_MB=${FLUSH_MB:-512}
PYTHON=${PYTHON:-python3}
log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" | tee -a "$OUTDIR/run.log" >&2; }

# ---- 1. environment -------------------------------------------------------------------------
{
    date -u; uname -a
    command -v rocm-smi >/dev/null && rocm-smi --showproductname --showdriverversion 2>&1
    # the cache sizes (L3: the Infinity Cache autotune assumes for the flush, docs/hip.md)
    command -v rocminfo >/dev/null && rocminfo 2>&1 | grep -E 'Marketing Name|gfx|Compute Unit|L[1-3]:' | sort -u
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "hip", torch.version.hip, "available", torch.cuda.is_available())' 2>&1
    git -C "$ROOT" rev-parse HEAD 2>&1
} > "$OUTDIR/env.txt"

# ---- 2. build -------------------------------------------------------------------------------
AUTOTUNE=${AUTOTUNE:-$BUILD_DIR/autotune}
if [ ! -x "$AUTOTUNE" ]; then
    log "building autotune into $BUILD_DIR"
    { cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DAT_BUILD_TESTS=OFF &&
      cmake --build "$BUILD_DIR" -j"$(nproc)"; } > "$OUTDIR/build.log" 2>&1 ||
        { log "build failed: see $OUTDIR/build.log"; exit 1; }
fi
"$AUTOTUNE" devices --json > "$OUTDIR/devices.json" 2>&1
HIP_OK=$("$PYTHON" - "$OUTDIR/devices.json" <<'PY'
import json, sys
try:
    for b in json.load(open(sys.argv[1])).get("backends", []):
        if b.get("name") == "hip" and b.get("available") and b.get("devices"):
            print(1); sys.exit()
except Exception:
    pass
print(0)
PY
)
if [ -z "${ARCH:-}" ]; then
    ARCH=$(command -v rocminfo >/dev/null && rocminfo 2>/dev/null | grep -oE 'gfx[0-9a-f]+(:[a-z]+[+-])*' | head -1)
    ARCH=${ARCH:-gfx90a}
fi
log "hip device usable: $HIP_OK; compile-only target $ARCH"

# ---- 3. compile-only check (hipRTC, no device) ------------------------------------------------
for d in f32 bf16; do
    "$AUTOTUNE" space gemm --backend hip --arch "$ARCH" --compile --dtype "$d" --limit 20 \
        --m 1000 --n 999 --k 77 --layout tt > "$OUTDIR/compile_$d.log" 2>&1
    log "compile-only $d: $(head -2 "$OUTDIR/compile_$d.log" | tr '\n' ' ')"
done
[ "$HIP_OK" = 1 ] || { log "no usable AMD GPU: device steps skipped"; echo "no AMD GPU: compile-only" > "$OUTDIR/summary.txt"; exit 0; }

# ---- 4. correctness: every candidate tried is checked against the reference ----------------
mkdir -p "$OUTDIR/correctness"
for d in f32 f16 bf16; do
    for l in nn nt tn tt; do
        for s in $CORRECT_SHAPES; do
            IFS=x read -r m n k <<< "$s"
            name="${d}_${l}_${s}"
            db="$OUTDIR/correctness/db_$name"; mkdir -p "$db"
            timeout --signal=TERM 120 "$AUTOTUNE" gemm --backend hip --dtype "$d" --layout "$l" \
                --m "$m" --n "$n" --k "$k" --budget "$CORRECT_BUDGET" --db "$db" --json \
                > "$OUTDIR/correctness/$name.json" 2> "$OUTDIR/correctness/$name.stderr.log"
            echo "rc=$?" >> "$OUTDIR/correctness/$name.stderr.log"
            "$AUTOTUNE" db show "gemm/$d/$l/${m}x${n}x${k}|" --db "$db" \
                > "$OUTDIR/correctness/$name.results.log" 2>&1
        done
    done
done
log "correctness done"

# ---- 5. torch.matmul (hipBLASLt / rocBLAS) and tuning on the same shapes -----------------
"$PYTHON" "$ROOT/benchmarks/gpu/torch_bench.py" --dtypes "$DTYPES" --shapes "$SHAPES" \
    --flush-mb "$FLUSH_MB" > "$OUTDIR/torch.jsonl" 2> "$OUTDIR/torch.stderr.log"
log "torch.matmul done (rc=$?)"
mkdir -p "$OUTDIR/tune" "$OUTDIR/tune-db"
for d in $DTYPES; do
    for s in $SHAPES; do
        IFS=x read -r m n k <<< "$s"
        timeout --signal=TERM --kill-after=30 "$TUNE_TIMEOUT_S" "$AUTOTUNE" gemm --backend hip \
            --dtype "$d" --m "$m" --n "$n" --k "$k" --budget "$TUNE_BUDGET" --db "$OUTDIR/tune-db" \
            --json > "$OUTDIR/tune/${d}_$s.json" 2> "$OUTDIR/tune/${d}_$s.stderr.log"
        log "tune $d $s: rc=$?"
    done
done

# ---- 6. summary ---------------------------------------------------------------------------
"$PYTHON" "$HERE/summarize.py" "$OUTDIR" | tee "$OUTDIR/summary.txt"
