#!/usr/bin/env python3
"""transfer.py — the warm-start benchmark: for pairs (target, source) of recorded spaces,
`autotune replay TARGET --transfer SOURCE` against the same replay without it, many seeds;
evaluations until the best is within 5 % and 1 % of the target's optimum. See README.md.

    transfer.py run OUTDIR [--seeds N] [--jobs J] [--targets PREFIX] [--kind KIND]
                                                    run the pairs (those whose target's name starts
                                                    with PREFIX, of KIND same, held-out or
                                                    mismatched; skips runs already in OUTDIR/raw),
                                                    then pack them into OUTDIR/runs.jsonl.gz
    transfer.py summary OUTDIR                      tables (markdown) from OUTDIR/runs.jsonl.gz

Environment: BUILD (folder with autotune, default build), SHARED_SPACES (default
../shared/spaces beside the repository), HUB_SPACES (a folder of the FAIR Benchmark Hub files
that benchmarks/spaces/hub/fetch.sh fetches; with it, their held-out pairs run too)."""
import gzip, json, os, random, statistics, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("SHARED_SPACES", os.path.join(os.path.dirname(REPO), "shared", "spaces"))
OURS = os.path.join(REPO, "benchmarks", "spaces")
HUB = os.environ.get("HUB_SPACES", "")
AT = os.path.join(os.environ.get("BUILD", os.path.join(REPO, "build")), "autotune")

CLB = ["gemm-clblast-RTX_3090", "gemm-clblast-RTX_2080_Ti"]
CONV = ["convolution-A100", "convolution-MI250X"]
POCL = ["pocl-gemm-square-256", "pocl-gemm-tall-2048x32x256", "pocl-gemm-largek-64x64x4096",
        "pocl-gemm-small-48x40x33"]
# The same four shapes on another CPU (an AVX-512 Xeon), the whole 288-config sub-space of the
# current template, recorded on a quiet machine (benchmarks/spaces/README.md).
XEON = ["pocl-xeon-gemm-square-256", "pocl-xeon-gemm-tall-2048x32x256",
        "pocl-xeon-gemm-largek-64x64x4096", "pocl-xeon-gemm-small-48x40x33"]
# Held out: the same four shapes on the EPYC again, the current template's whole sub-space on a
# quiet machine (recorded after the warm start was built): every pair of its shapes, and each
# shape from the Xeon's same shape and back.
EPYC = ["pocl-epyc-gemm-square-256", "pocl-epyc-gemm-tall-2048x32x256",
        "pocl-epyc-gemm-largek-64x64x4096", "pocl-epyc-gemm-small-48x40x33"]
# Held out: recordings of the same kernels on other GPUs that the warm start (and its probe) was
# never run on while it was built; every pair with one of them. The hub's RTX_Titan convolution
# has other parameters (no use_shmem, use_cmem): a source that must be refused.
HUB_GEMM = ["hub-gemm-RTX_Titan", "hub-gemm-RTX_3060_laptop"]
HUB_CONV = ["hub-convolution-A4000", "hub-convolution-W6600"]
HUB_DEDISP = ["hub-dedispersion-A100", "hub-dedispersion-MI250X"]
EXTRA = sorted(f[:-8] for f in os.listdir(OURS)
               if f.startswith("pocl-gemm-") and f.endswith(".json.gz") and f[:-8] not in POCL)


def path(name):
    for d in (SHARED, OURS) + ((HUB,) if HUB else ()):
        p = os.path.join(d, name + ".json.gz")
        if os.path.exists(p):
            return p
    raise SystemExit(f"transfer.py: no space {name}")


def pairs():
    """(kind, target, source): same kernel on another device or shape, and mismatched ones."""
    out = []
    for group in (CLB, CONV, POCL + EXTRA, XEON):
        out += [("same", t, s) for t in group for s in group if s != t]
    out += [("mismatched", CLB[0], CONV[0]), ("mismatched", CONV[0], CLB[0]),
            ("mismatched", POCL[0], CLB[0])]
    out += [("held-out", t, s) for t in EPYC for s in EPYC if s != t]
    out += [("held-out", t, s) for e, x in zip(EPYC, XEON) for t, s in ((e, x), (x, e))]
    if HUB:
        for group, hub in ((CLB + HUB_GEMM, HUB_GEMM), (CONV + HUB_CONV, HUB_CONV),
                           (HUB_DEDISP, HUB_DEDISP)):
            out += [("held-out", t, s) for t in group for s in group
                    if s != t and (t in hub or s in hub)]
        out += [("mismatched", CONV[0], "hub-convolution-RTX_Titan"),
                ("mismatched", HUB_GEMM[0], "hub-pnpoly-RTX_3090")]
    return out


def budget(target):
    # Enough to reach 1 % in most runs without a warm start: the CLBlast spaces' median to 1 %
    # is about 240 evaluations (docs/search.md), the convolutions' about 300 to 400.
    # The hub's GEMMs and convolutions are the same kernels; dedispersion's median to 1 % is
    # under 100 (docs/search.md).
    if target.startswith(("gemm-clblast", "hub-gemm")):
        return 600
    if target.startswith(("convolution", "hub-convolution")):
        return 800
    if target.startswith("hub-dedispersion"):
        return 400
    return 288 if target.startswith(("pocl-xeon", "pocl-epyc")) else 144


def run_one(outdir, kind, target, source, seed, mode):
    name = f"{target}__{source}__{mode}__{seed}.json"
    dest = os.path.join(outdir, "raw", name)
    if os.path.exists(dest):
        return
    raw = os.path.dirname(dest)
    # Without the warm start the source is not read: another pair's run of the target is reused.
    if mode == "off" and kind != "mismatched":
        for f in os.listdir(raw):
            if f.startswith(target + "__") and f.endswith(f"__off__{seed}.json"):
                j = json.load(open(os.path.join(raw, f)))
                if j["transfer"]["sources"][0]["reason"] == "warm starts are off (--no-transfer)":
                    j["pair_kind"], j["source"] = kind, source
                    j["transfer"]["sources"][0]["file"] = os.path.basename(path(source))
                    with open(dest + ".tmp", "w") as out:
                        json.dump(j, out)
                    os.replace(dest + ".tmp", dest)
                    return
    cmd = [AT, "replay", path(target), "--seed", str(seed), "--budget", str(budget(target)),
           "--json", "--transfer", path(source)]
    if mode == "off":
        cmd.append("--no-transfer")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"transfer.py: {' '.join(cmd)} failed: {r.stderr}")
    j = json.loads(r.stdout)
    j["pair_kind"], j["target"], j["source"], j["mode"] = kind, target, source, mode
    j.pop("file", None)  # a path on the machine that ran it
    for s in j.get("transfer", {}).get("sources", []):
        s["file"] = os.path.basename(s["file"])
    with open(dest + ".tmp", "w") as f:
        json.dump(j, f)
    os.replace(dest + ".tmp", dest)


def to_within(j, frac):
    for evals, best in j["trajectory"]:
        if best <= j["optimum_time"] * (1 + frac):
            return evals
    return None  # not within the budget


def run(outdir, seeds, jobs, targets="", kind=""):
    os.makedirs(os.path.join(outdir, "raw"), exist_ok=True)
    todo = [(k, t, s, seed, m) for k, t, s in pairs()
            if t.startswith(targets) and k.startswith(kind)
            for seed in range(1, seeds + 1) for m in ("on", "off")]
    with ThreadPoolExecutor(jobs) as ex:
        for f in [ex.submit(run_one, outdir, *a) for a in todo]:
            f.result()
    raw = os.path.join(outdir, "raw")
    with gzip.open(os.path.join(outdir, "runs.jsonl.gz"), "wt") as out:
        for f in sorted(os.listdir(raw)):
            if f.endswith(".json"):
                out.write(json.dumps(json.load(open(os.path.join(raw, f))), sort_keys=True) + "\n")


def evals(runs, frac, cap):
    """Each run's evaluations to within frac, a run that never got there counted as past the
    budget (cap + 1)."""
    return [x if x is not None else cap + 1 for x in (to_within(j, frac) for j in runs)]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(x, cap):
    return f">{cap}" if x > cap else (f"{x:g}")


def ratio_interval(a, b, rng, resamples=1000):
    """A 95 % bootstrap interval of the ratio of medians (a / b: the `on` and `off` runs'
    evaluations), each side resampled on its own: with a warm start a seed's random stream goes
    another way, so no seed pairs an `on` run with an `off` one. Fixed generator: reproducible."""
    r = sorted(statistics.median(rng.choices(a, k=len(a))) /
               statistics.median(rng.choices(b, k=len(b))) for _ in range(resamples))
    return r[int(0.025 * resamples)], r[int(0.975 * resamples) - 1]


def summary(outdir):
    runs = {}
    for line in gzip.open(os.path.join(outdir, "runs.jsonl.gz"), "rt"):
        j = json.loads(line)
        runs.setdefault((j["pair_kind"], j["target"], j["source"]), {}).setdefault(
            j["mode"], []).append(j)
    ratios, sure, rng = {}, {}, random.Random(0)
    print("| pair | target ← source | seeds | 5 %: off → on (ratio) | 95 % interval |"
          " 1 %: off → on (ratio) |"
          " source weight (median) | first picks from source | probe picks (median) |"
          " not within 1 % (off/on) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    order = {"same": 0, "held-out": 1, "mismatched": 2}
    for (kind, t, s), m in sorted(runs.items(), key=lambda kv: (order[kv[0][0]], kv[0][1:])):
        on, off = m.get("on", []), m.get("off", [])
        cap = budget(t)
        cells, ratio = [], []  # to 5 % and to 1 %
        for frac in (0.05, 0.01):
            a, b = med(evals(off, frac, cap)), med(evals(on, frac, cap))
            cells.append(f"{fmt(a, cap)} → {fmt(b, cap)} ({b / a:.2f})")
            ratio.append(b / a)
        lo, hi = ratio_interval(evals(on, 0.05, cap), evals(off, 0.05, cap), rng)
        src = [j["transfer"]["sources"][0] for j in on]
        used = [x for x in src if x["used"]]
        w = f"{statistics.median(x['weight'] for x in used):.2f}" if used else \
            "refused: " + src[0].get("reason", "")
        fp = statistics.median(j["transfer"]["first_picks_from_sources"] for j in on)
        pp = [j["transfer"]["probe_picks"] for j in on if "probe_picks" in j["transfer"]]
        pp = f"{statistics.median(pp):g}" if pp else "–"  # runs before 0.2.0 did not count it
        miss = (sum(to_within(j, 0.01) is None for j in off), sum(to_within(j, 0.01) is None for j in on))
        print(f"| {kind} | {t} ← {s} | {len(on)} | {cells[0]} | {lo:.2f}-{hi:.2f} | {cells[1]} |"
              f" {w} | {fp:g} |"
              f" {pp} | {miss[0]}/{miss[1]} |")
        if kind != "mismatched":
            group = ("held-out " if kind == "held-out" else "") + (
                "PoCL" if t.startswith("pocl-") else "GPU")
            if kind == "same" and t.startswith("pocl-xeon"):
                group = "PoCL (Xeon)"
            ratios.setdefault(group, []).append(ratio[0])
            sure.setdefault(group, []).append((lo, hi))
    print()
    for k, r in sorted(ratios.items()):
        print(f"{k} same-kernel pairs: median ratio (on / off, evaluations to 5 %) "
              f"{statistics.median(r):.2f}; halved or better on {sum(x <= 0.5 for x in r)} of "
              f"{len(r)}; worse on {sum(x > 1 for x in r)}; by the 95 % intervals, clearly "
              f"halved on {sum(h <= 0.5 for _, h in sure[k])}, clearly better on "
              f"{sum(h < 1 for _, h in sure[k])}, clearly worse on {sum(l > 1 for l, _ in sure[k])}, "
              f"clearly worse by more than 10 % on {sum(l > 1.1 for l, _ in sure[k])}")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("run", "summary"):
        raise SystemExit(__doc__)
    args = sys.argv[3:]
    arg = lambda k, d="": args[args.index(k) + 1] if k in args else d
    if sys.argv[1] == "run":
        run(sys.argv[2], int(arg("--seeds", 20)), int(arg("--jobs", 2)), arg("--targets"),
            arg("--kind"))
    else:
        summary(sys.argv[2])
