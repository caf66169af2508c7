/* Published encoder-decoder models as Hugging Face transformers saves
 * them: config.json says the family and sizes, model.safetensors (or
 * model.safetensors.index.json and its shards) holds the tensors under the
 * family's names, which map one to one onto libtfm's parameters. Whatever
 * the loader does not know (a family, an option's value, a tensor) is
 * refused by name rather than guessed. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/json.h"
#include "io/json_doc.h"
#include "io/safetensors.h"
#include "model/families.h"
#include "model/loader.h"
#include "model/model.h"
#include "translate/generation.h"
#include "text/text.h"

#define CONFIG_MAX_BYTES ((size_t)1 << 20)
#define INDEX_MAX_BYTES ((size_t)64 << 20)
/* NLLB's tokenizer.json is 17 MB */
#define TOKENIZER_FILE_MAX_BYTES ((size_t)256 << 20)

/* --- config.json ------------------------------------------------------------------ */

int tfm__activation_of(tfm__loader *l, const char *key, const char *name, tfm_activation *out)
{
    static const struct {
        const char *name;
        tfm_activation activation;
    } known[] = {{"relu", TFM_ACTIVATION_RELU},          {"gelu", TFM_ACTIVATION_GELU},
                 {"silu", TFM_ACTIVATION_SILU},          {"swish", TFM_ACTIVATION_SILU},
                 {"gelu_new", TFM_ACTIVATION_GELU_TANH},
                 {"gelu_pytorch_tanh", TFM_ACTIVATION_GELU_TANH}};
    for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0) {
            *out = known[i].activation;
            return 0;
        }
    tfm__fail(TFM_ERR_FORMAT, "%s: config.json's %s %s%s%s is not supported (relu, gelu, "
              "silu, swish, gelu_new, gelu_pytorch_tanh are)", l->ctx, key, name ? "\"" : "",
              name ? name : "(not a string)", name ? "\"" : "");
    return -1;
}

int tfm__special_ids(tfm__loader *l, const tfm__config_defaults *d, int64_t *pad, int64_t *eos,
                       int64_t *start)
{
    int64_t bos;
    if (tfm__config_int(l, "pad_token_id", d->pad, 0, INT32_MAX, pad) < 0 ||
        tfm__config_int(l, "eos_token_id", d->eos, 0, INT32_MAX, eos) < 0 ||
        tfm__config_int(l, "bos_token_id", d->bos, 0, INT32_MAX, &bos) < 0 ||
        tfm__config_int(l, "decoder_start_token_id", d->start >= 0 ? d->start : bos, 0, INT32_MAX,
                   start) < 0)
        return -1;
    if (*start < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: config.json has no decoder_start_token_id (nor "
                  "bos_token_id, which transformers would start from)", l->ctx);
        return -1;
    }
    return 0;
}

int tfm__has_file(tfm__loader *l, const char *name, char *path)
{
    return tfm__in_folder(l->ctx, l->folder, name, path, PATH_MAX_BYTES) == 0 && tfm__path_taken(path);
}

/* The folder's JSON object file name into *text (the caller's to free,
 * also on failure), *doc (the caller's when read) and, unless NULL,
 * *as_read (the text before parsing, which parsing changes; the caller's
 * too): 1 when read, 0 when absent and not required, -1 with the error
 * set. */
static int read_object(tfm__loader *l, const char *name, int required, char **text, tfm__json *doc,
                       char **as_read)
{
    char path[PATH_MAX_BYTES], context[sizeof l->ctx + 64];
    size_t size;
    if (tfm__in_folder(l->ctx, l->folder, name, path, PATH_MAX_BYTES) < 0)
        return -1;
    if (!required && !tfm__path_taken(path))
        return 0;
    snprintf(context, sizeof context, "%s: %s", l->ctx, name);
    if (tfm__read_whole_file(l->op, path, CONFIG_MAX_BYTES, text, &size) != TFM_OK)
        return -1;
    if (as_read && !(*as_read = strdup(*text))) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
        return -1;
    }
    if (tfm__json_parse(context, *text, size, (int64_t)(size / 2 + 1), doc) != TFM_OK)
        return -1;
    if (doc->nodes[0].type != TFM__JSON_OBJECT) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s is not a JSON object", l->ctx, name);
        tfm__json_free(doc);
        return -1;
    }
    return 1;
}

static int read_config(tfm__loader *l, tfm_model_options *o)
{
    if (read_object(l, "config.json", 1, &l->config_text, &l->config, &l->config_as_read) < 0)
        return -1;
    l->has_config = 1;
    l->doc = &l->config;
    l->doc_name = "config.json";
    const char *type = tfm__config_string(l, "model_type");
    int found = 0;
    for (int f = 0; type && f < TFM__FAMILIES; f++)
        if (strcmp(type, tfm__families[f]->model_type) == 0) {
            l->family = (tfm__family)f;
            found = 1;
        }
    if (!found) {
        tfm__fail(TFM_ERR_FORMAT, "%s: config.json's model_type %s%s%s is not a family "
                  "libtfm supports (marian, bart, mbart, m2m_100, t5)", l->ctx, type ? "\"" : "",
                  type ? type : "(missing)", type ? "\"" : "");
        return -1;
    }
    const tfm__family_info *f = tfm__families[l->family];
    tfm_model_options_init(o);
    return f->read_config(l, f, o);
}

/* --- generation_config.json ------------------------------------------------------------- */

/* The decoding defaults (translate/generation.h), from generation_config.json,
 * or from config.json where older folders keep them. */
static int read_generation(tfm__loader *l, tfm_model_options *o, tfm__generation *g)
{
    int read = read_object(l, "generation_config.json", 0, &l->generation_text,
                           &l->generation, &l->generation_as_read);
    if (read < 0)
        return -1;
    if (read) {
        l->has_generation = 1;
        l->doc = &l->generation;
        l->doc_name = "generation_config.json";
    }
    tfm__json_doc doc = tfm__doc_of(l);
    return tfm__generation_read(&doc, l->has_generation,
                                tfm__families[l->family]->defaults.forced_eos,
                                o, g) == TFM_OK
               ? 0
               : -1;
}

/* --- tokenizers -------------------------------------------------------------------- */

/* tokenizer_config.json into l->settings, when the folder has one; 0
 * when read or absent. */
static int read_settings(tfm__loader *l)
{
    int read = read_object(l, "tokenizer_config.json", 0, &l->settings_text, &l->settings, NULL);
    l->has_settings = read == 1;
    return read < 0 ? -1 : 0;
}

void tfm__reading_settings(tfm__loader *l)
{
    l->doc = &l->settings;
    l->doc_name = "tokenizer_config.json";
}

void tfm__reading_config(tfm__loader *l)
{
    l->doc = &l->config;
    l->doc_name = "config.json";
}

/* --- added tokens ------------------------------------------------------------------ */

/* The tokens transformers' tokenizer keeps whole in text, in the order its
 * __init__ and from_pretrained settle them; listed marks the ids so far. */
typedef struct added_list {
    const tfm_tokenizer *tok;
    tfm__added_token *tokens;
    int32_t count;
    size_t capacity;
    uint8_t *listed;
} added_list;

enum { OPTIONAL = 1, IF_NEW = 2 };

/* Appends content with its AddedToken flags (lstrip, rstrip, single_word)
 * and the id it must have (-1: any). OPTIONAL: not when the tokenizer
 * lacks it (a family default); IF_NEW: not when listed already (a plain
 * string, which transformers' _add_tokens skips then). */
static int add_token(tfm__loader *l, added_list *a, const char *content, int32_t id,
                     const int flags[3], int how)
{
    int32_t piece = tfm_tokenizer_piece_to_id(a->tok, content, (int64_t)strlen(content));
    if ((piece < 0 && (how & OPTIONAL)) || (piece >= 0 && (how & IF_NEW) && a->listed[piece]))
        return 0;
    if (tfm__grow(l->ctx, (void **)&a->tokens, sizeof *a->tokens, (size_t)a->count,
                  &a->capacity, 1))
        return -1;
    if (piece >= 0)
        a->listed[piece] = 1;
    a->tokens[a->count++] = (tfm__added_token){content, id, flags[0], flags[1], flags[2]};
    return 0;
}

/* n as a token: a string (its content, flags kept), or an AddedToken's
 * object {"content": ..., "lstrip": ..., "rstrip": ..., "single_word":
 * ...} (its flags, false when absent); where names it for the refusal. */
static int token_of(tfm__loader *l, const tfm__json_node *n, const char *where,
                    const char **content,
                    int flags[3])
{
    const tfm__json *doc = &l->settings;
    static const char *const names[3] = {"lstrip", "rstrip", "single_word"};
    if (n->type == TFM__JSON_STRING) {
        *content = tfm__json_string(doc, n);
        return 0;
    }
    const tfm__json_node *c = n->type == TFM__JSON_OBJECT ? tfm__json_member(doc, n, "content")
                                                          : NULL;
    int bad = !c || c->type != TFM__JSON_STRING;
    for (int k = 0; k < 3 && !bad; k++) {
        const tfm__json_node *f = tfm__json_member(doc, n, names[k]);
        bad = f && f->type != TFM__JSON_TRUE && f->type != TFM__JSON_FALSE &&
              f->type != TFM__JSON_NULL;
        flags[k] = f && f->type == TFM__JSON_TRUE;
    }
    if (bad) {
        tfm__fail(TFM_ERR_FORMAT, "%s: tokenizer_config.json's %s is not a token (a string, or "
                  "an AddedToken's {\"content\": ...} with true/false lstrip, rstrip, "
                  "single_word)", l->ctx, where);
        return -1;
    }
    *content = tfm__json_string(doc, c);
    return 0;
}

/* The special-token attributes (SPECIAL_TOKENS_ATTRIBUTES), in the order
 * of each family's defaults (tfm__family_info.special_tokens). */
static const char *const attributes[TFM__SPECIAL_TOKENS] = {
    [TFM__BOS_TOKEN] = "bos_token", [TFM__EOS_TOKEN] = "eos_token",
    [TFM__UNK_TOKEN] = "unk_token", [TFM__SEP_TOKEN] = "sep_token",
    [TFM__PAD_TOKEN] = "pad_token", [TFM__CLS_TOKEN] = "cls_token",
    [TFM__MASK_TOKEN] = "mask_token"};

/* Builds tok's added tokens as transformers' slow tokenizer of the folder
 * has them: the special tokens (tokenizer_config.json's, else the
 * class's; <mask> with lstrip in BartTokenizer, MBart(50)Tokenizer,
 * NllbTokenizer), the language codes, T5's <extra_id_N> (lstrip and
 * rstrip, as T5Tokenizer sets them), additional_special_tokens, then
 * added_tokens_decoder over all of them. */
static int added_tokens(tfm__loader *l, tfm_tokenizer *tok)
{
    added_list a = {tok, NULL, 0, 0, calloc((size_t)tfm_tokenizer_vocab_size(tok), 1)};
    char (*sentinels)[24] = NULL;
    const int none[3] = {0, 0, 0}, both[3] = {1, 1, 0};
    int failed = !a.listed;
    if (failed)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
    const tfm__json *doc = &l->settings;
    const tfm__json_node *top = l->has_settings ? &doc->nodes[0] : NULL;
    const tfm__family_info *f = tfm__families[l->family];
    int mask_lstrip = f->mask_lstrip || l->mask_lstrip;
    for (int k = 0; k < TFM__SPECIAL_TOKENS && !failed; k++) {
        const char *key = attributes[k], *content = f->special_tokens[k];
        const tfm__json_node *n = top ? tfm__json_member(doc, top, key) : NULL;
        int flags[3] = {k == TFM__MASK_TOKEN && mask_lstrip, 0, 0};
        if (n && n->type != TFM__JSON_NULL) {
            failed = token_of(l, n, key, &content, flags) < 0 ||
                     add_token(l, &a, content, -1, flags, n->type == TFM__JSON_STRING ? IF_NEW : 0);
        } else if (!n && content) {
            failed = add_token(l, &a, content, -1, flags, OPTIONAL | IF_NEW);
        }
    }
    for (int32_t i = 0; i < l->n_codes && !failed; i++) {
        char code[64];
        snprintf(code, sizeof code, "%s%s%s", l->code_affix, l->codes[i], l->code_affix);
        const char *copy = NULL;
        /* the content must outlive the list: the tokenizer's own piece */
        int32_t id = tfm_tokenizer_piece_to_id(tok, code, (int64_t)strlen(code));
        copy = id >= 0 ? tok->pieces[id].text : NULL;
        failed = copy && add_token(l, &a, copy, id, none, IF_NEW);
    }
    if (l->extra_ids > 0 && !failed) {
        failed = !(sentinels = malloc((size_t)l->extra_ids * sizeof *sentinels));
        if (failed)
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld sentinels", l->ctx,
                      (long long)l->extra_ids);
        for (int64_t i = 0; i < l->extra_ids && !failed; i++) {
            snprintf(sentinels[i], sizeof sentinels[i], "<extra_id_%d>", (int)i);
            failed = add_token(l, &a, sentinels[i], -1, both, 0);
        }
    }
    const tfm__json_node *extra = top ? tfm__json_member(doc, top, "additional_special_tokens")
                                      : NULL;
    if (extra && extra->type != TFM__JSON_ARRAY && extra->type != TFM__JSON_NULL && !failed) {
        tfm__fail(TFM_ERR_FORMAT, "%s: tokenizer_config.json's additional_special_tokens is not "
                  "a list", l->ctx);
        failed = 1;
    }
    for (uint32_t i = extra && extra->type == TFM__JSON_ARRAY ? (uint32_t)(extra - doc->nodes) + 1
                                                              : 0;
         extra && i < extra->next && !failed; i = doc->nodes[i].next) {
        const char *content;
        int flags[3] = {0, 0, 0};
        failed = token_of(l, &doc->nodes[i], "additional_special_tokens", &content, flags) < 0 ||
                 add_token(l, &a, content, -1, flags,
                           doc->nodes[i].type == TFM__JSON_STRING ? IF_NEW : 0);
    }
    const tfm__json_node *decoder = top ? tfm__json_member(doc, top, "added_tokens_decoder")
                                        : NULL;
    if (decoder && decoder->type != TFM__JSON_OBJECT && decoder->type != TFM__JSON_NULL &&
        !failed) {
        tfm__fail(TFM_ERR_FORMAT, "%s: tokenizer_config.json's added_tokens_decoder is not an "
                  "object", l->ctx);
        failed = 1;
    }
    for (uint32_t i = decoder && decoder->type == TFM__JSON_OBJECT
                          ? (uint32_t)(decoder - doc->nodes) + 1 : 0;
         decoder && i < decoder->next && !failed; i = doc->nodes[i].next) {
        const tfm__json_node *n = &doc->nodes[i];
        const char *key = tfm__json_key(doc, n), *content;
        char *end;
        long id = strtol(key, &end, 10);
        int flags[3] = {0, 0, 0};
        if (!*key || *end || id < 0 || id > INT32_MAX || n->type != TFM__JSON_OBJECT) {
            tfm__fail(TFM_ERR_FORMAT, "%s: tokenizer_config.json's added_tokens_decoder maps "
                      "\"%.32s\", not an id to an AddedToken", l->ctx, key);
            failed = 1;
        } else {
            failed = token_of(l, n, "added_tokens_decoder", &content, flags) < 0 ||
                     add_token(l, &a, content, (int32_t)id, flags, 0);
        }
    }
    failed = failed || tfm__added_set(l->ctx, tok, a.tokens, a.count);
    free(sentinels);
    free(a.tokens);
    free(a.listed);
    return failed ? -1 : 0;
}

/* The family's tokenizer files (its room's load_tokenizers), when the
 * folder has them, as the model's tokenizers with their added tokens. 0
 * when attached or absent. */
static int attach_tokenizers(tfm__loader *l, tfm_model *m)
{
    tfm_tokenizer *source = NULL, *target = NULL;
    uint64_t mark = tfm__error_mark();
    int found = tfm__families[l->family]->load_tokenizers(l, &source, &target);
    if (found == 0)
        return 0;
    int failed = found < 0 || (source && added_tokens(l, source) < 0) ||
                 (target && added_tokens(l, target) < 0) ||
                 tfm_model_set_tokenizers(m, source, target) != TFM_OK;
    tfm_tokenizer_free(source);
    tfm_tokenizer_free(target);
    if (failed)
        tfm__fail_within(l->ctx, mark);
    return failed ? -1 : 0;
}

/* --- the ids around sources ------------------------------------------------------- */

/* The ids the family's tokenizer in transformers puts around a source
 * (BART <s> X </s>; Marian, T5 X </s>, Marian's leading ">>xx<<" one token;
 * mBART-50, M2M100, NLLB [code] X </s>; mBART-cc25's MBartTokenizer and
 * NLLB's legacy X </s> [code]), tokenizer_config.json's src_lang
 * and tgt_lang (else the tokenizers' defaults: en_XX, eng_Latn, en), the
 * SentencePiece families' strip of decoded text and
 * clean_up_tokenization_spaces (default true), for a model with
 * tokenizers. */
static int read_text_template(tfm__loader *l, tfm_model *m)
{
    const tfm_tokenizer *tok = tfm_model_tokenizer(m, 0);
    if (!tok)
        return 0;
    int32_t clean_up = 1, legacy = 0;
    if (l->has_settings)
        tfm__reading_settings(l);
    if (l->has_settings && (tfm__config_bool(l, "clean_up_tokenization_spaces", 1, &clean_up) < 0 ||
                            tfm__config_bool(l, "legacy_behaviour", 0, &legacy) < 0))
        return -1;
    const char *source = l->has_settings ? tfm__config_string(l, "src_lang") : NULL;
    const char *target = l->has_settings ? tfm__config_string(l, "tgt_lang") : NULL;
    /* fairseq_tokenizer's reading of the class: mBART-cc25's MBartTokenizer
     * and NLLB's legacy put the code after </s> */
    const tfm__family_info *f = tfm__families[l->family];
    const char *class = l->tokenizer_class ? l->tokenizer_class : "";
    int nllb = strncmp(class, "NllbTokenizer", 13) == 0;
    int code_last = (nllb && legacy) ||
                    (f->code_first_class &&
                     strncmp(class, f->code_first_class, strlen(f->code_first_class)) != 0);
    int32_t bos = tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS),
            eos = tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS);
    if (eos < 0 || (f->bos_first && bos < 0)) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the tokenizer has no %s to put around sources", l->ctx,
                  eos < 0 ? "</s>" : "<s>");
        return -1;
    }
    tfm__text_template *t = &m->text;
    if (f->bos_first) {
        *t = (tfm__text_template){{bos, eos}, 1, 2, -1, -1, 0, clean_up, 0};
    } else if (!f->source_language) {
        *t = (tfm__text_template){{eos}, 0, 1, -1, -1, 1, clean_up, f->leading_code};
    } else {
        /* a place for the code, which tfm_model_set_languages fills */
        *t = code_last ? (tfm__text_template){{eos, eos}, 0, 2, 1, -1, 1, clean_up, 0}
                       : (tfm__text_template){{eos, eos}, 1, 2, 0, -1, 1, clean_up, 0};
        if (!source)
            source = nllb && f->nllb_source_language ? f->nllb_source_language
                                                     : f->source_language;
    }
    uint64_t mark = tfm__error_mark();
    /* a one-language family's src_lang, if any, is no code it carries */
    if (f->source_language && tfm_model_set_languages(m, source, target) != TFM_OK) {
        tfm__fail_within(l->ctx, mark);
        return -1;
    }
    return 0;
}

/* --- the tensors -------------------------------------------------------------------- */

/* model.safetensors, or every shard model.safetensors.index.json names. */
static int open_files(tfm__loader *l)
{
    char path[PATH_MAX_BYTES];
    if (tfm__in_folder(l->ctx, l->folder, "model.safetensors", path, PATH_MAX_BYTES) < 0)
        return -1;
    if (tfm__path_taken(path))
        return (l->files[l->n_files] = tfm__safetensors_open(l->op, path)) ? (l->n_files++, 0)
                                                                           : -1;
    char *text = NULL;
    size_t size;
    tfm__json index;
    if (tfm__in_folder(l->ctx, l->folder, "model.safetensors.index.json", path, PATH_MAX_BYTES) < 0)
        return -1;
    if (!tfm__path_taken(path)) {
        tfm__fail(TFM_ERR_IO, "%s: neither model.safetensors nor model.safetensors.index.json "
                  "is there (PyTorch's pytorch_model.bin is not read: save the model with "
                  "safe_serialization)", l->ctx);
        return -1;
    }
    if (tfm__read_whole_file(l->op, path, INDEX_MAX_BYTES, &text, &size) != TFM_OK)
        return -1;
    if (tfm__json_parse(l->ctx, text, size, (int64_t)(size / 2 + 1), &index) != TFM_OK) {
        free(text);
        return -1;
    }
    int status = 0;
    const tfm__json_node *top = &index.nodes[0], *map = NULL;
    for (uint32_t i = 1; top->type == TFM__JSON_OBJECT && i < top->next; i = index.nodes[i].next)
        if (strcmp(tfm__json_key(&index, &index.nodes[i]), "weight_map") == 0)
            map = &index.nodes[i];
    if (!map || map->type != TFM__JSON_OBJECT) {
        tfm__fail(TFM_ERR_FORMAT, "%s: model.safetensors.index.json has no weight_map object",
                  l->ctx);
        status = -1;
    }
    uint32_t end = map ? map->next : 0;
    for (uint32_t i = map ? (uint32_t)(map - index.nodes) + 1 : 0; status == 0 && i < end;
         i = index.nodes[i].next) {
        const tfm__json_node *n = &index.nodes[i];
        const char *shard = n->type == TFM__JSON_STRING ? tfm__json_string(&index, n) : NULL;
        if (!shard || !*shard || strchr(shard, '/') || strcmp(shard, "..") == 0) {
            tfm__fail(TFM_ERR_FORMAT, "%s: model.safetensors.index.json maps \"%s\" to something "
                      "other than a file name in the folder", l->ctx, tfm__json_key(&index, n));
            status = -1;
            break;
        }
        int seen = 0; /* shards repeat once per tensor: open each once */
        for (uint32_t k = (uint32_t)(map - index.nodes) + 1; k < i && !seen;
             k = index.nodes[k].next)
            seen = strcmp(tfm__json_string(&index, &index.nodes[k]), shard) == 0;
        if (seen)
            continue;
        if (l->n_files == MAX_SHARDS) {
            tfm__fail(TFM_ERR_FORMAT, "%s: model.safetensors.index.json names more than %d "
                      "shards", l->ctx, MAX_SHARDS);
            status = -1;
        } else if (tfm__in_folder(l->ctx, l->folder, shard, path, PATH_MAX_BYTES) < 0 ||
                   !(l->files[l->n_files] = tfm__safetensors_open(l->op, path))) {
            status = -1;
        } else {
            l->n_files++;
        }
    }
    if (status == 0 && l->n_files == 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: model.safetensors.index.json names no shard", l->ctx);
        status = -1;
    }
    tfm__json_free(&index);
    free(text);
    return status;
}

/* The file and index of a published tensor, or -1. */
static int find_tensor(const tfm__loader *l, const char *name, int64_t *index)
{
    for (int32_t f = 0; f < l->n_files; f++)
        if ((*index = tfm__safetensors_find(l->files[f], name)) >= 0)
            return f;
    return -1;
}

/* Reads the published tensor into the parameter ours, whose values it
 * must fill exactly (a [1, V] final_logits_bias fills a [V] bias); a
 * mismatch names both shapes and, for the vocabulary's tables, the
 * config's sizes. */
static int load_tensor(tfm__loader *l, const tfm_model *m, const char *ours, const char *name,
                       tfm_tensor *param, int32_t f, int64_t index)
{
    tfm__tensor_info info;
    tfm__safetensors_info(l->files[f], index, &info);
    int64_t leading_ones = 0;
    while (leading_ones < info.ndim - param->ndim && info.shape[leading_ones] == 1)
        leading_ones++;
    int fits = info.is_float && info.ndim - leading_ones == param->ndim;
    for (int32_t d = 0; fits && d < param->ndim; d++)
        fits = info.shape[leading_ones + d] == param->shape[d];
    if (!fits) {
        char want[64], have[64], sizes[96] = "";
        const tfm_model_options *o = &m->options;
        int source = strcmp(ours, "src_embedding.weight") == 0;
        if (source || strcmp(ours, "tgt_embedding.weight") == 0 ||
            strncmp(ours, "generator.", 10) == 0)
            snprintf(sizes, sizeof sizes, " (%s %lld, d_model %lld)",
                     source || o->src_vocab == o->tgt_vocab ? "vocab_size" : "decoder_vocab_size",
                     (long long)(source ? o->src_vocab : o->tgt_vocab), (long long)o->d_model);
        tfm__fail(TFM_ERR_FORMAT, "%s: tensor %s is %s %s where config.json describes %s%s",
                  l->ctx, name, info.dtype_name,
                  tfm__dims_str(info.shape, info.ndim, have, sizeof have),
                  tfm__shape_str(param, want, sizeof want), sizes);
        return -1;
    }
    tfm__safetensors_read_f32(l->files[f], index, tfm__f32(param));
    l->used[f][index] = 1;
    return 0;
}

/* Tensors a published folder holds that libtfm computes or ties instead:
 * sinusoidal tables, and the copies of a tied embedding table. */
static int derived(const tfm__loader *l, const tfm_model *m, const char *name)
{
    char buf[256];
    const char *copies[] = {"encoder.embed_positions.weight", "decoder.embed_positions.weight",
                            "encoder.embed_positions._float_tensor",
                            "decoder.embed_positions._float_tensor",
                            "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        int positions = i < 4, tokens = !positions;
        if (positions && m->options.positions == TFM_POSITIONS_LEARNED)
            continue;
        /* embed_tokens are copies of shared (or of the side's table) */
        if (tokens && !l->shared && strstr(copies[i], "decoder"))
            continue;
        snprintf(buf, sizeof buf, "%s%s", l->prefix, copies[i]);
        if (strcmp(name, buf) == 0)
            return 1;
    }
    return m->options.tie_generator && strcmp(name, "lm_head.weight") == 0;
}

static int load_tensors(tfm__loader *l, tfm_model *m)
{
    for (int32_t f = 0; f < l->n_files; f++)
        if (!(l->used[f] = calloc((size_t)tfm_safetensors_count(l->files[f]) + 1, 1))) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
            return -1;
        }
    int64_t index;
    l->prefix = find_tensor(l, "model.encoder.layers.0.fc1.weight", &index) >= 0 ||
                        find_tensor(l, "model.shared.weight", &index) >= 0 ||
                        find_tensor(l, "model.encoder.embed_tokens.weight", &index) >= 0
                    ? "model."
                    : "";
    tfm__family_layout layout = {l->family, l->shared, l->prefix};
    for (int64_t i = 0; i < tfm_params_count(m->params); i++) {
        const char *ours = tfm_params_name(m->params, i);
        char theirs[256];
        int32_t f = -1;
        if (tfm__published_name(&layout, m, ours, theirs, sizeof theirs) < 0) {
            tfm__fail(TFM_ERR_FORMAT, "%s: libtfm's parameter %s has no published name", l->ctx,
                      ours);
            return -1;
        }
        f = find_tensor(l, theirs, &index);
        int source = strcmp(ours, "src_embedding.weight") == 0;
        if (f < 0 && (source || strcmp(ours, "tgt_embedding.weight") == 0)) {
            /* files that kept the encoder's copy of the shared table; a
             * shared table where the config wants separate ones (Marian's
             * decoder_vocab_size other than vocab_size): its shape says why */
            snprintf(theirs, sizeof theirs, "%s%s", l->prefix,
                     source && l->shared ? "encoder.embed_tokens.weight" : "shared.weight");
            f = find_tensor(l, theirs, &index);
        }
        if (f < 0 && strcmp(ours, "generator.bias") == 0) {
            /* M2M100's lm_head has no bias */
            tfm_tensor *bias = tfm_params_at(m->params, i);
            memset(tfm__f32(bias), 0, (size_t)bias->numel * sizeof(float));
            continue;
        }
        if (f < 0) {
            tfm__fail(TFM_ERR_FORMAT, "%s: the model's files have no tensor %s (libtfm's %s)",
                      l->ctx, theirs, ours);
            return -1;
        }
        if (load_tensor(l, m, ours, theirs, tfm_params_at(m->params, i), f, index) < 0)
            return -1;
    }
    for (int32_t f = 0; f < l->n_files; f++)
        for (int64_t t = 0; t < tfm_safetensors_count(l->files[f]); t++) {
            const char *name = tfm_safetensors_name(l->files[f], t);
            if (!l->used[f][t] && !derived(l, m, name)) {
                tfm__fail(TFM_ERR_FORMAT, "%s: tensor %s is not one libtfm reads for a %s model "
                          "(an option it does not support?)", l->ctx, name,
                          tfm__families[l->family]->model_type);
                return -1;
            }
        }
    return 0;
}

/* The float values the files hold, bounding the model a config may ask
 * for (as tfm_model_load does with its file): twice them, since a
 * generator's bias of its own ([V], zeros where a family publishes none)
 * is never larger than the embedding table [V, D] the files hold. */
static int64_t float_values(const tfm__loader *l)
{
    int64_t total = 0;
    for (int32_t f = 0; f < l->n_files; f++)
        for (int64_t i = 0; i < tfm_safetensors_count(l->files[f]); i++) {
            tfm__tensor_info info;
            tfm__safetensors_info(l->files[f], i, &info);
            total += info.is_float ? info.numel : 0;
        }
    return total;
}

/* What saving the model back in the folder's layout needs
 * (families.h): the JSON texts as read (taken from the loader) and the
 * tokenizer files' bytes. 0, or -1 with the error set. */
static int keep_published(tfm__loader *l, tfm_model *m)
{
    tfm__published *p = calloc(1, sizeof *p);
    if (!p) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
        return -1;
    }
    p->family = l->family;
    p->shared = l->shared;
    p->config = l->config_as_read;
    p->generation = l->generation_as_read;
    l->config_as_read = l->generation_as_read = NULL;
    m->published = p;
    if (!tfm_model_tokenizer(m, 0))
        return 0;
    for (int32_t i = 0; i < TFM__TOKENIZER_FILES; i++) {
        char path[PATH_MAX_BYTES];
        if (!tfm__has_file(l, tfm__tokenizer_files[i], path))
            continue;
        int32_t n = p->n_files;
        if (tfm__read_whole_file(l->op, path, TOKENIZER_FILE_MAX_BYTES, &p->file_bytes[n],
                                 &p->file_sizes[n]) != TFM_OK)
            return -1;
        p->n_files++;
        if (!(p->file_names[n] = strdup(tfm__tokenizer_files[i]))) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
            return -1;
        }
    }
    return 0;
}

static void loader_free(tfm__loader *l)
{
    for (int32_t f = 0; f < l->n_files; f++) {
        tfm_safetensors_close(l->files[f]);
        if (l->used)
            free(l->used[f]);
    }
    free(l->used);
    if (l->has_config)
        tfm__json_free(&l->config);
    if (l->has_generation)
        tfm__json_free(&l->generation);
    if (l->has_settings)
        tfm__json_free(&l->settings);
    free(l->config_text);
    free(l->generation_text);
    free(l->settings_text);
    free(l->config_as_read);
    free(l->generation_as_read);
}

tfm_model *tfm_model_from_pretrained(const char *folder)
{
    const char *op = "tfm_model_from_pretrained";
    if (!folder) {
        tfm__fail(TFM_ERR_NULL, "%s: folder is NULL", op);
        return NULL;
    }
    tfm__loader *l = calloc(1, sizeof *l);
    if (!l) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    l->op = op;
    l->folder = folder;
    snprintf(l->ctx, sizeof l->ctx, "%s: \"%s\"", op, folder);
    tfm_model_options o;
    tfm_model *m = NULL;
    tfm__generation *g = calloc(1, sizeof *g);
    if (!g) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        free(l);
        return NULL;
    }
    int ok = read_config(l, &o) == 0 && read_generation(l, &o, g) == 0 && open_files(l) == 0;
    if (ok && !(l->used = calloc((size_t)l->n_files, sizeof *l->used))) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", l->ctx);
        ok = 0;
    }
    if (ok && !(m = tfm__model_create(op, &o, 2 * float_values(l))) &&
        (tfm_last_status() == TFM_ERR_ARG || tfm_last_status() == TFM_ERR_SIZE))
        tfm__fail_because(TFM_ERR_FORMAT, "%s: config.json describes no model libtfm can make "
                          "from these files", l->ctx);
    if (m && (load_tensors(l, m) < 0 || read_settings(l) < 0 || attach_tokenizers(l, m) < 0 ||
              read_text_template(l, m) < 0 || keep_published(l, m) < 0)) {
        tfm_model_free(m);
        m = NULL;
    }
    if (m) {
        tfm_model_set_training(m, 0); /* published for inference */
        m->generation = g;
    } else {
        tfm__generation_free(g);
    }
    loader_free(l);
    free(l);
    return m;
}
