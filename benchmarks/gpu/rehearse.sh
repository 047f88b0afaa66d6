#!/usr/bin/env bash
# Rehearses, HERE (no GPU), the one GPU run of benchmarks/gpu/README.md ("The GPU window"):
# prepare.sh (the carried dependency folder and Release build, ldd against only them and the
# base system, the 64 MiB limit), then run.sh --rehearse --pack OUTDIR exactly as the GPU
# command runs it (the same carried build, the same environment), which does every step up to
# the first device call and prints each step's time model; then checks that OUTDIR holds what
# the device tool brings back (at most 8 files, 16 MiB each, 64 MiB in all, plain names, at
# most 2 folders down) and that the archive holds the run's tree.
#
# Usage: benchmarks/gpu/rehearse.sh OUTDIR
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
OUTDIR=$(cd "$1" && pwd)
rm -rf "${OUTDIR:?}"/*
log() { printf '[rehearse %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

# ---- 1. what travels ----------------------------------------------------------------------
"$HERE/prepare.sh"

# ---- 2. the run, as on the GPU machine, up to the first device call -------------------------
TREE=$(mktemp -d "${TMPDIR:-/tmp}/autotune-gpu-run.XXXXXX")
trap 'rm -rf "$TREE"' EXIT
log "run.sh --rehearse --pack $OUTDIR $TREE/run"
(cd "$ROOT" && BUILD_DIR=build-gpu GPU_BUILD_DIR=build-gpu-there \
    benchmarks/gpu/run.sh --rehearse --pack "$OUTDIR" "$TREE/run") 2>&1 | tail -40

# ---- 3. what comes back -------------------------------------------------------------------
n=0
total=0
while IFS= read -r -d '' f; do
    rel=${f#"$OUTDIR"/}
    n=$((n + 1))
    size=$(stat -c %s "$f")
    total=$((total + size))
    [[ $rel =~ ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+){0,2}$ ]] || fail "$rel: a name or depth the device tool does not bring back"
    [ "$size" -le $((16 * 1048576)) ] || fail "$rel: $size bytes, over 16 MiB"
done < <(find "$OUTDIR" -type f -print0)
[ "$n" -le 8 ] || fail "$n files in $OUTDIR (at most 8 come back)"
[ "$total" -le $((64 * 1048576)) ] || fail "$total bytes in $OUTDIR (over 64 MiB)"
a="$OUTDIR/gpu-run.tar.gz"
[ -s "$a" ] || fail "no $a"
listing=$(tar -tzf "$a")
for want in run/summary.json run/summary.txt run/run.log run/time-model.txt run/devices.json \
    run/env.log run/build.log run/steps/mode.env; do
    grep -qx "$want" <<< "$listing" || fail "the archive lacks $want"
done
python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["mode"] == "rehearsal", s["mode"]' \
    "$OUTDIR/summary.json" || fail "summary.json: not a rehearsal's"
log "ok: $n files, $((total / 1024)) KiB in $OUTDIR; the archive holds $(wc -l <<< "$listing") entries"
{
    echo "# what a GPU run returns (rehearsal), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    (cd "$OUTDIR" && find . -type f ! -name listing.txt -printf '%s\t%P\n' | sort -k2)
    echo "# gpu-run.tar.gz"
    tar -tzvf "$a" | awk '{ print $3 "\t" $6 }'
} > "$OUTDIR/listing.txt"
[ "$((n + 1))" -le 8 ] || fail "no room for listing.txt"
