#!/usr/bin/env bash
# fetch.sh — fetches the FAIR Benchmark Hub recordings used by the strategy benchmark
# (README.md here: which, why, licence) at a fixed commit and checks their sha256.
#
#   benchmarks/spaces/hub/fetch.sh DEST [HUB]
#
# DEST: a folder for the hub-*.json.gz files. HUB: a clone of the hub (a checkout or a bare git
# directory) to read them from; without it they are downloaded from GitHub with curl.
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: $0 DEST [HUB]" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
dest=$1
hub=${2:-}
commit=8eeb99e7179e6838af95d392ac6c60cebfd8c434
mkdir -p "$dest"
# name  path in the hub (tab-separated in files.tsv: name, sha256, path)
while IFS=$'\t' read -r name sum path; do
    [[ $name == \#* || -z $name ]] && continue
    out=$dest/$name
    if [[ ! -f $out ]] || ! echo "$sum  $out" | sha256sum -c --status; then
        if [[ -n $hub ]]; then
            git --git-dir="$( [[ -d $hub/.git ]] && echo "$hub/.git" || echo "$hub")" \
                show "$commit:$path" >"$out"
        else
            url="https://github.com/AutoTuningAssociation/benchmark_hub/raw/$commit/${path// /%20}"
            curl -fsSL -o "$out" "$url"
        fi
    fi
    echo "$sum  $out" | sha256sum -c --quiet || { echo "fetch.sh: $name: wrong sha256" >&2; exit 1; }
    echo "$name"
done <"$here/files.tsv"
