#!/usr/bin/env bash
# Keeps what a GPU run brought back (the device tool's files_at folder: gpu-run.tar.gz,
# summary.json, summary.txt, run.log) under benchmarks/results/gpu-<date>-h200/, unchanged,
# with a README naming the run's date, commit and source digest (read from the archive), and
# prints the summary. Commit that folder as it is.
#
# Usage: benchmarks/gpu/keep.sh FILES_AT [DATE]     (DATE: YYYY-MM-DD, default: the run's)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then echo "usage: $0 FILES_AT [DATE]" >&2; exit 2; fi
SRC=$1
a="$SRC/gpu-run.tar.gz"
[ -s "$a" ] || { echo "$0: no $a" >&2; exit 1; }
member() { tar -xzOf "$a" --wildcards "*/$1" 2> /dev/null | head -c 4096 || true; }
when=$(member date.txt | tr -d '\n')
DATE=${2:-${when%%T*}}
[[ $DATE =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || { echo "$0: no date (give DATE)" >&2; exit 2; }
DEST="$ROOT/benchmarks/results/gpu-$DATE-h200"
if [ -e "$DEST" ]; then
    DEST="$DEST-$(date -u +%H%M%S)"
fi
mkdir -p "$DEST"
for f in gpu-run.tar.gz summary.json summary.txt run.log; do
    [ -f "$SRC/$f" ] && cp "$SRC/$f" "$DEST/$f"
done
{
    echo "# GPU run, $DATE (one H200)"
    echo
    echo "What \`benchmarks/gpu/run.sh --pack\` brought back from the GPU machine, unchanged"
    echo "(benchmarks/gpu/README.md, \"The GPU window\")."
    echo
    echo "- started: $when"
    echo "- commit: $(member git-rev.txt | tr -d '\n')"
    echo "- source digest: $(member source-digest.txt | tr -d '\n')"
    echo "- gpu: $(member gpu.txt | tr -d '\n')"
    echo "- mode: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s.get("mode"), "-", s.get("mode_note"))' "$DEST/summary.json" 2> /dev/null || echo unknown)"
    echo
    echo "\`tar -xzf gpu-run.tar.gz\` gives the run's tree (logs, steps/, tune/, tune.jsonl.gz)."
} > "$DEST/README.md"
echo "kept in ${DEST#"$ROOT"/}:" >&2
ls -l "$DEST" >&2
[ -f "$DEST/summary.txt" ] && cat "$DEST/summary.txt"
