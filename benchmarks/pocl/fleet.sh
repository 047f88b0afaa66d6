#!/usr/bin/env bash
# fleet.sh — fleet tuning on this machine (docs/shipping.md, "Fleet tuning under MPI"): one LLM
# shape list tuned by 1 process and by R MPI ranks (`mpirun -n R autotune tune --shapes`), each
# into a fresh database and a fresh PoCL kernel cache, with the same per-problem evaluation budget
# (so both do the same work); prints the wall time and the evaluations of each.
#
# Usage: benchmarks/pocl/fleet.sh OUTDIR
# Environment (all optional):
#   AUTOTUNE=build/autotune   autotune binary (relative paths are relative to the repo root);
#                             autotune-mpi must be next to it
#   SHAPES=benchmarks/shapes/llama-3.1-8b.yaml   the list the problems come from
#   LIST=FILE                 tune FILE as it is instead (default: SHAPES' GEMMs at 16 tokens:
#                             `m: [16, 128]` becomes `m: 16`, attention is left out)
#   BUDGET=8                  evaluations per problem
#   RANKS=2                   ranks of the MPI run
#   STRATEGY=random SEED=1    the search (random: both runs measure the same configurations)
# Writes to OUTDIR: list.yaml (what was tuned), one.{json,err}, fleet.{json,err} (the runs'
# JSON and progress lines), summary.txt (the table printed at the end).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUTDIR=$(mkdir -p "${1:?usage: $0 OUTDIR}" && cd "$1" && pwd)

AUTOTUNE=${AUTOTUNE:-build/autotune}
case "$AUTOTUNE" in /*) ;; *) AUTOTUNE="$ROOT/$AUTOTUNE" ;; esac
SHAPES=${SHAPES:-benchmarks/shapes/llama-3.1-8b.yaml}
case "$SHAPES" in /*) ;; *) SHAPES="$ROOT/$SHAPES" ;; esac
BUDGET=${BUDGET:-8}
RANKS=${RANKS:-2}
STRATEGY=${STRATEGY:-random}
SEED=${SEED:-1}

for need in "$AUTOTUNE" "$(dirname "$AUTOTUNE")/autotune-mpi"; do
    [ -x "$need" ] || { echo "$0: $need is missing (build with MPI found)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "$0: mpirun is missing (openmpi-bin)" >&2; exit 2; }

if [ -n "${LIST:-}" ]; then
    cp "$LIST" "$OUTDIR/list.yaml"
else # the small-m GEMMs: one token count, no attention
    sed -e 's/m: \[16, 128\]/m: 16/' -e '/^- attention/,$d' "$SHAPES" >"$OUTDIR/list.yaml"
fi
# Nothing read from the user's or the installed databases.
export AUTOTUNE_SHIPPED_DB='' AUTOTUNE_DB_PATH=''
unset AUTOTUNE_DB
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
MPIRUN=(mpirun -n "$RANKS")
[ "$RANKS" -le "$(nproc)" ] || MPIRUN+=(--oversubscribe)

"$AUTOTUNE" tune --shapes "$OUTDIR/list.yaml" --dry-run >"$OUTDIR/problems.txt" 2>/dev/null
echo "fleet benchmark: $(wc -l <"$OUTDIR/problems.txt") problems of $OUTDIR/list.yaml," \
    "$BUDGET evaluations each ($STRATEGY, seed $SEED), 1 process vs $RANKS ranks, $(nproc) cores"
sed 's/^/  /' "$OUTDIR/problems.txt"

# run NAME COMMAND...: a fresh database and kernel cache; the wall time into $OUTDIR/NAME.time.
run() {
    local name=$1
    shift
    rm -rf "$OUTDIR/db-$name" "$OUTDIR/pocl-$name"
    mkdir -p "$OUTDIR/pocl-$name"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    POCL_CACHE_DIR="$OUTDIR/pocl-$name" "$@" tune --shapes "$OUTDIR/list.yaml" --budget "$BUDGET" \
        --strategy "$STRATEGY" --seed "$SEED" --db "$OUTDIR/db-$name" --json \
        >"$OUTDIR/$name.json" 2>"$OUTDIR/$name.err" || rc=$?
    t1=$(date +%s.%N)
    python3 -c "print(f'{$t1 - $t0:.2f}')" >"$OUTDIR/$name.time"
    [ "$rc" -eq 0 ] || echo "$0: the $name run exited $rc (see $OUTDIR/$name.err)" >&2
}
echo "1 process ..."
run one "$AUTOTUNE"
echo "$RANKS ranks ..."
run fleet "${MPIRUN[@]}" "$AUTOTUNE"

python3 - "$OUTDIR" "$RANKS" <<'EOF' | tee "$OUTDIR/summary.txt"
import json, sys
out, ranks = sys.argv[1], int(sys.argv[2])
rows = []
print(f"{'run':<10} {'ranks':>5} {'problems':>8} {'evaluated':>9} {'measured':>8} {'wall s':>8}  "
      f"{'complete':<8} ranks used")
for name, r in (("1 process", "one"), (f"mpirun", "fleet")):
    d = json.load(open(f"{out}/{r}.json"))
    wall = float(open(f"{out}/{r}.time").read())
    used = sorted({p.get("rank", 0) for p in d["problems"] if p["status"] == "ok"})
    print(f"{name:<10} {d.get('ranks', 1):>5} {len(d['problems']):>8} {d['evaluated']:>9} "
          f"{d['measured']:>8} {wall:>8.2f}  {str(d['complete']):<8} {used}")
    rows.append(wall)
if len(rows) == 2 and rows[1] > 0:
    print(f"speed-up of {ranks} ranks over 1 process: {rows[0] / rows[1]:.2f}x")
EOF
