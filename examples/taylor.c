/* tfm-taylor (tutorial 003, "Tutorial: Transformer Neural Networks"): learn
 * the Taylor expansions of seq2seq_series_2terms.txt with the tutorial's
 * transformer, then translate the 750 test functions and score them with
 * the notebook's exact string comparison.
 *
 * The model is tfm_model configured as the notebook's Encoder/Decoder:
 * learned positions, token embeddings times a trainable scale from
 * sqrt(d), separate Q/K/V linears dividing the scores by a trainable scale
 * from sqrt(d_model) (not sqrt(d_head)), post-norm layers, no final norms,
 * dropout on embeddings, attention weights, feed-forward and residuals, and
 * PyTorch's default initialisation (the notebook's xavier branch never
 * runs). The source mask hides pad keys, in self-attention and in the
 * decoder's cross-attention; the target mask is "key not pad" AND causal.
 * Loss: cross-entropy of target[:, 1:] given target[:, :-1], pads ignored.
 *
 * Training runs by iterations as the notebook does, reporting train and
 * validation loss every --step iterations to a CSV and an SVG plot, keeping
 * the checkpoint with the best validation loss (parameters and optimizer
 * state, so --resume can go on) and stopping at --iterations or after
 * --time-limit minutes. The defaults are the notebook's (batch 32, Adam
 * 2e-4); for a short budget, --bucket batches targets of similar length
 * and cuts the pads after them, --eos-label trains <eos> right after each
 * target, and --schedule invsqrt or cosine warms the learning rate up and
 * decays it (cosine: to 0 at --iterations or at the time limit, whichever
 * comes first, so a machine slower than the recipe's, or one sharing its
 * cores, still anneals). docs/results.md has the recipe that reaches the
 * tutorial's accuracy in under an hour on two cores.
 * --translate CHECKPOINT decodes the test sources greedily (or with --beam
 * N) and prints "Accuracy: F +/- dF"; --int8 1 quantizes the model's
 * layers first (tfm_model_quantize), --int8 2 its generator too. */
#include <math.h>
#include <unistd.h>

#include "cli.h"
#include "ranks.h"
#include "taylor_data.h"

typedef struct config {
    const char *data, *out, *resume, *translate, *init, *schedule, *precision;
    int64_t max_seq_len, d_model, layers, heads, d_ff;
    int64_t batch, iterations, step, warmup, step_size, seed, evaluate;
    int64_t bucket, eos_label, norm_first, beam, decode_batch, examples, threads, distributed;
    int64_t print_first, int8;
    double dropout, lr, beta2, weight_decay, gamma, clip, label_smoothing, time_limit;
} config;

typedef struct history {
    int64_t count, capacity;
    int64_t *iteration;
    double *train, *val, *lr, *seconds;
} history;

static const char *program = "tfm-taylor";

static void clock_text(double seconds, char *out, size_t size)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(out, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(out, size, "%ld:%02ld", s / 60, s % 60);
}

/* The data file the repository carries (data/taylor/) where this program was
 * built, else the copy installed beside it. */
static const char *default_data_path(void)
{
    return access(TFM_TAYLOR_DATA_SOURCE, R_OK) == 0 ? TFM_TAYLOR_DATA_SOURCE
                                                      : TFM_TAYLOR_DATA_INSTALLED;
}

/* --- the model ------------------------------------------------------------------- */

static tfm_model *build_model(const config *c, const taylor_data *d)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = d->src_vocab.size;
    o.tgt_vocab = d->tgt_vocab.size;
    o.max_src_len = d->src_len;
    o.max_tgt_len = d->tgt_len;
    o.positions = TFM_POSITIONS_LEARNED;
    o.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
    o.encoder_layers = (int32_t)c->layers;
    o.decoder_layers = (int32_t)c->layers;
    /* Pre-norm layers leave the residual stream unnormalised: a final norm
     * closes each stack, as nn.Transformer's norm_first models have. */
    o.final_norm = (int32_t)c->norm_first;
    o.d_model = c->d_model;
    o.heads = (int32_t)c->heads;
    o.d_ff = c->d_ff;
    o.dropout = (float)c->dropout;
    o.activation = TFM_ACTIVATION_RELU;
    o.norm_first = (int32_t)c->norm_first;
    o.fused_qkv = 0;
    o.trainable_scale = 1;
    o.scale_init = sqrtf((float)c->d_model);
    o.seed = (uint64_t)c->seed;
    tfm_model *model = tfm_model_create(&o);
    if (!model || strcmp(c->init, "tutorial") != 0)
        return model;
    /* tfm_model initialises the layers' matrices as nn.Transformer does
     * (xavier); the notebook's are nn.Linear's U(-1/sqrt(in), 1/sqrt(in)). */
    tfm_params *params = tfm_model_params(model);
    tfm_rng *rng = tfm_rng_create((uint64_t)c->seed + 1);
    int ok = rng != NULL;
    for (int64_t i = 0; ok && i < tfm_params_count(params); i++) {
        const char *name = tfm_params_name(params, i);
        tfm_tensor *t = tfm_params_at(params, i);
        if ((strncmp(name, "encoder.", 8) && strncmp(name, "decoder.", 8)) || tfm_tensor_ndim(t) != 2)
            continue;
        float bound = 1.0f / sqrtf((float)tfm_tensor_dim(t, 1));
        ok = tfm_init_uniform(t, -bound, bound, rng) == TFM_OK;
    }
    if (!ok) {
        tfm_model_free(model);
        model = NULL;
    }
    tfm_rng_free(rng);
    return model;
}

/* --- batches and losses -------------------------------------------------------- */

/* The labels: the notebook's tgt[:, 1:] (lengths NULL), or each target's
 * tokens and the slot right after them, pads beyond, with <eos> in that
 * slot when eos is set. The notebook's rows hold <pad> in that slot and
 * <eos> only in the last one, so its model learns to stop after O(x**6)
 * from the 62 targets of exactly 83 tokens alone. */
typedef struct label_rule {
    const int32_t *lengths; /* target token counts, by row */
    int eos;
} label_rule;

/* Rows rows[0..n) of the data: src [n, S], the decoder input
 * tgt[:, :width] and the labels (tgt[:, 1:width + 1] by the rule), each
 * [n, width] (width T - 1: the notebook's tgt[:, :-1] and tgt[:, 1:]). */
static void fill_batch(const taylor_data *d, const int64_t *rows, int64_t n, int64_t width,
                       const label_rule *rule, tfm_tensor *src, tfm_tensor *tgt_in,
                       tfm_tensor *tgt_out)
{
    int32_t *s = tfm_tensor_data_i32(src), *in = tfm_tensor_data_i32(tgt_in),
            *out = tfm_tensor_data_i32(tgt_out);
    int64_t S = d->src_len, T = d->tgt_len;
    for (int64_t b = 0; b < n; b++) {
        int32_t *labels = out + b * width;
        memcpy(s + b * S, d->src + rows[b] * S, (size_t)S * sizeof *s);
        memcpy(in + b * width, d->tgt + rows[b] * T, (size_t)width * sizeof *in);
        memcpy(labels, d->tgt + rows[b] * T + 1, (size_t)width * sizeof *labels);
        if (!rule->lengths)
            continue;
        int64_t length = rule->lengths[rows[b]];
        for (int64_t i = length + 1; i < width; i++)
            labels[i] = TAYLOR_PAD;
        if (rule->eos && length < width)
            labels[length] = TAYLOR_EOS;
    }
}

/* The mean cross-entropy over the batch's non-pad labels. */
static tfm_tensor *batch_loss(tfm_tape *tape, tfm_model *model, const tfm_tensor *src,
                              const tfm_tensor *tgt_in, const tfm_tensor *tgt_out,
                              float label_smoothing)
{
    tfm_tensor *src_mask = tfm_mask_padding(tape, src, TAYLOR_PAD, TFM_I32);
    tfm_tensor *tgt_mask = tfm_mask_combine(
        tape, tfm_mask_padding(tape, tgt_in, TAYLOR_PAD, TFM_I32),
        tfm_mask_causal(tape, tfm_tensor_dim(tgt_in, 1), TFM_I32));
    /* The notebook's cross-attention gets src_mask too: pad keys hidden. */
    tfm_tensor *logits =
        tfm_model_forward(tape, model, src, tgt_in, src_mask, tgt_mask, src_mask, NULL, NULL, NULL);
    return tfm_cross_entropy(tape, logits, tgt_out, TAYLOR_PAD, label_smoothing);
}

typedef struct eval_set {
    tfm_tensor *src, *tgt_in, *tgt_out;
} eval_set;

static int eval_set_make(eval_set *e, const taylor_data *d, const int64_t *rows, int64_t n,
                         const label_rule *rule)
{
    e->src = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){n, d->src_len});
    e->tgt_in = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){n, d->tgt_len - 1});
    e->tgt_out = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){n, d->tgt_len - 1});
    if (!e->src || !e->tgt_in || !e->tgt_out)
        return -1;
    fill_batch(d, rows, n, d->tgt_len - 1, rule, e->src, e->tgt_in, e->tgt_out);
    return 0;
}

static void eval_set_free(eval_set *e)
{
    tfm_tensor_free(e->src);
    tfm_tensor_free(e->tgt_in);
    tfm_tensor_free(e->tgt_out);
}

/* The loss in evaluation mode (no dropout, nothing recorded); NAN on error. */
static double eval_loss(tfm_tape *tape, tfm_model *model, const eval_set *e)
{
    float value = NAN;
    tfm_model_set_training(model, 0);
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *loss = batch_loss(tape, model, e->src, e->tgt_in, e->tgt_out, 0.0f);
    if (!loss || tfm_tensor_item(loss, &value) != TFM_OK)
        value = NAN;
    tfm_tape_reset(tape);
    tfm_tape_set_recording(tape, 1);
    tfm_model_set_training(model, 1);
    return value;
}

/* --- loss history: CSV and SVG ------------------------------------------------------ */

static int history_add(history *h, int64_t iteration, double train, double val, double lr,
                       double seconds)
{
    if (h->count == h->capacity) {
        int64_t grown = h->capacity ? 2 * h->capacity : 256;
        int64_t *it = realloc(h->iteration, (size_t)grown * sizeof *it);
        if (it)
            h->iteration = it;
        double **columns[4] = {&h->train, &h->val, &h->lr, &h->seconds};
        int ok = it != NULL;
        for (int i = 0; i < 4 && ok; i++) {
            double *column = realloc(*columns[i], (size_t)grown * sizeof *column);
            if (column)
                *columns[i] = column;
            ok = column != NULL;
        }
        if (!ok)
            return -1;
        h->capacity = grown;
    }
    h->iteration[h->count] = iteration;
    h->train[h->count] = train;
    h->val[h->count] = val;
    h->lr[h->count] = lr;
    h->seconds[h->count] = seconds;
    h->count++;
    return 0;
}

static void history_free(history *h)
{
    free(h->iteration);
    free(h->train);
    free(h->val);
    free(h->lr);
    free(h->seconds);
}

static const char csv_header[] = "iteration,train_loss,val_loss,lr,seconds\n";

static void csv_row(FILE *f, const history *h, int64_t i)
{
    fprintf(f, "%lld,%.6f,%.6f,%.6g,%.1f\n", (long long)h->iteration[i], h->train[i], h->val[i],
            h->lr[i], h->seconds[i]);
}

/* The history as a whole file (fresh start, or cut back on resuming). */
static int csv_write(const char *path, const history *h)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(csv_header, f);
    for (int64_t i = 0; i < h->count; i++)
        csv_row(f, h, i);
    return fclose(f) == 0 ? 0 : -1;
}

static int csv_append(const char *path, const history *h)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    csv_row(f, h, h->count - 1);
    return fclose(f) == 0 ? 0 : -1;
}

/* The rows of an earlier run up to iteration last (missing file: none). */
static int csv_read(const char *path, int64_t last, history *h)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    int status = 0;
    while (fgets(line, sizeof line, f)) {
        long long it;
        double train, val, lr, seconds;
        if (sscanf(line, "%lld,%lf,%lf,%lf,%lf", &it, &train, &val, &lr, &seconds) != 5)
            continue; /* the header */
        if (it <= last && history_add(h, it, train, val, lr, seconds) < 0) {
            status = -1;
            break;
        }
    }
    fclose(f);
    return status;
}

/* 1, 2 or 5 times a power of ten, about range / 6. */
static double nice_step(double range)
{
    double raw = range / 6.0, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

/* Train and validation loss against iteration, log-scaled loss axis. */
static int svg_write(const char *path, const history *h)
{
    const double W = 800, H = 500, left = 80, right = 30, top = 50, bottom = 60;
    const double pw = W - left - right, ph = H - top - bottom;
    double lo = INFINITY, hi = -INFINITY;
    int64_t x_max = 1;
    for (int64_t i = 0; i < h->count; i++) {
        const double v[2] = {h->train[i], h->val[i]};
        for (int k = 0; k < 2; k++)
            if (v[k] > 0 && isfinite(v[k])) {
                lo = fmin(lo, v[k]);
                hi = fmax(hi, v[k]);
            }
        if (h->iteration[i] > x_max)
            x_max = h->iteration[i];
    }
    if (!(lo <= hi)) {
        lo = 0.1;
        hi = 1;
    }
    /* log10 range with a margin, at least 0.3 decades. */
    double y0 = log10(lo), y1 = log10(hi), pad = fmax(0.05 * (y1 - y0), 0.5 * (0.3 - (y1 - y0)));
    y0 -= fmax(pad, 0.02);
    y1 += fmax(pad, 0.02);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
#define X(it) (left + pw * (double)(it) / (double)x_max)
#define Y(v) (top + ph * (1.0 - (log10(v) - y0) / (y1 - y0)))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"13\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H, W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">tfm-taylor: "
            "cross-entropy loss</text>\n", left + pw / 2);
    /* Loss axis: a line at each m * 10^e inside the range, darker and
     * labelled at 1 (and 2 and 5 when the range is short). */
    for (double e = floor(y0); e <= ceil(y1); e++)
        for (int m = 1; m <= 9; m++) {
            double v = m * pow(10.0, e), y = Y(v);
            if (log10(v) < y0 || log10(v) > y1)
                continue;
            int labelled = m == 1 || (y1 - y0 < 2.5 && (m == 2 || m == 5));
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n"
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                    left, y, left + pw, y, labelled ? "#cccccc" : "#eeeeee", left - 5, y, left, y);
            if (labelled)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                        left - 8, y + 4, v);
        }
    /* Iteration axis. */
    double dx = nice_step((double)x_max);
    for (double t = 0; t <= (double)x_max + 1e-9; t += dx) {
        double x = X(t);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eeeeee\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                x, top, x, top + ph, x, top + ph, x, top + ph + 5, x, top + ph + 20, t);
    }
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
            "stroke=\"black\"/>\n", left, top, pw, ph);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">iteration</text>\n",
            left + pw / 2, H - 15);
    fprintf(f, "<text x=\"20\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.0f)\">"
            "loss</text>\n", top + ph / 2, top + ph / 2);
    static const char *const colour[2] = {"#1f77b4", "#ff7f0e"};
    static const char *const label[2] = {"train (100 rows)", "validation (100 rows)"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[k]);
        for (int64_t i = 0; i < h->count; i++) {
            double v = k ? h->val[i] : h->train[i];
            if (v > 0 && isfinite(v))
                fprintf(f, "%.1f,%.1f ", X(h->iteration[i]), Y(v));
        }
        fputs("\"/>\n", f);
        double lx = left + pw - 190, ly = top + 20 + 20 * k;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                lx, ly, lx + 25, ly, colour[k], lx + 32, ly + 4, label[k]);
    }
#undef X
#undef Y
    fputs("</svg>\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* --- translation ------------------------------------------------------------------ */

/* Token 85 for a row whose 84 generated tokens neither ended nor paused:
 * the notebook's loop runs 85 steps, one more than tfm_decoding's limit of
 * max_tgt_len - 1, and that last token decides whether scoring drops the
 * 84th (it drops the list's last entry, and a <pad> is never appended). */
static int32_t last_step(tfm_tape *tape, tfm_model *model, const int32_t *src, int64_t S,
                         const int32_t *tokens, int64_t T)
{
    int32_t best = -1;
    tfm_tensor *s = tfm_tensor_from_i32(2, (const int64_t[]){1, S}, src);
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){1, T}, tokens);
    tfm_model_set_training(model, 0);
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *src_mask = tfm_mask_padding(tape, s, TAYLOR_PAD, TFM_I32);
    tfm_tensor *logits = tfm_model_decode(tape, model, t, tfm_model_encode(tape, model, s, src_mask, NULL),
                                          tfm_mask_causal(tape, T, TFM_I32), src_mask, NULL, NULL);
    if (logits) {
        int64_t V = tfm_tensor_dim(logits, 2);
        const float *row = tfm_tensor_data_f32(logits) + (T - 1) * V;
        best = 0;
        for (int64_t v = 1; v < V; v++)
            if (row[v] > row[best])
                best = (int32_t)v;
    }
    tfm_tape_reset(tape);
    tfm_tape_set_recording(tape, 1);
    tfm_model_set_training(model, 1);
    tfm_tensor_free(s);
    tfm_tensor_free(t);
    return best;
}

static void print_example(const taylor_data *d, int64_t row, const int32_t *list, int64_t n,
                          int correct)
{
    char *src = taylor_stringify(&d->src_vocab, d->src + row * d->src_len + 1, d->src_len - 2);
    char *tgt = taylor_stringify(&d->tgt_vocab, d->tgt + row * d->tgt_len + 1, d->tgt_len - 2);
    char *out = taylor_stringify(&d->tgt_vocab, list + (n > 0), n > 2 ? n - 2 : 0);
    printf("  line %lld: %s\n    target:    %s\n    predicted: %s  [%s]\n",
           (long long)d->lines[row], src ? src : "?", tgt ? tgt : "?", out ? out : "?",
           correct ? "correct" : "WRONG");
    free(src);
    free(tgt);
    free(out);
}

/* Decodes the test sources and scores them as the notebook does. */
static int translate(const config *c, tfm_model *model, tfm_tape *tape, const taylor_data *d,
                     taylor_split test)
{
    const int64_t S = d->src_len, T = d->tgt_len, steps = T; /* the notebook: range(max_len) */
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = c->beam > 1 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    o.max_length = (int32_t)(T - 1);
    o.bos_id = TAYLOR_SOS;
    o.eos_id = TAYLOR_EOS;
    o.src_pad_id = TAYLOR_PAD;
    o.beam_size = (int32_t)(c->beam > 1 ? c->beam : 1);
    o.n_best = 1;
    int64_t batch = c->decode_batch < test.count ? c->decode_batch : test.count;
    tfm_decoding *decoding = tfm_decoding_create(model, &o, batch, S);
    int32_t *tokens = malloc((size_t)(batch * T) * sizeof *tokens);
    int32_t *lengths = malloc((size_t)batch * sizeof *lengths);
    int32_t *seq = malloc((size_t)(T + 1) * sizeof *seq); /* room for token 85 */
    int32_t *list = malloc((size_t)(T + 1) * sizeof *list);
    int status = -1;
    if (!decoding || !tokens || !lengths || !seq || !list) {
        cli_fail(program, "creating the decoder");
        goto done;
    }
    printf("Translating %lld test functions (%s%s, batches of %lld)\n", (long long)test.count,
           c->beam > 1 ? "beam " : "greedy", c->beam > 1 ? "search" : "", (long long)batch);
    int64_t correct = 0, shown = 0, mistakes_shown = 0;
    double start = cli_seconds();
    for (int64_t first = 0; first < test.count; first += batch) {
        int64_t n = test.count - first < batch ? test.count - first : batch;
        const int32_t *src_rows = d->src + (test.begin + first) * S;
        tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){n, S}, src_rows);
        if (!src || tfm_decoding_run(decoding, src, tokens, batch * T, lengths, batch, NULL, 0, NULL,
                                     0, NULL, 0) != TFM_OK) {
            tfm_tensor_free(src);
            cli_fail(program, "decoding");
            goto done;
        }
        tfm_tensor_free(src);
        for (int64_t b = 0; b < n; b++) {
            int64_t row = test.begin + first + b;
            memcpy(seq, tokens + b * T, (size_t)lengths[b] * sizeof *seq);
            int64_t len = taylor_greedy_list(seq, lengths[b], steps, list);
            if (c->beam <= 1 && len == T && list[len - 1] != TAYLOR_EOS) {
                int32_t next = last_step(tape, model, src_rows + b * S, S, seq, T);
                if (next < 0) {
                    cli_fail(program, "the last decoding step");
                    goto done;
                }
                seq[T] = next;
                len = taylor_greedy_list(seq, T + 1, steps, list);
            }
            int ok = taylor_matches(&d->tgt_vocab, list, len, d->tgt + row * T, T);
            if (ok < 0) {
                fprintf(stderr, "%s: scoring row %lld failed\n", program, (long long)row);
                goto done;
            }
            correct += ok;
            if (shown < c->examples) {
                shown++;
                print_example(d, row, list, len, ok);
            } else if (!ok && mistakes_shown < c->examples) {
                mistakes_shown++;
                print_example(d, row, list, len, ok);
            }
        }
        double F = (double)correct / (double)(first + n);
        printf("%8lld\taccuracy: %8.3f  (%.3f s)\n", (long long)(first + n - 1), F,
               cli_seconds() - start);
        fflush(stdout);
    }
    double F = (double)correct / (double)test.count;
    printf("%lld of %lld correct\nAccuracy: %8.3f +/- %.3f\n", (long long)correct,
           (long long)test.count, F, sqrt(F * (1.0 - F) / (double)test.count));
    status = 0;
done:
    tfm_decoding_free(decoding);
    free(tokens);
    free(lengths);
    free(seq);
    free(list);
    return status;
}

/* --- training ----------------------------------------------------------------------- */

/* What a checkpoint says of the data beside its model and training state:
 * the length cap and both vocabularies, so --translate and --resume need
 * no flags and refuse a data file of other vocabularies. */
enum { DATA_KEYS = 3 };
static const char *const data_keys[DATA_KEYS] = {"taylor.max_seq_len", "taylor.src_vocab",
                                                 "taylor.tgt_vocab"};

/* The vocabulary's tokens, one space between each; NULL without memory. */
static char *vocab_text(const taylor_vocab *v)
{
    size_t size = 1;
    for (int32_t i = 0; i < v->size; i++)
        size += strlen(v->tokens[i]) + 1;
    char *text = malloc(size), *at = text;
    for (int32_t i = 0; text && i < v->size; i++)
        at += sprintf(at, "%s%s", i ? " " : "", v->tokens[i]);
    if (text)
        *at = '\0';
    return text;
}

static int save_checkpoint(tfm_model *model, const tfm_optimizer *adam, const config *c,
                           const taylor_data *d, const char *path)
{
    char max_seq_len[32];
    snprintf(max_seq_len, sizeof max_seq_len, "%lld", (long long)c->max_seq_len);
    const char *values[DATA_KEYS] = {max_seq_len, vocab_text(&d->src_vocab),
                                     vocab_text(&d->tgt_vocab)};
    int ok = values[1] && values[2] &&
             tfm_training_save(path, model, adam, 0, NULL, DATA_KEYS, data_keys, values) == TFM_OK;
    free((char *)values[1]);
    free((char *)values[2]);
    return ok ? 0 : -1;
}

/* The checkpoint's length cap, into c->max_seq_len, before the data loads. */
static int read_max_seq_len(config *c, const char *path)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    const char *text = file ? tfm_safetensors_metadata_get(file, data_keys[0]) : NULL;
    char *end = NULL;
    long long value = text ? strtoll(text, &end, 10) : 0;
    int ok = text && *end == '\0' && value >= 3 && value <= 100000;
    if (ok)
        c->max_seq_len = value;
    else if (text)
        fprintf(stderr, "%s: %s: %s = \"%s\" is not a length cap\n", program, path,
                data_keys[0], text);
    else
        cli_fail(program, path);
    tfm_safetensors_close(file);
    return ok ? 0 : -1;
}

/* The checkpoint's vocabularies must be the data's. */
static int check_vocabularies(const char *path, const taylor_data *d)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    int ok = file != NULL;
    for (int i = 1; ok && i < DATA_KEYS; i++) {
        const char *saved = tfm_safetensors_metadata_get(file, data_keys[i]);
        char *ours = vocab_text(i == 1 ? &d->src_vocab : &d->tgt_vocab);
        ok = saved && ours && strcmp(saved, ours) == 0;
        if (!ok)
            fprintf(stderr, "%s: %s was trained on another %s vocabulary than the data's%s%s\n",
                    program, path, i == 1 ? "source" : "target", saved ? "" : ": ",
                    saved ? "" : tfm_last_error());
        free(ours);
    }
    tfm_safetensors_close(file);
    return ok ? 0 : -1;
}

static tfm_optimizer *make_optimizer(const config *c, tfm_model *model)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, c->weight_decay > 0 ? TFM_OPTIMIZER_ADAMW : TFM_OPTIMIZER_ADAM);
    o.lr = (float)c->lr;
    o.beta2 = (float)c->beta2;
    o.weight_decay = (float)c->weight_decay;
    o.clip_norm = (float)c->clip;
    if (strcmp(c->schedule, "invsqrt") == 0) {
        o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
        o.warmup_steps = c->warmup;
    } else if (strcmp(c->schedule, "cosine") == 0) {
        o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
        o.warmup_steps = c->warmup;
        o.total_steps = c->iterations;
    } else if (strcmp(c->schedule, "step") == 0) {
        o.schedule = TFM_SCHEDULE_STEP;
        o.step_size = c->step_size;
        o.gamma = (float)c->gamma;
    }
    return tfm_optimizer_create(tfm_model_params(model), &o);
}

/* The cosine's base rate for a run the time limit may end first: the
 * optimizer's schedule follows its steps (to 0 at --iterations); past
 * warm-up, a run whose share of the time limit, time_done, is ahead of its
 * share of the steps follows the time instead, so it has annealed when
 * the limit stops it. Other schedules, and a run ahead of the clock: the
 * rate as given. */
static float cosine_base_rate(const config *c, const tfm_optimizer *adam, double time_done)
{
    int64_t done = tfm_optimizer_step_count(adam);
    if (strcmp(c->schedule, "cosine") != 0 || done < c->warmup)
        return (float)c->lr;
    const double pi = 3.14159265358979323846;
    double by_steps = (double)(done - c->warmup) / (double)(c->iterations - c->warmup);
    if (time_done <= by_steps || by_steps >= 1.0)
        return (float)c->lr;
    double ahead = 0.5 * (1.0 + cos(pi * fmin(time_done, 1.0)));
    /* the optimizer takes rates > 0: the cosine's last steps at 1e-4 of it */
    return (float)(c->lr * fmax(ahead / (0.5 * (1.0 + cos(pi * by_steps))), 1e-4));
}

static void shuffle(int64_t *a, int64_t n, tfm_rng *rng)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(tfm_rng_next_u64(rng) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One epoch: a fresh permutation of the training rows cut into per_epoch
 * batches, as the notebook's loader. With bucket > 0, each run of bucket
 * batches is first sorted by target length and the batches then come in a
 * random order, so a batch holds targets of similar length. */
static void plan_epoch(const config *c, int64_t *order, int64_t n, int64_t *batches,
                       int64_t per_epoch, const int32_t *lengths, int64_t *keys, tfm_rng *rng)
{
    shuffle(order, n, rng);
    for (int64_t i = 0; i < per_epoch; i++)
        batches[i] = i;
    if (!c->bucket)
        return;
    int64_t used = per_epoch * c->batch, pool = c->bucket * c->batch;
    for (int64_t i = 0; i < used; i++)
        keys[i] = (int64_t)lengths[order[i]] << 32 | order[i];
    for (int64_t p = 0; p < used; p += pool)
        qsort(keys + p, (size_t)(used - p < pool ? used - p : pool), sizeof *keys, by_value);
    for (int64_t i = 0; i < used; i++)
        order[i] = keys[i] & 0xffffffff;
    shuffle(batches, per_epoch, rng);
}

/* The labels of a batch that its loss counts (not <pad>). */
static int64_t counted_labels(const tfm_tensor *labels)
{
    const int32_t *v = tfm_tensor_data_i32((tfm_tensor *)labels);
    int64_t n = 0;
    for (int64_t i = 0; i < tfm_tensor_numel(labels); i++)
        n += v[i] != TAYLOR_PAD;
    return n;
}

/* Training; on several ranks each runs its slice of every batch and rank 0
 * alone monitors, writes the loss files and checkpoints. */
static int train(const config *c, ranks *r, tfm_model *model, tfm_tape *tape,
                 const taylor_data *d, taylor_split train_split, taylor_split val_split,
                 char *best_path, size_t best_size)
{
    char csv_path[4096], svg_path[4096], last_path[4096];
    snprintf(csv_path, sizeof csv_path, "%s/taylor_losses.csv", c->out);
    snprintf(svg_path, sizeof svg_path, "%s/taylor_losses.svg", c->out);
    snprintf(best_path, best_size, "%s/taylor_best.safetensors", c->out);
    snprintf(last_path, sizeof last_path, "%s/taylor_last.safetensors", c->out);
    if (r->rank == 0 && cli_make_folders(c->out) != 0) {
        fprintf(stderr, "%s: cannot create the folder '%s': %s\n", program, c->out,
                strerror(errno));
        return -1;
    }
    int status = -1;
    history h = {0};
    eval_set train_eval = {0}, val_eval = {0};
    int64_t slice_first, slice_rows;
    ranks_slice(r, c->batch, &slice_first, &slice_rows);
    tfm_tensor *src = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){slice_rows, d->src_len});
    tfm_tensor *tgt_in = NULL, *tgt_out = NULL;
    int64_t per_epoch = train_split.count / c->batch, cursor = per_epoch;
    int64_t *order = malloc((size_t)train_split.count * sizeof *order);
    int64_t *keys = malloc((size_t)train_split.count * sizeof *keys);
    int64_t *batches = malloc((size_t)per_epoch * sizeof *batches);
    int32_t *lengths = malloc((size_t)d->rows * sizeof *lengths);
    int64_t *rows = malloc((size_t)val_split.count * sizeof *rows);
    tfm_rng *rng = tfm_rng_create((uint64_t)c->seed + 2);
    tfm_optimizer *adam = make_optimizer(c, model);
    if (!src || !order || !keys || !batches || !lengths || !rows || !rng || !adam) {
        cli_fail(program, "setting up training");
        goto done;
    }
    for (int64_t r = 0; r < d->rows; r++) {
        const int32_t *row = d->tgt + r * d->tgt_len;
        int32_t n = 0;
        while (n + 1 < d->tgt_len - 1 && row[n + 1] != TAYLOR_PAD)
            n++;
        lengths[r] = n;
    }
    /* Cut batches keep the labels up to the slot after each target, so the
     * monitors score the same labels as training. */
    const label_rule rule = {c->bucket || c->eos_label ? lengths : NULL, (int)c->eos_label};
    /* The notebook's monitors: a random sample (with replacement) of the
     * training rows, as many as the validation rows, and the validation rows. */
    for (int64_t i = 0; i < val_split.count; i++)
        rows[i] = train_split.begin +
                  (int64_t)(tfm_rng_next_u64(rng) % (uint64_t)train_split.count);
    if (eval_set_make(&train_eval, d, rows, val_split.count, &rule) < 0) {
        cli_fail(program, "the training monitor set");
        goto done;
    }
    for (int64_t i = 0; i < val_split.count; i++)
        rows[i] = val_split.begin + i;
    if (eval_set_make(&val_eval, d, rows, val_split.count, &rule) < 0) {
        cli_fail(program, "the validation set");
        goto done;
    }

    for (int64_t i = 0; i < train_split.count; i++)
        order[i] = train_split.begin + i;
    int64_t done_steps = 0;
    double best = INFINITY, seconds_before = 0;
    if (c->resume) {
        if (tfm_training_load(c->resume, model, adam, 0, NULL) != TFM_OK) {
            cli_fail(program, "resuming");
            goto done;
        }
        done_steps = tfm_optimizer_step_count(adam);
        /* The data order comes from the seed alone: replaying the epochs
         * planned so far puts it where the run stopped. */
        int64_t plans = (done_steps + per_epoch - 1) / per_epoch;
        for (int64_t e = 0; e < plans; e++)
            plan_epoch(c, order, train_split.count, batches, per_epoch, lengths, keys, rng);
        cursor = plans ? done_steps - (plans - 1) * per_epoch : per_epoch;
        if (r->rank == 0 && (csv_read(csv_path, done_steps, &h) < 0 || csv_write(csv_path, &h) < 0)) {
            fprintf(stderr, "%s: cannot carry over '%s'\n", program, csv_path);
            goto done;
        }
        for (int64_t i = 0; i < h.count; i++)
            best = fmin(best, h.val[i]);
        seconds_before = h.count ? h.seconds[h.count - 1] : 0;
        printf("Resumed from %s at iteration %lld (%lld loss rows kept, best validation %.4f)\n",
               c->resume, (long long)done_steps, (long long)h.count, best);
    } else if (r->rank == 0 && csv_write(csv_path, &h) < 0) {
        fprintf(stderr, "%s: cannot write '%s'\n", program, csv_path);
        goto done;
    }

    char optimizer[64] = "Adam";
    if (c->weight_decay > 0)
        snprintf(optimizer, sizeof optimizer, "AdamW (weight decay %g)", c->weight_decay);
    printf("Training: batch %lld (%lld batches an epoch%s), %s lr %g (%s schedule), "
           "%s products, iterations %lld, time limit %s; monitoring every %lld\n",
           (long long)c->batch, (long long)per_epoch,
           c->bucket ? ", bucketed by target length" : "", optimizer, c->lr, c->schedule,
           c->precision, (long long)c->iterations, c->time_limit > 0 ? "on" : "none",
           (long long)c->step);
    fflush(stdout);
    tfm_model_set_training(model, 1);
    double start = cli_seconds(), limit = c->time_limit * 60.0;
    int64_t first = done_steps;
    int out_of_time = 0;
    while (done_steps < c->iterations && !out_of_time) {
        if (cursor == per_epoch) {
            plan_epoch(c, order, train_split.count, batches, per_epoch, lengths, keys, rng);
            cursor = 0;
        }
        const int64_t *batch_rows = order + batches[cursor++] * c->batch;
        /* Bucketed batches end after their longest target: causal attention
         * keeps the earlier positions exact, and what is cut holds only
         * pads and the <eos> the notebook's rows carry in the last slot. */
        int64_t width = d->tgt_len - 1;
        if (c->bucket) {
            width = 1;
            for (int64_t b = 0; b < c->batch; b++)
                if (lengths[batch_rows[b]] + 1 > width)
                    width = lengths[batch_rows[b]] + 1;
        }
        tfm_tensor_free(tgt_in);
        tfm_tensor_free(tgt_out);
        tgt_in = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){slice_rows, width});
        tgt_out = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){slice_rows, width});
        if (!tgt_in || !tgt_out) {
            cli_fail(program, "batch");
            goto done;
        }
        fill_batch(d, batch_rows + slice_first, slice_rows, width, &rule, src, tgt_in, tgt_out);
        tfm_optimizer_zero_grad(adam);
        tfm_tensor *loss = batch_loss(tape, model, src, tgt_in, tgt_out, (float)c->label_smoothing);
        float lr = tfm_optimizer_lr(adam);
        /* A failed step still joins the average, saying so: no rank waits */
        int stepped = loss && tfm_tape_backward(tape, loss) == TFM_OK;
        if (ranks_average_gradients(r, stepped ? (double)counted_labels(tgt_out) : -1.0) !=
                TFM_OK ||
            !stepped || tfm_optimizer_step(adam) != TFM_OK) {
            cli_fail(program, "training step");
            goto done;
        }
        tfm_tape_reset(tape);
        done_steps++;
        double elapsed = cli_seconds() - start;
        /* rank 0's clock decides for every rank: when to stop, and where
         * the cosine is */
        double time_done = ranks_share(r, limit > 0 ? elapsed / limit : 0.0);
        out_of_time = time_done >= 1.0;
        if (limit > 0 && !out_of_time &&
            tfm_optimizer_set_lr(adam, cosine_base_rate(c, adam, time_done)) != TFM_OK) {
            cli_fail(program, "learning rate");
            goto done;
        }
        if ((done_steps % c->step && done_steps != c->iterations && !out_of_time) || r->rank)
            continue;
        double t_loss = eval_loss(tape, model, &train_eval);
        double v_loss = eval_loss(tape, model, &val_eval);
        if (!isfinite(t_loss) || !isfinite(v_loss)) {
            cli_fail(program, "monitor losses");
            goto done;
        }
        elapsed = cli_seconds() - start;
        if (history_add(&h, done_steps, t_loss, v_loss, lr, seconds_before + elapsed) < 0 ||
            csv_append(csv_path, &h) < 0 || svg_write(svg_path, &h) < 0) {
            fprintf(stderr, "%s: cannot write the loss files in '%s'\n", program, c->out);
            goto done;
        }
        int improved = v_loss < best;
        if (improved) {
            best = v_loss;
            if (save_checkpoint(model, adam, c, d, best_path) < 0) {
                cli_fail(program, "saving the best checkpoint");
                goto done;
            }
        }
        double rate = (double)(done_steps - first) / elapsed;
        double left = (double)(c->iterations - done_steps) / rate;
        if (limit > 0 && limit - elapsed < left)
            left = limit - elapsed;
        char took[32], remaining[32];
        clock_text(elapsed, took, sizeof took);
        clock_text(left, remaining, sizeof remaining);
        printf("%8lld  train %.4f  val %.4f  lr %.2e  %.1f it/s (%.0f ms/it)  %s elapsed, "
               "%s left%s\n", (long long)done_steps, t_loss, v_loss, (double)lr, rate,
               1000.0 / rate, took, remaining, improved ? "  *best" : "");
        fflush(stdout);
    }
    if (r->rank == 0 && save_checkpoint(model, adam, c, d, last_path) < 0) {
        cli_fail(program, "saving the last checkpoint");
        goto done;
    }
    printf("Stopped after %lld iterations (%s); best validation loss %.4f in %s, last state in "
           "%s, losses in %s and %s\n", (long long)done_steps,
           out_of_time ? "time limit" : "all iterations done", best, best_path, last_path,
           csv_path, svg_path);
    if (r->size > 1)
        printf("%d ranks: averaging gradients took %.2f s of the %.2f s of training (%.1f%%)\n",
               r->size, r->reduce_seconds, cli_seconds() - start,
               100.0 * r->reduce_seconds / (cli_seconds() - start));
    status = 0;
done:
    history_free(&h);
    eval_set_free(&train_eval);
    eval_set_free(&val_eval);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt_in);
    tfm_tensor_free(tgt_out);
    free(order);
    free(keys);
    free(batches);
    free(lengths);
    free(rows);
    tfm_rng_free(rng);
    tfm_optimizer_free(adam);
    return status;
}

/* --- main --------------------------------------------------------------------------- */

/* The notebook's printme: the codes of each split's first row. */
static void print_first_rows(const taylor_data *d, const taylor_split *splits[3])
{
    static const char *const names[3] = {"TRAIN_DATA", "VAL_DATA", "TEST_DATA"};
    for (int k = 0; k < 3; k++) {
        int64_t row = splits[k]->begin;
        printf("%s (line %lld)\n source:", names[k], (long long)d->lines[row]);
        for (int64_t i = 0; i < d->src_len; i++)
            printf(" %d", d->src[row * d->src_len + i]);
        printf("\n target:");
        for (int64_t i = 0; i < d->tgt_len; i++)
            printf(" %d", d->tgt[row * d->tgt_len + i]);
        printf("\n");
    }
}

/* String flags outside their choices, and flags that contradict each other;
 * 0, or CLI_USAGE_ERROR after saying why. */
static int check_config(const config *c)
{
    const char *bad = NULL;
    if (strcmp(c->init, "tutorial") && strcmp(c->init, "xavier"))
        bad = "--init is 'tutorial' or 'xavier'";
    else if (strcmp(c->schedule, "constant") && strcmp(c->schedule, "invsqrt") &&
             strcmp(c->schedule, "cosine") && strcmp(c->schedule, "step"))
        bad = "--schedule is 'constant', 'invsqrt', 'cosine' or 'step'";
    else if (!strcmp(c->schedule, "invsqrt") && c->warmup < 1)
        bad = "--schedule invsqrt needs --warmup of at least 1";
    else if (!strcmp(c->schedule, "cosine") && c->warmup >= c->iterations)
        bad = "--schedule cosine needs --warmup below --iterations";
    if (!bad)
        return 0;
    fprintf(stderr, "%s: %s\n", program, bad);
    return cli_usage_error(program);
}

int main(int argc, char **argv)
{
    config c = {.data = default_data_path(), .out = "runs/taylor",
                .init = "tutorial", .schedule = "constant",
                .max_seq_len = TAYLOR_MAX_SEQ_LEN, .d_model = 64, .layers = 2, .heads = 8,
                .d_ff = 128, .batch = 32, .iterations = 400000, .step = 100, .warmup = 4000,
                .step_size = 100000, .seed = 1, .evaluate = 1, .beam = 1, .decode_batch = 250,
                .examples = 5, .threads = 1, .dropout = 0.1, .lr = 2e-4, .beta2 = 0.999,
                .gamma = 0.5, .precision = "float32"};
    const cli_flag flags[] = {
        {"data", CLI_STRING, &c.data, 0, 0, "the Taylor-series file"},
        {"max-seq-len", CLI_INT, &c.max_seq_len, 3, 100000, "the tutorial's MAX_SEQ_LEN"},
        {"d-model", CLI_INT, &c.d_model, 1, 8192, "embedding dimension"},
        {"layers", CLI_INT, &c.layers, 1, 64, "encoder layers and decoder layers, each"},
        {"heads", CLI_INT, &c.heads, 1, 256, "attention heads"},
        {"d-ff", CLI_INT, &c.d_ff, 1, 65536, "feed-forward hidden dimension"},
        {"dropout", CLI_FLOAT, &c.dropout, 0, 0.99, "dropout probability"},
        {"init", CLI_STRING, &c.init, 0, 0, "'tutorial' (nn.Linear defaults) or 'xavier'"},
        {"norm-first", CLI_INT, &c.norm_first, 0, 1, "1: pre-norm layers (with a final norm), 0: the notebook's post-norm"},
        {"seed", CLI_INT, &c.seed, 0, 1e15, "initialisation, dropout and shuffling"},
        {"threads", CLI_INT, &c.threads, 1, 64,
         "libtfm's threads, which above 1 also run the matrix products (at 1 the BLAS's own: OPENBLAS_NUM_THREADS)"},
        {"batch", CLI_INT, &c.batch, 1, 11000, "training batch size"},
        {"bucket", CLI_INT, &c.bucket, 0, 11000, "batches of similar target length, sorted in "
         "pools of this many batches and cut after their longest target (0: the notebook's)"},
        {"eos-label", CLI_INT, &c.eos_label, 0, 1, "train <eos> right after each target (1) "
         "rather than the notebook's <pad> there (0)"},
        {"lr", CLI_FLOAT, &c.lr, 0, 1, "Adam learning rate (the peak, with warmup)"},
        {"beta2", CLI_FLOAT, &c.beta2, 0, 0.999999, "Adam beta2"},
        {"weight-decay", CLI_FLOAT, &c.weight_decay, 0, 1, "> 0: AdamW with this decoupled "
         "weight decay (0: the notebook's Adam)"},
        {"schedule", CLI_STRING, &c.schedule, 0, 0,
         "'constant', 'invsqrt' (lr * min(s/warmup, sqrt(warmup/s))), 'cosine' (warmup, then "
         "half a cosine to 0 at --iterations or the time limit, whichever is first) or "
         "'step'"},
        {"warmup", CLI_INT, &c.warmup, 0, 1e9, "warmup iterations of the invsqrt and cosine "
         "schedules"},
        {"step-size", CLI_INT, &c.step_size, 1, 1e9, "step schedule: iterations per decay"},
        {"gamma", CLI_FLOAT, &c.gamma, 0, 1, "step schedule: decay factor"},
        {"clip", CLI_FLOAT, &c.clip, 0, 1e6, "clip the gradient norm to this (0: off)"},
        {"label-smoothing", CLI_FLOAT, &c.label_smoothing, 0, 0.99, "cross-entropy smoothing"},
        {"iterations", CLI_INT, &c.iterations, 0, 1e12, "training iterations in all"},
        {"time-limit", CLI_FLOAT, &c.time_limit, 0, 1e7, "stop training after these minutes"},
        {"step", CLI_INT, &c.step, 1, 1e9, "monitor (losses, checkpoint) every this many"},
        {"precision", CLI_STRING, &c.precision, 0, 0, CLI_PRECISION_HELP},
        {"out", CLI_STRING, &c.out, 0, 0, "folder for losses, plot and checkpoints"},
        {"resume", CLI_STRING, &c.resume, 0, 0, "continue exactly from a checkpoint (its model, "
         "optimizer state and data order; the model flags are the file's)"},
        {"evaluate", CLI_INT, &c.evaluate, 0, 1, "translate the test set with the best checkpoint "
         "after training"},
        {"translate", CLI_STRING, &c.translate, 0, 0, "only translate the test set with this "
         "checkpoint (its model and length cap are the file's)"},
        {"beam", CLI_INT, &c.beam, 1, 64, "beam size (1: greedy, as the notebook)"},
        {"decode-batch", CLI_INT, &c.decode_batch, 1, 100000, "sources decoded at once"},
        {"int8", CLI_INT, &c.int8, 0, 2, "translate with the model quantized to int8: 1 its "
         "layers, 2 its generator too (0: float32)"},
        {"examples", CLI_INT, &c.examples, 0, 100000, "translations and mistakes to print"},
        {"print-first", CLI_SWITCH, &c.print_first, 0, 0, "print the token codes of each split's "
         "first row, as the notebook's printme, then exit"},
        {"distributed", CLI_SWITCH, &c.distributed, 0, 0, "data-parallel training under "
         "`mpirun -np N`: each rank runs --batch/N rows of every batch; rank 0 prints, writes "
         "the files and translates"},
    };
    int exit_now = cli_parse(argc, argv,
                             "Tutorial 003: a transformer learns Taylor expansions "
                             "(seq2seq_series_2terms.txt), then translates the test set.",
                             flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    tfm_set_num_threads((int32_t)c.threads); /* within the flag's range */
    if (cli_set_precision(program, c.precision) < 0)
        return cli_usage_error(program);
    if (cli_check_heads(program, c.d_model, c.heads) || check_config(&c))
        return CLI_USAGE_ERROR;
    ranks r;
    if (ranks_start(&r, (int)c.distributed, &argc, &argv, program) < 0)
        return EXIT_FAILURE;
    if (c.batch % r.size) {
        fprintf(stderr, "%s: --batch %lld does not split into %d equal slices\n", program,
                (long long)c.batch, r.size);
        return ranks_stop(&r, cli_usage_error(program));
    }
    if (r.rank && !freopen("/dev/null", "w", stdout)) /* rank 0 speaks for all */
        fprintf(stderr, "%s: rank %d: cannot silence standard output\n", program, r.rank);
    /* --translate and --resume take the model and the length cap from the file */
    const char *from_file = c.translate ? c.translate : c.resume;
    if (from_file && read_max_seq_len(&c, from_file) < 0)
        return ranks_stop(&r, EXIT_FAILURE);
    char error[512], best_path[4096];
    taylor_data *d = taylor_data_load(c.data, c.max_seq_len, error, sizeof error);
    if (!d) {
        fprintf(stderr, "%s: %s: %s\n", program, c.data, error);
        return ranks_stop(&r, EXIT_FAILURE);
    }
    int status = EXIT_FAILURE;
    tfm_model *model = NULL;
    tfm_tape *tape = NULL;
    taylor_split train_split, val_split, test_split;
    if (taylor_data_split(d, TAYLOR_TRAIN_SIZE, TAYLOR_TEST_SIZE, &train_split, &val_split,
                          &test_split, error, sizeof error) < 0) {
        fprintf(stderr, "%s: %s: %s\n", program, c.data, error);
        goto done;
    }
    if (c.batch > train_split.count) {
        fprintf(stderr, "%s: --batch %lld exceeds the %lld training rows\n", program,
                (long long)c.batch, (long long)train_split.count);
        goto done;
    }
    printf("%lld samples, %lld kept (source length %lld, target length %lld; vocabularies %d "
           "and %d); train %lld, validation %lld, test %lld\n", (long long)d->samples,
           (long long)d->rows, (long long)d->src_len, (long long)d->tgt_len, d->src_vocab.size,
           d->tgt_vocab.size, (long long)train_split.count, (long long)val_split.count,
           (long long)test_split.count);
    if (c.print_first) {
        print_first_rows(d, (const taylor_split *[3]){&train_split, &val_split, &test_split});
        status = EXIT_SUCCESS;
        goto done;
    }
    if (from_file && check_vocabularies(from_file, d) < 0)
        goto done;
    model = from_file ? tfm_model_load(from_file) : build_model(&c, d);
    if (!model || !(tape = tfm_tape_create())) {
        cli_fail(program, from_file ? from_file : "building the model");
        goto done;
    }
    tfm_model_options o;
    tfm_model_options_init(&o);
    tfm_model_get_options(model, &o);
    printf("Model%s%s: d_model %lld, %d+%d layers, %d heads, d_ff %lld, dropout %g, %s; "
           "%lld parameters\n", from_file ? " from " : "", from_file ? from_file : "",
           (long long)o.d_model, (int)o.encoder_layers, (int)o.decoder_layers,
           (int)o.heads, (long long)o.d_ff, (double)o.dropout,
           o.norm_first ? "pre-norm" : "post-norm",
           (long long)tfm_model_parameter_count(model));
    fflush(stdout);
    if (!c.translate) {
        if (ranks_share_model(&r, model) != TFM_OK) {
            cli_fail(program, "sharing the model among the ranks");
            goto done;
        }
        if (train(&c, &r, model, tape, d, train_split, val_split, best_path,
                  sizeof best_path) < 0)
            goto done;
        if (!c.evaluate || r.rank) {
            status = EXIT_SUCCESS;
            goto done;
        }
        if (tfm_params_load(tfm_model_params(model), best_path) != TFM_OK) {
            cli_fail(program, "loading the best checkpoint");
            goto done;
        }
        printf("Parameters from %s\n", best_path);
    }
    if (c.int8 && tfm_model_quantize(model, TFM_QUANTIZE_LAYERS |
                                                (c.int8 == 2 ? TFM_QUANTIZE_GENERATOR : 0)) !=
                      TFM_OK) {
        cli_fail(program, "quantizing the model");
        goto done;
    }
    if (translate(&c, model, tape, d, test_split) == 0)
        status = EXIT_SUCCESS;
done:
    tfm_tape_free(tape);
    tfm_model_free(model);
    taylor_data_free(d);
    return ranks_stop(&r, status);
}
