/* tfm_model_from_pretrained on a folder the input writes: a sequence of
 * records, each one byte naming the file (its value modulo the number of
 * names below: 0 config.json, 1 model.safetensors, 2 generation_config.json,
 * 3 tokenizer_config.json, 4 vocab.json, 5 source.spm, 6 target.spm,
 * 7 merges.txt, 8 sentencepiece.bpe.model, 9 spiece.model,
 * 10 target_vocab.json), its length in two bytes (little-endian, cut to
 * what is left) and its bytes; a file named twice holds the last record's
 * bytes, a file not named is not there, a short last record is dropped. A
 * model that loads gives its decoding defaults, encodes and decodes a text
 * when it has tokenizers, and encodes one source. */
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

static const char *const names[] = {
    "config.json", "model.safetensors", "generation_config.json", "tokenizer_config.json",
    "vocab.json",  "source.spm",        "target.spm",             "merges.txt",
    "sentencepiece.bpe.model", "spiece.model", "target_vocab.json"};
enum { FILES = sizeof names / sizeof names[0] };

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    if (size)
        fwrite(data, 1, size, f);
    fclose(f);
}

/* The model's text path: a source with a leading Marian code and the
 * families' added tokens, its ids decoded back (target ids they may not
 * be: then refused). */
static void text_round_trip(const tfm_model *m)
{
    static const char text[] = ">>fra<< ab a\xc3\xa9 </s> b<mask> <extra_id_0>x<pad>";
    int32_t ids[64];
    char out[256];
    int64_t count = 0, length;
    if (tfm_model_encode_text(m, text, sizeof text - 1, ids, 64, &count) == TFM_OK)
        tfm_model_decode_text(m, ids, count, out, sizeof out, &length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char folder[64], paths[FILES][128];
    if (!folder[0]) {
        snprintf(folder, sizeof folder, "%s/tfm_fuzz_pretrained_%ld",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        mkdir(folder, 0700);
        for (int i = 0; i < FILES; i++)
            snprintf(paths[i], sizeof paths[i], "%s/%s", folder, names[i]);
    }
    for (int i = 0; i < FILES; i++)
        unlink(paths[i]);
    for (size_t at = 0; at + 3 <= size;) {
        size_t file = data[at] % FILES, length = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        if (length > size - at)
            length = size - at;
        write_file(paths[file], data + at, length);
        at += length;
    }
    tfm_model *m = tfm_model_from_pretrained(folder);
    if (!m)
        return 0;
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    tfm_decode_options_from_model(m, &o);
    if (tfm_model_tokenizer(m, 0))
        text_round_trip(m);
    fuzz_encode_and_free(m);
    return 0;
}
