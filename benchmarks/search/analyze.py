#!/usr/bin/env python3
"""analyze.py — summarises benchmarks/search/run.sh's raw runs: evaluations until the best found
is within 5 % and 1 % of each space's optimum, as a fraction of the space (median and 90th
percentile over seeds), as Markdown tables, and a plot of best-so-far versus evaluations.

    analyze.py OUTDIR        reads OUTDIR/raw/<space>/*.json, writes OUTDIR/summary.md,
                             OUTDIR/summary.json and OUTDIR/best-so-far.png

A run that never gets within the threshold counts as its budget (the evaluations it was
allowed, at most the space): it is shown with a '>' in the tables.

Names come from the file names: `S-<seed>.json` is ours, `kt-S-<seed>.json` Kernel Tuner's
(`kt:S`); `S@skip-failed` is ours on the space without the configs recorded as failed and
`kt:S@pay-failed` Kernel Tuner paying for them (run.sh's two other fair comparisons). Shares
are always of the whole recorded space (meta.json). The "target" table compares `model` (our
default) per space with Kernel Tuner's best strategy there, in the three ways of counting
failed configs; HELD_OUT (space names, space-separated) marks the spaces kept out of tuning.
"""
import glob
import json
import math
import os
import sys

import numpy as np

THRESHOLDS = (0.05, 0.01)


def runs_of(outdir):
    spaces = {}
    for path in sorted(glob.glob(os.path.join(outdir, "raw", "*", "*.json"))):
        space = os.path.basename(os.path.dirname(path))
        if os.path.basename(path) == "meta.json":
            continue
        with open(os.path.join(os.path.dirname(path), "meta.json")) as f:
            meta = json.load(f)  # the evaluation budget every run of this space was given
        with open(path) as f:
            try:
                r = json.load(f)
            except json.JSONDecodeError as e:
                print(f"analyze: {path}: {e}", file=sys.stderr)
                continue
        if "error" in r or "trajectory" not in r:
            print(f"analyze: {path}: {r.get('error', 'no trajectory')}", file=sys.stderr)
            continue
        r["budget"] = meta["budget"]
        r["space"] = meta["space"]  # the whole space, also for a run on it without failures
        r["space_failed"] = meta.get("failed", 0)
        name = os.path.basename(path)[: -len(".json")].rsplit("-", 1)[0]
        if name.startswith("kt-pay-"):
            name = "kt:" + name[len("kt-pay-"):] + "@pay-failed"
        elif name.startswith("kt-"):
            name = "kt:" + name[len("kt-"):]
        spaces.setdefault(space, {}).setdefault(name, []).append(r)
    return spaces


def evals_to(run, optimum, thr):
    """(evaluations, reached) until best-so-far <= optimum * (1 + thr)."""
    for evals, t in run["trajectory"]:
        if t <= optimum * (1 + thr) * (1 + 1e-12):
            return evals, True
    return min(run["budget"], run["space"]), False


def summarise(spaces):
    summary = {}
    for space, strategies in spaces.items():
        for name, runs in strategies.items():
            opt = runs[0]["optimum_time"]
            size = runs[0]["space"]
            entry = {"seeds": len(runs), "space": size, "budget": min(runs[0]["budget"], size),
                     "failed": runs[0]["space_failed"]}
            for thr in THRESHOLDS:
                ev = [evals_to(r, opt, thr) for r in runs]
                fr = np.array([e / size for e, _ in ev])
                entry[f"{thr:g}"] = {
                    "fractions": [float(x) for x in fr],
                    "median_fraction": float(np.median(fr)),
                    "p90_fraction": float(np.percentile(fr, 90)),
                    "median_evals": float(np.median([e for e, _ in ev])),
                    "reached": sum(ok for _, ok in ev),
                }
            summary.setdefault(space, {})[name] = entry
    return summary


def pct(x):
    return f"{100 * x:.2g}%" if x < 0.1 else f"{100 * x:.0f}%"


def tables(summary):
    spaces = sorted(summary)
    names = sorted({n for s in summary.values() for n in s}, key=lambda n: (n.startswith("kt:"), n))
    out = []
    for thr in THRESHOLDS:
        key = f"{thr:g}"
        out.append(f"\n### Evaluations until within {thr:.0%} of the optimum (fraction of the space)\n")
        out.append("Each cell: median / 90th percentile over seeds; `>` where some seeds never got "
                   "there within the budget (counted as the budget); (n/N) seeds that got there.\n")
        out.append("| strategy | " + " | ".join(spaces) + " | median over spaces | median over all runs |")
        out.append("|---" * (len(spaces) + 3) + "|")
        for n in names:
            cells, meds, every = [], [], []
            for s in spaces:
                e = summary[s].get(n)
                if not e:
                    cells.append("–")
                    continue
                m = e[key]
                mark = ">" if m["reached"] < e["seeds"] else ""
                cells.append(f"{pct(m['median_fraction'])} / {mark}{pct(m['p90_fraction'])} "
                             f"({m['reached']}/{e['seeds']})")
                meds.append(m["median_fraction"])
                every += m["fractions"]
            full = len(meds) == len(spaces)
            med = pct(float(np.median(meds))) if full else "–"
            allr = pct(float(np.median(every))) if full else "–"
            out.append(f"| {n} | " + " | ".join(cells) + f" | {med} | {allr} |")
    out.append(target_table(summary))
    sizes = ", ".join(f"{s}: {summary[s][next(iter(summary[s]))]['space']} configs, budget "
                      f"{summary[s][next(iter(summary[s]))]['budget']}" for s in spaces)
    out.append(f"\nSpaces: {sizes}.\n")
    return "\n".join(out)


def target_table(summary, key="0.05"):
    """Per space: `model`'s median evaluations to 5 % against Kernel Tuner's best strategy's
    there, counting failed configs three ways: ours pays and Kernel Tuner skips them (its own
    simulation), both pay, both skip. A space without failures has one way."""
    held = set(os.environ.get("HELD_OUT", "").split())
    out = ["\n### Target: `model` against Kernel Tuner's best strategy per space (evaluations to 5 %)\n",
           "Median evaluations over seeds (share of the space). `model` pays for failed configs, "
           "Kernel Tuner's own simulation skips them; `both pay`: Kernel Tuner paying too "
           "(`@pay-failed`); `both skip`: ours on the space without them (`@skip-failed`). "
           "Kernel Tuner's best is the strategy with the lowest median on that space, chosen "
           "separately for each way of counting. ✓: `model` needs no more.\n",
           "| space | set | failed | model | KT best (KT skips) | ✓ | both pay: KT best | ✓ | "
           "both skip: model | KT best | ✓ |",
           "|---" * 11 + "|"]

    def med(e):
        return e[key]["median_evals"]

    def best_of(sp, pay):
        cands = {n: e for n, e in sp.items() if n.startswith("kt:")
                 and n.endswith("@pay-failed") == pay}
        if not cands:
            return None, None
        n = min(cands, key=lambda n: med(cands[n]))
        return n, cands[n]

    def cell(e, name=None):
        if e is None:
            return "–"
        label = f"{name.split(':', 1)[1].split('@')[0]} " if name else ""
        return f"{label}{med(e):.1f} ({pct(med(e) / e['space'])})"

    def ok(a, b):
        return "–" if a is None or b is None else ("✓" if med(a) <= med(b) else "✗")

    fracs, wins = [], {"skip": 0, "pay": 0, "both": 0, "n": 0}
    for space in sorted(summary):
        sp = summary[space]
        m = sp.get("model")
        if m is None:
            continue
        kn, kb = best_of(sp, False)
        pn, pb = best_of(sp, True)
        ms = sp.get("model@skip-failed")
        failed = m.get("failed", 0)
        if not failed:  # one way only
            pn, pb, ms = kn, kb, m
        fracs.append(med(m) / m["space"])
        row = [space, "held out" if space in held else "tuning", str(failed), cell(m),
               cell(kb, kn), ok(m, kb), cell(pb, pn), ok(m, pb), cell(ms), cell(kb, kn), ok(ms, kb)]
        out.append("| " + " | ".join(row) + " |")
        wins["n"] += 1
        wins["skip"] += ok(m, kb) == "✓"
        wins["pay"] += ok(m, pb) == "✓"
        wins["both"] += ok(ms, kb) == "✓"
    if fracs:
        out.append(f"\n`model` needs no more evaluations than Kernel Tuner's best on {wins['skip']} of "
                   f"{wins['n']} spaces as counted today (ours pays, Kernel Tuner skips), on "
                   f"{wins['pay']} when both pay, on {wins['both']} when both skip. Median over "
                   f"spaces of `model`'s median share: {pct(float(np.median(fracs)))}.\n")
    out.append(noise_table(summary, key, best_of))
    return "\n".join(out)


def noise_table(summary, key, best_of, resamples=2000):
    """Per space: how sure the target table's ✓ or ✗ (as counted today) is. A 95 % bootstrap
    interval of `model`'s median minus Kernel Tuner's best strategy's median, the seeds of each
    resampled on their own (the two draw from different generators, so no seed pairs them);
    fixed generator, so the table is reproducible. The best strategy is the one of lowest median
    on these seeds, so its median is a little lucky (the least of five) and the interval does
    not include that choice."""
    rng = np.random.default_rng(0)

    def boot(e):
        ev = np.array(e[key]["fractions"]) * e["space"]
        return np.median(rng.choice(ev, (resamples, len(ev))), axis=1)

    out = ["\n#### How sure: `model`'s median minus Kernel Tuner's best's, 95 % bootstrap interval\n",
           "Evaluations to 5 %, counted as today (ours pays for failed configs). `clearly "
           "fewer` / `clearly more`: the whole interval below / above 0; else within the noise "
           "of these seeds.\n",
           "| space | model − KT best | 95 % interval | |", "|---|---|---|---|"]
    count = {}
    for space in sorted(summary):
        sp = summary[space]
        m = sp.get("model")
        kn, kb = best_of(sp, False)
        if m is None or kb is None:
            continue
        diff = boot(m) - boot(kb)
        lo, hi = np.percentile(diff, [2.5, 97.5])
        d = m[key]["median_evals"] - kb[key]["median_evals"]
        verdict = "clearly fewer" if hi < 0 else "clearly more" if lo > 0 else "within the noise"
        out.append(f"| {space} | {d:+.1f} | [{lo:+.1f}, {hi:+.1f}] | {verdict} |")
        count[verdict] = count.get(verdict, 0) + 1
    out.append("\n" + ", ".join(f"{v}: {count.get(v, 0)}" for v in
                                 ("clearly fewer", "within the noise", "clearly more")) + ".\n")
    return "\n".join(out)


def plot(spaces, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for s in spaces.values() for n in s}, key=lambda n: (n.startswith("kt:"), n))
    colors = {n: plt.cm.tab10(i % 10) for i, n in enumerate(names)}
    cols = 3
    rows = math.ceil(len(spaces) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.2 * rows), squeeze=False)
    for ax, space in zip(axes.flat, sorted(spaces)):
        for name, runs in sorted(spaces[space].items()):
            opt, size = runs[0]["optimum_time"], runs[0]["space"]
            budget = min(runs[0]["budget"], size)
            x = np.unique(np.round(np.geomspace(1, budget, 200)).astype(int))
            curves = []
            for r in runs:
                y = np.full(x.shape, np.nan)
                for evals, t in r["trajectory"]:
                    y[x >= evals] = t / opt
                curves.append(y)
            med = np.nanmedian(np.array(curves), axis=0) if curves else x * np.nan
            ax.plot(x, med, label=name, color=colors[name],
                    linestyle="--" if name.startswith("kt:") else "-")
        ax.axhline(1.05, color="grey", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_ylim(0.99, 2.0)
        ax.set_title(f"{space} ({size} configs)", fontsize=9)
        ax.set_xlabel("evaluations")
        ax.set_ylabel("best so far / optimum (median over seeds)")
    for ax in list(axes.flat)[len(spaces):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    outdir = sys.argv[1]
    spaces = runs_of(outdir)
    if not spaces:
        print(f"analyze: no runs under {outdir}/raw", file=sys.stderr)
        sys.exit(1)
    summary = summarise(spaces)
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    md = tables(summary)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("# Strategy benchmark\n" + md + "\n")
    plot(spaces, os.path.join(outdir, "best-so-far.png"))
    print(md)


if __name__ == "__main__":
    main()
