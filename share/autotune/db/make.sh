#!/usr/bin/env bash
# make.sh — how the shipped databases in this folder are made (share/autotune/db/README.md):
# tune every shipped shape list (benchmarks/shapes/*.yaml) on one device with `autotune tune`,
# check the coverage, and export the device's records as a bundle named after its family.
#   share/autotune/db/make.sh [BUDGET]      (per problem; default 30s)
# Environment: AUTOTUNE=path/to/autotune (default build/autotune), OUTDB (a scratch database,
# default a temporary folder; an existing one resumes), BACKEND/DEVICE (default: autotune's).
set -euo pipefail
cd "$(dirname "$0")/../../.."
AT=${AUTOTUNE:-build/autotune}
BUDGET=${1:-30s}
OUTDB=${OUTDB:-$(mktemp -d)}
dev=()
[ -n "${BACKEND:-}" ] && dev+=(--backend "$BACKEND")
[ -n "${DEVICE:-}" ] && dev+=(--device "$DEVICE")
# Tuned from nothing: no shipped database answers or seeds this run.
export AUTOTUNE_SHIPPED_DB= AUTOTUNE_DB_PATH=
for list in benchmarks/shapes/*.yaml; do
  echo "== $list ($(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$AT" tune --shapes "$list" --budget "$BUDGET" --db "$OUTDB" "${dev[@]}"
  "$AT" db stats --db "$OUTDB" --shapes "$list" | sed -n '/^coverage/,$p'
done
# The bundle is named after the device's family (its compile target, or a PoCL CPU's LLVM name)
# and backend: one file per device kind.
name=$("$AT" db export - --db "$OUTDB" --best-only | zcat | python3 -c '
import json, sys
sys.stdin.readline()
d = json.loads(sys.stdin.readline())["device"]
print("%s-%s" % (d["backend"], d["family"].replace(" ", "-").replace("/", "-")))')
"$AT" db export "share/autotune/db/$name.jsonl.gz" --db "$OUTDB"
"$AT" db stats --db "$OUTDB"
