#!/usr/bin/env bash
# Installs ns-3 3.37 (Debian's libns3-dev) and g++, and builds the comparison
# program into benches/ns3/build/. Idempotent. Needs root for apt-get.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! dpkg -s libns3-dev g++ >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libns3-dev g++
fi
mkdir -p "$here/build"
# Debian's ns-3 pkg-config files are broken (they emit "-I/usr;"): name the libraries by hand.
g++ -O2 -std=c++17 "$here/dc.cc" -o "$here/build/dc" -I/usr/include \
    -lns3-applications -lns3-internet -lns3-traffic-control -lns3-point-to-point -lns3-network -lns3-core
echo "built $here/build/dc (ns-3 $(dpkg-query -W -f='${Version}' libns3-dev))"
