#!/usr/bin/env bash
# transfer.sh — the warm-start benchmark: `autotune replay TARGET --transfer SOURCE` against the
# same replay with --no-transfer, for every pair of recorded spaces of one kernel (and a few
# mismatched pairs), 20 seeds; then transfer.py's table. See README.md ("Warm starts").
#
#   benchmarks/search/transfer.sh OUTDIR
#
# Environment: BUILD (folder with autotune) [build], SHARED_SPACES [../shared/spaces beside the
# repository], SEEDS [20], JOBS (runs at once) [2]. Runs already in OUTDIR/raw are kept.
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
nice -n 10 python3 "$here/transfer.py" run "$1" --seeds "${SEEDS:-20}" --jobs "${JOBS:-2}"
python3 "$here/transfer.py" summary "$1" | tee "$1/summary.md"
