#!/usr/bin/env bash
# docs/results.md: tutorial 003 with weight decay 0.05 on 2 MPI ranks,
# bfloat16 then float32 products, for ITERATIONS steps (75000: the
# 6-minute recipe, the default; 265000: the 20-minute one).
#   usage: docs/runs/taylor_precision_pair.sh [ITERATIONS]
iterations=${1:-75000}
cd "$(dirname "$0")/../.."  # the repository
for p in bfloat16 float32; do
  OPENBLAS_NUM_THREADS=1 /usr/bin/time -f 'wall %e s' mpirun --allow-run-as-root -np 2 \
    ./build/examples/tfm-taylor --distributed --threads 1 --out "runs/taylor_${iterations}_$p" \
    --batch 4 --lr 1e-3 --warmup 3200 --iterations "$iterations" --weight-decay 0.05 --bucket 50 \
    --eos-label 1 --dropout 0 --schedule cosine --clip 1 --label-smoothing 0.1 --step 5000 \
    --precision $p > "runs/taylor_mpi2_b4_wd005_${iterations}_$p.log" 2>&1
done
