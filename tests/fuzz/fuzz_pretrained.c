/* tfm_model_from_pretrained on a folder the input writes (fuzz.h's
 * fuzz_folder: records of a file's number, its length and bytes). A model
 * that loads gives its decoding defaults, encodes and decodes a text when
 * it has tokenizers, and encodes one source. */
#include "fuzz.h"

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
    tfm_model *m = tfm_model_from_pretrained(fuzz_folder(data, size));
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
