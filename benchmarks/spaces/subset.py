#!/usr/bin/env python3
"""subset.py — keeps the configurations of a Kernel Tuner cache file whose parameters have the
given values (a slab of the space), with tune_params narrowed to match; gzip'd when OUT ends in
.gz. Used when a recording could only finish part of its space (see README.md).

    benchmarks/spaces/subset.py IN.json OUT.json.gz BM=32 [BN=32 ...]
"""
import gzip
import json
import sys


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    src, dst, conds = sys.argv[1], sys.argv[2], sys.argv[3:]
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        d = json.load(f)
    want = {}
    for c in conds:
        name, _, value = c.partition("=")
        if name not in d["tune_params_keys"]:
            print(f"subset.py: no parameter '{name}' in {src}", file=sys.stderr)
            sys.exit(2)
        want[name] = int(value) if value.lstrip("-").isdigit() else value
    d["cache"] = {k: r for k, r in d["cache"].items() if all(r[p] == v for p, v in want.items())}
    if not d["cache"]:
        print(f"subset.py: no configuration of {src} has {' '.join(conds)}", file=sys.stderr)
        sys.exit(1)
    d["tune_params"] = {p: sorted({r[p] for r in d["cache"].values()}, key=lambda v: (isinstance(v, str), v))
                        for p in d["tune_params_keys"]}
    text = json.dumps(d, indent=None, separators=(", ", ": "))
    with (gzip.open if dst.endswith(".gz") else open)(dst, "wt") as f:
        f.write(text + "\n")
    print(f"{dst}: {len(d['cache'])} configurations")


if __name__ == "__main__":
    main()
