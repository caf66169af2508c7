#!/bin/sh
# tfm-taylor --distributed on 2 ranks prints the loss curve of one process
# with the same global batch; a state written on 2 ranks resumes in 1.
#   usage: check_taylor_distributed.sh TFM_TAYLOR MPIRUN
set -u
taylor=$1
mpirun=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OPENBLAS_NUM_THREADS=1
. "$(dirname "$0")/../scripts/steps.sh"
losses() { awk '$2 == "train" && $4 == "val" { print $1, $3, $5 }' "$1"; }
flags="--iterations 20 --step 10 --evaluate 0 --batch 32"
"$taylor" $flags --out "$scratch/one" >"$scratch/one.txt" 2>&1 &&
    "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$taylor" --distributed $flags \
        --out "$scratch/two" >"$scratch/two.txt" 2>&1
step "1 process and 2 ranks train" $?
losses "$scratch/one.txt" >"$scratch/one.losses"
losses "$scratch/two.txt" >"$scratch/two.losses"
cat "$scratch/two.losses"
[ "$(wc -l <"$scratch/one.losses")" -eq 2 ] && cmp -s "$scratch/one.losses" "$scratch/two.losses"
step "2 ranks print the losses of 1 process (same global batch)" $?
"$taylor" --iterations 30 --step 10 --evaluate 0 --out "$scratch/two" \
    --resume "$scratch/two/taylor_last.safetensors" >"$scratch/resumed.txt" 2>&1 &&
    grep -q "Resumed from .* at iteration 20" "$scratch/resumed.txt" &&
    losses "$scratch/resumed.txt" | grep -q "^30 "
step "a state written on 2 ranks resumes in 1 process" $?
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
