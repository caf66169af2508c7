#!/usr/bin/env bash
# Builds libtfm and runs the first example: y = 3x + 2 fitted through the tape.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
tfm_install_deps
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
./build/examples/tfm-fit-line
