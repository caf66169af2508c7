/* tfm_model_from_pretrained on an mBART-50 or M2M100 folder the input
 * writes (fuzz.h's fuzz_folder; the seeds are such folders), then what
 * those families add: their languages chosen by codes (the input's first
 * and last bytes pick each among mBART-50's, M2M100's both spellings,
 * NLLB's and ones that are no language), a text encoded with the source
 * language's code, decoded with the model's published defaults (cut to 4
 * tokens and 2 beams) and its output read back as text. */
#include "fuzz.h"

static const char *const codes[] = {"en_XX", "fr_XX", "de_DE", "__en__", "fr", "de",
                                    "eng_Latn", "xx_YY", "</s>", "<unk>", ""};
enum { CODES = sizeof codes / sizeof codes[0] };

/* The text encoded (when the source fits the model), decoded with the
 * model's defaults, and the output as text. */
static void translate(tfm_model *m)
{
    static const char text[] = "Fichier a\xc3\xa9";
    int32_t ids[64], tokens[2 * 5];
    char out[512];
    int64_t count = 0, length;
    if (tfm_model_encode_text(m, text, sizeof text - 1, ids, 64, &count) != TFM_OK ||
        count > tfm_model_max_src_len(m))
        return;
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    FUZZ_ASSERT(tfm_decode_options_from_model(m, &o) == TFM_OK);
    o.max_length = o.max_length > 4 ? 4 : o.max_length;
    o.beam_size = o.beam_size > 2 ? 2 : o.beam_size;
    o.n_best = 1;
    tfm_decoding *d = tfm_decoding_create(m, &o, 1, count);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, count}, ids);
    int32_t lengths[1];
    if (d && tfm_decoding_run(d, src, tokens, 5, lengths, 1, NULL, 0, NULL, 0, NULL, 0) == TFM_OK) {
        tfm_status s = tfm_model_decode_text(m, tokens, lengths[0], out, sizeof out, &length);
        FUZZ_ASSERT(s == TFM_OK || s == TFM_ERR_SIZE); /* a forged tokenizer's long pieces */
    }
    tfm_tensor_free(src);
    tfm_decoding_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_model *m = tfm_model_from_pretrained(fuzz_folder(data, size));
    if (!m)
        return 0;
    if (tfm_model_tokenizer(m, 0)) {
        tfm_model_set_languages(m, codes[data[0] % CODES], codes[data[size - 1] % CODES]);
        translate(m);
    }
    fuzz_encode_and_free(m);
    return 0;
}
