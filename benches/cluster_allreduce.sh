#!/bin/sh
# Runtime vs MPI vs Gloo allreduce in a cluster-in-a-box, alternately in one sitting
# (docs/performance-runtime.md, "Runtime and cluster-in-a-box"). Root; baselines from scripts/install-baselines.sh.
#   sudo benches/cluster_allreduce.sh [SCENARIO] [--gso]
# N (ranks, default 4) and SIZES (default 1M:64M) from the environment.
set -eu
SCEN=${1:-examples/cluster-star4-1g.toml}
GSO=${2:-}
FL=${FABRICLAB:-fabriclab}
ARGS="-n ${N:-4} --sizes ${SIZES:-1M:64M} --factor 2 --iters ${ITERS:-5} --warmup 2 --cluster bench"
$FL cluster down --name bench >/dev/null
$FL cluster up "$SCEN" --name bench $GSO
trap '$FL cluster down --name bench >/dev/null' EXIT
for round in 1 2; do
    echo "## round $round"
    $FL runtime bench $ARGS
    $FL runtime bench $ARGS --baseline mpi
    $FL runtime bench $ARGS --baseline gloo 2>/dev/null
done
