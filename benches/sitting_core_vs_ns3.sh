#!/usr/bin/env bash
# The packet core alone against ns-3's Simulator::Run, one sitting (issue 13):
# each round runs ns-3's build/dc on a case of benches/ns3/flows.py, then
# every given run_spec binary on the same case's core JSON, one run per
# process; prints each process's CPU time (perf stat task-clock) and, per
# command, the best and median, and ns-3's best over each command's best.
# A benchmark, not a test.
#
#   python benches/ns3/flows.py --out /tmp/star04 --topology star --load 0.4 --duration 200ms
#   python benches/core_json.py /tmp/star04/scenario.toml > /tmp/star04.json
#   bash benches/sitting_core_vs_ns3.sh /tmp/star04 /tmp/star04.json 3 base=/tmp/run_spec_old new=target/release/deps/run_spec-HASH
set -euo pipefail
case_dir=$1; json=$2; rounds=$3; shift 3
here="$(cd "$(dirname "$0")" && pwd)"
out=$(mktemp -d)
cpu() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | grep task-clock | cut -d, -f1; }
for r in $(seq "$rounds"); do
    echo "round $r load $(cut -d' ' -f1 /proc/loadavg)"
    echo "ns-3 $(cpu "$here/ns3/build/dc" --case="$case_dir/case.txt" --out="$out/ns3.csv" --links="$out/links.csv")"
    for named in "$@"; do
        echo "${named%%=*} $(cpu "${named#*=}" "$json" 1)"
    done
done | tee "$out/log" | grep -v '^round' | python3 -c '
import sys, statistics, collections
d = collections.defaultdict(list)
for line in sys.stdin:
    name, ms = line.split()
    d[name].append(float(ms) / 1000)
ns3 = min(d["ns-3"])
for name, v in d.items():
    print(f"{name}: CPU s best {min(v):.3f} median {statistics.median(v):.3f}; ns-3 best / best {ns3 / min(v):.1f}; runs {[round(x, 3) for x in v]}")
'
grep '^round' "$out/log"
