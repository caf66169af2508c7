#!/bin/sh
# tfm-translate on a tiny made-up corpus (sentences of words and the same
# words spelled backwards): training reports the pairs it skips, the model
# file translates standard input line for line and as the lines come,
# --score gives chrF and BLEU worked out by hand, and bad input is refused
# with the examples' exit statuses (examples/cli.h: 2 for usage, 1 else).
# Then each published-model fixture folder (tests/marian ...) translates
# its cases' sources as its twin did, greedy and beam; and --po translates
# gettext catalogs (tests/fixtures/po) into ones msgfmt accepts.
#   usage: check_translate.sh TFM_TRANSLATE TESTS_DIR [CATALOGS]
# CATALOGS: 1 when tfm-translate is built with --po (libgettextpo), 0 when not.
set -u
translate=$1
tests=$2
catalogs=${3:-1}
scratch=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT
. "$(dirname "$0")/../scripts/steps.sh"

# pairs FIRST COUNT FILE [reversed]: sentences of 2 to 4 words, FILE.en
# and FILE.fr (with "reversed", the French words in the other order: a
# domain the model trained on the others never saw)
pairs() {
    awk -v first="$1" -v n="$2" -v out="$3" -v reversed="${4:-}" 'BEGIN {
        split("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima " \
              "mike november oscar papa quebec romeo sierra tango", word, " ")
        for (i = first; i < first + n; i++) {
            en = fr = ""
            for (j = 0; j < 2 + i % 3; j++) {
                w = word[1 + (i * 7 + j * 13 + int(i / 20) * j) % 20]
                back = ""
                for (c = length(w); c >= 1; c--)
                    back = back substr(w, c, 1)
                en = en (j ? " " : "") w
                fr = reversed ? back (j ? " " : "") fr : fr (j ? " " : "") back
            }
            print en >(out ".en")
            print fr >(out ".fr")
        }
    }'
}
data=$scratch/data
mkdir "$data"
pairs 0 300 "$data/train"
pairs 300 20 "$data/validation"
pairs 320 20 "$data/test"
# two pairs with a side that holds no text: reported and skipped
printf 'golf hotel\n   \n' >>"$data/train.en"
printf '\n flog letoh\n' >>"$data/train.fr"

model=$scratch/model.safetensors
"$translate" --train --data "$data" --out "$model" --steps 300 --validate-every 100 \
    --vocab-size 316 --max-len 32 --d-model 32 --heads 2 --layers 1 --d-ff 64 \
    --max-tokens 400 --warmup 50 --lr 3e-3 --dropout 0 --beam 1 >"$scratch/train.txt" 2>&1
status=$?
[ $status -eq 0 ] && [ -s "$model" ] && grep -q "^Test (20 pairs, greedy): chrF" "$scratch/train.txt"
step "--train --steps writes a model and scores the test pairs" $?
grep -q "^train: skipped 2 of 302 pairs: 2 with a side that holds no text" "$scratch/train.txt"
step "empty and whitespace-only pairs are reported as skipped" $?
# val_falls LOG COUNT: LOG has COUNT validations, the last lower than the first
val_falls() {
    awk -v count="$2" '$2 == "epoch" && $6 == "val" { val[++n] = $7 }
        END { exit !(n == count && val[n] < val[1]) }' "$1"
}
# the validation loss at step 100, then at 300: it falls
val_falls "$scratch/train.txt" 3
step "the validation loss falls" $?
[ $status -eq 0 ] || cat "$scratch/train.txt"
grep -qx "Best model: $model, a new file" "$scratch/train.txt"
step "--train says its --out is a new file" $?

# Its vocabulary holds the placeholder pieces (16 of its 316; it saw no
# directive): each
# translation keeps the message's directives, in order, and a catalog of
# them passes gettext's msgfmt --check-format (a test-only dependency).
printf '%s\n' 'alpha %s bravo' 'File "%s" was renamed to "%s".' '%d of %d (%-10.3lf%%)' \
    'golf <b>%zu</b> hotel &amp; $HOME' '%2$s kilo %1$s' >"$scratch/formats.en"
"$translate" --model "$model" --beam 1 <"$scratch/formats.en" >"$scratch/formats.fr" &&
    "$translate" --model "$model" --beam 4 <"$scratch/formats.en" >"$scratch/formats4.fr"
step "messages with directives translate" $?
if command -v msgfmt >/dev/null; then
    for out in formats.fr formats4.fr; do
        [ -s "$scratch/$out" ] && awk 'BEGIN { print "msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=UTF-8\\n\"\n" }
             NR == FNR { en[FNR] = $0; next }
             { gsub(/"/, "\\\"", en[FNR]); gsub(/"/, "\\\"")
               print "#, c-format\nmsgid \"" en[FNR] "\"\nmsgstr \"" $0 "\"\n" }' \
            "$scratch/formats.en" "$scratch/$out" >"$scratch/$out.po" &&
            msgfmt --check-format -o /dev/null "$scratch/$out.po" 2>"$scratch/msgfmt.txt" ||
            { cat "$scratch/$out.po" "$scratch/msgfmt.txt"; false; }
        step "msgfmt --check-format accepts the translations ($out)" $?
    done
else
    echo "SKIP msgfmt --check-format: gettext's msgfmt is not installed"
fi
[ "$(grep -o '%s' "$scratch/formats.fr" | wc -l)" -eq 3 ] && ! grep -q "$(printf '\357\275\237')" \
    "$scratch/formats.fr"
step "the directives come back as text, no placeholder left" $?
# a glossary (TSV): the target term where the line holds the source term
printf 'ALPHA\tsierratango\n\nkilo\tlima\n' >"$scratch/glossary.tsv"
printf 'alpha bravo\nbravo charlie\n' |
    "$translate" --model "$model" --glossary "$scratch/glossary.tsv" >"$scratch/glossary.fr" &&
    [ "$(grep -c sierratango "$scratch/glossary.fr")" -eq 1 ] &&
    sed -n 1p "$scratch/glossary.fr" | grep -q sierratango
step "--glossary puts the target term where the source term is" $?
printf 'alpha\n' >"$scratch/bad.tsv"
echo alpha | "$translate" --model "$model" --glossary "$scratch/bad.tsv" >/dev/null \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "bad.tsv:1: a glossary line is a source term, a tab" "$scratch/err.txt"
step "a glossary line without its tab is refused, naming the line" $?

# A run never replaces the model at --out unless told to (--overwrite):
# its best starts at infinity, so its first validation would.
tiny="--data $data --vocab-size 316 --max-len 32 --d-model 16 --heads 2 --layers 1 --d-ff 16
      --max-tokens 400 --steps 1 --validate-every 1 --evaluate 0"
cp "$model" "$scratch/kept.safetensors"
# shellcheck disable=SC2086
"$translate" --train $tiny --out "$scratch/kept.safetensors" >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "already exists.*--overwrite" "$scratch/err.txt" &&
    cmp -s "$model" "$scratch/kept.safetensors"
step "--train refuses a model at --out, which stays as it was" $?
# shellcheck disable=SC2086
"$translate" --train $tiny --out "$scratch/kept.safetensors" --overwrite \
    --save-vocab "$scratch/vocab.model" >"$scratch/again.txt" 2>&1 &&
    grep -qx "Best model: $scratch/kept.safetensors, replacing the model there (--overwrite)" \
        "$scratch/again.txt" && ! cmp -s "$model" "$scratch/kept.safetensors"
step "--train --overwrite replaces it, saying so" $?
# a vocabulary save that fails (the file size limit reached: EFBIG) leaves
# the one there as it was
cp "$scratch/vocab.model" "$scratch/vocab.before"
# shellcheck disable=SC2086
(trap '' XFSZ; ulimit -f 2; exec "$translate" --train $tiny --vocab-size 400 \
    --out "$scratch/new.safetensors" --save-vocab "$scratch/vocab.model") \
    >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "tfm_tokenizer_save" "$scratch/err.txt" &&
    cmp -s "$scratch/vocab.model" "$scratch/vocab.before"
step "--save-vocab that fails leaves the vocabulary there as it was" $?

printf 'hotel quebec\nalpha bravo charlie\n' | "$translate" --model "$model" >"$scratch/two.txt" &&
    [ "$(wc -l <"$scratch/two.txt")" -eq 2 ]
step "--model: two lines in, two lines out" $?

# Fine-tuning (--train --model): from the libtfm file, with the embeddings
# and the encoder frozen, on pairs it never saw; the saved model's frozen
# tensors are the start's, bit for bit, and the decoder's moved.
mkdir "$scratch/domain"
pairs 1000 200 "$scratch/domain/train" reversed
pairs 1200 20 "$scratch/domain/validation" reversed
pairs 1220 20 "$scratch/domain/test" reversed
tune="--data $scratch/domain --steps 40 --validate-every 20 --lr 1e-3 --warmup 10 --average 0"
# fine_tune WHAT START PARTS OUT: fine-tunes START (a file or a folder)
# on those pairs with PARTS frozen into OUT (its log OUT.txt): it says so,
# and its validation loss falls
fine_tune() {
    # shellcheck disable=SC2086
    "$translate" --train --model "$2" $tune --freeze "$3" --out "$4" >"$4.txt" 2>&1 &&
        grep -q "^Model: $2, .* of them trained, frozen: $3" "$4.txt"
    local status=$?
    step "--train --model $1 --freeze $3 fine-tunes it into --out" $status
    [ $status -eq 0 ] || cat "$4.txt"
    val_falls "$4.txt" 2
    step "fine-tuning $1: the validation loss falls" $?
}
fine_tune FILE "$model" embeddings,encoder "$scratch/tuned.safetensors"
grep -q "^Test (20 pairs, beam): chrF" "$scratch/tuned.safetensors.txt"
step "fine-tuning scores the test pairs with the best model" $?
# frozen START TUNED MAP [CHANGED]: in TUNED, each tensor under a prefix
# of MAP ("tuned.=start.,...") holds the bytes of START's tensor of the
# name with START's prefix, and each matrix under CHANGED differs from
# START's of the same name
frozen() {
    python3 - "$@" <<'PY'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in header.items() if k != "__metadata__"}
start, tuned = tensors(sys.argv[1]), tensors(sys.argv[2])
pairs = [(t, start[s + t[len(prefix):]]) for spec in sys.argv[3].split(",")
         for prefix, s in [spec.split("=")] for t in tuned if t.startswith(prefix)]
changed = [t for t in tuned if len(sys.argv) > 4 and t.startswith(sys.argv[4])
           and t.endswith("weight")]
sys.exit(not (pairs and all(tuned[t] == value for t, value in pairs)
              and (len(sys.argv) == 4 or changed)
              and all(tuned[t] != start[t] for t in changed)))
PY
}
frozen "$model" "$scratch/tuned.safetensors" src_embedding.=src_embedding.,encoder.=encoder. decoder.
step "fine-tuning: frozen tensors bit for bit the start's, the decoder's changed" $?
printf 'hotel quebec\nalpha bravo\n' | "$translate" --model "$scratch/tuned.safetensors" \
    >"$scratch/tuned.txt" && [ "$(wc -l <"$scratch/tuned.txt")" -eq 2 ]
step "the fine-tuned file translates" $?
cp "$scratch/tuned.safetensors" "$scratch/tuned.before"
# shellcheck disable=SC2086
"$translate" --train --model "$scratch/tuned.safetensors" $tune \
    --out "$scratch/tuned.safetensors" >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "already exists.*--overwrite" "$scratch/err.txt" &&
    cmp -s "$scratch/tuned.safetensors" "$scratch/tuned.before"
step "fine-tuning refuses the model at --out (its own file) without --overwrite" $?
# shellcheck disable=SC2086
"$translate" --train --model "$model" $tune --freeze embeddings,attention \
    --out "$scratch/never.safetensors" >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "'attention' is not a part" "$scratch/err.txt" &&
    [ ! -e "$scratch/never.safetensors" ]
step "--freeze with a word that is not a part is refused by name" $?
# shellcheck disable=SC2086
"$translate" --train --model "$model" $tune --save-vocab "$scratch/never.model" \
    --out "$scratch/never.safetensors" >/dev/null 2>&1
[ $? -eq 2 ] && [ ! -e "$scratch/never.safetensors" ]
step "--train --model keeps the model's vocabulary: --save-vocab is refused" $?
# a published folder: its tokenizers, its ids around sources and its
# decoder start; the saved model reloads and translates
fine_tune FOLDER "$tests/marian" embeddings "$scratch/marian"
[ -s "$scratch/marian/config.json" ] && [ -s "$scratch/marian/source.spm" ] &&
    frozen "$tests/marian/model.safetensors" "$scratch/marian/model.safetensors" \
        model.shared.=model.shared.,model.encoder.embed=model.encoder.embed model.decoder.layers.
step "fine-tuning FOLDER saves the folder's layout, the frozen embeddings bit for bit" $?
printf 'hotel quebec\nalpha bravo\n' | "$translate" --model "$scratch/marian" \
    --max-length 8 >"$scratch/marian-out.txt" && [ "$(wc -l <"$scratch/marian-out.txt")" -eq 2 ]
step "the fine-tuned folder reloads and translates" $?

# LoRA (--lora): an adapter over the frozen model trains on the same
# pairs, is saved as PEFT's folder and translated with (--adapter); the
# model's file stays as it was, bit for bit.
# lora WHAT START OUT [OPTIONS]: trains a rank-4 adapter over START into OUT
# (its log OUT.txt): it says so, its validation loss falls, PEFT's files
lora() {
    what=$1 start=$2 out=$3
    shift 3
    rm -rf "$scratch/start.before"
    cp -r "$start" "$scratch/start.before"
    # shellcheck disable=SC2086
    "$translate" --train --model "$start" $tune --lr 1e-2 --lora 4 "$@" --out "$out" \
        >"$out.txt" 2>&1 && grep -q "^Model: $start, .* of them trained (LoRA adapter)" \
        "$out.txt" && [ -s "$out/adapter_config.json" ] && [ -s "$out/adapter_model.safetensors" ]
    status=$?
    step "--train --model $what --lora 4 saves PEFT's adapter folder" $status
    [ $status -eq 0 ] || cat "$out.txt"
    val_falls "$out.txt" 2
    step "LoRA over $what: the validation loss falls" $?
}
lora FILE "$model" "$scratch/adapter"
cmp -s "$model" "$scratch/start.before"
step "LoRA over FILE: the model's file unchanged bit for bit" $?
grep -q "^Test (20 pairs, beam): chrF" "$scratch/adapter.txt"
step "LoRA scores the test pairs with the model and its best adapter" $?
"$translate" --model "$model" --beam 1 <"$scratch/domain/test.en" >"$scratch/plain.txt" &&
    "$translate" --model "$model" --beam 1 --adapter "$scratch/adapter" \
        <"$scratch/domain/test.en" >"$scratch/adapted.txt" &&
    "$translate" --model "$model" --beam 1 --adapter "$scratch/adapter" --batch 1 \
        <"$scratch/domain/test.en" >"$scratch/adapted-again.txt" &&
    [ "$(wc -l <"$scratch/adapted.txt")" -eq 20 ] &&
    ! cmp -s "$scratch/plain.txt" "$scratch/adapted.txt" &&
    cmp -s "$scratch/adapted.txt" "$scratch/adapted-again.txt"
step "--adapter translates otherwise than the model alone, alike in any batches" $?
cp -r "$scratch/adapter" "$scratch/adapter.before"
# shellcheck disable=SC2086
"$translate" --train --model "$model" $tune --lora 4 --out "$scratch/adapter" \
    >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "already exists.*--overwrite" "$scratch/err.txt" &&
    diff -r "$scratch/adapter" "$scratch/adapter.before" >/dev/null
step "--lora refuses the adapter folder at --out without --overwrite, unchanged" $?
lora FOLDER "$tests/marian" "$scratch/marian-adapter" --lora-targets q,v,fc1 --lora-alpha 8
diff -r "$tests/marian" "$scratch/start.before" >/dev/null
step "LoRA over FOLDER: the folder unchanged bit for bit" $?
grep -q '"r": 4' "$scratch/marian-adapter/adapter_config.json" &&
    grep -q '"fc1"' "$scratch/marian-adapter/adapter_config.json"
step "LoRA over FOLDER: PEFT's config with the rank and targets asked" $?
printf 'hotel quebec\nalpha bravo\n' | "$translate" --model "$tests/marian" \
    --adapter "$scratch/marian-adapter" --max-length 8 >"$scratch/marian-lora.txt" &&
    [ "$(wc -l <"$scratch/marian-lora.txt")" -eq 2 ]
step "--adapter over the published folder translates" $?
"$translate" --model "$tests/marian" --adapter "$scratch/adapter" </dev/null >/dev/null \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "adapter" "$scratch/err.txt"
step "--adapter on a model it does not fit is refused" $?

# --int8: the model quantized (layers, output projection, bfloat16 caches)
# translates the test pairs as float32 does on most lines
"$translate" --model "$model" --beam 1 <"$data/test.en" >"$scratch/float32.txt" &&
    "$translate" --model "$model" --beam 1 --int8 <"$data/test.en" >"$scratch/int8.txt" &&
    [ "$(wc -l <"$scratch/int8.txt")" -eq "$(wc -l <"$data/test.en")" ] &&
    paste -d '\t' "$scratch/float32.txt" "$scratch/int8.txt" |
    awk -F '\t' '{ same += $1 == $2 } END { exit !(same >= 0.8 * NR) }'
step "--int8 translates as float32 does on at least 80% of the test lines" $?

# Streaming: a line's translation is out before standard input ends.
mkfifo "$scratch/in"
"$translate" --model "$model" <"$scratch/in" >"$scratch/stream.txt" 2>&1 &
pid=$!
exec 3>"$scratch/in"
echo "hotel quebec" >&3
for _ in $(seq 100); do
    [ -s "$scratch/stream.txt" ] && break
    sleep 0.1
done
[ "$(wc -l <"$scratch/stream.txt")" -eq 1 ]
streamed=$?
echo "alpha bravo" >&3
exec 3>&-
wait "$pid"
status=$?
pid=
[ $streamed -eq 0 ] && [ $status -eq 0 ] && [ "$(wc -l <"$scratch/stream.txt")" -eq 2 ]
step "--model translates a line before standard input ends" $?

"$translate" --model "$model" </dev/null >"$scratch/none.txt" && [ ! -s "$scratch/none.txt" ]
step "an empty standard input: nothing out, exit 0" $?
# invalid UTF-8, a NUL, a lone byte and a line of nothing but bytes >= 0x80
printf 'hotel \377\376 quebec\nab\000cd\n\303\n\200\201\202\n' |
    "$translate" --model "$model" >"$scratch/bytes.txt" && [ "$(wc -l <"$scratch/bytes.txt")" -eq 4 ]
step "bytes that are not UTF-8: one line out for each line in" $?
printf '\n   \nhotel quebec\n\n' | "$translate" --model "$model" >"$scratch/blank.txt" &&
    [ "$(wc -l <"$scratch/blank.txt")" -eq 4 ] &&
    [ "$(awk 'NF == 0 { blank++ } END { print blank }' "$scratch/blank.txt")" = 3 ] &&
    [ -n "$(sed -n 3p "$scratch/blank.txt")" ]
step "empty and blank lines translate to empty lines, the others to text" $?
awk 'BEGIN { for (i = 0; i < 500; i++) printf "alpha "; print "" }' |
    "$translate" --model "$model" >"$scratch/long.txt" 2>"$scratch/err.txt" &&
    [ "$(wc -l <"$scratch/long.txt")" -eq 1 ] &&
    grep -q "a line is cut to the model's 32 tokens" "$scratch/err.txt"
step "a line longer than the model's sources is cut, saying so" $?
# A 10 MB line is encoded only as far as the model's 32 ids need: the
# whole line took 70 bytes of memory a byte, four times over.
awk 'BEGIN { for (i = 0; i < 1750000; i++) printf "alpha "; print "" }' >"$scratch/huge.txt"
peak=$(python3 -c '
import resource, subprocess, sys
with open(sys.argv[3], "rb") as line:
    subprocess.run([sys.argv[1], "--model", sys.argv[2]], stdin=line, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' \
    "$translate" "$model" "$scratch/huge.txt")
echo "a 10 MB line: tfm-translate's peak memory $peak MiB"
[ -n "$peak" ] && [ "$peak" -lt 160 ]
step "a 10 MB line is cut in bounded memory" $?

# The model file rewritten (python3's standard library): without its
# tokenizer ("bare"), and with twice the ids its tokenizer has ("wide"):
# ids past the tokenizer's whose embedding rows and output biases are the
# first ones doubled, so their logits are twice the first ones'.
python3 - "$model" "$scratch" <<'EOF'
import array, json, struct, sys
data = open(sys.argv[1], 'rb').read()
size = struct.unpack('<Q', data[:8])[0]
tensors = json.loads(data[8:8 + size])
values = {k: data[8 + size + v['data_offsets'][0]:8 + size + v['data_offsets'][1]]
          for k, v in tensors.items() if k != '__metadata__'}


def write(name, header):
    blob = b''
    for key in sorted(values):
        header[key]['data_offsets'] = [len(blob), len(blob) + len(values[key])]
        blob += values[key]
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    open(sys.argv[2] + '/' + name, 'wb').write(struct.pack('<Q', len(text)) + text + blob)


bare = json.loads(json.dumps(tensors))
del bare['__metadata__']['tfm.tokenizer']
write('bare.safetensors', bare)
vocab = int(tensors['__metadata__']['tfm.tgt_vocab'])
for key in ('src_embedding.weight', 'generator.bias'):
    values[key] += array.array('f', [2 * v for v in array.array('f', values[key])]).tobytes()
    tensors[key]['shape'][0] = 2 * vocab
tensors['__metadata__']['tfm.src_vocab'] = tensors['__metadata__']['tfm.tgt_vocab'] = str(2 * vocab)
write('wide.safetensors', tensors)
EOF
echo "hotel" | "$translate" --model "$scratch/bare.safetensors" >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "holds no tokenizer" "$scratch/err.txt" && ! grep -q "TFM_OK" "$scratch/err.txt"
step "a model file without a tokenizer is refused, saying so (and no more)" $?
mkdir "$scratch/untokenized" && cp "$tests/mbart/config.json" "$tests/mbart/model.safetensors" \
    "$scratch/untokenized/"
echo "hotel" | "$translate" --model "$scratch/untokenized" >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "lacks the tokenizer files" "$scratch/err.txt" &&
    [ "$(wc -l <"$scratch/err.txt")" -eq 1 ]
step "a folder without its tokenizer files is refused, saying so in one line" $?
"$translate" --model "$scratch/wide.safetensors" --beam 1 <"$data/test.en" >"$scratch/wide.txt" &&
    "$translate" --model "$model" --beam 1 <"$data/test.en" >"$scratch/narrow.txt" &&
    cmp -s "$scratch/wide.txt" "$scratch/narrow.txt"
step "a model with more ids than its tokenizer never writes those ids" $?

# --score: identical files, and one pair worked out by hand. chrF (no
# spaces): 1-grams 5 of 6 match, 2-grams 3 of 4, 3-grams 1 of 2, 4-grams
# 0 of 1 (orders 5, 6: none) -> P = R = (5/6 + 3/4 + 1/2 + 0) / 4, 52.08.
# BLEU: 5/6, 3/4, 1/2 and 0 of 1 smoothed to 1/2; equal lengths ->
# (5/6 * 3/4 * 1/2 * 1/2)^(1/4) = 62.87.
"$translate" --score "$data/test.fr" --reference "$data/test.fr" >"$scratch/score.txt" &&
    grep -qx "chrF 100.00  BLEU 100.00  (20 lines)" "$scratch/score.txt"
step "--score: a file against itself is chrF 100, BLEU 100" $?
printf 'a b c d\nx y\n' >"$scratch/hyp.txt"
printf 'a b c e\nx y\n' >"$scratch/ref.txt"
"$translate" --score "$scratch/hyp.txt" --reference "$scratch/ref.txt" >"$scratch/score.txt" &&
    grep -qx "chrF 52.08  BLEU 62.87  (2 lines)" "$scratch/score.txt"
step "--score: chrF 52.08 and BLEU 62.87 as worked out by hand" $?

# standard output on a full disk: exit 1, saying so
"$translate" --model "$model" <"$data/test.en" >/dev/full 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "cannot write standard output: No space left" "$scratch/err.txt"
step "--model translating to /dev/full exits 1 with a message" $?
"$translate" --score "$data/test.fr" --reference "$data/test.fr" >/dev/full 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "cannot write standard output" "$scratch/err.txt"
step "--score to /dev/full exits 1 with a message" $?
# a usage error says what is wrong once, with no empty message of libtfm's
"$translate" --model "$model" --precision float64 </dev/null >/dev/null 2>"$scratch/err.txt"
[ $? -eq 2 ] && grep -q "^tfm-translate: --precision is float32 or bfloat16, not 'float64'" \
    "$scratch/err.txt" && [ "$(wc -l <"$scratch/err.txt")" -eq 2 ] &&
    ! grep -q TFM_OK "$scratch/err.txt"
step "--precision float64 is one message and a usage error" $?

usage() { # name, then the flags
    name=$1
    shift
    "$translate" "$@" </dev/null >/dev/null 2>&1
    step "$name exits with status 2" $([ $? -eq 2 ]; echo $?)
}
usage "no mode" --data "$data"
usage "two modes" --model "$model" --score "$model" --reference "$model"
usage "--freeze without --train" --model "$model" --freeze encoder
usage "--train without --minutes or --steps" --train --data "$data"
usage "--train with both --minutes and --steps" --train --steps 1 --minutes 1
usage "--score without --reference" --score "$scratch/hyp.txt"
usage "an unknown flag" --no-such-flag
usage "--lora without --model" --train --steps 1 --data "$data" --lora 4
usage "--lora 0" --train --steps 1 --model "$model" --data "$data" --lora 0
usage "--lora with --freeze" --train --steps 1 --model "$model" --lora 4 --freeze encoder
usage "--lora-targets without --lora" --train --steps 1 --model "$model" --lora-targets q
usage "--lora-targets naming no linear" --train --steps 1 --model "$model" --lora 4 \
    --lora-targets q,attention
usage "--adapter with --train" --train --steps 1 --model "$model" --adapter "$data"
"$translate" --train --steps 1 --data "$scratch/nowhere" --out "$scratch/x.safetensors" \
    >/dev/null 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "scripts/translation_data.py" "$scratch/err.txt"
step "a missing data folder exits 1, naming scripts/translation_data.py" $?
# expected FOLDER RUN FIELD: each case's FIELD (source, or RUN's text or
# num_beams), one a line, from the folder's expected.json
expected() {
    python3 -c 'import json, sys
for case in json.load(open(sys.argv[1] + "/expected.json"))["cases"]:
    print(case[sys.argv[3]] if sys.argv[3] == "source" else
          case[sys.argv[2]]["options"].get("num_beams", 1) if sys.argv[3] == "num_beams" else
          case[sys.argv[2]]["text"])' "$@"
}
for family in marian bart mbart m2m100 m2m100/nllb t5 t5/original t5/narrow; do
    folder=$tests/$family
    for run in greedy beam; do
        beams=$(expected "$folder" "$run" num_beams | sed -n 1p)
        expected "$folder" "$run" source | "$translate" --model "$folder" --beam "$beams" \
            >"$scratch/published.txt" 2>"$scratch/err.txt"
        expected "$folder" "$run" text | cmp -s - "$scratch/published.txt"
        step "--model $family (a published folder), $run: the twin's translations" $?
    done
done
# words WORD K: K WORDs, one space apart
words() {
    yes "$1" | head -n "$2" | paste -sd ' ' -
}
# A cut line keeps the ids around its source (</s>, BART's <s>): the text
# fitting the model's 64 sources exactly and a longer one translate alike.
for fit in marian:63 bart:62 mbart:62; do
    family=${fit%:*}
    words a "${fit#*:}" | "$translate" --model "$tests/$family" >"$scratch/fit.txt" 2>/dev/null &&
        words a 90 | "$translate" --model "$tests/$family" >"$scratch/cut.txt" 2>/dev/null &&
        cmp -s "$scratch/fit.txt" "$scratch/cut.txt"
    step "--model $family: a line cut to the sources keeps the ids around it" $?
done
"$translate" --model "$tests/mbart" --source-language xx_XX </dev/null >/dev/null \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q '"xx_XX"' "$scratch/err.txt"
step "--source-language a multilingual model lacks exits 1, naming it" $?

# --po: gettext catalogs in and out, on the tiny model and on tests/marian
# (their translations break most format directives: those entries are left
# untranslated, each with a comment saying why). msgfmt checks fuzzy
# entries only when told to use them (--use-fuzzy).
po=$tests/fixtures/po
french="nplurals=2; plural=(n > 1);"
if [ "$catalogs" = 0 ]; then
    "$translate" --model "$model" --po "$po/messages.pot" --out "$scratch/x.po" \
        2>"$scratch/err.txt"
    [ $? -eq 1 ] && grep -q "built without gettext catalog support" "$scratch/err.txt" &&
        [ ! -e "$scratch/x.po" ]
    step "--po without libgettextpo: exit 1, saying it is not built with catalogs" $?
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi
# po_round_trip NAME MODEL IN LANGUAGE PLURAL_FORMS [FLAGS]: translated,
# msgfmt -c clean, and check_po.py's comparison with the input
po_round_trip() {
    name=$1 model_path=$2 in=$3 language=$4 forms=$5
    shift 5
    out=$scratch/$name.po
    "$translate" --model "$model_path" --po "$in" --language "$language" --out "$out" "$@" \
        2>"$scratch/$name.err"
    status=$?
    [ $status -eq 0 ] && msgfmt -c --use-fuzzy -o /dev/null "$out" 2>"$scratch/$name.msgfmt"
    step "--po $name: exit 0, and msgfmt -c --use-fuzzy accepts what it wrote" $?
    [ $status -eq 0 ] || cat "$scratch/$name.err"
    python3 "$tests/check_po.py" "$in" "$out" "$language" "$forms" "$@" >"$scratch/$name.check" &&
        translated=$(awk '{ print $1 }' "$scratch/$name.check") &&
        left=$(awk '{ print $3 }' "$scratch/$name.check") &&
        [ "$translated" -gt 0 ] &&
        grep -q ": $translated entries machine-translated.*: $left whose translation failed" \
            "$scratch/$name.err"
    step "--po $name: entries, order, comments and header kept; $(cat "$scratch/$name.check") as it says" $?
}
po_round_trip pot-tiny "$model" "$po/messages.pot" fr "$french"
po_round_trip pot-marian "$tests/marian" "$po/messages.pot" fr "$french"
po_round_trip po-marian "$tests/marian" "$po/messages.fr.po" fr "$french"
"$translate" --model "$tests/marian" --adapter "$scratch/marian-adapter" --po "$po/messages.pot" \
    --language fr --out "$scratch/adapted.po" 2>/dev/null &&
    msgfmt -c --use-fuzzy -o /dev/null "$scratch/adapted.po" &&
    ! cmp -s "$scratch/adapted.po" "$scratch/pot-marian.po"
step "--po --adapter: msgfmt -c accepts what it wrote, translated otherwise than without" $?
po_round_trip po-marian-all "$tests/marian" "$po/messages.fr.po" fr "$french" --all
po_round_trip pot-russian "$model" "$po/messages.pot" ru \
    "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"
po_round_trip pot-japanese "$model" "$po/messages.pot" ja "nplurals=1; plural=0;"
# the language from a multilingual model's code (fr_XX) when --language is not given
"$translate" --model "$model" --po "$po/messages.pot" --target-language fr_XX \
    --out "$scratch/code.po" 2>/dev/null
[ $? -eq 1 ] && [ ! -e "$scratch/code.po" ]
step "--po --target-language on a model without languages: refused, nothing written" $?
# a second run on its own output changes nothing it translated, and notes
# each entry it leaves once
"$translate" --model "$model" --po "$scratch/pot-tiny.po" --out "$scratch/again.po" 2>/dev/null &&
    python3 "$tests/check_po.py" "$scratch/pot-tiny.po" "$scratch/again.po" fr "$french" \
        >/dev/null && [ "$(grep -c "^# tfm-translate:" "$scratch/again.po")" -eq \
        "$(grep -c "^# tfm-translate:" "$scratch/pot-tiny.po")" ]
step "--po on its own output: the language from the header, one note an entry" $?

# refusals: nothing written, a file there kept byte for byte
cp "$po/messages.fr.po" "$scratch/kept.po"
"$translate" --model "$model" --po "$po/messages.pot" --language fr --out "$scratch/kept.po" \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "already exists: give --overwrite" "$scratch/err.txt" &&
    cmp -s "$po/messages.fr.po" "$scratch/kept.po"
step "--po refuses a file at --out without --overwrite, which stays as it was" $?
"$translate" --model "$model" --po "$scratch/kept.po" --out "$scratch/kept.po" --overwrite \
    2>/dev/null && msgfmt -c --use-fuzzy -o /dev/null "$scratch/kept.po" &&
    ! cmp -s "$po/messages.fr.po" "$scratch/kept.po"
step "--po --overwrite updates a catalog in place" $?
"$translate" --model "$model" --po "$po/messages.pot" --language fr --out /dev/full \
    --overwrite 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "not a regular file" "$scratch/err.txt" && [ -c /dev/full ]
step "--po --out /dev/full: exit 1, the device left alone" $?
mkdir "$scratch/full"
cp "$po/messages.fr.po" "$scratch/full/fr.po"
# a write that fails midway (the file size limit: EFBIG)
(trap '' XFSZ; ulimit -f 1; exec "$translate" --model "$model" --po "$po/messages.pot" \
    --language fr --out "$scratch/full/fr.po" --overwrite) 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "nothing written to" "$scratch/err.txt" &&
    cmp -s "$po/messages.fr.po" "$scratch/full/fr.po" && [ "$(ls -A "$scratch/full")" = fr.po ]
step "--po whose write fails: exit 1, the catalog there as it was, no file left beside it" $?
"$translate" --model "$model" --po "$po/messages.pot" --language fr \
    --out "$scratch/nowhere/fr.po" 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "cannot create a file beside" "$scratch/err.txt"
step "--po --out in a missing folder: exit 1, saying so" $?
"$translate" --model "$model" --po "$po/messages.fr.po" --language de --out "$scratch/de.po" \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "is a catalog for 'fr', not 'de'" "$scratch/err.txt" &&
    [ ! -e "$scratch/de.po" ]
step "--po --language de on a French catalog: refused, nothing written" $?
"$translate" --model "$model" --po "$po/messages.pot" --out "$scratch/unsaid.po" \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "say which language" "$scratch/err.txt" && [ ! -e "$scratch/unsaid.po" ]
step "--po without a language anywhere: refused, asking for --language" $?
printf 'msgid "a"\nmsgstr "b"\nmsgid\n' >"$scratch/broken.po"
"$translate" --model "$model" --po "$scratch/broken.po" --language fr --out "$scratch/b.po" \
    2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "cannot read the catalog" "$scratch/err.txt" && [ ! -e "$scratch/b.po" ]
step "--po on a broken catalog: exit 1, saying where, nothing written" $?
iconv -f UTF-8 -t ISO-8859-1 "$po/messages.fr.po" | sed 's/charset=UTF-8/charset=ISO-8859-1/' \
    >"$scratch/latin1.po"
"$translate" --model "$model" --po "$scratch/latin1.po" --out "$scratch/l.po" 2>"$scratch/err.txt"
[ $? -eq 1 ] && grep -q "msgconv" "$scratch/err.txt" && [ ! -e "$scratch/l.po" ]
step "--po on an ISO-8859-1 catalog: refused, naming msgconv" $?
usage "--po without --out" --model "$model" --po "$po/messages.pot"
usage "--language without --po" --model "$model" --language fr
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
