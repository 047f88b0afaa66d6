#!/usr/bin/env python3
"""kt_sim.py — runs Kernel Tuner's strategies in simulation mode on one recorded space (a Kernel
Tuner cache file, plain or .gz) and writes one JSON per run in the shape `autotune replay --json`
prints, so benchmarks/search/analyze.py reads both alike.

    kt_sim.py SPACE OUTDIR --strategies a,b --seeds 20 --budget N [--failed skip|pay]

Evaluations are counted as `autotune replay` counts them: unique configurations measured, in
the order Kernel Tuner's results list has them (a configuration served again from its cache is
not a new evaluation). Kernel Tuner's `tune_cache` restricts the space to the file's configs
that did not fail, so its strategies never spend an evaluation on a failed config; ours do.
`--failed pay` keeps the configs recorded as failed (compile or run time; not `InvalidConfig`)
in Kernel Tuner's space, as ours does: each costs an evaluation when its strategy picks it and
comes back as an error, as on a device. Its runs are written as `kt-pay-<strategy>-<seed>.json`.
Each run seeds Python's and NumPy's generators, which Kernel Tuner's strategies draw from.
"""
import argparse
import gzip
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings

import numpy as np

from kernel_tuner import interface, util

warnings.filterwarnings("ignore")

# Keys a simulation needs; the per-repetition `times` lists make the real-GPU files ~10x bigger
# and Kernel Tuner re-parses the file on every run, so a slim copy is what it reads.
KEEP = ("time", "compile_time", "verification_time", "benchmark_time")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def slim_copy(data, tmpdir):
    keys = data["tune_params_keys"]
    out = {k: v for k, v in data.items() if k != "cache"}
    out["cache"] = {
        key: {**{p: rec[p] for p in keys}, **{k: rec[k] for k in KEEP if k in rec}}
        for key, rec in data["cache"].items()
    }
    path = os.path.join(tmpdir, "space.json")
    with open(path, "w") as f:
        json.dump(out, f)
    return path


def memoize_setup():
    """Kernel Tuner reads the cache file twice per run; the file is the same for every run on
    it, so it is parsed once. The search space is built anew for every run: Kernel Tuner's
    Searchspace keeps neighbour caches that its strategies pop from (simulated annealing's
    random neighbour prefers configs an earlier walk linked), so a space shared between runs, as
    this script did until 2026-12-01, hands later seeds what earlier ones found. Measured:
    simulated annealing on the RTX 2080 Ti CLBlast space reached 5 % in a median of 11
    evaluations with the space shared by seeds 1..10 in one process, 554 with a fresh space per
    seed (seed 1, the first on the shared space, took 540 both ways); on that space with its
    times shuffled among the configs, where nothing can beat random sampling, the shared space
    still gave a median near 150. Building the space takes no longer than resetting it."""
    read_cache = util.read_cache
    memo = {}

    def cached_read(path, open_cache=True):
        if path not in memo:
            memo[path] = read_cache(path, open_cache=False)
        return memo[path]

    util.read_cache = cached_read


def pay_for_failures():
    """Kernel Tuner's simulation takes its space from the cache's configs without an error; this
    makes it take those that failed to compile or run too (the restriction it infers is the only
    thing that drops them), so its strategies pay for them as ours do."""

    def restrictions_with_failures(cache):
        keys = cache["tune_params_keys"]
        space = set(
            tuple(r[k] for k in keys)
            for r in cache["cache"].values()
            if not isinstance(r.get("__error__"), util.InvalidConfig)
        )

        def restriction(*values):
            return values in space

        return util.FunctionConstraint(restriction)

    util.infer_restrictions_from_cache = restrictions_with_failures


def run_one(path, data, strategy, seed, budget):
    keys = data["tune_params_keys"]
    random.seed(seed)
    np.random.seed(seed)
    t0 = time.perf_counter()
    results, _ = interface.tune_cache(
        path, strategy=strategy, strategy_options={"max_fevals": budget}, quiet=True, verbose=False
    )
    seconds = time.perf_counter() - t0
    seen, best, trajectory, failed = set(), math.inf, [], 0
    for r in results:
        if not r:
            continue
        cfg = tuple(r[k] for k in keys)
        if cfg in seen:
            continue
        seen.add(cfg)
        t = r.get("time")
        if "__error__" in r or not isinstance(t, (int, float)) or not math.isfinite(t):
            failed += 1
            continue
        if t < best:
            best = t
            trajectory.append([len(seen), t])
    return {
        "tool": "kernel_tuner",
        "strategy": strategy,
        "seed": seed,
        "budget": budget,
        "evaluated": len(seen),
        "failed": failed,
        "best": {"time": best if math.isfinite(best) else None},
        "trajectory": trajectory,
        "seconds": round(seconds, 3),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("space")
    ap.add_argument("outdir")
    ap.add_argument("--strategies", required=True)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=1, help="seeds FIRST..FIRST+SEEDS-1")
    ap.add_argument("--budget", type=int, required=True)
    ap.add_argument("--failed", choices=("skip", "pay"), default="skip",
                    help="skip: Kernel Tuner's own simulation (failed configs left out of its "
                    "space); pay: they are in it and cost an evaluation, as in ours")
    a = ap.parse_args()
    data = load(a.space)
    valid = [r["time"] for r in data["cache"].values() if isinstance(r.get("time"), (int, float))]
    header = {"file": a.space, "space": len(data["cache"]), "optimum_time": min(valid)}
    memoize_setup()
    if a.failed == "pay":
        pay_for_failures()
    prefix = "kt-pay-" if a.failed == "pay" else "kt-"
    os.makedirs(a.outdir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = slim_copy(data, tmp)
        for strategy in a.strategies.split(","):
            for seed in range(a.first_seed, a.first_seed + a.seeds):
                out = os.path.join(a.outdir, f"{prefix}{strategy}-{seed}.json")
                try:
                    run = run_one(path, data, strategy, seed, a.budget)
                except Exception as e:  # a strategy that crashes is reported, not fatal
                    run = {"tool": "kernel_tuner", "strategy": strategy, "seed": seed,
                           "error": f"{type(e).__name__}: {e}"}
                    print(f"kt_sim: {strategy} seed {seed}: {run['error']}", file=sys.stderr)
                with open(out, "w") as f:
                    json.dump({**header, **run, "failed_configs": a.failed}, f)


if __name__ == "__main__":
    main()
