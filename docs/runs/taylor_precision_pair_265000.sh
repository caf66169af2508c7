#!/usr/bin/env bash
# docs/results.md: tutorial 003's 20-minute recipe (weight decay 0.05, 265,000 steps), bfloat16 then float32 products
cd "$(dirname "$0")/../.."  # the repository
for p in bfloat16 float32; do
  OPENBLAS_NUM_THREADS=1 /usr/bin/time -f 'wall %e s' mpirun --allow-run-as-root -np 2 \
    ./build/examples/tfm-taylor --distributed --threads 1 --out runs/taylor_099_$p \
    --batch 4 --lr 1e-3 --warmup 3200 --iterations 265000 --weight-decay 0.05 --bucket 50 \
    --eos-label 1 --dropout 0 --schedule cosine --clip 1 --label-smoothing 0.1 --step 5000 \
    --precision $p > runs/taylor_mpi2_b4_wd005_265000_$p.log 2>&1
done
