#!/usr/bin/env bash
# run.sh — what running candidates in a worker process costs: the same random search (same seed,
# so the same configurations) on the OpenCL device with the worker (default) and in the tuner's
# own process (AUTOTUNE_ISOLATION=off), alternated; per mode the wall time per candidate and,
# per configuration, the median kernel time each recorded (isolation must not change it).
#   benchmarks/isolation/run.sh OUTDIR [path/to/autotune]
set -euo pipefail
out=${1:?usage: run.sh OUTDIR [autotune]}
at=${2:-build/autotune}
mkdir -p "$out"
problem=(--m 256 --n 256 --k 256)
n=40
{
  echo "date: $(date -u +%FT%TZ)"
  echo "command: $0 $*"
  echo "autotune: $("$at" --version)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"
# Warm PoCL's kernel cache, so that neither mode pays the first compiles.
"$at" gemm "${problem[@]}" --strategy random --seed 7 --budget "$n" --db "$out/warm" --json >/dev/null
for round in 1 2 3; do
  for mode in worker inprocess; do
    db="$out/db-$mode-$round"
    rm -rf "$db"
    if [ "$mode" = inprocess ]; then export AUTOTUNE_ISOLATION=off; else unset AUTOTUNE_ISOLATION; fi
    "$at" gemm "${problem[@]}" --strategy random --seed 7 --budget "$n" --db "$db" --json \
      >"$out/$mode-$round.json"
    "$at" db show "gemm/f32/nn/256x256x256" --db "$db" >"$out/$mode-$round.records.txt"
    rm -rf "$db"
  done
done
unset AUTOTUNE_ISOLATION
rm -rf "$out/warm"
python3 - "$out" "$n" <<'PY' | tee "$out/summary.txt"
import json, re, statistics, sys, glob
out, n = sys.argv[1], int(sys.argv[2])
def medians(path):
    m, key = {}, None
    for line in open(path):
        if line.startswith("result"):
            key = line.rsplit("|", 1)[1].strip()
        elif key and "median_us=" in line:
            if "status=ok" in line:
                m[key] = float(re.search(r"median_us=([0-9.e+-]+)", line).group(1))
            key = None
    return m
per = {}
for mode in ("worker", "inprocess"):
    secs = [json.load(open(f))["seconds"] for f in sorted(glob.glob(f"{out}/{mode}-*.json"))]
    per[mode] = [s / n * 1e3 for s in secs]
    print(f"{mode:9s} ms per candidate, 3 rounds: " + ", ".join(f"{x:.1f}" for x in per[mode]))
w, i = statistics.median(per["worker"]), statistics.median(per["inprocess"])
print(f"isolation costs {w - i:+.1f} ms per candidate (median of rounds: {w:.1f} vs {i:.1f})")
ratios = []
for r in (1, 2, 3):
    a, b = medians(f"{out}/worker-{r}.records.txt"), medians(f"{out}/inprocess-{r}.records.txt")
    ratios += [a[k] / b[k] for k in a if k in b]
print(f"kernel medians, worker / in-process over {len(ratios)} configs: "
      f"median {statistics.median(ratios):.3f}, spread {min(ratios):.2f}..{max(ratios):.2f}")
PY
