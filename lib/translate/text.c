/* A model's text in and out: the ids its family puts around a source
 * (BART's <s> X </s>, mBART's [en_XX] X </s> ...), its languages, and
 * decoding as transformers' decode(skip_special_tokens=True) does; the
 * template travels with the tokenizers as one "tfm." metadata value. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/model.h"
#include "translate/text.h"
#include "text/text.h"

/* The model's tokenizer of side (0 source, 1 target), or NULL with
 * TFM_ERR_STATE. */
static const tfm_tokenizer *tokenizer_of(const char *op, const tfm_model *m, int32_t side)
{
    const tfm_tokenizer *tok = tfm_model_tokenizer(m, side);
    if (!tok)
        tfm__fail(TFM_ERR_STATE, "%s: the model has no tokenizers (tfm_model_set_tokenizers, "
                  "or a published folder with its tokenizer files)", op);
    return tok;
}

/* The length of the language code text starts with, for a template that
 * reads one (multilingual OPUS-MT models take their target language so):
 * MarianTokenizer's remove_language_code takes a leading ">>" up to the
 * first "<<" after it, whatever lies between, as one token; else 0. */
static int64_t leading_code(const tfm__text_template *t, const char *text, int64_t length)
{
    if (!t->leading_code || !text || length < 4 || memcmp(text, ">>", 2) != 0)
        return 0;
    for (int64_t i = 2; i + 1 < length; i++)
        if (text[i] == '<' && text[i + 1] == '<')
            return i + 2;
    return 0;
}

/* Puts the template's ids around the text's inner ids, which sit at
 * ids + the prefix's count + has_code: the prefix, the language code
 * text[0, code) (the vocabulary's id, <unk> when it has no such code, as
 * MarianTokenizer looks its tokens up) and the suffix. */
static void put_around(const tfm__text_template *t, const tfm_tokenizer *tok, const char *text,
                       int64_t code, int32_t *ids, int64_t inner)
{
    memcpy(ids, t->ids, (size_t)t->n_prefix * sizeof *ids);
    if (code > 0) {
        int32_t id = tfm_tokenizer_piece_to_id(tok, text, code);
        ids[t->n_prefix] = id >= 0 ? id : tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK);
    }
    memcpy(ids + t->n_prefix + (code > 0) + inner, t->ids + t->n_prefix,
           (size_t)(t->n_ids - t->n_prefix) * sizeof *ids);
}

/* The text's own ids, all of them, into *ids (malloc'd) at offset, room
 * left for after: one pass for the usual text, whose ids are at most its
 * bytes and a leading piece. */
static tfm_status tokenize(const tfm_tokenizer *tok, const char *text, int64_t length,
                           int64_t offset, int64_t after, int32_t **ids, int64_t *count)
{
    int64_t capacity = length + 2;
    for (int pass = 0; pass < 2; pass++) {
        size_t room = (size_t)(offset + capacity + after);
        if (!(*ids = malloc((room > 0 ? room : 1) * sizeof **ids)))
            return tfm__fail(TFM_ERR_NOMEM, "out of memory for %lld ids", (long long)room);
        tfm_status s = tfm_tokenizer_encode(tok, text, length, *ids + offset, capacity, count);
        if (s != TFM_ERR_SIZE || pass == 1) {
            if (s != TFM_OK) {
                free(*ids);
                *ids = NULL;
            }
            return s;
        }
        free(*ids);
        capacity = *count;
    }
    return TFM_ERR_SIZE; /* not reached */
}

tfm_status tfm__text_encode(const char *op, const tfm_model *m, const tfm__text_template *t,
                            const char *text, int64_t length, int64_t max_ids, int32_t **ids,
                            int64_t *count, int32_t *cut)
{
    *ids = NULL;
    *count = 0;
    if (cut)
        *cut = 0;
    const tfm_tokenizer *tok = tokenizer_of(op, m, 0);
    if (!tok)
        return TFM_ERR_STATE;
    int64_t code = leading_code(t, text, length), inner = 0;
    int64_t around = t->n_ids + (code > 0), before = t->n_prefix + (code > 0);
    if (max_ids < around)
        return tfm__fail(TFM_ERR_SIZE, "%s: %lld ids cannot hold the %lld the model puts "
                         "around a text", op, (long long)max_ids, (long long)around);
    uint64_t mark = tfm__error_mark();
    tfm_status s;
    if (max_ids == INT64_MAX) {
        s = tokenize(tok, text + code, length - code, before, around - before, ids, &inner);
    } else if (!(*ids = malloc((size_t)max_ids * sizeof **ids))) {
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld ids", op, (long long)max_ids);
    } else {
        /* as transformers truncates: the text's own ids end early, those
         * around them stay; only as much text is read as they need */
        s = tfm_tokenizer_encode_truncated(tok, text + code, length - code, *ids + before,
                                           max_ids - around, &inner, cut);
    }
    if (s != TFM_OK) {
        free(*ids);
        *ids = NULL;
        tfm__fail_within(op, mark);
        return s;
    }
    put_around(t, tok, text, code, *ids, inner);
    *count = inner + around;
    return TFM_OK;
}

/* The encoding calls' checks: TFM_OK, or the error. */
static tfm_status check_encode(const char *op, const tfm_model *m, const int64_t *count,
                               int64_t capacity)
{
    if (!m || !count)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, m ? "count" : "model");
    if (capacity < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: capacity %lld is negative", op, (long long)capacity);
    return TFM_OK;
}

tfm_status tfm_model_encode_text(const tfm_model *m, const char *text, int64_t length,
                                 int32_t *ids, int64_t capacity, int64_t *count)
{
    const char *op = "tfm_model_encode_text";
    int32_t *all = NULL;
    tfm_status s = check_encode(op, m, count, capacity);
    if (s == TFM_OK)
        s = tfm__text_encode(op, m, &m->text, text, length, INT64_MAX, &all, count, NULL);
    if (s != TFM_OK)
        return s;
    if (!ids || capacity < *count)
        s = tfm__fail(TFM_ERR_SIZE, "%s: the text takes %lld ids, ids has room for %lld", op,
                      (long long)*count, (long long)capacity);
    else
        memcpy(ids, all, (size_t)*count * sizeof *ids);
    free(all);
    return s;
}

tfm_status tfm_model_encode_text_truncated(const tfm_model *m, const char *text,
                                           int64_t length, int32_t *ids, int64_t capacity,
                                           int64_t *count, int32_t *cut)
{
    const char *op = "tfm_model_encode_text_truncated";
    if (cut)
        *cut = 0;
    int32_t *kept = NULL;
    tfm_status s = check_encode(op, m, count, capacity);
    if (s == TFM_OK && !ids && capacity > 0)
        s = tfm__fail(TFM_ERR_NULL, "%s: ids is NULL", op);
    if (s == TFM_OK)
        *count = 0;
    if (s == TFM_OK)
        s = tfm__text_encode(op, m, &m->text, text, length, capacity, &kept, count, cut);
    if (s == TFM_OK)
        memcpy(ids, kept, (size_t)*count * sizeof *ids);
    free(kept);
    return s;
}

/* Whether id is one of tok's special tokens (unknown, beginning, end,
 * padding). */
static int special(const tfm_tokenizer *tok, int32_t id)
{
    for (int which = TFM_TOKEN_UNK; which <= TFM_TOKEN_PAD; which++)
        if (id == tfm_tokenizer_special_id(tok, (tfm_special_token)which))
            return 1;
    return 0;
}

/* Whether transformers' decode(skip_special_tokens=True) drops id. */
static int skipped(const tfm_model *m, const tfm__text_template *t, const tfm_tokenizer *tok,
                   int32_t id)
{
    if (special(tok, id))
        return 1;
    for (int32_t i = 0; i < t->n_ids; i++)
        if (id == t->ids[i])
            return 1;
    return id == t->target_language || id == tfm_model_bos_id(m);
}

/* Without the spaces around it (str.strip), in place. */
static size_t strip(char *text, size_t length)
{
    size_t from = 0;
    while (length > 0 && isspace((unsigned char)text[length - 1]))
        length--;
    while (from < length && isspace((unsigned char)text[from]))
        from++;
    memmove(text, text + from, length - from);
    text[length - from] = '\0';
    return length - from;
}

/* transformers' clean_up_tokenization, in place: each pattern in turn
 * over the whole text, as its chain of str.replace calls does. */
static size_t clean_up(char *text, size_t length)
{
    static const char *const patterns[][2] = {
        {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        size_t from = strlen(patterns[p][0]), to = strlen(patterns[p][1]), w = 0;
        for (size_t r = 0; r < length;) {
            if (r + from <= length && memcmp(text + r, patterns[p][0], from) == 0) {
                memmove(text + w, patterns[p][1], to);
                w += to;
                r += from;
            } else {
                text[w++] = text[r++];
            }
        }
        length = w;
    }
    text[length] = '\0';
    return length;
}

tfm_status tfm__text_decode(const char *op, const tfm_model *m, const tfm__text_template *t,
                            const int32_t *ids, int64_t count, char **text, int64_t *length)
{
    *text = NULL;
    const tfm_tokenizer *tok = tokenizer_of(op, m, 1);
    if (!tok)
        return TFM_ERR_STATE;
    int32_t pieces = tfm_tokenizer_vocab_size(tok);
    int32_t unk = tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK);
    int64_t vocab = tfm_model_tgt_vocab(m);
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= vocab || (ids[i] >= pieces && unk < 0))
            return tfm__fail(TFM_ERR_RANGE, "%s: ids[%lld] = %d is outside the %s [0, %lld)",
                             op, (long long)i, (int)ids[i],
                             ids[i] >= 0 && ids[i] < vocab ? "tokenizer's pieces"
                                                           : "target vocabulary",
                             (long long)(ids[i] >= 0 && ids[i] < vocab ? pieces : vocab));
    int32_t *kept = malloc((size_t)(count > 0 ? count : 1) * sizeof *kept);
    if (!kept)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld ids", op, (long long)count);
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++)
        if (!skipped(m, t, tok, ids[i]))
            kept[n++] = ids[i] < pieces ? ids[i] : unk;
    uint64_t mark = tfm__error_mark();
    int64_t size = 0;
    tfm_status s = tfm_tokenizer_decode(tok, kept, n, NULL, 0, &size);
    char *decoded = s == TFM_ERR_SIZE ? malloc((size_t)size + 1) : NULL;
    if (s == TFM_ERR_SIZE && !decoded)
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld bytes of text", op,
                      (long long)size + 1);
    else if (decoded)
        s = tfm_tokenizer_decode(tok, kept, n, decoded, size + 1, &size);
    free(kept);
    if (s != TFM_OK) {
        free(decoded);
        tfm__fail_within(op, mark);
        return s;
    }
    if (t->strip)
        size = (int64_t)strip(decoded, (size_t)size);
    if (t->clean_up)
        size = (int64_t)clean_up(decoded, (size_t)size);
    *text = decoded;
    *length = size;
    return TFM_OK;
}

tfm_status tfm_model_decode_text(const tfm_model *m, const int32_t *ids, int64_t count,
                                 char *text, int64_t capacity, int64_t *length)
{
    const char *op = "tfm_model_decode_text";
    if (!m || !length || (!ids && count > 0))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !m ? "model" : !length ? "length" : "ids");
    if (count < 0 || capacity < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: %s %lld is negative", op,
                         count < 0 ? "count" : "capacity",
                         (long long)(count < 0 ? count : capacity));
    char *decoded = NULL;
    tfm_status s = tfm__text_decode(op, m, &m->text, ids, count, &decoded, length);
    if (s != TFM_OK)
        return s;
    if (!text || capacity < *length + 1)
        s = tfm__fail(TFM_ERR_SIZE, "%s: the text takes %lld bytes and its NUL, text has room "
                      "for %lld", op, (long long)*length, (long long)capacity);
    else
        memcpy(text, decoded, (size_t)*length + 1);
    free(decoded);
    return s;
}

/* Whether ids[0, n) are all in [0, vocab); else TFM_ERR_RANGE for op. */
static int ids_in(const char *op, const char *what, const int32_t *ids, int32_t n,
                  int64_t vocab)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            tfm__fail(TFM_ERR_RANGE, "%s: %s[%d] = %d is outside the source vocabulary "
                      "[0, %lld)", op, what, (int)i, (int)ids[i], (long long)vocab);
            return 0;
        }
    return 1;
}

tfm_status tfm_model_set_source_template(tfm_model *m, const int32_t *prefix, int32_t n_prefix,
                                         const int32_t *suffix, int32_t n_suffix)
{
    const char *op = "tfm_model_set_source_template";
    if (!m || (!prefix && n_prefix > 0) || (!suffix && n_suffix > 0))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !m ? "model" : !prefix && n_prefix > 0 ? "prefix" : "suffix");
    if (n_prefix < 0 || n_suffix < 0 || n_prefix + n_suffix > TFM__TEMPLATE_MAX)
        return tfm__fail(TFM_ERR_ARG, "%s: n_prefix %d and n_suffix %d must be >= 0 and at "
                         "most %d in all", op, (int)n_prefix, (int)n_suffix, TFM__TEMPLATE_MAX);
    if (!ids_in(op, "prefix", prefix, n_prefix, m->options.src_vocab) ||
        !ids_in(op, "suffix", suffix, n_suffix, m->options.src_vocab))
        return TFM_ERR_RANGE;
    tfm__text_template *t = &m->text;
    if (n_prefix > 0)
        memcpy(t->ids, prefix, (size_t)n_prefix * sizeof *prefix);
    if (n_suffix > 0)
        memcpy(t->ids + n_prefix, suffix, (size_t)n_suffix * sizeof *suffix);
    t->n_prefix = n_prefix;
    t->n_ids = n_prefix + n_suffix;
    t->language = -1;
    return TFM_OK;
}

/* The id of piece[0, length) when it is a control piece, as language
 * codes are, other than the special tokens (</s> is no language); else
 * -1. */
static int32_t control_id(const tfm_tokenizer *tok, const char *piece, size_t length)
{
    int32_t id = tfm_tokenizer_piece_to_id(tok, piece, (int64_t)length);
    if (id < 0 || tok->pieces[id].type != TFM__PIECE_CONTROL)
        return -1;
    return special(tok, id) ? -1 : id;
}

int32_t tfm__text_language_id(const char *op, const tfm_tokenizer *tok, const char *side,
                              const char *code)
{
    int32_t id = control_id(tok, code, strlen(code));
    char wrapped[64];
    if (id < 0 && strlen(code) + 5 <= sizeof wrapped) {
        snprintf(wrapped, sizeof wrapped, "__%s__", code);
        id = control_id(tok, wrapped, strlen(wrapped));
    }
    if (id < 0)
        tfm__fail(TFM_ERR_ARG, "%s: the %s tokenizer has no language code \"%s\"", op, side,
                  code);
    return id;
}

tfm_status tfm_model_set_languages(tfm_model *m, const char *source, const char *target)
{
    const char *op = "tfm_model_set_languages";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    const tfm_tokenizer *tok = tokenizer_of(op, m, 0);
    if (!tok)
        return TFM_ERR_STATE;
    if (source && m->text.language < 0)
        return tfm__fail(TFM_ERR_STATE, "%s: the model's sources carry no language code "
                         "(not an mBART-50, M2M100 or NLLB model)", op);
    int32_t source_id = source ? tfm__text_language_id(op, tok, "source", source) : 0;
    int32_t target_id = target ? tfm__text_language_id(op, tfm_model_tokenizer(m, 1), "target", target) : 0;
    if (source_id < 0 || target_id < 0)
        return TFM_ERR_ARG;
    if (source)
        m->text.ids[m->text.language] = source_id;
    if (target)
        m->text.target_language = target_id;
    return TFM_OK;
}

/* --- in the model's file ------------------------------------------------------------ */

/* "prefix=0 suffix=2 language=-1 target_language=-1 strip=0 clean_up=1",
 * then " leading_code=1" for a template that reads Marian's codes */
char *tfm__text_template_format(const char *op, const tfm__text_template *t)
{
    char buffer[256], *at = buffer;
    const char *const *parts = (const char *const[]){"prefix=", " suffix="};
    for (int part = 0; part < 2; part++) {
        at += sprintf(at, "%s", parts[part]);
        int32_t from = part ? t->n_prefix : 0, to = part ? t->n_ids : t->n_prefix;
        for (int32_t i = from; i < to; i++)
            at += sprintf(at, "%s%d", i > from ? "," : "", (int)t->ids[i]);
    }
    at += sprintf(at, " language=%d target_language=%d strip=%d clean_up=%d", (int)t->language,
                  (int)t->target_language, (int)t->strip, (int)t->clean_up);
    /* only when set: the files of other models read as before */
    if (t->leading_code)
        sprintf(at, " leading_code=1");
    char *copy = malloc(strlen(buffer) + 1);
    if (!copy)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    else
        strcpy(copy, buffer);
    return copy;
}

/* One "name=" field's integers at *at (comma-separated, up to max) into
 * out, name with the space before it but the first; their count, or -1
 * when the text is not exactly that (no sign, space or tab that
 * tfm__text_template_format does not write). */
static int read_field(const char **at, const char *name, int32_t *out, int max)
{
    size_t n = strlen(name);
    if (strncmp(*at, name, n) != 0 || (*at)[n] != '=')
        return -1;
    const char *p = *at + n + 1;
    int count = 0;
    while (*p && *p != ' ') {
        char *end;
        if (!isdigit((unsigned char)(*p == '-' ? p[1] : *p)))
            return -1;
        long v = strtol(p, &end, 10);
        if (count == max || v < -1 || v > INT32_MAX)
            return -1;
        out[count++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && (*p == ' ' || !*p))
            return -1;
    }
    *at = p;
    return count;
}

tfm_status tfm__text_template_parse(const char *ctx, const char *key, const char *value,
                                    int64_t src_vocab, int64_t tgt_vocab,
                                    tfm__text_template *out)
{
    tfm__text_template t = TFM__NO_TEXT_TEMPLATE;
    int32_t suffix[TFM__TEMPLATE_MAX];
    const char *at = value;
    int n_prefix = read_field(&at, "prefix", t.ids, TFM__TEMPLATE_MAX);
    int n_suffix = n_prefix < 0 ? -1 : read_field(&at, " suffix", suffix, TFM__TEMPLATE_MAX);
    int ok = n_suffix >= 0 && n_prefix + n_suffix <= TFM__TEMPLATE_MAX &&
             read_field(&at, " language", &t.language, 1) == 1 &&
             read_field(&at, " target_language", &t.target_language, 1) == 1 &&
             read_field(&at, " strip", &t.strip, 1) == 1 &&
             read_field(&at, " clean_up", &t.clean_up, 1) == 1 &&
             (*at == '\0' || (read_field(&at, " leading_code", &t.leading_code, 1) == 1 &&
                              t.leading_code == 1 && *at == '\0'));
    if (ok) {
        memcpy(t.ids + n_prefix, suffix, (size_t)n_suffix * sizeof *suffix);
        t.n_prefix = n_prefix;
        t.n_ids = n_prefix + n_suffix;
        for (int32_t i = 0; i < t.n_ids; i++)
            ok = ok && t.ids[i] >= 0 && t.ids[i] < src_vocab;
        ok = ok && t.language < t.n_ids && t.target_language < tgt_vocab &&
             (t.strip == 0 || t.strip == 1) && (t.clean_up == 0 || t.clean_up == 1);
    }
    if (!ok)
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s \"%.80s\" is not a source template "
                         "of this model's vocabularies", ctx, key, value);
    *out = t;
    return TFM_OK;
}
