#!/usr/bin/env python3
"""strip_failed.py — copies a Kernel Tuner cache file without the configurations recorded as
failed (a `time` that is an error string), which is the space Kernel Tuner's own simulation mode
searches; run.sh replays ours on it for the comparison in which neither side pays for failures.

    strip_failed.py IN.json[.gz] OUT.json.gz      prints how many records it dropped
"""
import gzip
import json
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    src, dst = sys.argv[1:]
    opener = gzip.open if src.endswith(".gz") else open
    with opener(src, "rt") as f:
        data = json.load(f)
    objective = data.get("objective", "time")
    cache = data["cache"]
    kept = {k: r for k, r in cache.items() if not isinstance(r.get(objective), str)}
    data["cache"] = kept
    with gzip.open(dst, "wt") as f:
        json.dump(data, f)
    print(len(cache) - len(kept))


if __name__ == "__main__":
    main()
