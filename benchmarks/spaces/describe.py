#!/usr/bin/env python3
"""describe.py — one Markdown table row per recorded space (Kernel Tuner cache files, .json or
.json.gz): problem, device, configurations, failures by kind, the optimum and how far the
typical configuration is from it.

    benchmarks/spaces/describe.py benchmarks/spaces/*.json.gz
"""
import collections
import gzip
import json
import os
import statistics
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print("| file | problem | device | configs | failed | optimum (ms) | GFLOP/s | median / optimum | optimum config |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        d = load(path)
        recs = list(d["cache"].values())
        times = [r["time"] for r in recs if isinstance(r["time"], (int, float))]
        fails = collections.Counter(r["time"] for r in recs if isinstance(r["time"], str))
        best = min(recs, key=lambda r: r["time"] if isinstance(r["time"], (int, float)) else float("inf"))
        size = d.get("problem_size", [])
        gflops = ""
        if d.get("kernel_name") == "gemm" and len(size) == 3:
            m, n, k = size
            gflops = f"{2 * m * n * k / (best['time'] * 1e-3) / 1e9:.1f}"
        failed = ", ".join(f"{v} {k}" for k, v in sorted(fails.items())) or "0"
        cfg = ",".join(f"{p}={best[p]}" for p in d["tune_params_keys"])
        print(f"| {os.path.basename(path)} | {d.get('problem', size)} | {d['device_name']} | "
              f"{len(recs)} | {failed} | {best['time']:.4g} | {gflops} | "
              f"{statistics.median(times) / best['time']:.2f} | {cfg} |")


if __name__ == "__main__":
    main()
