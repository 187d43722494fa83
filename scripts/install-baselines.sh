#!/bin/sh
# Installs the baselines of `fabriclab runtime bench --baseline mpi|gloo`:
# Open MPI + mpi4py (MPI_Allreduce) and PyTorch from PyPI (torch.distributed's
# Gloo backend). Needs root for apt-get. PYTHON selects the interpreter whose
# environment gets mpi4py and torch (default: python3 on PATH).
#   sudo scripts/install-baselines.sh            # both
#   sudo scripts/install-baselines.sh mpi        # MPI only (torch from PyPI is large: ~1 GB with its CUDA deps)
#   sudo scripts/install-baselines.sh ptp        # linuxptp (ptp4l, pmc): the clock-sync baseline of
#                                                # benches/bench_box_clock.py (docs/clockwork.md)
set -eu
PYTHON=${PYTHON:-python3}
what=${1:-all}
if [ "$what" = all ] || [ "$what" = mpi ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openmpi-bin libopenmpi-dev
    "$PYTHON" -m pip install mpi4py
fi
if [ "$what" = all ] || [ "$what" = ptp ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends linuxptp
fi
if [ "$what" = all ] || [ "$what" = gloo ]; then
    # Plain PyPI (no other index is reachable from the lab's machines).
    "$PYTHON" -m pip install torch
fi
