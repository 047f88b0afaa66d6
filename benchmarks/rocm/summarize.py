#!/usr/bin/env python3
"""Summary of a benchmarks/rocm/run.sh output folder: correctness (every candidate's outcome,
counted from `autotune db show`), then per dtype and shape the tuned GFLOP/s, torch.matmul's
(hipBLASLt / rocBLAS on ROCm) and their ratio. Stdlib only. Usage: summarize.py OUTDIR"""
import glob
import json
import os
import re
import sys

STATUSES = ["ok", "wrong_result", "launch_error", "crashed", "timeout", "compile_error",
            "resource_limit"]


def load_json(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def main(out):
    lines = []
    counts = dict.fromkeys(STATUSES, 0)
    failed_cases = []
    for res in sorted(glob.glob(os.path.join(out, "correctness", "*.results.log"))):
        text = open(res).read()
        for s in STATUSES:
            counts[s] += len(re.findall(r"\b%s\b" % s, text))
        name = os.path.basename(res)[: -len(".results.log")]
        j = load_json(os.path.join(out, "correctness", name + ".json"))
        if not j or not j.get("best", {}).get("config") or re.search(r"\bwrong_result\b", text):
            failed_cases.append(name)
    lines.append("correctness: candidate outcomes " +
                 ", ".join("%s %d" % (s, n) for s, n in counts.items()))
    lines.append("correctness: cases without a correct best or with a wrong result: %d%s" %
                 (len(failed_cases), (" (" + ", ".join(failed_cases[:20]) + ")") if failed_cases else ""))

    torch = {}
    try:
        for line in open(os.path.join(out, "torch.jsonl")):
            c = json.loads(line)
            if c.get("kind") == "case" and c.get("status") == "ok":
                torch[(c["dtype"], "%dx%dx%d" % (c["m"], c["n"], c["k"]))] = c["gflops"]
    except (OSError, ValueError):
        lines.append("torch.matmul: no results (see torch.stderr.log)")
    lines.append("%-5s %-18s %12s %12s %7s  %s" % ("dtype", "shape", "autotune", "torch", "ratio",
                                                   "best config"))
    for path in sorted(glob.glob(os.path.join(out, "tune", "*.json"))):
        dtype, shape = os.path.basename(path)[:-5].split("_", 1)
        j = load_json(path)
        at = j["best"]["gflops"] if j and j.get("best", {}).get("config") else None
        tg = torch.get((dtype, shape))
        ratio = "%.2f" % (at / tg) if at and tg else "-"
        lines.append("%-5s %-18s %12s %12s %7s  %s" % (
            dtype, shape, "%.0f" % at if at else "-", "%.0f" % tg if tg else "-", ratio,
            j["best"]["config"] if at else "(no result: see the .stderr.log)"))
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py OUTDIR")
    main(sys.argv[1])
