/* A model's tokenizers, carried in its file so that one file turns text
 * into text: each tokenizer's bytes (tfm_tokenizer_save_bytes) in base64
 * under a "tfm." metadata key, since safetensors metadata holds strings. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/base64.h"
#include "io/safetensors.h"
#include "model/families.h"
#include "model/model.h"
#include "translate/text.h"
#include "translate/tokenizers.h"

static const char *const keys[2] = {TFM__MODEL_KEY_PREFIX "tokenizer",
                                    TFM__MODEL_KEY_PREFIX "target_tokenizer"};

/* tok's bytes (tfm_tokenizer_save_bytes), malloc'd; NULL on error. */
static void *bytes_of(const char *op, const tfm_tokenizer *tok, int64_t *size)
{
    *size = 0;
    tfm_tokenizer_save_bytes(tok, NULL, 0, size); /* asks for the size */
    void *bytes = *size > 0 ? malloc((size_t)*size) : NULL;
    if (!bytes) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a tokenizer of %lld bytes", op,
                  (long long)*size);
        return NULL;
    }
    if (tfm_tokenizer_save_bytes(tok, bytes, *size, size) != TFM_OK) {
        free(bytes);
        return NULL;
    }
    return bytes;
}

/* A copy of tok made through its bytes, as a file will hold it. */
static tfm_tokenizer *copy_of(const char *op, const tfm_tokenizer *tok)
{
    int64_t size;
    void *bytes = bytes_of(op, tok, &size);
    tfm_tokenizer *copy = bytes ? tfm_tokenizer_from_bytes(bytes, size) : NULL;
    free(bytes);
    return copy;
}

static tfm_status check_fits(const char *op, const char *side, const tfm_tokenizer *tok,
                             int64_t vocab)
{
    if (tok && tfm_tokenizer_vocab_size(tok) > vocab)
        return tfm__fail(TFM_ERR_ARG, "%s: the %s tokenizer has %d ids, more than the model's "
                         "%s vocabulary of %lld", op, side, (int)tfm_tokenizer_vocab_size(tok),
                         side, (long long)vocab);
    return TFM_OK;
}

static void replace(tfm_model *m, tfm_tokenizer *source, tfm_tokenizer *target)
{
    tfm_tokenizer_free(m->tokenizers[0]);
    tfm_tokenizer_free(m->tokenizers[1]);
    m->tokenizers[0] = source;
    m->tokenizers[1] = target;
    /* the folder's tokenizer files no longer describe them */
    if (m->published)
        m->published->tokenizers_replaced = 1;
}

tfm_status tfm_model_set_tokenizers(tfm_model *m, const tfm_tokenizer *source,
                                    const tfm_tokenizer *target)
{
    const char *op = "tfm_model_set_tokenizers";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    if (!source && target)
        return tfm__fail(TFM_ERR_NULL, "%s: source is NULL but target is not (a target "
                         "tokenizer alone has no source text to read)", op);
    if (check_fits(op, "source", source, m->options.src_vocab) != TFM_OK ||
        check_fits(op, "target", target ? target : source, m->options.tgt_vocab) != TFM_OK)
        return tfm_last_status();
    tfm_tokenizer *a = NULL, *b = NULL;
    if ((source && !(a = copy_of(op, source))) || (target && !(b = copy_of(op, target)))) {
        tfm_tokenizer_free(a);
        return tfm_last_status();
    }
    replace(m, a, b);
    return TFM_OK;
}

const tfm_tokenizer *tfm_model_tokenizer(const tfm_model *m, int32_t target)
{
    if (!m)
        return NULL;
    return target && m->tokenizers[1] ? m->tokenizers[1] : m->tokenizers[0];
}

int tfm__model_tokenizer_metadata(const char *op, const tfm_model *m, const char **out_keys,
                                  char **out_values)
{
    int count = 0;
    for (int side = 0; side < 2; side++) {
        if (!m->tokenizers[side])
            continue;
        int64_t size;
        void *bytes = bytes_of(op, m->tokenizers[side], &size);
        char *text = bytes ? tfm__base64_encode(op, bytes, (size_t)size) : NULL;
        free(bytes);
        if (!text) {
            while (count > 0)
                free(out_values[--count]);
            return -1;
        }
        out_keys[count] = keys[side];
        out_values[count++] = text;
    }
    const tfm__text_template none = TFM__NO_TEXT_TEMPLATE;
    if (count > 0 && memcmp(&m->text, &none, sizeof none) != 0) {
        char *text = tfm__text_template_format(op, &m->text);
        if (!text) {
            while (count > 0)
                free(out_values[--count]);
            return -1;
        }
        out_keys[count] = TFM__TEXT_TEMPLATE_KEY;
        out_values[count++] = text;
    }
    return count;
}

/* The tokenizer of metadata key, or NULL: with no error recorded when the
 * file has no such key (*absent = 1), else TFM_ERR_FORMAT or NOMEM. */
static tfm_tokenizer *read_one(const char *ctx, const tfm_safetensors *file, const char *key,
                               int *absent)
{
    const char *text = tfm__safetensors_metadata(file, key);
    *absent = !text;
    if (!text)
        return NULL;
    size_t size = 0;
    void *bytes = tfm__base64_decode(ctx, key, text, strlen(text), &size);
    tfm_tokenizer *tok = bytes ? tfm_tokenizer_from_bytes(bytes, (int64_t)size) : NULL;
    if (bytes && !tok)
        tfm__fail_because(TFM_ERR_FORMAT, "%s: metadata %s is not a tokenizer", ctx, key);
    free(bytes);
    return tok;
}

tfm_status tfm__model_tokenizers_read(const char *ctx, const tfm_safetensors *file,
                                      tfm_model *m)
{
    int absent[2];
    tfm_tokenizer *source = read_one(ctx, file, keys[0], &absent[0]);
    tfm_tokenizer *target = (source || absent[0]) ? read_one(ctx, file, keys[1], &absent[1])
                                                  : NULL;
    tfm_status s = TFM_OK;
    if ((!source && !absent[0]) || (!target && !absent[1]))
        s = tfm_last_status();
    else if (!source && target)
        s = tfm__fail(TFM_ERR_FORMAT, "%s: metadata holds %s without %s", ctx, keys[1],
                      keys[0]);
    else if (check_fits(ctx, "source", source, m->options.src_vocab) != TFM_OK ||
             check_fits(ctx, "target", target ? target : source, m->options.tgt_vocab) != TFM_OK)
        s = tfm__fail_because(TFM_ERR_FORMAT, "%s: its tokenizers do not fit its model", ctx);
    const char *template = tfm__safetensors_metadata(file, TFM__TEXT_TEMPLATE_KEY);
    tfm__text_template text = TFM__NO_TEXT_TEMPLATE;
    if (s == TFM_OK && template && !source)
        s = tfm__fail(TFM_ERR_FORMAT, "%s: metadata holds %s without %s", ctx,
                      TFM__TEXT_TEMPLATE_KEY, keys[0]);
    else if (s == TFM_OK && template)
        s = tfm__text_template_parse(ctx, TFM__TEXT_TEMPLATE_KEY, template,
                                     m->options.src_vocab, m->options.tgt_vocab, &text);
    if (s != TFM_OK) {
        tfm_tokenizer_free(source);
        tfm_tokenizer_free(target);
        return s;
    }
    replace(m, source, target);
    m->text = text;
    return TFM_OK;
}
