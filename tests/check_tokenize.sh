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
# --decode: a line that is not ids (a word, a number with more after it, an
# id past the vocabulary, one beyond int32: 2^32 + 5, not 5) exits 1 naming
# the line and the word, and prints nothing for it
for bad in xyz:xyz "12abc 5:12abc" "5 -3:-3" "12 100000:100000" "12 4294967301:4294967301" \
    "+7:+7"; do
    printf '5\n%s\n' "${bad%:*}" | "$tokenize" --model "$text/unigram.model" --decode \
        >"$scratch/out.txt" 2>"$scratch/err.txt"
    [ $? -eq 1 ] && [ "$(wc -l <"$scratch/out.txt")" -eq 1 ] &&
        grep -q "line 2: '${bad#*:}' is not a token id" "$scratch/err.txt"
    step "--decode refuses the line '${bad%:*}', naming it" $?
done
printf '5 7\r\n12\0003\n' | "$tokenize" --model "$text/unigram.model" --decode \
    >"$scratch/out.txt" 2>"$scratch/err.txt"
[ $? -eq 1 ] && [ "$(wc -l <"$scratch/out.txt")" -eq 1 ] && grep -q "line 2: '12" "$scratch/err.txt"
step "--decode takes a line ending in CR, refuses one with a NUL byte" $?
# standard output on a full disk: every mode exits 1 saying so
full() { # name, then the command's arguments (standard input from $text/heldout.txt)
    name=$1
    shift
    "$tokenize" "$@" <"$text/heldout.txt" >/dev/full 2>"$scratch/err.txt"
    [ $? -eq 1 ] && grep -q "cannot write standard output: No space left" "$scratch/err.txt"
    step "$name to /dev/full exits 1 with a message" $?
}
full "encoding" --model "$text/unigram.model"
"$tokenize" --model "$text/unigram.model" <"$text/heldout.txt" >"$scratch/heldout.ids"
"$tokenize" --model "$text/unigram.model" --decode <"$scratch/heldout.ids" >/dev/full \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "cannot write standard output" "$scratch/err.txt"
step "--decode to /dev/full exits 1 with a message" $?
full "--train's report" --train "$text/heldout.txt" --vocab-size 400 --out "$scratch/full.model"
full "--help" --help
# a save that fails (the file size limit reached: EFBIG) leaves the model
# there as it was: the tokenizer is written beside it, then renamed
"$tokenize" --train "$text/heldout.txt" --vocab-size 400 --out "$scratch/kept.model" >/dev/null &&
    cp "$scratch/kept.model" "$scratch/before.model" &&
    (trap '' XFSZ; ulimit -f 2; exec "$tokenize" --train "$text/heldout.txt" --vocab-size 800 \
        --out "$scratch/kept.model") >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "tfm_tokenizer_save" "$scratch/err.txt" &&
    cmp -s "$scratch/kept.model" "$scratch/before.model"
step "--train whose save fails leaves the model at --out as it was" $?
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
