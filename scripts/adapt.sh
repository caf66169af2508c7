#!/bin/bash
# Adapting the README's translation model to a domain it never saw (issue
# 42, "Shown on real text"): the messages of compilers and parser
# generators (scripts/translation_data.py --domain compilers). Prints one
# row of docs/results.md's "Adapting to a domain" table per method, every
# command it runs first:
#   base        the general model as it is
#   full        every parameter fine-tuned for --minutes, kept best by the
#               domain's validation loss
#   full-frozen the same with the embeddings frozen (the shared vocabulary
#               table, which the general text also reads)
#   full-replay every parameter, on the domain's pairs and as many of the
#               general training pairs (translation_data.py --replay 5000):
#               what the model knew is rehearsed, still kept best by the
#               domain's validation loss
#   full-replay-frozen  the same with the embeddings frozen
#   lora8       a LoRA adapter of rank 8 on every attention projection
#               (q, k, v, o of both attentions) over the frozen general
#               model, trained on the domain's pairs and as many general
#               ones replayed (as full-replay), its folder (PEFT's) kept
#               best by the domain's validation loss
#   lora16      the same of rank 16
#   lora8-domain  rank 8 on the domain's pairs alone
#   usage: bash scripts/adapt.sh [MINUTES [METHOD...]]   (from the
#   repository, after meson setup build && ninja -C build; as root to
#   install the packages; by default every method, each trained for 4.5
#   minutes so that its last validation and save end within 5)
# It makes runs/translation/data and runs/domain/data when missing, trains
# the general model as the README does when runs/translation/model.safetensors
# is missing (10 minutes), and writes everything else under runs/adapt/.
set -eu
minutes=${1:-4.5}
shift $(($# > 0))
methods=${*:-base full full-frozen full-replay full-replay-frozen lora8 lora16 lora8-domain}
translate=build/examples/tfm-translate
general=runs/translation/model.safetensors
out=runs/adapt
mkdir -p "$out"

run() { echo "\$ $*" >&2; "$@"; }

# Both cores: two MPI ranks when mpirun and libtfm_mpi are there, else two
# threads; bfloat16 products where the CPU has them (as the README).
precision=float32
grep -qw avx512_bf16 /proc/cpuinfo && precision=bfloat16
if command -v mpirun >/dev/null && [ -e build/lib/distributed/libtfm_mpi.so ]; then
    train=(mpirun --allow-run-as-root --oversubscribe -np 2 "$translate" --train --distributed)
else
    train=("$translate" --train --threads 2)
fi

[ -s runs/translation/data/test.en ] || run python3 scripts/translation_data.py
[ -s runs/domain/data/test.en ] || run python3 scripts/translation_data.py --domain compilers
[ -s "$general" ] ||
    run "${train[@]}" --precision "$precision" --minutes 9.5 --out "$general" >"$out/general.log"

# chrF of a model on a test set (beam 4, the model's default), one thread
chrf() {
    run "$translate" --model "$1" "${@:4}" <"$2/test.en" >"$out/$3.fr" &&
        "$translate" --score "$out/$3.fr" --reference "$2/test.fr" | awk '{ print $2 }'
}

echo "| method | domain chrF | general chrF | minutes | bytes written | trained parameters |"
echo "| --- | --- | --- | --- | --- | --- |"

# Fine-tuning: 3e-4, 0.15 of the general run's peak rate (at 5e-4 a well
# trained base lost 1.02 chrF on the general set in CI), a short warm-up,
# a validation every 50 steps (keep-best by the domain's validation loss).
tune() { # name, data, extra options
    local name=$1 data=$2
    shift 2
    local model=$out/$name.safetensors start
    rm -f "$model"
    start=$(date +%s.%N)
    run "${train[@]}" --model "$general" --data "$data" --out "$model" \
        --precision "$precision" --minutes "$minutes" --lr 3e-4 --warmup 50 \
        --validate-every 50 --average 0 --evaluate 0 "$@" >"$out/$name.log"
    local took trained
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", (b - a) / 60 }')
    trained=$(sed -n 's/^Model: .*, \([0-9]*\) of them trained.*/\1/p' "$out/$name.log")
    echo "| $name | $(chrf "$model" runs/domain/data "$name.domain") |" \
         "$(chrf "$model" runs/translation/data "$name.general") | $took |" \
         "$(stat -c %s "$model") | $trained |"
}
# LoRA: the adapter alone trains, with the threads (ranks do not average an
# adapter's gradients); a higher rate than fine-tuning's, 2e-3: its few
# parameters start from a zero product and move the model only through
# alpha / rank. On the domain's pairs alone the adapter forgets as much as
# full fine-tuning does (docs/results.md); with the general pairs replayed
# it keeps the general set.
lora() { # name, rank, data
    local name=$1 rank=$2 data=$3 folder=$out/$1 start
    rm -rf "$folder"
    start=$(date +%s.%N)
    run "$translate" --train --threads 2 --model "$general" --data "$data" \
        --lora "$rank" --out "$folder" --precision "$precision" --minutes "$minutes" \
        --lr 2e-3 --warmup 50 --validate-every 50 --average 0 --evaluate 0 >"$out/$name.log"
    local took trained
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", (b - a) / 60 }')
    trained=$(sed -n 's/^Model: .*, \([0-9]*\) of them trained.*/\1/p' "$out/$name.log")
    echo "| $name | $(chrf "$general" runs/domain/data "$name.domain" --adapter "$folder") |" \
         "$(chrf "$general" runs/translation/data "$name.general" --adapter "$folder") |" \
         "$took | $(cat "$folder"/* | wc -c) | $trained |"
}
[ -s runs/domain/replay/test.en ] ||
    run python3 scripts/translation_data.py --domain compilers --replay 5000 runs/domain/replay

for method in $methods; do
    case $method in
    base) echo "| base | $(chrf "$general" runs/domain/data base.domain) |" \
               "$(chrf "$general" runs/translation/data base.general) | | | |" ;;
    full) tune full runs/domain/data ;;
    full-frozen) tune full-frozen runs/domain/data --freeze embeddings ;;
    full-replay) tune full-replay runs/domain/replay ;;
    full-replay-frozen) tune full-replay-frozen runs/domain/replay --freeze embeddings ;;
    lora8) lora lora8 8 runs/domain/replay ;;
    lora16) lora lora16 16 runs/domain/replay ;;
    lora8-domain) lora lora8-domain 8 runs/domain/data ;;
    *) echo "adapt.sh: no method '$method' (base, full, full-frozen, full-replay, full-replay-frozen, lora8, lora16, lora8-domain)" >&2
       exit 2 ;;
    esac
done
