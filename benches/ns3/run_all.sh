#!/usr/bin/env bash
# The comparison points recorded in docs/performance.md ("fabriclab against
# ns-3 3.37"). Needs benches/ns3/install.sh first. Results (flows, both
# simulators' outputs, compare.json and compare-handshake.json) go under
# ${1:-runs/ns3}. Every point runs seeds 2 and 3 (flows pooled per bucket);
# ns-3 runs once per seed, and both fabriclab modes (without and with the
# handshake) are compared with that one ns-3 run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-runs/ns3}"
py="${PYTHON:-python}"
seeds="${SEEDS:-2,3}"
cmp() { echo "== $*"; "$py" "$here/compare.py" --seeds "$seeds" "$@"; "$py" "$here/compare.py" --seeds "$seeds" --handshake --reuse-ns3 "$@"; echo; }
for load in 0.2 0.4 0.6; do
    cmp --out "$out/star-dctcp-$load" --topology star --load "$load" --duration 200ms
done
cmp --out "$out/leafspine-dctcp-0.3" --topology leaf_spine --spines 4 --load 0.3 --duration 50ms
cmp --out "$out/leafspine-dctcp-0.6" --topology leaf_spine --spines 4 --load 0.6 --duration 50ms
cmp --out "$out/star-newreno-0.4" --topology star --cc newreno --load 0.4 --duration 200ms
cmp --out "$out/star-dctcp-prio-0.6" --topology star --load 0.6 --duration 100ms --prio-below-bytes 100000
