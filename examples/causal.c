/* tfm-causal (tutorial 002, "Implementing a Transformer"): the tutorial's
 * CausalTransformer built from libtfm's parts the way the notebook builds it
 * from torch parts: attention with per-head Q/K/V weights of shape
 * heads x d_model x d_k (no Q/K/V bias) and a W_o linear, a two-linear ReLU
 * feed-forward, post-norm encoder and decoder layers sharing one dropout,
 * sinusoidal positions and a no-peek mask. Trained on one fixed batch of
 * random tokens, one step per "epoch", with Adam(1e-4, betas 0.9/0.98,
 * eps 1e-9) and cross-entropy ignoring token 0, printing the loss. */
#include <math.h>

#include "cli.h"

#define MAX_LAYERS 64

typedef struct attention {
    tfm_tensor *w_q, *w_k, *w_v; /* [heads, d_model, d_k] */
    tfm_layer *w_o;
    int32_t heads;
    float scale;                 /* 1 / sqrt(d_k) */
} attention;

typedef struct feed_forward {
    tfm_layer *w1, *w2;
} feed_forward;

typedef struct block {
    attention self_attn, cross_attn; /* cross_attn only in decoder layers */
    feed_forward ff;
    tfm_layer *norm1, *norm2, *norm3;
    tfm_layer *dropout;
} block;

typedef struct causal_transformer {
    tfm_params *params;
    tfm_layer *encoder_embedding, *decoder_embedding, *positions, *fc, *dropout;
    block encoder[MAX_LAYERS], decoder[MAX_LAYERS];
    int32_t layers;
} causal_transformer;

typedef struct config {
    int64_t vocab, d_model, heads, layers, d_ff, length, batch, epochs, seed, threads;
    double dropout, lr;
} config;

/* --- building the parts ---------------------------------------------------- */

static int make_attention(attention *a, tfm_params *p, const char *name, const config *c,
                          tfm_rng *rng)
{
    char full[256];
    int64_t d_k = c->d_model / c->heads;
    const int64_t shape[3] = {c->heads, c->d_model, d_k};
    tfm_tensor **weights[3] = {&a->w_q, &a->w_k, &a->w_v};
    const char *names[3] = {"W_q", "W_k", "W_v"};
    for (int i = 0; i < 3; i++) {
        snprintf(full, sizeof full, "%s.%s", name, names[i]);
        *weights[i] = tfm_params_add(p, full, 3, shape);
        if (!*weights[i] || tfm_init_xavier_uniform(*weights[i], 1.0f, rng) != TFM_OK)
            return -1;
    }
    snprintf(full, sizeof full, "%s.W_o", name);
    a->w_o = tfm_linear_create(p, full, c->d_model, c->d_model, 1, rng);
    a->heads = (int32_t)c->heads;
    a->scale = 1.0f / sqrtf((float)d_k);
    return a->w_o ? 0 : -1;
}

static int make_block(block *b, tfm_params *p, const char *name, int decoder, const config *c,
                      tfm_rng *rng)
{
    char full[256];
    snprintf(full, sizeof full, "%s.self_attn", name);
    if (make_attention(&b->self_attn, p, full, c, rng) < 0)
        return -1;
    snprintf(full, sizeof full, "%s.cross_attn", name);
    if (decoder && make_attention(&b->cross_attn, p, full, c, rng) < 0)
        return -1;
    snprintf(full, sizeof full, "%s.feed_forward.w1", name);
    b->ff.w1 = tfm_linear_create(p, full, c->d_model, c->d_ff, 1, rng);
    snprintf(full, sizeof full, "%s.feed_forward.w2", name);
    b->ff.w2 = b->ff.w1 ? tfm_linear_create(p, full, c->d_ff, c->d_model, 1, rng) : NULL;
    tfm_layer **norms[3] = {&b->norm1, &b->norm2, &b->norm3};
    for (int i = 0; i < (decoder ? 3 : 2); i++) {
        snprintf(full, sizeof full, "%s.norm%d", name, i + 1);
        if (!(*norms[i] = tfm_layer_norm_create(p, full, c->d_model, 1e-5f)))
            return -1;
    }
    b->dropout = tfm_dropout_create((float)c->dropout, rng);
    return b->ff.w2 && b->dropout ? 0 : -1;
}

static void free_block(block *b)
{
    tfm_layer *layers[] = {b->self_attn.w_o, b->cross_attn.w_o, b->ff.w1, b->ff.w2,
                           b->norm1, b->norm2, b->norm3, b->dropout};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        tfm_layer_free(layers[i]);
}

static void free_model(causal_transformer *m)
{
    for (int32_t i = 0; i < m->layers; i++) {
        free_block(&m->encoder[i]);
        free_block(&m->decoder[i]);
    }
    tfm_layer *layers[] = {m->encoder_embedding, m->decoder_embedding, m->positions, m->fc,
                           m->dropout};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        tfm_layer_free(layers[i]);
    tfm_params_free(m->params);
}

static int make_model(causal_transformer *m, const config *c, tfm_rng *rng)
{
    m->layers = (int32_t)c->layers;
    m->params = tfm_params_create();
    if (!m->params)
        return -1;
    m->encoder_embedding = tfm_embedding_create(m->params, "encoder_embedding", c->vocab,
                                                c->d_model, rng);
    m->decoder_embedding = tfm_embedding_create(m->params, "decoder_embedding", c->vocab,
                                                c->d_model, rng);
    m->positions = tfm_sinusoidal_positions_create(c->length, c->d_model);
    char name[64];
    for (int32_t i = 0; i < m->layers; i++) {
        snprintf(name, sizeof name, "encoder_layers.%d", (int)i);
        if (make_block(&m->encoder[i], m->params, name, 0, c, rng) < 0)
            return -1;
    }
    for (int32_t i = 0; i < m->layers; i++) {
        snprintf(name, sizeof name, "decoder_layers.%d", (int)i);
        if (make_block(&m->decoder[i], m->params, name, 1, c, rng) < 0)
            return -1;
    }
    m->fc = tfm_linear_create(m->params, "fc", c->d_model, c->vocab, 1, rng);
    m->dropout = tfm_dropout_create((float)c->dropout, rng);
    return m->encoder_embedding && m->decoder_embedding && m->positions && m->fc && m->dropout
               ? 0
               : -1;
}

/* --- the forward pass, as the notebook writes it ---------------------------- */

/* einsum("bnd,hde->bhne", x, W): W [h, d, e] becomes [d, h*e], one GEMM, then heads. */
static tfm_tensor *project_heads(tfm_tape *t, const tfm_tensor *x, const tfm_tensor *w,
                                 int32_t heads)
{
    int64_t d = tfm_tensor_dim(w, 1), e = tfm_tensor_dim(w, 2);
    tfm_tensor *flat = tfm_reshape(t, tfm_transpose(t, w, 0, 1), 2, (const int64_t[]){d, heads * e});
    return tfm_split_heads(t, tfm_matmul(t, x, flat, 0, 0), heads);
}

static tfm_tensor *attend(tfm_tape *t, const attention *a, const tfm_tensor *q_in,
                          const tfm_tensor *kv_in, const tfm_tensor *keep)
{
    tfm_tensor *q = project_heads(t, q_in, a->w_q, a->heads);
    tfm_tensor *k = project_heads(t, kv_in, a->w_k, a->heads);
    tfm_tensor *v = project_heads(t, kv_in, a->w_v, a->heads);
    tfm_tensor *scores = tfm_scale(t, tfm_matmul(t, q, k, 0, 1), a->scale);
    tfm_tensor *context = tfm_matmul(t, tfm_softmax(t, scores, keep), v, 0, 0);
    return tfm_linear_forward(t, a->w_o, tfm_merge_heads(t, context));
}

static tfm_tensor *feed(tfm_tape *t, const feed_forward *f, const tfm_tensor *x)
{
    return tfm_linear_forward(t, f->w2, tfm_relu(t, tfm_linear_forward(t, f->w1, x)));
}

/* x = norm(x + dropout(sublayer)) */
static tfm_tensor *add_norm(tfm_tape *t, const block *b, const tfm_layer *norm,
                            const tfm_tensor *x, const tfm_tensor *update)
{
    return tfm_layer_norm_forward(t, norm, tfm_add(t, x, tfm_dropout_forward(t, b->dropout, update)));
}

static tfm_tensor *forward(tfm_tape *t, const causal_transformer *m, const tfm_tensor *src,
                           const tfm_tensor *tgt)
{
    int64_t tgt_len = tfm_tensor_dim(tgt, 1);
    tfm_tensor *no_peek = tfm_mask_causal(t, tgt_len, TFM_I32);
    tfm_tensor *x = tfm_dropout_forward(
        t, m->dropout, tfm_positions_forward(t, m->positions,
                                             tfm_embedding_forward(t, m->encoder_embedding, src), 0));
    tfm_tensor *y = tfm_dropout_forward(
        t, m->dropout, tfm_positions_forward(t, m->positions,
                                             tfm_embedding_forward(t, m->decoder_embedding, tgt), 0));
    for (int32_t i = 0; i < m->layers; i++) {
        const block *b = &m->encoder[i];
        x = add_norm(t, b, b->norm1, x, attend(t, &b->self_attn, x, x, NULL));
        x = add_norm(t, b, b->norm2, x, feed(t, &b->ff, x));
    }
    for (int32_t i = 0; i < m->layers; i++) {
        const block *b = &m->decoder[i];
        y = add_norm(t, b, b->norm1, y, attend(t, &b->self_attn, y, y, no_peek));
        y = add_norm(t, b, b->norm2, y, attend(t, &b->cross_attn, y, x, NULL));
        y = add_norm(t, b, b->norm3, y, feed(t, &b->ff, y));
    }
    return tfm_linear_forward(t, m->fc, y);
}

int main(int argc, char **argv)
{
    const char *program = cli_name(argv[0]);
    config c = {.vocab = 5000, .d_model = 512, .heads = 8, .layers = 6, .d_ff = 2048,
                .length = 100, .batch = 64, .epochs = 10, .seed = 33, .threads = 1, .dropout = 0.1,
                .lr = 1e-4};
    const cli_flag flags[] = {
        {"vocab", CLI_INT, &c.vocab, 2, 1e7, "source and target vocabulary size"},
        {"d-model", CLI_INT, &c.d_model, 2, 8192, "model width"},
        {"heads", CLI_INT, &c.heads, 1, 256, "attention heads (must divide d-model)"},
        {"layers", CLI_INT, &c.layers, 1, MAX_LAYERS, "encoder and decoder layers each"},
        {"d-ff", CLI_INT, &c.d_ff, 1, 65536, "feed-forward width"},
        {"length", CLI_INT, &c.length, 2, 4096, "sequence length (max_seq_length)"},
        {"batch", CLI_INT, &c.batch, 1, 4096, "sequences in the batch"},
        {"epochs", CLI_INT, &c.epochs, 1, 1e6, "training steps on the batch"},
        {"dropout", CLI_FLOAT, &c.dropout, 0, 0.99, "dropout rate"},
        {"lr", CLI_FLOAT, &c.lr, 0, 10, "Adam learning rate"},
        {"seed", CLI_INT, &c.seed, 0, 1e15, "random seed"},
        {"threads", CLI_INT, &c.threads, 1, 64,
         "libtfm's threads, which above 1 also run the matrix products (at 1 the BLAS's own: OPENBLAS_NUM_THREADS)"},
    };
    int exit_now = cli_parse(argc, argv,
                             "Tutorial 002's CausalTransformer trained on random tokens.", flags,
                             (int)(sizeof flags / sizeof flags[0]), NULL);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    tfm_set_num_threads((int32_t)c.threads); /* within the flag's range */
    if (cli_check_heads(program, c.d_model, c.heads))
        return CLI_USAGE_ERROR;

    int status = EXIT_FAILURE;
    causal_transformer model;
    memset(&model, 0, sizeof model);
    tfm_rng *rng = tfm_rng_create((uint64_t)c.seed);
    tfm_tape *tape = tfm_tape_create();
    tfm_optimizer *adam = NULL;
    tfm_tensor *src = NULL, *tgt_in = NULL, *tgt_out = NULL;
    if (!rng || !tape || make_model(&model, &c, rng) < 0) {
        cli_fail(program, "building the model");
        goto done;
    }
    tfm_optimizer_options options;
    tfm_optimizer_options_init(&options, TFM_OPTIMIZER_ADAM);
    options.lr = (float)c.lr;
    options.beta2 = 0.98f;
    options.eps = 1e-9f;
    if (!(adam = tfm_optimizer_create(model.params, &options))) {
        cli_fail(program, "optimizer");
        goto done;
    }

    /* torch.randint(1, vocab, (batch, length)) for source and target; the
     * decoder reads tgt[:, :-1] and predicts tgt[:, 1:]. */
    int64_t n = c.batch * c.length, steps = c.length - 1;
    int32_t *tokens = malloc((size_t)(2 * n) * sizeof *tokens);
    int32_t *shifted = malloc((size_t)(2 * c.batch * steps) * sizeof *shifted);
    if (!tokens || !shifted) {
        free(tokens);
        free(shifted);
        fprintf(stderr, "%s: out of memory\n", program);
        goto done;
    }
    for (int64_t i = 0; i < 2 * n; i++)
        tokens[i] = 1 + (int32_t)(tfm_rng_next_u64(rng) % (uint64_t)(c.vocab - 1));
    const int32_t *tgt = tokens + n;
    for (int64_t b = 0; b < c.batch; b++)
        for (int64_t j = 0; j < steps; j++) {
            shifted[b * steps + j] = tgt[b * c.length + j];
            shifted[c.batch * steps + b * steps + j] = tgt[b * c.length + j + 1];
        }
    src = tfm_tensor_from_i32(2, (const int64_t[]){c.batch, c.length}, tokens);
    tgt_in = tfm_tensor_from_i32(2, (const int64_t[]){c.batch, steps}, shifted);
    tgt_out = tfm_tensor_from_i32(2, (const int64_t[]){c.batch, steps}, shifted + c.batch * steps);
    free(tokens);
    free(shifted);
    if (!src || !tgt_in || !tgt_out) {
        cli_fail(program, "data");
        goto done;
    }

    printf("CausalTransformer: vocab %lld, d_model %lld, %lld heads, %lld+%lld layers, d_ff %lld, "
           "batch %lld x %lld, dropout %g; %lld parameters\n",
           (long long)c.vocab, (long long)c.d_model, (long long)c.heads, (long long)c.layers,
           (long long)c.layers, (long long)c.d_ff, (long long)c.batch, (long long)c.length,
           c.dropout, (long long)tfm_params_numel(model.params));
    fflush(stdout);
    double start = cli_seconds();
    for (int64_t epoch = 1; epoch <= c.epochs; epoch++) {
        double step_start = cli_seconds();
        tfm_optimizer_zero_grad(adam);
        tfm_tensor *logits = forward(tape, &model, src, tgt_in);
        tfm_tensor *loss = tfm_cross_entropy(tape, logits, tgt_out, 0, 0.0f);
        float value;
        if (!loss || tfm_tape_backward(tape, loss) != TFM_OK || tfm_optimizer_step(adam) != TFM_OK ||
            tfm_tensor_item(loss, &value) != TFM_OK) {
            cli_fail(program, "training step");
            goto done;
        }
        tfm_tape_reset(tape);
        double now = cli_seconds();
        printf("Epoch: %lld, Loss: %.6f  (%.2f s/step, %.0f s left)\n", (long long)epoch, value,
               now - step_start, (now - start) / (double)epoch * (double)(c.epochs - epoch));
        fflush(stdout);
    }
    status = EXIT_SUCCESS;
done:
    tfm_tensor_free(src);
    tfm_tensor_free(tgt_in);
    tfm_tensor_free(tgt_out);
    tfm_optimizer_free(adam);
    if (model.params)
        free_model(&model);
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    return status;
}
