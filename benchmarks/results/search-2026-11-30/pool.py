import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("raw "): continue
    _, strat, f, n, *vals = line.split()
    n = int(n)
    for v in vals:
        a, b = v.split("/")
        rows.setdefault(strat, {}).setdefault(f, []).append((float(a) / n, float(b) / n))
def q(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs) + 0.5) - 1 if p < 1 else len(xs) - 1)]
print("| strategy | " + " | ".join(f.replace(".json.gz", "") for f in next(iter(rows.values()))) + " | all spaces and seeds |")
print("|---|" + "---|" * (len(next(iter(rows.values()))) + 1))
for strat, fs in rows.items():
    cells = []
    pool5 = []
    for f, v in fs.items():
        e5 = [a for a, _ in v]; pool5 += e5
        cells.append("%.2f %% / %.2f %%" % (100 * statistics.median(e5), 100 * sorted(e5)[int(0.9 * len(e5) + 0.999) - 1]))
    pool1 = [b for v in fs.values() for _, b in v]
    cells.append("**%.2f %%** / %.2f %% (1 %%: %.2f %%)" % (100 * statistics.median(pool5), 100 * sorted(pool5)[int(0.9 * len(pool5) + 0.999) - 1], 100 * statistics.median(pool1)))
    print("| `%s` | " % strat + " | ".join(cells) + " |")
