#!/usr/bin/env bash
# The layered store's lookup time on the PoCL device (docs/shipping.md; issue 12's targets:
# <= 20 ms from a cold process to a launchable kernel from a cached binary, <= 5 us per hot
# lookup) with a shipped layer of N best entries (lookup.c):
#   1. cold, first use: the exact entry is checked here (compiled, run once) and stored;
#   2. cold again: the check and the binary come from the user's database;
#   3. the same for a nearest-shape answer (a shape not in the layer: every key is scanned);
#   4. the same layer shipped as a bundle (autotune db export): its first open imports it into
#      the user's cache, later processes open that copy;
#   5. hot at_lookup, and hot at_gemm_get + at_kernel_destroy (the context's kernel cache);
#   6. the OpenCL runtime's own start-up, the floor under every cold figure.
# Usage: benchmarks/pocl/lookup.sh OUTDIR   (N=10000; LOOKUP=build/benchmarks/lookup)
set -euo pipefail
out=${1:?usage: lookup.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${LOOKUP:-$root/build/benchmarks/lookup}
n=${N:-10000}
mkdir -p "$out"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export AUTOTUNE_SHIPPED_DB='' AUTOTUNE_DB_PATH=''
{
  echo "# lookup.sh on $(hostname) at $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$bin" prepare "$dir" "$n"
  du -h "$dir/layer/data.mdb"
  "$bin" cold "$dir" 256 256 16
  "$bin" cold "$dir" 256 256 16
  "$bin" cold "$dir" 256 256 16
  "$bin" cold "$dir" 200 300 100
  "$bin" cold "$dir" 200 300 100
  "${AUTOTUNE:-$root/build/autotune}" db export "$dir/layer.jsonl.gz" --db "$dir/layer"
  ls -l "$dir/layer.jsonl.gz" | awk '{print $5 " bytes: the layer as a bundle"}'
  for _ in 1 2 3; do XDG_CACHE_HOME="$dir/cache" LOOKUP_LAYER="$dir/layer.jsonl.gz" "$bin" cold "$dir" 256 256 16; done
  "$bin" hot "$dir" 256 256 16 200000
  "$bin" hot "$dir" 200 300 100 200000
  for _ in 1 2 3; do "$bin" opencl; done
} 2>&1 | tee "$out/lookup.txt"
