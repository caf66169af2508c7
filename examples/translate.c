/* tfm-translate: text in, text out. Trains a translation model on two
 * line-aligned files with a vocabulary it trains itself, keeps the best
 * checkpoint (the tokenizer inside), scores it with chrF and BLEU, and
 * translates standard input line by line:
 *
 *   python3 scripts/translation_data.py           # runs/translation/data
 *   tfm-translate --train --minutes 10            # runs/translation/model.safetensors
 *   echo "Cannot open file" | tfm-translate --model runs/translation/model.safetensors
 *   tfm-translate --score hyp.fr --reference test.fr
 *   tfm-translate --po messages.pot --language fr --out fr.po   # catalog.c
 *   tfm-translate --train --model FILE_OR_FOLDER --data DIR --out tuned.safetensors
 *                                                # fine-tunes a model, --freeze parts
 *   tfm-translate --train --model M --lora 8 --data DIR --out ADAPTER_FOLDER
 *   tfm-translate --model M --adapter ADAPTER_FOLDER # a LoRA adapter, PEFT's folder
 *
 * Training: a joint BPE vocabulary (byte fallback, so no text is
 * untokenisable), a pre-norm encoder-decoder with one embedding table for
 * both languages and the output projection tied to it, label smoothing,
 * AdamW with warm-up then 1/sqrt decay and a linear cool-down to the end
 * of the budget, clipping, batches of about
 * --max-tokens padded tokens grouped by length (tfm_batch_plan), the
 * validation loss over every validation pair, on threads or MPI ranks. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tfm/tfm.h>

#ifdef TFM_TRANSLATE_CATALOGS
#include "catalog.h"
#endif
#include "cli.h"
#include "ranks.h"

static const char *program = "tfm-translate";

typedef struct config {
    int64_t train, distributed, overwrite;
    const char *model, *score, *reference, *glossary;
    const char *data, *source_ext, *target_ext, *out, *vocab, *save_vocab, *precision;
    int64_t vocab_size, max_len;
    int64_t d_model, heads, layers, d_ff;
    double dropout, label_smoothing, lr, weight_decay, clip, minutes, cooldown;
    int64_t warmup, max_tokens, steps, validate_every, average, seed, threads;
    int64_t beam, max_length, batch, evaluate, int8, timing, no_placeholders;
    const char *source_language, *target_language, *freeze;
    int64_t lora;                 /* --lora's rank; 0: fine-tune every parameter */
    double lora_alpha;
    const char *lora_targets, *adapter;
    const char *po, *language;
    int64_t all;
} config;

/* --- text files --------------------------------------------------------------------- */

typedef struct text_lines {
    char *data;
    char **line; /* NUL-terminated, without the line end */
    int64_t count;
} text_lines;

static void text_lines_free(text_lines *t)
{
    free(t->data);
    free(t->line);
    *t = (text_lines){0};
}

/* Every line of path; 0, or -1 after a message. */
static int text_lines_read(const char *path, text_lines *t)
{
    *t = (text_lines){0};
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open '%s': %s\n", program, path, strerror(errno));
        return -1;
    }
    size_t size = 0, capacity = 1 << 20, got;
    t->data = malloc(capacity);
    while (t->data && (got = fread(t->data + size, 1, capacity - size - 1, f)) > 0) {
        size += got;
        if (size + 1 == capacity) {
            char *grown = realloc(t->data, capacity *= 2);
            if (!grown)
                free(t->data);
            t->data = grown;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (!t->data || failed) {
        fprintf(stderr, "%s: cannot read '%s'%s\n", program, path,
                t->data ? "" : ": out of memory");
        text_lines_free(t);
        return -1;
    }
    t->data[size] = '\0';
    int64_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += t->data[i] == '\n';
    lines += size && t->data[size - 1] != '\n';
    t->line = malloc((size_t)(lines + 1) * sizeof *t->line);
    if (!t->line) {
        fprintf(stderr, "%s: out of memory for the lines of '%s'\n", program, path);
        text_lines_free(t);
        return -1;
    }
    char *start = t->data;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && t->data[i] != '\n')
            continue;
        if (i == size && start == t->data + size)
            break;
        t->data[i] = '\0';
        if (t->data + i > start && t->data[i - 1] == '\r')
            t->data[i - 1] = '\0';
        t->line[t->count++] = start;
        start = t->data + i + 1;
    }
    return 0;
}

/* --- pairs of token ids ------------------------------------------------------------- */

/* One side of a corpus as batch.h reads it: example i is
 * ids[offsets[i], offsets[i + 1]). */
typedef struct corpus {
    int32_t *ids;
    int64_t ids_count, ids_capacity;
    int64_t *offsets, count;
} corpus;

typedef struct pairs {
    corpus source, target;
    int32_t bos, eos, pad;                    /* the model's */
    int64_t *source_lengths, *target_lengths; /* as the tensors hold them: target + 1 */
    int64_t *line;                            /* each pair's line in the files */
    int64_t empty, too_long;                  /* pairs skipped */
} pairs;

static void pairs_free(pairs *p)
{
    free(p->source.ids);
    free(p->source.offsets);
    free(p->target.ids);
    free(p->target.offsets);
    free(p->source_lengths);
    free(p->target_lengths);
    free(p->line);
    *p = (pairs){0};
}

/* How a pair's sides become the model's ids: a source as the model
 * encodes one (its family's ids around the text), a target as decoding
 * makes one (its forced first token, a language code, then the target
 * tokenizer's ids), each at most its limit long. */
typedef struct encoding {
    const tfm_model *model;
    const tfm_tokenizer *target;
    int32_t forced;       /* the target's first id, or -1 */
    int64_t around;       /* ids the model puts around every source */
    int64_t source_limit, target_limit;
} encoding;

/* The model's encoding, for sources of at most max_len ids and targets
 * of max_len decoder inputs; 0, or -1 after a message. */
static int encoding_make(const tfm_model *model, int64_t max_len, encoding *e)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    int32_t around[8]; /* a family puts at most 4 ids around a source */
    *e = (encoding){.model = model, .target = tfm_model_tokenizer(model, 1)};
    int64_t tgt_len = tfm_model_max_tgt_len(model);
    e->source_limit = tfm_model_max_src_len(model) < max_len ? tfm_model_max_src_len(model)
                                                             : max_len;
    e->target_limit = (tgt_len < max_len ? tgt_len : max_len) - 1; /* then <s> before */
    if (!e->target) {
        fprintf(stderr, "%s: the model has no tokenizer to encode the pairs with\n", program);
        return -1;
    }
    if (tfm_model_bos_id(model) < 0 || tfm_model_eos_id(model) < 0 ||
        tfm_model_pad_id(model) < 0) {
        fprintf(stderr, "%s: the model lacks a decoder start, end or padding id (options "
                "bos_id, eos_id, pad_id) to train with\n", program);
        return -1;
    }
    if (tfm_decode_options_from_model(model, &o) != TFM_OK ||
        tfm_model_encode_text(model, "", 0, around, 8, &e->around) != TFM_OK) {
        cli_fail(program, "reading the model's encoding");
        return -1;
    }
    e->forced = o.forced_bos_id;
    return 0;
}

/* Appends the ids of one side of a pair to c, at most limit of them; the
 * count, 0 for text that gives no ids of its own, -1 past the limit
 * (nothing kept; the text encoded only as far as limit + 1 ids need), or
 * -2 on error. */
static int64_t corpus_add(corpus *c, const encoding *e, int target, const char *text,
                          int64_t limit)
{
    if (c->ids_capacity - c->ids_count < limit) {
        int64_t capacity = c->ids_capacity ? c->ids_capacity * 2 : 1 << 16;
        while (capacity < c->ids_count + limit)
            capacity *= 2;
        int32_t *grown = realloc(c->ids, (size_t)capacity * sizeof *grown);
        if (!grown)
            return -2;
        c->ids = grown;
        c->ids_capacity = capacity;
    }
    int32_t *ids = c->ids + c->ids_count, cut = 0;
    int64_t count = 0, length = (int64_t)strlen(text), forced = target && e->forced >= 0;
    if (forced && limit > 0)
        ids[0] = e->forced;
    tfm_status s = target ? tfm_tokenizer_encode_truncated(e->target, text, length, ids + forced,
                                                            limit - forced, &count, &cut)
                          : tfm_model_encode_text_truncated(e->model, text, length, ids, limit,
                                                            &count, &cut);
    if (s != TFM_OK)
        return -2;
    if (cut)
        return -1;
    if (target ? count == 0 : count == e->around)
        return 0;
    count += target ? forced : 0;
    c->ids_count += count;
    return count;
}

/* The pairs of source and target lines tokenized: a pair with a side that
 * gives no ids (empty, or spaces only) or more than max_len ids is
 * counted and skipped, never trained on. 0, or -1 after a message. */
static int pairs_make(const encoding *e, const text_lines *source, const text_lines *target,
                      const char *name, pairs *p)
{
    *p = (pairs){.bos = tfm_model_bos_id(e->model), .eos = tfm_model_eos_id(e->model),
                 .pad = tfm_model_pad_id(e->model)};
    if (source->count != target->count) {
        fprintf(stderr, "%s: the %s files are not aligned: %lld source lines, %lld target "
                "lines\n", program, name, (long long)source->count, (long long)target->count);
        return -1;
    }
    int64_t n = source->count;
    p->source.offsets = malloc((size_t)(n + 1) * sizeof(int64_t));
    p->target.offsets = malloc((size_t)(n + 1) * sizeof(int64_t));
    p->source_lengths = malloc((size_t)(n + 1) * sizeof(int64_t));
    p->target_lengths = malloc((size_t)(n + 1) * sizeof(int64_t));
    p->line = malloc((size_t)(n + 1) * sizeof(int64_t));
    if (!p->source.offsets || !p->target.offsets || !p->source_lengths ||
        !p->target_lengths || !p->line)
        goto nomem;
    p->source.offsets[0] = p->target.offsets[0] = 0;
    /* with the vocabularies' placeholder pieces, a pair's spans that must
     * pass unchanged become them (tfm_placeholders_pair) */
    const tfm_tokenizer *sides[2] = {tfm_model_tokenizer(e->model, 0), e->target};
    int placeholders = 1;
    for (int k = 0; k < 2; k++)
        placeholders = placeholders && sides[k] &&
                       tfm_tokenizer_piece_to_id(sides[k], tfm_placeholder(0),
                                                 (int64_t)strlen(tfm_placeholder(0))) >= 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t kept_source = p->source.ids_count;
        char *masked[2] = {NULL, NULL};
        const char *side[2] = {source->line[i], target->line[i]};
        if (placeholders) {
            masked[0] = malloc(4 * strlen(side[0]) + 1);
            masked[1] = malloc(4 * strlen(side[1]) + 1);
            int32_t count = 0;
            if (!masked[0] || !masked[1] ||
                tfm_placeholders_pair(side[0], side[1], masked[0], masked[1], &count) != TFM_OK) {
                free(masked[0]);
                free(masked[1]);
                goto nomem;
            }
            side[0] = masked[0];
            side[1] = masked[1];
        }
        int64_t a = corpus_add(&p->source, e, 0, side[0], e->source_limit);
        int64_t b = a > 0 ? corpus_add(&p->target, e, 1, side[1], e->target_limit) : 0;
        free(masked[0]);
        free(masked[1]);
        if (a == -2 || b == -2)
            goto nomem;
        if (a <= 0 || b <= 0) {
            p->source.ids_count = kept_source;
            if (a == 0 || b == 0)
                p->empty++;
            else
                p->too_long++;
            continue;
        }
        int64_t k = p->source.count;
        p->line[k] = i;
        p->source_lengths[k] = a;
        p->target_lengths[k] = b + 1; /* <s> before, </s> after */
        p->source.offsets[++p->source.count] = p->source.ids_count;
        p->target.offsets[++p->target.count] = p->target.ids_count;
    }
    if (p->empty || p->too_long)
        printf("%s: skipped %lld of %lld pairs: %lld with a side that holds no text, %lld "
               "longer than %lld tokens\n", name, (long long)(p->empty + p->too_long),
               (long long)n, (long long)p->empty, (long long)p->too_long,
               (long long)e->source_limit);
    if (p->source.count == 0) {
        fprintf(stderr, "%s: no %s pair to use\n", program, name);
        return -1;
    }
    return 0;
nomem:
    fprintf(stderr, "%s: out of memory tokenizing the %s pairs (%s)\n", program, name,
            tfm_last_error());
    return -1;
}

/* --- the model ---------------------------------------------------------------------- */

enum { UNK_ID = 0, BOS_ID = 1, EOS_ID = 2, PAD_ID = 3 };

/* A joint BPE vocabulary of both languages' training text. */
static tfm_tokenizer *train_vocabulary(const config *c, const text_lines *source,
                                       const text_lines *target)
{
    int64_t n = source->count + target->count;
    const char **lines = malloc((size_t)n * sizeof *lines);
    if (!lines)
        return NULL;
    memcpy(lines, source->line, (size_t)source->count * sizeof *lines);
    memcpy(lines + source->count, target->line, (size_t)target->count * sizeof *lines);
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    options.vocab_size = (int32_t)c->vocab_size;
    options.byte_fallback = 1;
    options.pad_piece = 1;
    const char *placeholders[TFM_PLACEHOLDERS];
    for (int32_t i = 0; i < TFM_PLACEHOLDERS; i++)
        placeholders[i] = tfm_placeholder(i);
    options.user_symbols = placeholders;
    options.n_user_symbols = TFM_PLACEHOLDERS;
    tfm_tokenizer *tok = NULL;
    tfm_tokenizer_train_bpe(lines, NULL, n, &options, &tok);
    free(lines);
    return tok;
}

static tfm_model *build_model(const config *c, int64_t vocab)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = vocab;
    o.max_src_len = c->max_len;
    o.max_tgt_len = c->max_len + 1;
    o.share_embeddings = 1;
    o.tie_generator = 1;
    o.positions = TFM_POSITIONS_SINUSOIDAL;
    o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    o.encoder_layers = o.decoder_layers = (int32_t)c->layers;
    o.final_norm = 1;
    o.norm_first = 1;
    o.d_model = c->d_model;
    o.heads = (int32_t)c->heads;
    o.d_ff = c->d_ff;
    o.dropout = (float)c->dropout;
    o.seed = (uint64_t)c->seed;
    o.bos_id = BOS_ID;
    o.eos_id = EOS_ID;
    o.pad_id = PAD_ID;
    return tfm_model_create(&o);
}

/* The cross-entropy of the pairs indices[0, rows): the mean over their
 * target tokens (with label smoothing) for training, or their sum for
 * validation; *counted the tokens. */
static tfm_tensor *batch_loss(tfm_tape *tape, tfm_model *model, const pairs *p,
                              const int64_t *indices, int64_t rows, float label_smoothing,
                              tfm_reduction reduction, int64_t *counted)
{
    int64_t n = p->source.count;
    tfm_tensor *src = tfm_batch_pad(tape, p->source.ids, p->source.ids_count,
                                    p->source.offsets, n, indices, rows, p->pad);
    tfm_tensor *decoder_input = NULL, *labels = NULL;
    if (!src || tfm_batch_shift_targets(tape, p->target.ids, p->target.ids_count,
                                        p->target.offsets, n, indices, rows, p->bos, p->eos,
                                        p->pad, &decoder_input, &labels) != TFM_OK)
        return NULL;
    int64_t lengths[4096];
    int64_t *source_lengths = rows <= 4096 ? lengths : malloc((size_t)rows * sizeof *lengths);
    if (!source_lengths)
        return NULL;
    for (int64_t b = 0; b < rows; b++)
        source_lengths[b] = p->source_lengths[indices[b]];
    tfm_tensor *padding =
        tfm_mask_from_lengths(tape, source_lengths, rows, tfm_tensor_dim(src, 1), TFM_I32);
    if (source_lengths != lengths)
        free(source_lengths);
    /* Pads follow every target's tokens, so the causal mask alone keeps them
     * from the tokens; their own rows are ignored by the loss. */
    tfm_tensor *causal = tfm_mask_causal(tape, tfm_tensor_dim(decoder_input, 1), TFM_I32);
    tfm_tensor *logits = tfm_model_forward(tape, model, src, decoder_input, NULL, causal, NULL,
                                           padding, NULL, padding);
    return tfm_cross_entropy_reduced(tape, logits, labels, p->pad, label_smoothing, reduction,
                                     counted);
}

/* The mean cross-entropy (no smoothing, no dropout) over every target
 * token of the pairs, in batches of the plan; NAN on error. */
static double validation_loss(tfm_tape *tape, tfm_model *model, const pairs *p,
                              const int64_t *order, const int64_t *starts, int64_t batches)
{
    double sum = 0.0;
    int64_t tokens = 0;
    tfm_model_set_training(model, 0);
    tfm_tape_set_recording(tape, 0);
    for (int64_t b = 0; b < batches && isfinite(sum); b++) {
        int64_t counted = 0;
        float value = NAN;
        tfm_tensor *loss = batch_loss(tape, model, p, order + starts[b],
                                      starts[b + 1] - starts[b], 0.0f, TFM_REDUCTION_SUM,
                                      &counted);
        if (!loss || tfm_tensor_item(loss, &value) != TFM_OK)
            value = NAN;
        sum += value;
        tokens += counted;
        tfm_tape_reset(tape);
    }
    tfm_tape_set_recording(tape, 1);
    tfm_model_set_training(model, 1);
    return tokens ? sum / (double)tokens : NAN;
}

/* --- translating: the library's translator (translate.h) --------------------------- */

/* The translator's decoding defaults, with --beam and --max-length. */
static void decode_options(const tfm_translator *t, const config *c, tfm_decode_options *o)
{
    tfm_decode_options_init(o);
    tfm_translator_decode_options(t, o);
    if (c->beam) {
        o->strategy = c->beam > 1 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
        o->beam_size = (int32_t)c->beam;
    }
    if (c->max_length)
        o->max_length = (int32_t)c->max_length;
}

/* out[i] = the translation of lines[i] (malloc'd), saying which lines were
 * cut to the model's sources; 0, or -1 after a message. */
static int translate_lines(tfm_translator *t, const tfm_translate_options *o,
                           char *const *lines, int64_t n, char **out)
{
    tfm_translation *r = NULL;
    if (tfm_translate(t, (const char *const *)lines, n, o, &r) != TFM_OK) {
        cli_fail(program, "translating");
        return -1;
    }
    int64_t done = 0;
    for (; done < n; done++) {
        int64_t tokens = 0;
        int32_t truncated = 0;
        tfm_translation_source_tokens(r, done, &tokens, &truncated);
        if (truncated)
            fprintf(stderr, "%s: a line is cut to the model's %lld tokens\n", program,
                    (long long)tokens);
        if (!(out[done] = strdup(tfm_translation_text(r, done, 0))))
            break;
    }
    tfm_translation_free(r);
    if (done == n)
        return 0;
    fprintf(stderr, "%s: out of memory for %lld translations\n", program, (long long)n);
    while (done > 0)
        free(out[--done]);
    return -1;
}

/* chrF and BLEU of the hypotheses against the references. */
static int score(char *const *hypotheses, char *const *references, int64_t n, double *chrf,
                 double *bleu)
{
    return tfm_score_chrf((const char *const *)hypotheses, (const char *const *)references, n,
                          chrf) == TFM_OK &&
                   tfm_score_bleu((const char *const *)hypotheses,
                                  (const char *const *)references, n, bleu) == TFM_OK
               ? 0
               : -1;
}

/* Lines from a file descriptor as they come: a line is taken as soon as
 * it is complete, and the reader says when no more is waiting, so a batch
 * is translated as soon as its input stops. */
typedef struct line_reader {
    int fd, eof;
    char *buffer;
    size_t size, capacity, start;
} line_reader;

/* The next complete line (NUL-terminated, valid until the next call), or
 * NULL: at the end of input (*ended = 1), or when wait is 0 and no line is
 * complete yet. */
static char *next_line(line_reader *r, int wait, int *ended)
{
    *ended = 0;
    for (;;) {
        char *newline = r->size > r->start
                            ? memchr(r->buffer + r->start, '\n', r->size - r->start)
                            : NULL;
        if (newline || (r->eof && r->size > r->start)) {
            char *line = r->buffer + r->start;
            size_t end = newline ? (size_t)(newline - r->buffer) : r->size;
            r->buffer[end] = '\0';
            if (end > r->start && r->buffer[end - 1] == '\r')
                r->buffer[end - 1] = '\0';
            r->start = end + 1;
            return line;
        }
        if (r->eof) {
            *ended = 1;
            return NULL;
        }
        if (!wait) {
            struct pollfd p = {r->fd, POLLIN, 0};
            if (poll(&p, 1, 0) <= 0)
                return NULL;
        }
        if (r->start > 0) { /* earlier lines are done with */
            memmove(r->buffer, r->buffer + r->start, r->size - r->start);
            r->size -= r->start;
            r->start = 0;
        }
        if (r->size + 4096 + 1 > r->capacity) {
            size_t capacity = r->capacity ? r->capacity * 2 : 1 << 16;
            char *grown = realloc(r->buffer, capacity);
            if (!grown) {
                *ended = -1;
                return NULL;
            }
            r->buffer = grown;
            r->capacity = capacity;
        }
        ssize_t got = read(r->fd, r->buffer + r->size, r->capacity - r->size - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *ended = -1;
            return NULL;
        }
        r->eof = got == 0;
        r->size += (size_t)got;
    }
}

/* The name --lora trains and --adapter loads the adapter under. */
#define ADAPTER "adapter"

/* The model under --adapter's translator, freed after it (close_translator). */
static tfm_model *adapted;

static tfm_model *load_model(const char *path);
static tfm_model *load_with_languages(const config *c);

/* --model with --adapter loaded as ADAPTER, --int8 and the languages set on
 * the model, then a translator over it with the rest of options; NULL with
 * the library's error. */
static tfm_translator *open_adapted(const config *c, const tfm_translator_options *options)
{
    tfm_translator_options over = *options;
    over.int8 = 0;
    over.source_language = over.target_language = NULL;
    tfm_translator *t = NULL;
    if ((adapted = load_with_languages(c)) &&
        tfm_model_load_adapter(adapted, ADAPTER, c->adapter) == TFM_OK &&
        (!c->int8 || tfm_model_quantize(adapted, TFM_QUANTIZE_LAYERS |
                                                     TFM_QUANTIZE_GENERATOR) == TFM_OK))
        t = tfm_translator_create(adapted, &over);
    if (!t) {
        tfm_model_free(adapted);
        adapted = NULL;
    }
    return t;
}

static void close_translator(tfm_translator *t)
{
    tfm_translator_free(t);
    tfm_model_free(adapted);
    adapted = NULL;
}

/* A --glossary file: its lines, and its terms as
 * tfm_translate_options.glossary takes them (pointing into the lines). */
typedef struct glossary_file {
    text_lines lines;
    const char **terms;
    int32_t n;
} glossary_file;

static void glossary_free(glossary_file *g)
{
    text_lines_free(&g->lines);
    free(g->terms);
    *g = (glossary_file){0};
}

/* The terms of path: one "source<TAB>target" a line (blank lines
 * skipped). 0, or -1 after a message (g freed). */
static int glossary_read(const char *path, glossary_file *g)
{
    *g = (glossary_file){0};
    if (text_lines_read(path, &g->lines) < 0)
        return -1;
    if (!(g->terms = malloc((size_t)(2 * g->lines.count + 1) * sizeof *g->terms))) {
        fprintf(stderr, "%s: out of memory for the glossary\n", program);
        glossary_free(g);
        return -1;
    }
    for (int64_t i = 0; i < g->lines.count; i++) {
        char *line = g->lines.line[i], *tab = strchr(line, '\t');
        if (!line[strspn(line, " \t\r")])
            continue;
        if (!tab || tab == line || !tab[1] || strchr(tab + 1, '\t')) {
            fprintf(stderr, "%s: %s:%lld: a glossary line is a source term, a tab and its "
                    "target term\n", program, path, (long long)i + 1);
            glossary_free(g);
            return -1;
        }
        *tab = '\0';
        g->terms[2 * g->n] = line;
        g->terms[2 * g->n + 1] = tab + 1;
        g->n++;
    }
    return 0;
}

/* The translator of --model, with --int8, the languages and placeholders
 * (--no-placeholders), and its translations' options (decode: their
 * decoding; --glossary's terms, held in g until the caller frees it);
 * NULL after a message. */
static tfm_translator *open_translator(const config *c, tfm_decode_options *decode,
                                       tfm_translate_options *o, glossary_file *g)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.int8 = c->int8 != 0;
    to.keep_placeholders = c->no_placeholders == 0;
    to.source_language = c->source_language;
    to.target_language = c->target_language;
    *g = (glossary_file){0};
    if (c->glossary && glossary_read(c->glossary, g) < 0)
        return NULL;
    tfm_translator *t = c->adapter ? open_adapted(c, &to) : tfm_translator_open(c->model, &to);
    if (!t) {
        cli_fail(program, c->adapter ? "loading the model and its adapter" : "loading the model");
        glossary_free(g);
        return NULL;
    }
    decode_options(t, c, decode);
    tfm_translate_options_init(o);
    o->decode = decode;
    o->adapter = c->adapter ? ADAPTER : NULL;
    o->glossary = g->terms;
    o->n_glossary = g->n;
    return t;
}

static int translate_stream(const config *c)
{
    double start = cli_seconds();
    tfm_decode_options decode;
    tfm_translate_options o;
    glossary_file glossary;
    tfm_translator *t = open_translator(c, &decode, &o, &glossary);
    if (!t)
        return EXIT_FAILURE;
    double loaded = cli_seconds(), first_line = 0.0;
    int64_t translated = 0;
    line_reader reader = {.fd = STDIN_FILENO};
    int64_t batch = c->batch ? c->batch : isatty(STDIN_FILENO) ? 1 : 32;
    char **lines = malloc((size_t)batch * sizeof *lines);
    char **out = malloc((size_t)batch * sizeof *out);
    int status = EXIT_FAILURE, ended = 0;
    int64_t n = 0;
    if (!lines || !out) {
        fprintf(stderr, "%s: out of memory for %lld lines\n", program, (long long)batch);
        goto done;
    }
    while (ended == 0) {
        /* wait for a first line, then take what has come with it */
        char *line = next_line(&reader, n == 0, &ended);
        if (line && first_line == 0.0)
            first_line = cli_seconds();
        if (line && !(lines[n++] = strdup(line))) {
            fprintf(stderr, "%s: out of memory\n", program);
            goto done;
        }
        if (ended < 0) {
            fprintf(stderr, "%s: cannot read standard input: %s\n", program, strerror(errno));
            goto done;
        }
        if (n == batch || (n > 0 && !line)) {
            if (translate_lines(t, &o, lines, n, out) < 0)
                goto done;
            for (int64_t i = 0; i < n; i++) {
                printf("%s\n", out[i]);
                free(out[i]);
                free(lines[i]);
            }
            translated += n;
            n = 0;
            fflush(stdout);
            if (cli_stdout_failed())
                goto done; /* said at exit */
        }
    }
    if (c->timing) {
        double took = first_line > 0.0 ? cli_seconds() - first_line : 0.0;
        fprintf(stderr, "%s: loaded the model in %.2f s; translated %lld lines in %.2f s "
                "(%.1f lines/s) from the first line read\n", program, loaded - start,
                (long long)translated, took, took > 0.0 ? (double)translated / took : 0.0);
    }
    status = EXIT_SUCCESS;
done:
    for (int64_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    free(out);
    free(reader.buffer);
    close_translator(t);
    glossary_free(&glossary);
    return status;
}

/* --po: the catalog's entries translated into --out (catalog.c). */
static int translate_catalog(const config *c)
{
#ifdef TFM_TRANSLATE_CATALOGS
    tfm_decode_options decode;
    tfm_translate_options o;
    glossary_file glossary;
    tfm_translator *t = open_translator(c, &decode, &o, &glossary);
    if (!t)
        return EXIT_FAILURE;
    /* placeholders (the translator's) and the glossary apply to every
     * entry; catalog.c still leaves untranslated an entry whose
     * translation msgfmt would refuse, saying so */
    catalog_job job = {
        .in = c->po, .out = c->out, .language = c->language,
        .target_language = c->target_language, .all = c->all != 0,
        .overwrite = c->overwrite != 0, .program = program,
    };
    int status = catalog_translate(&job, t, &o);
    close_translator(t);
    glossary_free(&glossary);
    return status;
#else
    (void)c;
    fprintf(stderr, "%s: --po: this tfm-translate is built without gettext catalog support "
            "(install libgettextpo-dev and configure again)\n", program);
    return EXIT_FAILURE;
#endif
}

static int score_files(const config *c)
{
    text_lines hypotheses, references;
    if (text_lines_read(c->score, &hypotheses) < 0)
        return EXIT_FAILURE;
    if (text_lines_read(c->reference, &references) < 0) {
        text_lines_free(&hypotheses);
        return EXIT_FAILURE;
    }
    int status = EXIT_FAILURE;
    double chrf, bleu;
    if (hypotheses.count != references.count)
        fprintf(stderr, "%s: %lld hypotheses for %lld references\n", program,
                (long long)hypotheses.count, (long long)references.count);
    else if (score(hypotheses.line, references.line, hypotheses.count, &chrf, &bleu) < 0)
        cli_fail(program, "scoring");
    else {
        printf("chrF %.2f  BLEU %.2f  (%lld lines)\n", chrf, bleu, (long long)hypotheses.count);
        status = EXIT_SUCCESS;
    }
    text_lines_free(&hypotheses);
    text_lines_free(&references);
    return status;
}

/* --- training ----------------------------------------------------------------------- */

typedef struct text_data {
    text_lines source[3], target[3]; /* train, validation, test */
} text_data;

static const char *const split_names[3] = {"train", "validation", "test"};

static void text_data_free(text_data *d)
{
    for (int s = 0; s < 3; s++) {
        text_lines_free(&d->source[s]);
        text_lines_free(&d->target[s]);
    }
}

static int text_data_read(const config *c, text_data *d)
{
    *d = (text_data){0};
    for (int s = 0; s < 3; s++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.%s", c->data, split_names[s], c->source_ext);
        if (access(path, R_OK) != 0) {
            fprintf(stderr, "%s: no '%s': make the English-French pairs of the Debian "
                    "catalogs with `python3 scripts/translation_data.py %s`, or give --data "
                    "a folder of train, validation and test .%s and .%s files\n", program,
                    path, c->data, c->source_ext, c->target_ext);
            return -1;
        }
        if (text_lines_read(path, &d->source[s]) < 0)
            return -1;
        snprintf(path, sizeof path, "%s/%s.%s", c->data, split_names[s], c->target_ext);
        if (text_lines_read(path, &d->target[s]) < 0)
            return -1;
    }
    return 0;
}

/* Translates the test pairs' sources with the model and prints their
 * scores; 0, or -1 after a message. */
static int evaluate(const config *c, tfm_model *model, const text_data *d, double start)
{
    const text_lines *source = &d->source[2], *reference = &d->target[2];
    int64_t n = source->count;
    char **out = calloc((size_t)n, sizeof *out);
    double begun = cli_seconds(), chrf, bleu;
    tfm_model_set_training(model, 0);
    tfm_translator *t = out ? tfm_translator_create(model, NULL) : NULL;
    int status = -1;
    if (!out) {
        fprintf(stderr, "%s: out of memory for %lld translations\n", program, (long long)n);
    } else if (!t) {
        cli_fail(program, "preparing to translate");
    } else {
        tfm_decode_options decode;
        decode_options(t, c, &decode);
        tfm_translate_options o;
        tfm_translate_options_init(&o);
        o.decode = &decode;
        if (translate_lines(t, &o, source->line, n, out) < 0) {
            for (int64_t i = 0; i < n; i++)
                out[i] = NULL;
        } else if (score(out, reference->line, n, &chrf, &bleu) < 0) {
            cli_fail(program, "scoring the test set");
        } else {
            printf("Test (%lld pairs, %s): chrF %.2f  BLEU %.2f  translated in %.1f s "
                   "(%.1f sentences/s); trained and translated in %.1f minutes\n", (long long)n,
                   decode.strategy == TFM_DECODE_BEAM ? "beam" : "greedy", chrf, bleu,
                   cli_seconds() - begun, (double)n / (cli_seconds() - begun),
                   (cli_seconds() - start) / 60.0);
            for (int64_t i = 0; i < 3 && i < n; i++)
                printf("  %s\n  -> %s\n  (reference: %s)\n", source->line[i], out[i],
                       reference->line[i]);
            status = 0;
        }
    }
    for (int64_t i = 0; out && i < n; i++)
        free(out[i]);
    free(out);
    tfm_translator_free(t);
    return status;
}

/* --freeze: the parts of the model that do not train; 0, or -1 with the
 * library's error. */
static int set_frozen(const config *c, tfm_model *model)
{
    tfm_model_parts parts = 0;
    return c->freeze && (tfm_model_parts_parse(c->freeze, &parts) != TFM_OK ||
                         tfm_model_freeze(model, parts) != TFM_OK)
               ? -1
               : 0;
}

/* --lora-targets: q, k, v, o (both attentions'), fc1, fc2; 0 for a name
 * it does not know. */
static tfm_adapter_targets parse_targets(const char *list)
{
    static const struct { const char *name; tfm_adapter_targets targets; } known[] = {
        {"q", TFM_ADAPT_Q}, {"k", TFM_ADAPT_K}, {"v", TFM_ADAPT_V}, {"o", TFM_ADAPT_O},
        {"fc1", TFM_ADAPT_FF_IN}, {"fc2", TFM_ADAPT_FF_OUT},
    };
    tfm_adapter_targets targets = 0;
    for (const char *at = list; *at;) {
        size_t length = strcspn(at, ","), k = 0;
        while (k < sizeof known / sizeof known[0] &&
               (strlen(known[k].name) != length || strncmp(known[k].name, at, length) != 0))
            k++;
        if (k == sizeof known / sizeof known[0])
            return 0;
        targets |= known[k].targets;
        at += length + (at[length] == ',');
    }
    return targets;
}

/* --lora: a new adapter over the model, the one its forward calls apply;
 * 0, or -1 with the library's error. */
static int add_adapter(const config *c, tfm_model *model)
{
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = (int32_t)c->lora;
    o.alpha = c->lora_alpha > 0 ? (float)c->lora_alpha : (float)c->lora;
    o.targets = parse_targets(c->lora_targets);
    return tfm_model_add_adapter(model, ADAPTER, &o) == TFM_OK &&
                   tfm_model_use_adapter(model, ADAPTER) == TFM_OK
               ? 0
               : -1;
}

/* What the run trains: the adapter's parameters under --lora, else the model's. */
static tfm_params *trained_params(const config *c, tfm_model *model)
{
    return c->lora ? tfm_model_adapter_params(model, ADAPTER) : tfm_model_params(model);
}

/* The parameters an optimizer step changes. */
static int64_t trained_count(const config *c, tfm_model *model)
{
    tfm_params *params = trained_params(c, model);
    int64_t count = 0;
    for (int64_t i = 0; i < tfm_params_count(params); i++)
        if (tfm_tensor_requires_grad(tfm_params_at(params, i)))
            count += tfm_tensor_numel(tfm_params_at(params, i));
    return count;
}

static tfm_optimizer *make_optimizer(const config *c, tfm_model *model)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    o.lr = (float)c->lr;
    o.beta2 = 0.98f;
    o.eps = 1e-9f;
    o.weight_decay = (float)c->weight_decay;
    o.clip_norm = (float)c->clip;
    o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
    o.warmup_steps = c->warmup;
    tfm_optimizer *adam = tfm_optimizer_create(trained_params(c, model), &o);
    if (adam && tfm_optimizer_no_decay_for_vectors(adam) != TFM_OK) {
        tfm_optimizer_free(adam);
        return NULL;
    }
    return adam;
}

/* The share of the schedule's rate a step takes, `done` of the run (its
 * steps, or its time under --minutes) behind it: 1, then down linearly over
 * the last `cooldown` of the run to nearly 0 at its end. A budget that ends
 * on a decayed rate trains a better model than one cut mid-schedule, and
 * --minutes cannot know its step count: the time decides. */
static float cooldown_share(double done, double cooldown)
{
    double left = 1.0 - done;
    if (cooldown <= 0 || left >= cooldown)
        return 1.0f;
    return (float)fmax(left / cooldown, 0.01);
}

/* An epoch's plan: order and starts of its batches. */
typedef struct plan {
    int64_t *order, *starts, batches, next;
} plan;

static int plan_make(plan *p, const pairs *data, int64_t max_tokens, tfm_rng *rng)
{
    int64_t n = data->source.count;
    if (!p->order) {
        p->order = malloc((size_t)n * sizeof *p->order);
        p->starts = malloc((size_t)(n + 1) * sizeof *p->starts);
        if (!p->order || !p->starts)
            return -1;
    }
    p->next = 0;
    return tfm_batch_plan(data->source_lengths, data->target_lengths, n, max_tokens, 0, rng,
                          p->order, n, p->starts, n + 1, &p->batches) == TFM_OK
               ? 0
               : -1;
}

static void plan_free(plan *p)
{
    free(p->order);
    free(p->starts);
}

/* The parameters at the last few validations, whose mean often beats
 * each of them (checkpoint averaging, as fairseq's average_checkpoints). */
typedef struct snapshots {
    float *values; /* capacity blocks of numel values */
    int64_t numel, capacity, kept, next;
} snapshots;

static int snapshots_make(snapshots *s, int64_t capacity, int64_t numel)
{
    *s = (snapshots){.numel = numel, .capacity = capacity};
    return capacity < 2 || (s->values = malloc((size_t)(capacity * numel) * sizeof(float)))
               ? 0
               : -1;
}

static void snapshots_take(snapshots *s, const float *values)
{
    if (s->capacity < 2)
        return;
    memcpy(s->values + s->next * s->numel, values, (size_t)s->numel * sizeof(float));
    s->next = (s->next + 1) % s->capacity;
    s->kept += s->kept < s->capacity;
}

static void snapshots_mean(const snapshots *s, float *out)
{
    for (int64_t i = 0; i < s->numel; i++) {
        double sum = 0.0;
        for (int64_t k = 0; k < s->kept; k++)
            sum += s->values[k * s->numel + i];
        out[i] = (float)(sum / (double)s->kept);
    }
}

/* A new model with a vocabulary trained on the training text (or
 * --vocab), the tokenizer inside; NULL after a message. */
static tfm_model *new_model(const config *c, const ranks *r, const text_data *d)
{
    tfm_tokenizer *tok;
    if (c->vocab) {
        tok = tfm_tokenizer_load_sentencepiece(c->vocab);
    } else {
        if (r->rank == 0)
            printf("Training a BPE vocabulary of %lld pieces on %lld + %lld lines...\n",
                   (long long)c->vocab_size, (long long)d->source[0].count,
                   (long long)d->target[0].count);
        fflush(stdout);
        tok = train_vocabulary(c, &d->source[0], &d->target[0]);
    }
    if (!tok) {
        cli_fail(program, "the vocabulary");
        return NULL;
    }
    tfm_model *model = NULL;
    if (tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD) != PAD_ID ||
        tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS) != EOS_ID ||
        tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS) != BOS_ID) {
        fprintf(stderr, "%s: the vocabulary must have <s>, </s> and <pad> at ids 1, 2 and 3 "
                "(spm_train --pad_id=3)\n", program);
    } else if (c->save_vocab && r->rank == 0 && cli_make_parent_folders(c->save_vocab) != 0) {
        fprintf(stderr, "%s: cannot create the folder of '%s': %s\n", program, c->save_vocab,
                strerror(errno));
    } else if (c->save_vocab && r->rank == 0 && tfm_tokenizer_save(tok, c->save_vocab) != TFM_OK) {
        cli_fail(program, "writing the vocabulary");
    } else if (!(model = build_model(c, tfm_tokenizer_vocab_size(tok))) ||
               tfm_model_set_tokenizers(model, tok, NULL) != TFM_OK ||
               set_frozen(c, model) < 0) {
        cli_fail(program, "making the model");
        tfm_model_free(model);
        model = NULL;
    }
    tfm_tokenizer_free(tok);
    return model;
}

static int is_folder(const char *path)
{
    struct stat about;
    return stat(path, &about) == 0 && S_ISDIR(about.st_mode);
}

/* A published model's folder, or a libtfm model file; NULL with the
 * library's error. */
static tfm_model *load_model(const char *path)
{
    return is_folder(path) ? tfm_model_from_pretrained(path) : tfm_model_load(path);
}

/* --model with --source-language and --target-language set on it; NULL
 * with the library's error. */
static tfm_model *load_with_languages(const config *c)
{
    tfm_model *model = load_model(c->model);
    if (model && (c->source_language || c->target_language) &&
        tfm_model_set_languages(model, c->source_language, c->target_language) != TFM_OK) {
        tfm_model_free(model);
        return NULL;
    }
    return model;
}

/* The model --train --model starts from (fine-tuning): its tokenizers,
 * architecture, languages and options; NULL after a message. */
static tfm_model *start_model(const config *c)
{
    tfm_model *model = load_with_languages(c);
    if (!model || set_frozen(c, model) < 0 || (c->lora && add_adapter(c, model) < 0)) {
        cli_fail(program, "loading the model to fine-tune");
        tfm_model_free(model);
        return NULL;
    }
    return model;
}

/* Writes the best model as it started: a published folder's fine-tuning
 * as a folder of the same layout, anything else as a libtfm file (the
 * tokenizers inside); under --lora, the adapter alone, PEFT's folder
 * naming --model its base. */
static tfm_status save_model(const config *c, const tfm_model *model)
{
    if (c->lora)
        return tfm_model_save_adapter(model, ADAPTER, c->out, c->model);
    return c->model && is_folder(c->model) ? tfm_model_save_pretrained(model, c->out, 0)
                                           : tfm_model_save(model, c->out);
}

/* What save_model wrote, to evaluate: under --lora, --model with the adapter
 * in use. NULL with the library's error. */
static tfm_model *load_saved(const config *c)
{
    if (!c->lora)
        return load_model(c->out);
    tfm_model *model = load_with_languages(c);
    if (model && (tfm_model_load_adapter(model, ADAPTER, c->out) != TFM_OK ||
                  tfm_model_use_adapter(model, ADAPTER) != TFM_OK)) {
        tfm_model_free(model);
        return NULL;
    }
    return model;
}

static int train(const config *c, ranks *r)
{
    double start = cli_seconds();
    int status = EXIT_FAILURE;
    text_data d;
    pairs train_pairs = {0}, val_pairs = {0};
    tfm_model *model = NULL;
    tfm_optimizer *adam = NULL;
    tfm_tape *tape = NULL;
    tfm_rng *rng = NULL;
    plan epoch = {0}, val_plan = {0};
    snapshots kept = {0};
    if (text_data_read(c, &d) < 0)
        goto done;
    /* A run's best starts at infinity, so its first validation would
     * replace whatever model is at --out: only when asked to. */
    struct stat about_out;
    int replacing = r->rank == 0 && stat(c->out, &about_out) == 0;
    if (replacing && !c->overwrite)
        fprintf(stderr, "%s: '%s' already exists, and this run would replace it at its first "
                "validation: give --overwrite to replace it, or another --out\n", program,
                c->out);
    if (ranks_decide(r, replacing && !c->overwrite))
        goto done;
    encoding e;
    model = c->model ? start_model(c) : new_model(c, r, &d);
    tape = tfm_tape_create();
    rng = tfm_rng_create((uint64_t)c->seed + 1);
    if (!model || encoding_make(model, c->max_len, &e) < 0 ||
        pairs_make(&e, &d.source[0], &d.target[0], "train", &train_pairs) < 0 ||
        pairs_make(&e, &d.source[1], &d.target[1], "validation", &val_pairs) < 0)
        goto done;
    if (!tape || !rng || ranks_share_model(r, model) != TFM_OK ||
        !(adam = make_optimizer(c, model)) ||
        plan_make(&val_plan, &val_pairs, c->max_tokens, NULL) < 0 ||
        snapshots_make(&kept, r->rank == 0 ? c->average : 0,
                       tfm_params_numel(trained_params(c, model))) < 0) {
        cli_fail(program, "setting up training");
        goto done;
    }
    if (r->rank == 0 && cli_make_parent_folders(c->out) != 0) {
        fprintf(stderr, "%s: cannot create the folder of '%s': %s\n", program, c->out,
                strerror(errno));
        goto done;
    }
    int64_t tokens_per_epoch = 0;
    for (int64_t i = 0; i < train_pairs.source.count; i++)
        tokens_per_epoch += train_pairs.target_lengths[i];
    if (r->rank == 0) {
        printf("Data: %lld training pairs (%lld target tokens), %lld validation pairs; "
               "vocabulary %d pieces (%.2f source and %.2f target tokens a line)\n",
               (long long)train_pairs.source.count, (long long)tokens_per_epoch,
               (long long)val_pairs.source.count, (int)tfm_tokenizer_vocab_size(e.target),
               (double)train_pairs.source.ids_count / (double)train_pairs.source.count,
               (double)train_pairs.target.ids_count / (double)train_pairs.target.count);
        if (c->model)
            printf("Model: %s, %lld parameters, %lld of them trained%s%s; %s products, "
                   "%lld thread%s x %d rank%s\n", c->model,
                   (long long)tfm_model_parameter_count(model),
                   (long long)trained_count(c, model), c->freeze ? ", frozen: " : "",
                   c->freeze ? c->freeze : c->lora ? " (LoRA adapter)" : "", c->precision, (long long)c->threads,
                   c->threads > 1 ? "s" : "", r->size, r->size > 1 ? "s" : "");
        else
            printf("Model: d %lld, %lld heads, %lld+%lld pre-norm layers, d_ff %lld, tied "
                   "embeddings and output, %lld parameters; %s products, %lld thread%s x "
                   "%d rank%s\n", (long long)c->d_model, (long long)c->heads,
                   (long long)c->layers, (long long)c->layers, (long long)c->d_ff,
                   (long long)tfm_model_parameter_count(model), c->precision,
                   (long long)c->threads, c->threads > 1 ? "s" : "", r->size,
                   r->size > 1 ? "s" : "");
        printf("Training: AdamW lr %g (warm-up %lld steps, then 1/sqrt, the last %g of the "
               "run down to 0), weight decay %g, clip %g, label smoothing %g, dropout %g, "
               "batches of %lld tokens, %s\n",
               c->lr, (long long)c->warmup, c->cooldown, c->weight_decay, c->clip,
               c->label_smoothing, c->dropout, (long long)c->max_tokens,
               c->minutes > 0 ? "until the time limit" : "a fixed number of steps");
        printf("Best model: %s, %s\n", c->out,
               replacing ? "replacing the model there (--overwrite)" : "a new file");
        fflush(stdout);
    }
    double limit = c->minutes * 60.0, best = INFINITY, trained_at = cli_seconds();
    int64_t steps = 0, epochs = 0, window_tokens = 0;
    double window_start = cli_seconds(), window_loss = 0.0;
    int64_t window_steps = 0;
    int stop = 0;
    tfm_model_set_training(model, 1);
    while (!stop) {
        if (epoch.next == epoch.batches) {
            if (plan_make(&epoch, &train_pairs, c->max_tokens, rng) < 0) {
                cli_fail(program, "planning the batches");
                goto done;
            }
            epochs++;
        }
        const int64_t *indices = epoch.order + epoch.starts[epoch.next];
        int64_t rows = epoch.starts[epoch.next + 1] - epoch.starts[epoch.next];
        epoch.next++;
        int64_t first, count, counted = 0;
        ranks_slice(r, rows, &first, &count);
        double done = limit > 0 ? (cli_seconds() - trained_at) / (start + limit - trained_at)
                                : (double)steps / (double)c->steps;
        tfm_optimizer_set_lr(adam, (float)c->lr * cooldown_share(ranks_share(r, done),
                                                                   c->cooldown));
        tfm_optimizer_zero_grad(adam);
        int stepped = 1;
        float value = 0.0f;
        if (count > 0) {
            tfm_tensor *loss = batch_loss(tape, model, &train_pairs, indices + first, count,
                                          (float)c->label_smoothing, TFM_REDUCTION_MEAN,
                                          &counted);
            stepped = loss && tfm_tape_backward(tape, loss) == TFM_OK &&
                      tfm_tensor_item(loss, &value) == TFM_OK;
        }
        if (ranks_average_gradients(r, stepped ? (double)counted : -1.0) != TFM_OK ||
            !stepped || tfm_optimizer_step(adam) != TFM_OK) {
            cli_fail(program, "training step");
            goto done;
        }
        tfm_tape_reset(tape);
        steps++;
        for (int64_t k = 0; k < rows; k++)
            window_tokens += train_pairs.target_lengths[indices[k]];
        window_loss += ranks_mean(r, value, (double)counted);
        window_steps++;
        double now = cli_seconds();
        /* the limit counts from the start: vocabulary and data included */
        stop = ranks_decide(r, (limit > 0 && now - start >= limit) ||
                                   (c->steps > 0 && steps >= c->steps));
        if (!stop && steps % c->validate_every)
            continue;
        if (r->rank == 0) {
            double val = validation_loss(tape, model, &val_pairs, val_plan.order,
                                         val_plan.starts, val_plan.batches);
            if (!isfinite(val)) {
                cli_fail(program, "the validation loss");
                goto done;
            }
            snapshots_take(&kept, tfm_params_values(trained_params(c, model)));
            int improved = val < best;
            if (improved) {
                best = val;
                if (save_model(c, model) != TFM_OK) {
                    cli_fail(program, "saving the best model");
                    goto done;
                }
            }
            printf("%7lld  epoch %lld  train %.3f  val %.3f  lr %.2e  %.0f target tokens/s  "
                   "%.1f min%s\n", (long long)steps, (long long)epochs,
                   window_loss / (double)window_steps, val, (double)tfm_optimizer_lr(adam),
                   (double)window_tokens / (now - window_start), (now - start) / 60.0,
                   improved ? "  *best" : "");
            fflush(stdout);
        }
        window_tokens = 0;
        window_loss = 0.0;
        window_steps = 0;
        window_start = cli_seconds(); /* validation is not training time */
    }
    if (r->rank == 0 && kept.kept >= 2) {
        snapshots_mean(&kept, tfm_params_values(trained_params(c, model)));
        double val = validation_loss(tape, model, &val_pairs, val_plan.order, val_plan.starts,
                                     val_plan.batches);
        int better = val < best;
        printf("The mean of the last %lld validations' parameters: val %.3f%s\n",
               (long long)kept.kept, val, better ? "  *best, kept" : ", not kept");
        if (better) {
            best = val;
            if (save_model(c, model) != TFM_OK) {
                cli_fail(program, "saving the averaged model");
                goto done;
            }
        }
    }
    if (r->rank == 0) {
        double trained = cli_seconds() - trained_at;
        printf("Trained %lld steps (%lld epochs) in %.1f minutes; best validation loss %.3f, "
               "%s in %s\n", (long long)steps, (long long)epochs, trained / 60.0, best,
               c->lora ? "the adapter" : "model and tokenizer", c->out);
        fflush(stdout);
        if (c->evaluate) {
            tfm_model *best_model = load_saved(c);
            if (!best_model) {
                cli_fail(program, "loading the best model");
                goto done;
            }
            int evaluated = evaluate(c, best_model, &d, start);
            tfm_model_free(best_model);
            if (evaluated < 0)
                goto done;
        }
    }
    status = EXIT_SUCCESS;
done:
    plan_free(&epoch);
    plan_free(&val_plan);
    free(kept.values);
    pairs_free(&train_pairs);
    pairs_free(&val_pairs);
    text_data_free(&d);
    tfm_optimizer_free(adam);
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    tfm_model_free(model);
    return status;
}

/* --- main --------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    program = cli_name(argv[0]);
    config c = {
        .data = "runs/translation/data", .source_ext = "en", .target_ext = "fr",
        .out = "runs/translation/model.safetensors", .precision = "float32",
        .vocab_size = 8000, .max_len = 128, .d_model = 256, .heads = 4, .layers = 3,
        .d_ff = 1024, .dropout = 0.1, .label_smoothing = 0.1, .lr = 2e-3,
        .weight_decay = 0.01, .clip = 1.0, .warmup = 500, .cooldown = 0.3, .max_tokens = 4000,
        .validate_every = 100, .average = 5, .seed = 0, .threads = 1, .evaluate = 1,
        .lora_targets = "q,k,v,o",
    };
    const cli_flag flags[] = {
        {"train", CLI_SWITCH, &c.train, 0, 0, "train a model on --data, keep the best in --out"},
        {"model", CLI_STRING, &c.model, 0, 0, "translate standard input with this model file, "
         "or a published model's folder (Marian, BART, mBART, M2M100, NLLB, T5); with "
         "--train, fine-tune it (its tokenizers and architecture) into --out"},
        {"freeze", CLI_STRING, &c.freeze, 0, 0, "--train: parts that do not train, "
         "comma-separated: embeddings, encoder, decoder, output"},
        {"lora", CLI_INT, &c.lora, 1, 512, "--train --model: train a LoRA adapter of this "
         "rank over the frozen model instead, saved into --out as PEFT's folder"},
        {"lora-alpha", CLI_FLOAT, &c.lora_alpha, 0, 1e6, "--lora: the adapter's terms are "
         "scaled by alpha / rank (0: alpha = rank)"},
        {"lora-targets", CLI_STRING, &c.lora_targets, 0, 0, "--lora: the linears adapted, "
         "comma-separated: q, k, v, o (self- and cross-attention's), fc1, fc2"},
        {"adapter", CLI_STRING, &c.adapter, 0, 0, "--model: translate with this LoRA "
         "adapter (PEFT's folder, as --lora saves)"},
        {"source-language", CLI_STRING, &c.source_language, 0, 0, "--model: a multilingual "
         "model's source language code (en_XX, en, eng_Latn)"},
        {"target-language", CLI_STRING, &c.target_language, 0, 0, "--model: its target "
         "language code (fr_XX, fr, fra_Latn)"},
        {"score", CLI_STRING, &c.score, 0, 0, "print chrF and BLEU of this file of translations"},
        {"reference", CLI_STRING, &c.reference, 0, 0, "--score's reference translations"},
        {"data", CLI_STRING, &c.data, 0, 0, "folder of {train,validation,test}.{en,fr}"},
        {"source", CLI_STRING, &c.source_ext, 0, 0, "the source files' extension"},
        {"target", CLI_STRING, &c.target_ext, 0, 0, "the target files' extension"},
        {"out", CLI_STRING, &c.out, 0, 0, "the best model's file (with its tokenizer; a "
         "folder of its layout when fine-tuning a published one), or --po's translated "
         "catalog; an existing one is refused unless --overwrite"},
        {"overwrite", CLI_SWITCH, &c.overwrite, 0, 0, "replace the file at --out (--train: "
         "at the run's first validation)"},
        {"po", CLI_STRING, &c.po, 0, 0, "translate this gettext catalog (.pot or .po) with "
         "--model into --out: its untranslated entries, marked fuzzy"},
        {"language", CLI_STRING, &c.language, 0, 0, "--po: the catalog's language (fr, "
         "pt_BR; default: --target-language's, else the catalog's header's)"},
        {"all", CLI_SWITCH, &c.all, 0, 0, "--po: translate every entry, the translated "
         "ones too"},
        {"vocab", CLI_STRING, &c.vocab, 0, 0, "a SentencePiece model to use instead of "
         "training one (<pad> at id 3)"},
        {"vocab-size", CLI_INT, &c.vocab_size, 300, 1 << 20, "pieces of the trained vocabulary"},
        {"save-vocab", CLI_STRING, &c.save_vocab, 0, 0, "also write the vocabulary here "
         "(a SentencePiece .model file)"},
        {"max-len", CLI_INT, &c.max_len, 2, 4096, "longest sentence in tokens (longer pairs "
         "are skipped)"},
        {"d-model", CLI_INT, &c.d_model, 1, 8192, "model width"},
        {"heads", CLI_INT, &c.heads, 1, 256, "attention heads"},
        {"layers", CLI_INT, &c.layers, 1, 64, "encoder layers and decoder layers, each"},
        {"d-ff", CLI_INT, &c.d_ff, 1, 65536, "feed-forward width"},
        {"dropout", CLI_FLOAT, &c.dropout, 0, 0.99, "dropout probability"},
        {"label-smoothing", CLI_FLOAT, &c.label_smoothing, 0, 0.99, "cross-entropy smoothing"},
        {"lr", CLI_FLOAT, &c.lr, 1e-7, 1, "peak learning rate (after the warm-up)"},
        {"weight-decay", CLI_FLOAT, &c.weight_decay, 0, 1, "AdamW's decoupled weight decay"},
        {"clip", CLI_FLOAT, &c.clip, 0, 1e6, "clip the gradient norm to this (0: off)"},
        {"warmup", CLI_INT, &c.warmup, 1, 1e9, "warm-up steps"},
        {"cooldown", CLI_FLOAT, &c.cooldown, 0, 1, "share of the run (its time under "
         "--minutes) at its end over which the rate falls linearly to 0 (0: none)"},
        {"max-tokens", CLI_INT, &c.max_tokens, 1, 1e9, "padded tokens a batch (all ranks)"},
        {"minutes", CLI_FLOAT, &c.minutes, 0, 1e7, "stop training this many minutes after the "
         "start (the vocabulary's training included)"},
        {"steps", CLI_INT, &c.steps, 0, 1e12, "stop training after this many steps (0: none)"},
        {"validate-every", CLI_INT, &c.validate_every, 1, 1e12, "steps between validations"},
        {"average", CLI_INT, &c.average, 0, 100, "at the end, try the mean of the parameters "
         "of this many last validations (0, 1: none)"},
        {"seed", CLI_INT, &c.seed, 0, 1e15, "initialisation, dropout and batches"},
        {"threads", CLI_INT, &c.threads, 1, 64, "libtfm threads (each rank's)"},
        {"precision", CLI_STRING, &c.precision, 0, 0, CLI_PRECISION_HELP},
        {"evaluate", CLI_INT, &c.evaluate, 0, 1, "after training, translate and score the test "
         "pairs with the best model"},
        {"beam", CLI_INT, &c.beam, 0, 64, "beam size (1: greedy; 0: the model's own, 4 for "
         "a model trained here)"},
        {"max-length", CLI_INT, &c.max_length, 0, 1 << 20, "--model: longest translation in "
         "tokens (0: the model's own)"},
        {"batch", CLI_INT, &c.batch, 0, 100000, "lines translated at once (0: 1 from a "
         "terminal, else 32)"},
        {"int8", CLI_SWITCH, &c.int8, 0, 0, "--model: quantize the model to int8 first, "
         "its layers and output projection (tfm_model_quantize)"},
        {"glossary", CLI_STRING, &c.glossary, 0, 0, "--model: a TSV file of terms (source, "
         "tab, target): where a line holds a source term, its translation holds the target "
         "term"},
        {"no-placeholders", CLI_SWITCH, &c.no_placeholders, 0, 0, "--model: translate the "
         "spans placeholders keep (printf directives, tags, ...) as text, unconstrained"},
        {"timing", CLI_SWITCH, &c.timing, 0, 0, "--model: say on standard error how long "
         "loading and translating took"},
        {"distributed", CLI_SWITCH, &c.distributed, 0, 0, "data-parallel training under "
         "mpirun, one rank a process"},
    };
    enum { N_FLAGS = (int)(sizeof flags / sizeof flags[0]) };
    unsigned char given[N_FLAGS] = {0};
    int parsed = cli_parse(argc, argv,
                           "Trains a translation model on text, translates standard input "
                           "or a gettext catalog with one, or scores translations.",
                           flags, N_FLAGS, given);
    if (parsed != CLI_CONTINUE)
        return parsed;
    int out_given = 0;
    for (int i = 0; i < N_FLAGS; i++)
        out_given |= given[i] && flags[i].value == &c.out;
    if (c.po && !c.model && !c.train && !c.score)
        c.model = "runs/translation/model.safetensors";
    int modes = (c.train != 0) + (c.model != NULL && !c.train) + (c.score != NULL);
    if (modes != 1 || (c.score != NULL) != (c.reference != NULL) ||
        ((c.distributed || c.freeze) && !c.train) ||
        (c.train && c.model && (c.vocab || c.save_vocab)) ||
        (c.po && (!c.model || c.train || !out_given)) || ((c.language || c.all) && !c.po)) {
        fprintf(stderr, "%s: give one of --train (--model to fine-tune one, with its own "
                "vocabulary), --model FILE (--po CATALOG --out FILE) or --score FILE "
                "--reference FILE (--distributed and --freeze with --train, --language and "
                "--all with --po)\n", program);
        return cli_usage_error(program);
    }
    int lora_given = 0;
    for (int i = 0; i < N_FLAGS; i++)
        lora_given |= given[i] && (flags[i].value == &c.lora_alpha ||
                                   flags[i].value == &c.lora_targets);
    if ((c.lora && (!c.train || !c.model || c.distributed || c.freeze)) ||
        (lora_given && !c.lora) || (c.adapter && (c.train || !c.model))) {
        fprintf(stderr, "%s: --lora trains an adapter with --train --model (neither "
                "--distributed nor --freeze), --lora-alpha and --lora-targets need it; "
                "--adapter translates with --model\n", program);
        return cli_usage_error(program);
    }
    if (c.lora && !parse_targets(c.lora_targets)) {
        fprintf(stderr, "%s: --lora-targets '%s': give some of q, k, v, o, fc1, fc2, "
                "comma-separated\n", program, c.lora_targets);
        return cli_usage_error(program);
    }
    if (c.train && (c.minutes <= 0) == (c.steps <= 0)) {
        fprintf(stderr, "%s: --train needs --minutes or --steps (one of them)\n", program);
        return cli_usage_error(program);
    }
    if (cli_check_heads(program, c.d_model, c.heads))
        return CLI_USAGE_ERROR;
    if (c.score)
        return score_files(&c);
    if (cli_set_precision(program, c.precision) < 0)
        return cli_usage_error(program);
    if (tfm_set_num_threads((int32_t)c.threads) != TFM_OK)
        return cli_fail(program, "setting up");
    if (c.po)
        return translate_catalog(&c);
    if (c.model && !c.train)
        return translate_stream(&c);
    ranks r;
    if (ranks_start(&r, (int)c.distributed, &argc, &argv, program) < 0)
        return EXIT_FAILURE;
    return ranks_stop(&r, train(&c, &r));
}
