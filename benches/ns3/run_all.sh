#!/usr/bin/env bash
# The comparison points recorded in docs/performance.md ("fabriclab against
# ns-3 3.37"). Needs benches/ns3/install.sh first. Results (flows, both
# simulators' outputs, compare.json) go under ${1:-runs/ns3}.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-runs/ns3}"
py="${PYTHON:-python}"
cmp() { echo "== $*"; "$py" "$here/compare.py" "$@"; echo; }
for load in 0.2 0.4 0.6; do
    cmp --out "$out/star-dctcp-$load" --topology star --load "$load" --duration 200ms --repeat 2
done
cmp --out "$out/leafspine-dctcp-0.3" --topology leaf_spine --spines 4 --load 0.3 --duration 50ms --repeat 2
cmp --out "$out/leafspine-dctcp-0.6" --topology leaf_spine --spines 4 --load 0.6 --duration 50ms
cmp --out "$out/star-newreno-0.4" --topology star --cc newreno --load 0.4 --duration 200ms --repeat 2
cmp --out "$out/star-dctcp-prio-0.6" --topology star --load 0.6 --duration 100ms --prio-below-bytes 100000
