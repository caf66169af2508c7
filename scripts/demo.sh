#!/usr/bin/env bash
# Builds libtfm and runs its main job on the data the repository carries:
# tutorial 003's transformer learns Taylor expansions for about a minute and
# a half on both cores (two MPI ranks of one thread each, bfloat16 products
# where the CPU has AVX512_BF16; two threads without MPI; one thread when
# another program keeps a core busy), then translates
# the 750 test functions and prints some with its accuracy (>= 0.90 within 2
# minutes: docs/results.md has the recipe and the figures).
set -eu -o pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
tfm_install_deps libopenmpi-dev openmpi-bin
if [ ! -d build ]; then
    echo "meson setup build"
    meson setup build >/dev/null
fi
echo "ninja -C build"
if [ -t 1 ]; then
    ninja -C build # on a terminal ninja's progress is one line
else # one line every tenth of the build, and anything else ninja says
    ninja -C build | awk -F '[][/]' '/^\[[0-9]+\/[0-9]+\] / {
            if ($2 * 10 >= shown * $3) { print "  [" $2 "/" $3 "]"; shown = int($2 * 10 / $3) + 1 }
            fflush(); next
        } { print; fflush() }'
fi

# The recipe (docs/results.md): batch 4, AdamW, a short cosine schedule. The
# time limit stops a slower machine in time, with the best model so far.
recipe=(--out runs/demo --batch 4 --bucket 50 --eos-label 1 --dropout 0 --label-smoothing 0.1
    --clip 1 --lr 1e-3 --weight-decay 0.05 --schedule cosine --warmup 2000 --iterations 50000
    --time-limit 1.6 --step 5000 --examples 3)
precision=float32
grep -qw avx512_bf16 /proc/cpuinfo && precision=bfloat16
# The cores nothing else is using, over half a second of /proc/stat: two
# ranks meet at every step, so one of them descheduled stalls both (beside
# one busy core two ranks made 16,000 steps and 0.62, one thread alone
# 31,000 and 0.93: docs/results.md), and the demo runs on what it gets.
idle_cores() {
    local a b
    a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    sleep 0.5
    b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    awk -v a="$a" -v b="$b" -v n="$(nproc)" 'BEGIN { split(a, x, " "); split(b, y, " ");
        printf "%.1f", (y[2] > x[2] ? n * (y[1] - x[1]) / (y[2] - x[2]) : n) }'
}
idle=$(idle_cores)
if awk -v idle="$idle" 'BEGIN { exit !(idle < 1.5) }'; then
    echo "($idle of $(nproc) cores idle: one process of one thread, which a busy core slows least)"
    run=(./build/examples/tfm-taylor --threads 1)
elif command -v mpirun >/dev/null && [ -e build/lib/distributed/libtfm_mpi.so ]; then
    # two ranks of one thread each run these small steps fastest
    run=(mpirun --oversubscribe)
    [ "$(id -u)" -ne 0 ] || run+=(--allow-run-as-root)
    run+=(-np 2 ./build/examples/tfm-taylor --distributed --threads 1)
else
    run=(./build/examples/tfm-taylor --threads 2)
fi
echo "${run[*]} --precision $precision ${recipe[*]}"
start=$(date +%s)
OPENBLAS_NUM_THREADS=1 "${run[@]}" --precision "$precision" "${recipe[@]}" </dev/null
echo "Trained and translated in $(($(date +%s) - start)) s."
echo
echo "The trained model describes itself: translate again with"
echo "  ./build/examples/tfm-taylor --translate runs/demo/taylor_best.safetensors"
