#!/usr/bin/env bash
# Builds libtfm and runs its main job on the data the repository carries:
# tutorial 003's transformer learns Taylor expansions for about a minute on
# both cores (10,000 steps of batch 4, the recipe in docs/results.md
# shortened), then translates the 750 test functions and prints some with
# its accuracy.
set -eu
cd "$(dirname "$0")/.."
. scripts/deps.sh
tfm_install_deps
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
OPENBLAS_NUM_THREADS=1 ./build/examples/tfm-taylor --out runs/demo --threads 2 \
    --batch 4 --bucket 50 --eos-label 1 --dropout 0 --label-smoothing 0.1 --clip 1 \
    --lr 3e-3 --schedule cosine --warmup 400 --iterations 10000 --step 1000 --examples 3
echo
echo "The trained model describes itself: translate again with"
echo "  ./build/examples/tfm-taylor --translate runs/demo/taylor_best.safetensors"
