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
# A cosine the time limit ends first anneals all the same: the rate follows
# the time when it is ahead of the steps (a slower or busy machine), on one
# process and on 2 ranks, which take rank 0's clock.
last_lr() { awk '$2 == "train" { for (i = 1; i < NF; i++) if ($i == "lr") lr = $(i + 1) } END { print lr }' "$1"; }
cosine="--schedule cosine --lr 1e-3 --warmup 5 --iterations 1000000 --time-limit 0.05 --step 10 --evaluate 0 --batch 8"
"$taylor" $cosine --out "$scratch/cos1" >"$scratch/cos1.txt" 2>&1 &&
    "$mpirun" -np 2 --oversubscribe --allow-run-as-root "$taylor" --distributed $cosine \
        --out "$scratch/cos2" >"$scratch/cos2.txt" 2>&1
step "cosine runs stopped by the time limit" $?
echo "last rates: $(last_lr "$scratch/cos1.txt") (1 process), $(last_lr "$scratch/cos2.txt") (2 ranks)"
awk -v a="$(last_lr "$scratch/cos1.txt")" -v b="$(last_lr "$scratch/cos2.txt")" \
    'BEGIN { exit !(a != "" && b != "" && a < 5e-5 && b < 5e-5) }'
step "the cosine has annealed (under 5% of its peak) when the time limit stops it" $?
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
