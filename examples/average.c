/* tfm-average (tutorials 000 and 001): the average of 10 uniform numbers as
 * a sequence-to-sequence task over digit tokens, with the tutorials' model:
 * torch.nn.Transformer (d_model 256, 4 heads, 3 + 3 post-norm layers, FFN
 * 128, dropout 0.1, final norms) between ONE token embedding shared by
 * source and target (not scaled) plus sinusoidal positions, and a linear
 * generator; a causal target mask and no other mask. Training: Adam 1e-3,
 * batches of 32 shuffled every epoch, 25 epochs, printing each epoch's sum
 * of batch losses as the tutorials do. Evaluation: the teacher-forced test
 * loss, then greedy decoding of the 1000 test sources from 's' for at most
 * 9 tokens (8 digits and 'e'), read as 0.d1…d8 for the RMSE against the
 * true averages, next to the RMSE of always answering the training mean.
 *
 * --recipe tuned keeps the model's size but trains it so that it learns:
 * no dropout (only the first digit or two can be predicted, so the signal
 * is weak and dropout drowns it: in short runs at reduced size it is what
 * keeps the loss on its plateau longest), pre-norm layers and a 400-step
 * warmup to lr 1e-3 then inverse-sqrt decay (so the post-norm stack is not
 * hit by full-size Adam steps from the first batch), and clipping at norm 1.
 * Flags override the recipe's values whatever their order. */
#include <math.h>

#include <tfm/decode.h>

#include "average_data.h"
#include "cli.h"
#include "ranks.h"

enum { DATA_SEED = 123, MAX_POSITIONS = 100 /* the tutorial's PositionalEncoding */ };

typedef struct config {
    const char *recipe, *save, *load, *precision;
    int64_t epochs, batch, d_model, heads, encoder_layers, decoder_layers, d_ff;
    int64_t norm_first, warmup, seed, eval_every, eval_batch, show, threads, distributed, int8;
    double lr, dropout, clip;
} config;

/* The tutorials' values; the flags start from these. */
static config tutorial_recipe(void)
{
    return (config){.recipe = "tutorial", .precision = "float32", .threads = 1, .epochs = 25,
                    .batch = 32,
                    .d_model = 256, .heads = 4, .encoder_layers = 3, .decoder_layers = 3,
                    .d_ff = 128, .norm_first = 0, .warmup = 0, .seed = 0, .eval_every = 5,
                    .eval_batch = 100, .show = 5, .lr = 1e-3, .dropout = 0.1, .clip = 0.0};
}

/* Whether the command line named the flag that writes to value. */
static int flag_given(const cli_flag *flags, const unsigned char *given, int n,
                      const void *value)
{
    for (int i = 0; i < n; i++)
        if (flags[i].value == value)
            return given[i];
    return 0;
}

/* Applies the tuned recipe to the values the command line left alone, so
 * that given flags win whatever their order; -1 for an unknown recipe. */
static int apply_recipe(config *c, const cli_flag *flags, const unsigned char *given, int n)
{
    if (strcmp(c->recipe, "tutorial") == 0)
        return 0;
    if (strcmp(c->recipe, "tuned") != 0)
        return -1;
    if (!flag_given(flags, given, n, &c->norm_first))
        c->norm_first = 1;
    if (!flag_given(flags, given, n, &c->dropout))
        c->dropout = 0.0;
    if (!flag_given(flags, given, n, &c->warmup))
        c->warmup = 400;
    if (!flag_given(flags, given, n, &c->clip))
        c->clip = 1.0;
    return 0;
}

/* --- the first sample, printed as the tutorial's numpy and torch print it - */

/* Python's repr of a double: the shortest text that reads back the same. */
static void print_repr(double v)
{
    char text[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v)
            break;
    }
    printf("%s", text);
}

/* numpy's str of a float array: 8 decimals without trailing zeros, padded to
 * one width, wrapped at 75 columns with a one-space hanging indent. */
static void print_numpy_row(const double *x, int n)
{
    char words[AVG_FEATURES][32];
    size_t width = 0;
    for (int i = 0; i < n; i++) {
        snprintf(words[i], sizeof words[i], "%.8f", x[i]);
        size_t len = strlen(words[i]);
        while (len > 2 && words[i][len - 1] == '0')
            words[i][--len] = '\0';
        if (len > width)
            width = len;
    }
    size_t line = 1;
    printf("[");
    for (int i = 0; i < n; i++) {
        size_t limit = i == n - 1 ? 74 : 75; /* room for the closing ']' */
        if (i > 0) {
            int wrap = line + 1 + width > limit;
            printf(wrap ? "\n " : " ");
            line = wrap ? 1 : line + 1;
        }
        printf("%-*s", (int)width, words[i]);
        line += width;
    }
    printf("]");
}

/* torch's str of an int64 vector: "tensor([…])", 18 per 80-column line. */
static void print_torch_vector(const int32_t *v, int n)
{
    const int per_line = (80 - 8) / 4;
    printf("tensor([");
    for (int i = 0; i < n; i++) {
        if (i > 0)
            printf(i % per_line ? ", " : ",\n        ");
        printf("%2d", (int)v[i]);
    }
    printf("])\n");
}

static void print_first(const avg_data *d)
{
    printf("raw inputs: ");
    print_numpy_row(d->x[0], AVG_FEATURES);
    printf("\nraw output: ");
    print_repr(d->y[0]);
    printf("\ntokenized input sequence: ");
    print_torch_vector(d->src[0], AVG_SRC_LEN);
    printf("tokenized output sequence: ");
    print_torch_vector(d->tgt[0], AVG_TGT_LEN);
}

/* --- batches --------------------------------------------------------------- */

/* Source, decoder input (tgt[:, :-1]) and labels (tgt[:, 1:]) of the rows
 * listed; NULL tensors when out of memory. */
typedef struct batch {
    tfm_tensor *src, *tgt_in, *tgt_out;
} batch;

static void batch_free(batch *b)
{
    tfm_tensor_free(b->src);
    tfm_tensor_free(b->tgt_in);
    tfm_tensor_free(b->tgt_out);
    *b = (batch){0};
}

static int batch_make(batch *b, const avg_data *d, const int32_t *rows, int64_t n)
{
    enum { STEPS = AVG_TGT_LEN - 1 };
    int32_t *src = malloc((size_t)n * AVG_SRC_LEN * sizeof *src);
    int32_t *in = malloc((size_t)n * STEPS * sizeof *in);
    int32_t *out = malloc((size_t)n * STEPS * sizeof *out);
    *b = (batch){0};
    if (src && in && out) {
        for (int64_t i = 0; i < n; i++) {
            memcpy(src + i * AVG_SRC_LEN, d->src[rows[i]], sizeof d->src[0]);
            memcpy(in + i * STEPS, d->tgt[rows[i]], STEPS * sizeof *in);
            memcpy(out + i * STEPS, d->tgt[rows[i]] + 1, STEPS * sizeof *out);
        }
        b->src = tfm_tensor_from_i32(2, (const int64_t[]){n, AVG_SRC_LEN}, src);
        b->tgt_in = tfm_tensor_from_i32(2, (const int64_t[]){n, STEPS}, in);
        b->tgt_out = tfm_tensor_from_i32(2, (const int64_t[]){n, STEPS}, out);
    }
    free(src);
    free(in);
    free(out);
    if (b->src && b->tgt_in && b->tgt_out)
        return 0;
    batch_free(b);
    return -1;
}

/* Teacher-forced logits of a batch: the tutorial's model(src, tgt_input). */
static tfm_tensor *forward(tfm_tape *tape, tfm_model *model, const batch *b)
{
    tfm_tensor *causal = tfm_mask_causal(tape, tfm_tensor_dim(b->tgt_in, 1), TFM_F32);
    return tfm_model_forward(tape, model, b->src, b->tgt_in, NULL, causal, NULL, NULL, NULL, NULL);
}

/* --- evaluation -------------------------------------------------------------- */

typedef struct report {
    double loss;          /* mean cross-entropy per target token, teacher-forced */
    double rmse;          /* decoded numbers against the true averages */
    int64_t exact;        /* decoded tokens == the target's tokens */
    int64_t malformed;    /* not 8 digits then 'e' */
    int64_t distinct;     /* different decoded strings */
} report;

static int compare_strings(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static int evaluate(tfm_model *model, tfm_tape *tape, tfm_decoding *decoding, const avg_data *d,
                    const config *c, report *r)
{
    enum { GENERATED = AVG_TGT_LEN - 1 };
    typedef char text[GENERATED + 1];
    int status = -1;
    int32_t rows[AVG_TEST], tokens[AVG_TEST * AVG_TGT_LEN], lengths[AVG_TEST];
    double values[AVG_TEST];
    text *decoded = malloc(AVG_TEST * sizeof *decoded);
    if (!decoded)
        return -1;
    for (int32_t i = 0; i < AVG_TEST; i++)
        rows[i] = AVG_TRAIN + i;
    *r = (report){0};
    tfm_model_set_training(model, 0);
    tfm_tape_set_recording(tape, 0);
    double squares = 0.0;
    for (int64_t start = 0; start < AVG_TEST; start += c->eval_batch) {
        int64_t n = AVG_TEST - start < c->eval_batch ? AVG_TEST - start : c->eval_batch;
        batch b;
        if (batch_make(&b, d, rows + start, n) < 0)
            goto done;
        float loss;
        tfm_tensor *ce = tfm_cross_entropy(tape, forward(tape, model, &b), b.tgt_out, -100, 0.0f);
        int ok = ce && tfm_tensor_item(ce, &loss) == TFM_OK &&
                 tfm_decoding_run(decoding, b.src, tokens + start * AVG_TGT_LEN,
                                  (AVG_TEST - start) * AVG_TGT_LEN, lengths + start,
                                  AVG_TEST - start, NULL, 0, NULL, 0, NULL, 0) == TFM_OK;
        tfm_tape_reset(tape);
        batch_free(&b);
        if (!ok)
            goto done;
        r->loss += (double)loss * (double)n;
    }
    r->loss /= AVG_TEST;
    for (int i = 0; i < AVG_TEST; i++) {
        /* tokens: 's', the generated tokens, then -1s */
        const int32_t *generated = tokens + i * AVG_TGT_LEN + 1;
        int count = lengths[i] - 1;
        double *value = &values[i];
        if (avg_decode(generated, count, value) != 1)
            r->malformed++;
        const int32_t *target = d->tgt[AVG_TRAIN + i] + 1;
        r->exact +=
            count == GENERATED && memcmp(generated, target, GENERATED * sizeof *target) == 0;
        double error = *value - d->y[AVG_TRAIN + i];
        squares += error * error;
        avg_tokens_to_text(generated, count, decoded[i]);
    }
    r->rmse = sqrt(squares / AVG_TEST);
    for (int i = 0; i < c->show && i < AVG_TEST; i++) {
        char want[GENERATED + 1];
        avg_tokens_to_text(d->tgt[AVG_TRAIN + i] + 1, GENERATED, want);
        printf("  test %d: target 0.%.8s, decoded \"%s\" = %.8f\n", i, want, decoded[i], values[i]);
    }
    qsort(decoded, AVG_TEST, sizeof *decoded, compare_strings);
    for (int i = 0; i < AVG_TEST; i++)
        r->distinct += i == 0 || strcmp(decoded[i], decoded[i - 1]) != 0;
    status = 0;
done:
    free(decoded);
    tfm_tape_set_recording(tape, 1);
    tfm_model_set_training(model, 1);
    return status;
}

static void print_report(const report *r, double baseline)
{
    printf("Test Loss: %.6f per token (teacher-forced)\n", r->loss);
    printf("Test RMSE: %.6f (training-mean baseline %.6f); exact %lld/%d; malformed %lld; "
           "%lld distinct outputs\n",
           r->rmse, baseline, (long long)r->exact, AVG_TEST, (long long)r->malformed,
           (long long)r->distinct);
    fflush(stdout);
}

/* --- training ---------------------------------------------------------------- */

/* One epoch over the training rows in a fresh random order (DataLoader with
 * shuffle=True; the last batch keeps what is left); the sum of batch losses
 * in *total. */
static int train_epoch(ranks *r, tfm_model *model, tfm_tape *tape, tfm_optimizer *optimizer,
                       const avg_data *d, const config *c, tfm_rng *rng, double *total)
{
    int32_t order[AVG_TRAIN];
    for (int32_t i = 0; i < AVG_TRAIN; i++)
        order[i] = i;
    for (int32_t i = AVG_TRAIN - 1; i > 0; i--) {
        int32_t j = (int32_t)(tfm_rng_next_u64(rng) % (uint64_t)(i + 1));
        int32_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
    *total = 0.0;
    for (int64_t start = 0; start < AVG_TRAIN; start += c->batch) {
        int64_t n = AVG_TRAIN - start < c->batch ? AVG_TRAIN - start : c->batch;
        /* on several ranks, this rank's slice of the batch; every label counts */
        int64_t first, rows;
        ranks_slice(r, n, &first, &rows);
        batch b;
        if (batch_make(&b, d, order + start + first, rows) < 0)
            return -1;
        float loss = 0.0f;
        tfm_tensor *ce = tfm_cross_entropy(tape, forward(tape, model, &b), b.tgt_out, -100, 0.0f);
        int ok = ce && tfm_optimizer_zero_grad(optimizer) == TFM_OK &&
                 tfm_tape_backward(tape, ce) == TFM_OK && tfm_tensor_item(ce, &loss) == TFM_OK;
        ok = ranks_average_gradients(r, ok ? (double)rows : -1.0) == TFM_OK && ok &&
             tfm_optimizer_step(optimizer) == TFM_OK;
        tfm_tape_reset(tape);
        batch_free(&b);
        if (!ok)
            return -1;
        *total += ranks_mean(r, loss, (double)rows);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *program = cli_name(argv[0]);
    int64_t print_first_only = 0;
    config c = tutorial_recipe();
    const cli_flag flags[] = {
        {"recipe", CLI_STRING, &c.recipe, 0, 0,
         "tutorial, or tuned: pre-norm, no dropout, warmup 400, clip 1 (given flags win)"},
        {"print-first", CLI_SWITCH, &print_first_only, 0, 0,
         "print the first training sample and its tokens, then exit"},
        {"distributed", CLI_SWITCH, &c.distributed, 0, 0, "data-parallel training under "
         "`mpirun -np N`: each rank runs its slice of every batch; rank 0 prints, evaluates "
         "and saves"},
        {"epochs", CLI_INT, &c.epochs, 0, 1e6, "passes over the 4000 training rows (0: none)"},
        {"batch", CLI_INT, &c.batch, 1, AVG_TRAIN, "training batch size"},
        {"lr", CLI_FLOAT, &c.lr, 0, 10, "Adam learning rate (peak, with warmup)"},
        {"warmup", CLI_INT, &c.warmup, 0, 1e9,
         "warmup steps, then lr * sqrt(warmup / step); 0: constant lr"},
        {"clip", CLI_FLOAT, &c.clip, 0, 1e9, "clip the global gradient norm (0: no)"},
        {"dropout", CLI_FLOAT, &c.dropout, 0, 0.99, "dropout rate"},
        {"norm-first", CLI_INT, &c.norm_first, 0, 1, "1: pre-norm layers, 0: post-norm"},
        {"d-model", CLI_INT, &c.d_model, 2, 8192, "model width"},
        {"heads", CLI_INT, &c.heads, 1, 256, "attention heads (must divide d-model)"},
        {"encoder-layers", CLI_INT, &c.encoder_layers, 0, 64, "encoder layers"},
        {"decoder-layers", CLI_INT, &c.decoder_layers, 1, 64, "decoder layers"},
        {"d-ff", CLI_INT, &c.d_ff, 1, 65536, "feed-forward width"},
        {"seed", CLI_INT, &c.seed, 0, 1e15, "initialisation, dropout and shuffling seed"},
        {"threads", CLI_INT, &c.threads, 1, 64,
         "libtfm's threads, which above 1 also run the matrix products (at 1 the BLAS's own: OPENBLAS_NUM_THREADS)"},
        {"precision", CLI_STRING, &c.precision, 0, 0, CLI_PRECISION_HELP},
        {"eval-every", CLI_INT, &c.eval_every, 0, 1e6,
         "evaluate the test set every this many epochs (0: only at the end)"},
        {"eval-batch", CLI_INT, &c.eval_batch, 1, AVG_TEST, "test sources decoded at once"},
        {"show", CLI_INT, &c.show, 0, AVG_TEST, "test predictions printed at each evaluation"},
        {"save", CLI_STRING, &c.save, 0, 0, "write the model here after training"},
        {"int8", CLI_INT, &c.int8, 0, 2, "evaluate the model quantized to int8 "
         "(tfm_model_quantize): 1 its layers, 2 its generator too (0: float32)"},
        {"load", CLI_STRING, &c.load, 0, 0, "read a saved model from here (its options are "
         "the file's); skip training"},
    };
    enum { N_FLAGS = sizeof flags / sizeof flags[0] };
    unsigned char given[N_FLAGS] = {0};
    int exit_now = cli_parse(argc, argv,
                             "Tutorials 000/001: the average of 10 numbers as digit sequences.\n"
                             "The defaults below are the tutorial recipe's.",
                             flags, N_FLAGS, given);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    if (apply_recipe(&c, flags, given, N_FLAGS) < 0) {
        fprintf(stderr, "%s: --recipe is tutorial or tuned, not '%s'\n", program, c.recipe);
        return cli_usage_error(program);
    }
    tfm_set_num_threads((int32_t)c.threads); /* within the flag's range */
    if (cli_set_precision(program, c.precision) < 0)
        return cli_usage_error(program);
    if (cli_check_heads(program, c.d_model, c.heads))
        return CLI_USAGE_ERROR;
    /* before training, so that a path that cannot be written costs no time */
    if (c.save && cli_make_parent_folders(c.save) != 0) {
        fprintf(stderr, "%s: cannot create the folders of '%s': %s\n", program, c.save,
                strerror(errno));
        return EXIT_FAILURE;
    }

    int status = EXIT_FAILURE;
    tfm_model *model = NULL;
    tfm_tape *tape = NULL;
    tfm_optimizer *optimizer = NULL;
    tfm_decoding *decoding = NULL;
    tfm_rng *rng = NULL;
    avg_data *data = avg_data_create(DATA_SEED);
    if (!data) {
        fprintf(stderr, "%s: out of memory\n", program);
        return EXIT_FAILURE;
    }
    if (print_first_only) {
        print_first(data);
        free(data);
        return EXIT_SUCCESS;
    }
    ranks peers;
    if (ranks_start(&peers, (int)c.distributed, &argc, &argv, program) < 0) {
        free(data);
        return EXIT_FAILURE;
    }
    if (peers.rank && !freopen("/dev/null", "w", stdout)) /* rank 0 speaks for all */
        fprintf(stderr, "%s: rank %d: cannot silence standard output\n", program, peers.rank);
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = AVG_VOCAB;
    mo.max_src_len = mo.max_tgt_len = MAX_POSITIONS;
    mo.share_embeddings = 1;           /* one TokenEmbedding for both sides */
    mo.positions = TFM_POSITIONS_SINUSOIDAL;
    mo.embedding_scale = TFM_EMBEDDING_SCALE_NONE; /* TokenEmbedding does not scale */
    mo.encoder_layers = (int32_t)c.encoder_layers;
    mo.decoder_layers = (int32_t)c.decoder_layers;
    mo.final_norm = 1;
    mo.d_model = c.d_model;
    mo.heads = (int32_t)c.heads;
    mo.d_ff = c.d_ff;
    mo.dropout = (float)c.dropout;
    mo.embedding_dropout = 0.0f; /* the tutorials' PositionalEncoding has none */
    mo.norm_first = (int32_t)c.norm_first;
    mo.seed = (uint64_t)c.seed;

    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    oo.lr = (float)c.lr;
    oo.clip_norm = (float)c.clip;
    if (c.warmup > 0) {
        oo.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
        oo.warmup_steps = c.warmup;
    }

    tfm_decode_options dopt;
    tfm_decode_options_init(&dopt);
    dopt.strategy = TFM_DECODE_GREEDY;
    dopt.max_length = AVG_TGT_LEN - 1;
    dopt.bos_id = AVG_START;
    dopt.eos_id = AVG_END;
    dopt.src_pad_id = -1;

    /* a saved model describes itself: --load needs none of the model flags */
    model = c.load ? tfm_model_load(c.load) : tfm_model_create(&mo);
    if (!model || !(tape = tfm_tape_create()) ||
        !(optimizer = tfm_optimizer_create(tfm_model_params(model), &oo)) ||
        !(decoding = tfm_decoding_create(model, &dopt, c.eval_batch, AVG_SRC_LEN)) ||
        !(rng = tfm_rng_create((uint64_t)c.seed ^ 0x5eed5eedu))) {
        cli_fail(program, c.load && !model ? c.load : "building the model");
        goto done;
    }
    tfm_model_get_options(model, &mo);
    if (!c.load && ranks_share_model(&peers, model) != TFM_OK) {
        cli_fail(program, "sharing the model among the ranks");
        goto done;
    }
    double train_mean = 0.0, squares = 0.0;
    for (int i = 0; i < AVG_TRAIN; i++)
        train_mean += data->y[i];
    train_mean /= AVG_TRAIN;
    for (int i = AVG_TRAIN; i < AVG_SAMPLES; i++)
        squares += (data->y[i] - train_mean) * (data->y[i] - train_mean);
    double baseline = sqrt(squares / AVG_TEST);

    int64_t epochs = c.load ? 0 : c.epochs;
    int64_t steps_per_epoch = (AVG_TRAIN + c.batch - 1) / c.batch;
    printf("%s%s: d_model %lld, %d heads, %d+%d %s layers, FFN %lld, dropout %g; "
           "%lld parameters\n", c.load ? "model from " : "recipe ", c.load ? c.load : c.recipe,
           (long long)mo.d_model, (int)mo.heads, (int)mo.encoder_layers,
           (int)mo.decoder_layers, mo.norm_first ? "pre-norm" : "post-norm",
           (long long)mo.d_ff, (double)mo.dropout,
           (long long)tfm_model_parameter_count(model));
    if (epochs > 0)
        printf("Adam lr %g%s, clip %g, batch %lld, %s products: %lld epochs x %lld steps\n",
               c.lr, c.warmup ? " (warmup then inverse sqrt)" : "", c.clip, (long long)c.batch,
               c.precision, (long long)epochs, (long long)steps_per_epoch);
    fflush(stdout);

    report r;
    double start = cli_seconds();
    for (int64_t epoch = 0; epoch < epochs; epoch++) {
        double total, epoch_start = cli_seconds();
        if (train_epoch(&peers, model, tape, optimizer, data, &c, rng, &total) < 0) {
            cli_fail(program, "training");
            goto done;
        }
        double now = cli_seconds();
        printf("Epoch: %lld, Training Loss: %.6f  (lr %.2e, %.0f ms/step, %.0f s left)\n",
               (long long)epoch, total, (double)tfm_optimizer_lr(optimizer),
               1000.0 * (now - epoch_start) / (double)steps_per_epoch,
               (now - start) / (double)(epoch + 1) * (double)(epochs - epoch - 1));
        fflush(stdout);
        if (c.eval_every && (epoch + 1) % c.eval_every == 0 && epoch + 1 < epochs && !peers.rank) {
            if (evaluate(model, tape, decoding, data, &c, &r) < 0) {
                cli_fail(program, "evaluating");
                goto done;
            }
            print_report(&r, baseline);
        }
    }
    if (peers.size > 1)
        printf("%d ranks: averaging gradients took %.2f s of the %.2f s of training (%.1f%%)\n",
               peers.size, peers.reduce_seconds, cli_seconds() - start,
               100.0 * peers.reduce_seconds / (cli_seconds() - start));
    if (peers.rank) { /* rank 0 saves and evaluates */
        status = EXIT_SUCCESS;
        goto done;
    }
    if (c.save && tfm_model_save(model, c.save) != TFM_OK) {
        cli_fail(program, "saving the model");
        goto done;
    }
    if (c.int8 && tfm_model_quantize(model, TFM_QUANTIZE_LAYERS |
                                                (c.int8 == 2 ? TFM_QUANTIZE_GENERATOR : 0)) !=
                      TFM_OK) {
        cli_fail(program, "quantizing the model");
        goto done;
    }
    if (evaluate(model, tape, decoding, data, &c, &r) < 0) {
        cli_fail(program, "evaluating");
        goto done;
    }
    print_report(&r, baseline);
    if (epochs > 0)
        printf("trained in %.1f s\n", cli_seconds() - start);
    status = EXIT_SUCCESS;
done:
    tfm_decoding_free(decoding);
    tfm_optimizer_free(optimizer);
    tfm_tape_free(tape);
    tfm_model_free(model);
    tfm_rng_free(rng);
    free(data);
    return ranks_stop(&peers, status);
}
