#!/bin/sh
# tfm-tokenize prints spm_encode's ids and spm_decode's text for the
# committed fixtures, trains a model it can read back, and follows the
# examples' command-line conventions (examples/cli.h).
#   usage: check_tokenize.sh TFM_TOKENIZE FIXTURES_TEXT_DIR
set -u
tokenize=$1
text=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
. "$(dirname "$0")/../scripts/steps.sh"
for case in unigram.lines bpe.lines bytes.heldout char.heldout word.heldout; do
    model=${case%.*}
    "$tokenize" --model "$text/$model.model" <"$text/${case#*.}.txt" >"$scratch/$case.ids" &&
        cmp -s "$scratch/$case.ids" "$text/$case.ids"
    step "$model: the ids of spm_encode --output_format=id" $?
done
"$tokenize" --vocab "$text/byte_bpe.vocab.json" --merges "$text/byte_bpe.merges.txt" \
    <"$text/heldout.txt" >"$scratch/byte_bpe.ids" &&
    cmp -s "$scratch/byte_bpe.ids" "$text/byte_bpe.heldout.ids"
step "byte-level BPE: the ids of GPT-2's encoder.py" $?
# decoding: the lines, but where spm_decode's text differs from them
"$tokenize" --model "$text/unigram.model" --decode <"$text/unigram.lines.ids" >"$scratch/back.txt" &&
    awk -F '\t' 'FILENAME == ARGV[1] { fixed[$1] = substr($0, length($1) + 2); next }
                 { print ((FNR - 1) in fixed) ? fixed[FNR - 1] : $0 }' \
        "$text/unigram.lines.decoded" "$text/lines.txt" >"$scratch/want.txt" &&
    cmp -s "$scratch/back.txt" "$scratch/want.txt"
step "--decode: the text of spm_decode --input_format=id" $?
"$tokenize" --train "$text/heldout.txt" --vocab-size 400 --out "$scratch/trained.model" >/dev/null &&
    "$tokenize" --model "$scratch/trained.model" <"$text/heldout.txt" >"$scratch/trained.ids" &&
    [ "$(wc -l <"$scratch/trained.ids")" -eq "$(wc -l <"$text/heldout.txt")" ]
step "--train writes a model that encodes" $?
"$tokenize" --help | grep -q -- "--vocab-size" && "$tokenize" --version | grep -q libtfm
step "--help and --version" $?
"$tokenize" --no-such-flag >/dev/null 2>&1
[ $? -eq 2 ]
step "an unknown flag exits with status 2" $?
"$tokenize" </dev/null >/dev/null 2>&1
[ $? -eq 2 ]
step "no model exits with status 2" $?
"$tokenize" --vocab "$text/byte_bpe.vocab.json" </dev/null >/dev/null 2>&1
[ $? -eq 2 ]
step "--vocab without --merges exits with status 2" $?
"$tokenize" --model "$text/lines.txt" </dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "TFM_ERR_FORMAT" "$scratch/err.txt"
step "a file that is no model fails with libtfm's message" $?
echo "12 4294967301" | "$tokenize" --model "$text/unigram.model" --decode >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "TFM_ERR_RANGE" "$scratch/err.txt"
step "--decode refuses an id beyond int32 (2^32 + 5, not 5)" $?
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
