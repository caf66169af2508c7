/* A model's low-rank adapters (tfm/adapters.h): which of its linears each
 * adapts, their A and B matrices in a store of their own (so an optimizer
 * over it trains nothing else), PEFT's files, and merging into the base.
 * The products themselves are ops/adapter.c's. */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfm/adapters.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/options.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/json.h"
#include "io/json_doc.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "nn/layer.h"
#include "ops/adapter.h"
#include "text/text.h"

#define NAME_MAX_BYTES 63
#define TARGETS 10
#define ALL_TARGETS ((1u << TARGETS) - 1u)
#define CONFIG_MAX_BYTES ((size_t)1 << 20)
#define CONFIG_FILE "adapter_config.json"
#define WEIGHTS_FILE "adapter_model.safetensors"

typedef struct tfm__adapter {
    char name[NAME_MAX_BYTES + 1];
    tfm_adapter_options options; /* layers pointing to layers below */
    int32_t *layers;
    int32_t rslora;              /* scale alpha / sqrt(rank) (a loaded use_rslora) */
    tfm_params *params;          /* A then B of each entry */
    tfm__adapter_set set;
} tfm__adapter;

/* The linears a target bit names: its sublayer and projection. */
static const struct target {
    tfm_adapter_targets bit;
    int block_child;   /* TFM__BLK_* */
    int attention;     /* 1: an attention's projection (index below), 0: feed-forward */
    int index;         /* TFM__ATT_Q/K/V/OUT or TFM__FF_LINEAR1/2 */
    const char *ours;  /* libtfm's module name after "layers.N." */
} targets[TARGETS] = {
    {TFM_ADAPT_SELF_Q, TFM__BLK_SELF_ATTN, 1, TFM__ATT_Q, "self_attn.q_proj"},
    {TFM_ADAPT_SELF_K, TFM__BLK_SELF_ATTN, 1, TFM__ATT_K, "self_attn.k_proj"},
    {TFM_ADAPT_SELF_V, TFM__BLK_SELF_ATTN, 1, TFM__ATT_V, "self_attn.v_proj"},
    {TFM_ADAPT_SELF_O, TFM__BLK_SELF_ATTN, 1, TFM__ATT_OUT, "self_attn.out_proj"},
    {TFM_ADAPT_CROSS_Q, TFM__BLK_CROSS_ATTN, 1, TFM__ATT_Q, "multihead_attn.q_proj"},
    {TFM_ADAPT_CROSS_K, TFM__BLK_CROSS_ATTN, 1, TFM__ATT_K, "multihead_attn.k_proj"},
    {TFM_ADAPT_CROSS_V, TFM__BLK_CROSS_ATTN, 1, TFM__ATT_V, "multihead_attn.v_proj"},
    {TFM_ADAPT_CROSS_O, TFM__BLK_CROSS_ATTN, 1, TFM__ATT_OUT, "multihead_attn.out_proj"},
    {TFM_ADAPT_FF_IN, TFM__BLK_FF, 0, TFM__FF_LINEAR1, "linear1"},
    {TFM_ADAPT_FF_OUT, TFM__BLK_FF, 0, TFM__FF_LINEAR2, "linear2"},
};

void tfm_adapter_options_init_sized(tfm_adapter_options *o, uint32_t struct_size)
{
    tfm_adapter_options d = {.struct_size = sizeof d, .rank = 8, .alpha = 8.0f,
                             .targets = TFM_ADAPT_Q | TFM_ADAPT_V};
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* --- the linears and their names ---------------------------------------------------- */

/* One linear a target names in layer `layer` of a stack (0 encoder, 1
 * decoder): its weight and rows, and its module name, published (PEFT's
 * key stem) when the model is, else libtfm's. 0, 1 when the stack's
 * layer has no such linear (cross-attention in the encoder), -1 with the
 * error set. */
typedef struct linear_at {
    const tfm_tensor *weight;
    int64_t first, rows;
    char module[TFM_NAME_MAX];
} linear_at;

static int linear_of(const char *op, const tfm_model *m, int stack, int32_t layer,
                     const struct target *t, linear_at *out)
{
    if (stack == 0 && t->block_child == TFM__BLK_CROSS_ATTN)
        return 1;
    const tfm_layer *block = (stack ? m->decoder : m->encoder)->children[layer];
    const tfm_layer *sub = block->children[t->block_child];
    if (t->attention && sub->fused && t->index != TFM__ATT_OUT) {
        /* a fused in-projection [3I, D]: q, k and v are its row blocks */
        int64_t inner = sub->weight->shape[0] / 3;
        out->weight = sub->weight;
        out->first = (t->index - TFM__ATT_Q) * inner;
        out->rows = inner;
    } else {
        out->weight = sub->children[t->index]->weight;
        out->first = 0;
        out->rows = out->weight->shape[0];
    }
    char ours[TFM_NAME_MAX];
    snprintf(ours, sizeof ours, "%s.layers.%d.%s", stack ? "decoder" : "encoder", (int)layer,
             t->ours);
    if (!m->published) {
        snprintf(out->module, sizeof out->module, "%s", ours);
        return 0;
    }
    if (tfm__published_module(m, ours, out->module, sizeof out->module) < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: %s has no published name in the model's family",
                         op, ours), -1;
    return 0;
}

/* The module's name after its layer's number ("self_attn.q_proj",
 * "layer.0.SelfAttention.q" has "SelfAttention.q"): target_modules' form. */
static const char *after_layer(const char *module)
{
    const char *best = module;
    for (const char *p = module; *p; p++)
        if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            while (*q >= '0' && *q <= '9')
                q++;
            if (*q == '.')
                best = q + 1;
        }
    return best;
}

static int layer_chosen(const tfm__adapter *a, int32_t layer)
{
    if (!a->options.n_layers)
        return 1;
    for (int32_t i = 0; i < a->options.n_layers; i++)
        if (a->layers[i] == layer)
            return 1;
    return 0;
}

/* --- making one ----------------------------------------------------------------------- */

static void adapter_free(tfm__adapter *a)
{
    if (!a)
        return;
    tfm_params_free(a->params);
    free(a->set.entries);
    free(a->layers);
    free(a);
}

void tfm__model_free_adapters(tfm_model *m)
{
    for (int32_t i = 0; i < m->n_adapters; i++)
        adapter_free(m->adapters[i]);
    free(m->adapters);
    m->adapters = NULL;
    m->n_adapters = 0;
    m->in_use = NULL;
}

/* While an adapter is in use the base is frozen, as PEFT's: its
 * parameters want no gradient (the backward skips their products), and a
 * quantized weight never does. */
static void freeze_base(tfm_model *m, int frozen)
{
    for (int64_t i = 0; i < tfm_params_count(m->params); i++) {
        tfm_tensor *t = tfm_params_at(m->params, i);
        t->requires_grad = !frozen && !t->int8;
    }
}

static int index_of(const tfm_model *m, const char *name)
{
    for (int32_t i = 0; name && i < m->n_adapters; i++)
        if (strcmp(m->adapters[i]->name, name) == 0)
            return i;
    return -1;
}

static tfm__adapter *find(const char *op, const tfm_model *m, const char *name)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return NULL;
    }
    if (!name) {
        tfm__fail(TFM_ERR_NULL, "%s: name is NULL", op);
        return NULL;
    }
    int i = index_of(m, name);
    if (i < 0)
        tfm__fail(TFM_ERR_ARG, "%s: the model has no adapter named \"%s\"", op, name);
    return i < 0 ? NULL : m->adapters[i];
}

/* The larger stack's layer count: layers_to_transform's range. */
static int32_t most_layers(const tfm_model *m)
{
    return m->options.encoder_layers > m->options.decoder_layers ? m->options.encoder_layers
                                                                 : m->options.decoder_layers;
}

/* Checks the options against the model; 0 or -1 with TFM_ERR_ARG. */
static int check_options(const char *op, const tfm_model *m, const tfm_adapter_options *o)
{
    if (o->rank < 1 || o->rank > TFM__ADAPTER_MAX_RANK)
        return tfm__fail(TFM_ERR_ARG, "%s: rank %d is outside 1..%d", op, (int)o->rank,
                         TFM__ADAPTER_MAX_RANK), -1;
    if (!(o->alpha > 0.0f) || !isfinite(o->alpha))
        return tfm__fail(TFM_ERR_ARG, "%s: alpha %g is not a positive number", op,
                         (double)o->alpha), -1;
    if (!(o->dropout >= 0.0f && o->dropout < 1.0f))
        return tfm__fail(TFM_ERR_ARG, "%s: dropout %g is outside [0, 1)", op,
                         (double)o->dropout), -1;
    if (!o->targets || (o->targets & ~ALL_TARGETS))
        return tfm__fail(TFM_ERR_ARG, "%s: targets 0x%x are not a set of TFM_ADAPT_* flags", op,
                         (unsigned)o->targets), -1;
    if ((o->targets & ~(TFM_ADAPT_CROSS_Q | TFM_ADAPT_CROSS_K | TFM_ADAPT_CROSS_V |
                        TFM_ADAPT_CROSS_O)) == 0 &&
        m->options.decoder_layers == 0)
        return tfm__fail(TFM_ERR_ARG, "%s: targets name cross-attention only, and the model "
                         "has no decoder layers", op), -1;
    if (o->n_layers < 0 || (o->n_layers > 0 && !o->layers))
        return tfm__fail(o->n_layers < 0 ? TFM_ERR_ARG : TFM_ERR_NULL,
                         "%s: n_layers %d with layers %s", op, (int)o->n_layers,
                         o->layers ? "given" : "NULL"), -1;
    int32_t most = most_layers(m);
    for (int32_t i = 0; i < o->n_layers; i++)
        if (o->layers[i] < 0 || o->layers[i] >= most)
            return tfm__fail(TFM_ERR_ARG, "%s: layers[%d] = %d is not a layer of the model "
                             "(0..%d)", op, (int)i, (int)o->layers[i], (int)most - 1), -1;
    return 0;
}

static int check_name(const char *op, const tfm_model *m, const char *name)
{
    if (!m || !name)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, m ? "name" : "model"), -1;
    size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX_BYTES)
        return tfm__fail(TFM_ERR_ARG, "%s: an adapter's name takes 1 to %d bytes, not %zu", op,
                         NAME_MAX_BYTES, n), -1;
    if (index_of(m, name) >= 0)
        return tfm__fail(TFM_ERR_ARG, "%s: the model has an adapter named \"%s\" already", op,
                         name), -1;
    return 0;
}

/* A new adapter of the options (checked) with its parameters, A drawn as
 * PEFT's reset_lora_parameters (kaiming_uniform_(a=sqrt(5)): bound
 * 1/sqrt(in)) when init, else zeros; NULL with the error set. */
static tfm__adapter *adapter_make(const char *op, tfm_model *m, const char *name,
                                  const tfm_adapter_options *o, int rslora, int init)
{
    tfm__adapter *a = calloc(1, sizeof *a);
    int64_t most = 2 * (int64_t)TARGETS *
                   (m->options.encoder_layers + m->options.decoder_layers);
    if (!a || !(a->set.entries = calloc((size_t)(most > 0 ? most : 1), sizeof *a->set.entries)) ||
        (o->n_layers && !(a->layers = malloc((size_t)o->n_layers * sizeof *a->layers))) ||
        !(a->params = tfm_params_create())) {
        adapter_free(a);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the adapter", op);
        return NULL;
    }
    snprintf(a->name, sizeof a->name, "%s", name);
    a->options = *o;
    a->options.struct_size = sizeof a->options;
    if (o->n_layers)
        memcpy(a->layers, o->layers, (size_t)o->n_layers * sizeof *a->layers);
    a->options.layers = a->layers;
    a->rslora = rslora;
    int32_t r = o->rank;
    a->set.rank = r;
    a->set.scale = rslora ? o->alpha / sqrtf((float)r) : o->alpha / (float)r;
    a->set.dropout = o->dropout;
    a->set.rng = m->rng;
    const int32_t counts[2] = {m->options.encoder_layers, m->options.decoder_layers};
    for (int stack = 0; stack < 2; stack++)
        for (int32_t l = 0; l < counts[stack]; l++) {
            if (!layer_chosen(a, l))
                continue;
            for (int t = 0; t < TARGETS; t++) {
                if (!(o->targets & targets[t].bit))
                    continue;
                linear_at at;
                int got = linear_of(op, m, stack, l, &targets[t], &at);
                if (got < 0) {
                    adapter_free(a);
                    return NULL;
                }
                if (got > 0)
                    continue;
                char a_name[TFM_NAME_MAX + 64], b_name[TFM_NAME_MAX + 64];
                snprintf(a_name, sizeof a_name, "base_model.model.%s.lora_A.weight", at.module);
                snprintf(b_name, sizeof b_name, "base_model.model.%s.lora_B.weight", at.module);
                int64_t in = at.weight->shape[1];
                tfm__adapted *e = &a->set.entries[a->set.count];
                *e = (tfm__adapted){at.weight, at.first, at.rows, NULL, NULL};
                if (!(e->a = tfm_params_add(a->params, a_name, 2, (const int64_t[]){r, in})) ||
                    !(e->b = tfm_params_add(a->params, b_name, 2,
                                            (const int64_t[]){at.rows, r}))) {
                    tfm__fail_within(op, 0);
                    adapter_free(a);
                    return NULL;
                }
                a->set.count++;
            }
        }
    if (a->set.count == 0) {
        adapter_free(a);
        tfm__fail(TFM_ERR_ARG, "%s: the targets and layers name no linear of the model", op);
        return NULL;
    }
    for (int64_t i = 0; init && i < a->set.count; i++) {
        float bound = 1.0f / sqrtf((float)a->set.entries[i].a->shape[1]);
        tfm_init_uniform(a->set.entries[i].a, -bound, bound, m->rng);
    }
    return a;
}

/* Appends a made adapter to the model; frees it on failure. */
static tfm_status attach(const char *op, tfm_model *m, tfm__adapter *a)
{
    tfm__adapter **grown = realloc(m->adapters, (size_t)(m->n_adapters + 1) * sizeof *grown);
    if (!grown) {
        adapter_free(a);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the adapter", op);
    }
    m->adapters = grown;
    m->adapters[m->n_adapters++] = a;
    return TFM_OK;
}

tfm_status tfm_model_add_adapter(tfm_model *m, const char *name, const tfm_adapter_options *given)
{
    const char *op = "tfm_model_add_adapter";
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    if (check_name(op, m, name) < 0 ||
        (given && tfm__read_options(op, "tfm_adapter_options_init", given, &o, sizeof o,
                                    offsetof(tfm_adapter_options, rank)) < 0) ||
        check_options(op, m, &o) < 0)
        return tfm_last_status();
    tfm__adapter *a = adapter_make(op, m, name, &o, 0, 1);
    return a ? attach(op, m, a) : tfm_last_status();
}

tfm_status tfm_model_remove_adapter(tfm_model *m, const char *name)
{
    tfm__adapter *a = find("tfm_model_remove_adapter", m, name);
    if (!a)
        return tfm_last_status();
    int i = index_of(m, name);
    memmove(m->adapters + i, m->adapters + i + 1,
            (size_t)(m->n_adapters - i - 1) * sizeof *m->adapters);
    m->n_adapters--;
    if (m->in_use == a) {
        m->in_use = NULL;
        freeze_base(m, 0);
    }
    adapter_free(a);
    return TFM_OK;
}

int32_t tfm_model_adapter_count(const tfm_model *m)
{
    if (!m)
        tfm__fail(TFM_ERR_NULL, "tfm_model_adapter_count: model is NULL");
    return m ? m->n_adapters : 0;
}

const char *tfm_model_adapter_name(const tfm_model *m, int32_t index)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "tfm_model_adapter_name: model is NULL");
        return NULL;
    }
    if (index < 0 || index >= m->n_adapters) {
        tfm__fail(TFM_ERR_RANGE, "tfm_model_adapter_name: index %d is outside 0..%d",
                  (int)index, (int)m->n_adapters - 1);
        return NULL;
    }
    return m->adapters[index]->name;
}

tfm_status tfm_model_adapter_options(const tfm_model *m, const char *name,
                                     tfm_adapter_options *options)
{
    const char *op = "tfm_model_adapter_options";
    tfm__adapter *a = find(op, m, name);
    if (!a)
        return tfm_last_status();
    if (!options)
        return tfm__fail(TFM_ERR_NULL, "%s: options is NULL", op);
    return tfm__write_options(op, "tfm_adapter_options_init", &a->options, options,
                              sizeof a->options, offsetof(tfm_adapter_options, rank)) < 0
               ? tfm_last_status()
               : TFM_OK;
}

tfm_status tfm_model_use_adapter(tfm_model *m, const char *name)
{
    const char *op = "tfm_model_use_adapter";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    tfm__adapter *a = name ? find(op, m, name) : NULL;
    if (name && !a)
        return tfm_last_status();
    m->in_use = a;
    freeze_base(m, a != NULL);
    if (!a && m->quantized)
        tfm_model_set_training(m, 0); /* a quantized model trains only an adapter */
    return TFM_OK;
}

const char *tfm_model_adapter_in_use(const tfm_model *m)
{
    if (!m)
        tfm__fail(TFM_ERR_NULL, "tfm_model_adapter_in_use: model is NULL");
    return m && m->in_use ? m->in_use->name : NULL;
}

tfm_params *tfm_model_adapter_params(tfm_model *m, const char *name)
{
    tfm__adapter *a = find("tfm_model_adapter_params", m, name);
    return a ? a->params : NULL;
}

const tfm__adapter_set *tfm__model_adapter(const char *op, const tfm_model *m, const char *name)
{
    tfm__adapter *a = find(op, m, name);
    return a ? &a->set : NULL;
}

const tfm__adapter_set *tfm__model_adapter_in_use(const tfm_model *m)
{
    if (!m->in_use)
        return NULL;
    /* dropout follows the model's training flag, as its layers' */
    m->in_use->set.training = m->generator->training;
    return &m->in_use->set;
}

tfm_params *tfm__model_adapter_params_in_use(const tfm_model *m)
{
    return m->in_use ? m->in_use->params : NULL;
}

/* --- merging ------------------------------------------------------------------------ */

tfm_status tfm_model_merge_adapter(tfm_model *m, const char *name)
{
    const char *op = "tfm_model_merge_adapter";
    tfm__adapter *a = find(op, m, name);
    if (!a)
        return tfm_last_status();
    if (tfm__model_refuse_quantized(op, m) != TFM_OK)
        return tfm_last_status();
    for (int64_t i = 0; i < a->set.count; i++) {
        const tfm__adapted *e = &a->set.entries[i];
        int64_t in = e->weight->shape[1], r = a->set.rank;
        tfm__sgemm(0, 0, e->rows, in, r, a->set.scale, tfm__f32(e->b), r, tfm__f32(e->a), in,
                   1.0f, tfm__f32(e->weight) + e->first * in, in);
    }
    return tfm_model_remove_adapter(m, name);
}

/* --- PEFT's files ------------------------------------------------------------------- */

/* adapter_config.json as it is written; failed once an append failed
 * (the error set, naming op). */
typedef struct text {
    const char *op;
    tfm__bytes b;
    int failed;
} text;

static void puts_(text *t, const char *s)
{
    t->failed = t->failed || tfm__bytes_append(t->op, &t->b, s, strlen(s)) < 0;
}

static void put_quoted(text *t, const char *s)
{
    size_t n = tfm__json_quote(NULL, s, strlen(s));
    t->failed = t->failed ||
                tfm__grow(t->op, (void **)&t->b.data, 1, t->b.size, &t->b.capacity, n) < 0;
    if (!t->failed)
        t->b.size += tfm__json_quote(t->b.data + t->b.size, s, strlen(s));
}

/* The shortest decimal that reads back as v (0.1, not 0.100000001), as
 * Python writes the float a user gave PEFT. */
static void put_float(text *t, float v)
{
    char number[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(number, sizeof number, "%.*g", digits, (double)v);
        if (strtof(number, NULL) == v)
            break;
    }
    puts_(t, number);
}

/* The distinct target_modules of the adapter (each linear's module after
 * its layer number), in the targets' order. */
static void put_target_modules(text *t, const tfm_model *m, const tfm__adapter *a)
{
    puts_(t, "[");
    int first = 1;
    char seen[TARGETS][TFM_NAME_MAX];
    int n_seen = 0;
    for (int i = 0; i < TARGETS; i++) {
        if (!(a->options.targets & targets[i].bit))
            continue;
        linear_at at;
        int stack = targets[i].block_child == TFM__BLK_CROSS_ATTN ? 1 : 0;
        if ((stack ? m->options.decoder_layers : m->options.encoder_layers) == 0)
            stack = 1 - stack;
        if (linear_of("tfm_model_save_adapter", m, stack, 0, &targets[i], &at) != 0)
            continue;
        const char *module = after_layer(at.module);
        int dup = 0;
        for (int k = 0; k < n_seen; k++)
            dup |= strcmp(seen[k], module) == 0;
        if (dup)
            continue;
        snprintf(seen[n_seen++], TFM_NAME_MAX, "%s", module);
        puts_(t, first ? "\n    " : ",\n    ");
        put_quoted(t, module);
        first = 0;
    }
    puts_(t, "\n  ]");
}

/* adapter_config.json as PEFT's LoraConfig.save_pretrained writes it
 * (sorted keys, two-space indent). */
static tfm_status write_config(const char *op, const tfm_model *m, const tfm__adapter *a,
                               const char *path, const char *base)
{
    text t = {.op = op};
    char number[64];
    puts_(&t, "{\n  \"alpha_pattern\": {},\n  \"auto_mapping\": null,\n"
              "  \"base_model_name_or_path\": ");
    if (base)
        put_quoted(&t, base);
    else
        puts_(&t, "null");
    puts_(&t, ",\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n"
              "  \"inference_mode\": true,\n  \"init_lora_weights\": true,\n"
              "  \"layer_replication\": null,\n");
    /* layers_pattern null: PEFT takes a module's first ".name.N." as its
     * layer (layers.N, T5's block.N) */
    puts_(&t, "  \"layers_pattern\": null");
    puts_(&t, ",\n  \"layers_to_transform\": ");
    if (a->options.n_layers) {
        puts_(&t, "[");
        for (int32_t i = 0; i < a->options.n_layers; i++) {
            snprintf(number, sizeof number, "%s%d", i ? ", " : "", (int)a->layers[i]);
            puts_(&t, number);
        }
        puts_(&t, "]");
    } else {
        puts_(&t, "null");
    }
    puts_(&t, ",\n  \"loftq_config\": {},\n  \"lora_alpha\": ");
    put_float(&t, a->options.alpha);
    puts_(&t, ",\n  \"lora_dropout\": ");
    put_float(&t, a->options.dropout);
    puts_(&t, ",\n  \"megatron_config\": null,\n  \"megatron_core\": \"megatron.core\",\n"
              "  \"modules_to_save\": null,\n  \"peft_type\": \"LORA\",\n  \"r\": ");
    snprintf(number, sizeof number, "%d", (int)a->options.rank);
    puts_(&t, number);
    puts_(&t, ",\n  \"rank_pattern\": {},\n  \"revision\": null,\n  \"target_modules\": ");
    put_target_modules(&t, m, a);
    puts_(&t, ",\n  \"task_type\": \"SEQ_2_SEQ_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": ");
    puts_(&t, a->rslora ? "true" : "false");
    puts_(&t, "\n}\n");
    tfm_status st = t.failed ? tfm_last_status()
                             : tfm__save_bytes_atomically(op, path, t.b.data, t.b.size);
    free(t.b.data);
    return st;
}

tfm_status tfm_model_save_adapter(const tfm_model *m, const char *name, const char *folder,
                                  const char *base_model_name_or_path)
{
    const char *op = "tfm_model_save_adapter";
    tfm__adapter *a = find(op, m, name);
    if (!a)
        return tfm_last_status();
    if (!folder)
        return tfm__fail(TFM_ERR_NULL, "%s: folder is NULL", op);
    char config[4096], weights[4096];
    if (tfm__in_folder(op, folder, CONFIG_FILE, config, sizeof config) < 0 ||
        tfm__in_folder(op, folder, WEIGHTS_FILE, weights, sizeof weights) < 0)
        return tfm_last_status();
    struct stat st;
    if (mkdir(folder, 0777) != 0 && !(errno == EEXIST && stat(folder, &st) == 0 &&
                                      S_ISDIR(st.st_mode)))
        return tfm__fail(TFM_ERR_IO, "%s: cannot make folder \"%s\": %s", op, folder,
                         errno == EEXIST ? "something else is there" : strerror(errno));
    int64_t n = tfm_params_count(a->params);
    const char **names = malloc((size_t)n * sizeof *names);
    const tfm_tensor **tensors = malloc((size_t)n * sizeof *tensors);
    tfm_status status;
    if (!names || !tensors) {
        status = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    } else {
        for (int64_t i = 0; i < n; i++) {
            names[i] = tfm_params_name(a->params, i);
            tensors[i] = tfm_params_at(a->params, i);
        }
        static const char *const keys[] = {"format"}, *const values[] = {"pt"};
        /* the old config goes first and the new one comes last: a save that
         * fails between leaves no config beside other weights (which would
         * load with the wrong rank or scale), and no reader takes the folder */
        status = unlink(config) == 0 || errno == ENOENT
                     ? TFM_OK
                     : tfm__fail(TFM_ERR_IO, "%s: cannot remove the earlier %s: %s", op, config,
                                 strerror(errno));
        if (status == TFM_OK)
            status = tfm__safetensors_write(op, weights, n, names, tensors, 1, keys, values);
        if (status == TFM_OK)
            status = write_config(op, m, a, config, base_model_name_or_path);
    }
    free(names);
    free(tensors);
    return status;
}

/* The targets a target_modules entry selects (PEFT: the module's name is
 * it, or ends in "." it), 0 when none. */
static tfm_adapter_targets targets_named(const tfm_model *m, const char *wanted)
{
    tfm_adapter_targets found = 0;
    size_t n = strlen(wanted);
    for (int i = 0; i < TARGETS; i++) {
        for (int stack = 0; stack < 2; stack++) {
            linear_at at;
            if ((stack ? m->options.decoder_layers : m->options.encoder_layers) == 0 ||
                linear_of("tfm_model_load_adapter", m, stack, 0, &targets[i], &at) != 0)
                continue;
            size_t len = strlen(at.module);
            if (strcmp(at.module, wanted) == 0 ||
                (len > n && at.module[len - n - 1] == '.' && strcmp(at.module + len - n, wanted) == 0))
                found |= targets[i].bit;
        }
    }
    tfm_clear_error();
    return found;
}

/* A member that must be absent, null, false, {} or [] (or equal to
 * allowed when it is a string); 0 or -1 with TFM_ERR_FORMAT. */
static int refuse_set(const tfm__json_doc *d, const char *key, const char *allowed)
{
    const tfm__json_node *v = tfm__doc_member(d, key);
    if (!v || v->type == TFM__JSON_NULL || v->type == TFM__JSON_FALSE ||
        ((v->type == TFM__JSON_OBJECT || v->type == TFM__JSON_ARRAY) && v->count == 0) ||
        (allowed && v->type == TFM__JSON_STRING &&
         strcmp(tfm__json_string(d->json, v), allowed) == 0))
        return 0;
    return tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s is set, which libtfm cannot apply as PEFT "
                     "would", d->ctx, d->name, key), -1;
}

/* The options an adapter_config.json describes for the model. */
static int read_config(const tfm__json_doc *d, const tfm_model *m, tfm_adapter_options *o,
                       int32_t *rslora, int32_t *layers, int32_t max_layers)
{
    const char *type = tfm__doc_string(d, "peft_type");
    if (!type || strcmp(type, "LORA") != 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: %s's peft_type is %s, not LORA", d->ctx, d->name,
                         type ? type : "missing"), -1;
    int64_t r;
    float alpha, dropout;
    if (!tfm__doc_member(d, "r"))
        return tfm__fail(TFM_ERR_FORMAT, "%s: %s has no r", d->ctx, d->name), -1;
    if (tfm__doc_int(d, "r", 8, 1, TFM__ADAPTER_MAX_RANK, &r) < 0 ||
        tfm__doc_float(d, "lora_alpha", 8.0f, 1e-30, 1e30, &alpha) < 0 ||
        tfm__doc_float(d, "lora_dropout", 0.0f, 0.0, 0.999999, &dropout) < 0 ||
        tfm__doc_bool(d, "use_rslora", 0, rslora) < 0 || refuse_set(d, "bias", "none") < 0 ||
        refuse_set(d, "fan_in_fan_out", NULL) < 0 || refuse_set(d, "use_dora", NULL) < 0 ||
        refuse_set(d, "rank_pattern", NULL) < 0 || refuse_set(d, "alpha_pattern", NULL) < 0 ||
        refuse_set(d, "modules_to_save", NULL) < 0 ||
        refuse_set(d, "layer_replication", NULL) < 0 || refuse_set(d, "lora_bias", NULL) < 0 ||
        refuse_set(d, "exclude_modules", NULL) < 0 ||
        refuse_set(d, "target_parameters", NULL) < 0 ||
        refuse_set(d, "trainable_token_indices", NULL) < 0 ||
        refuse_set(d, "use_qalora", NULL) < 0)
        return -1;
    o->rank = (int32_t)r;
    o->alpha = alpha;
    o->dropout = dropout;
    o->targets = 0;
    const tfm__json_node *modules = tfm__doc_member(d, "target_modules");
    if (modules && modules->type == TFM__JSON_STRING)
        return tfm__fail(TFM_ERR_FORMAT, "%s: %s's target_modules is the string \"%s\", which "
                         "PEFT takes for a regular expression over whole module paths (or "
                         "\"all-linear\") and libtfm does not apply: list the module names",
                         d->ctx, d->name, tfm__json_string(d->json, modules)), -1;
    if (!modules || modules->type != TFM__JSON_ARRAY || modules->count == 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: %s's target_modules is not a list of module "
                         "names", d->ctx, d->name), -1;
    const tfm__json_node *v = modules + 1;
    for (int64_t i = 0; i < modules->count; i++, v = d->json->nodes + v->next) {
        if (v->type != TFM__JSON_STRING)
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s's target_modules[%lld] is not a string",
                             d->ctx, d->name, (long long)i), -1;
        const char *wanted = tfm__json_string(d->json, v);
        tfm_adapter_targets t = targets_named(m, wanted);
        if (!t)
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s's target module \"%s\" is no attention "
                             "projection or feed-forward linear of the model", d->ctx, d->name,
                             wanted), -1;
        o->targets |= t;
    }
    const tfm__json_node *chosen = tfm__doc_member(d, "layers_to_transform");
    o->n_layers = 0;
    if (chosen && chosen->type == TFM__JSON_NUMBER) {
        chosen = NULL;
        int64_t one;
        if (tfm__doc_int(d, "layers_to_transform", 0, 0, max_layers - 1, &one) < 0)
            return -1;
        layers[o->n_layers++] = (int32_t)one;
    } else if (chosen && chosen->type == TFM__JSON_ARRAY) {
        if (chosen->count > max_layers)
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s's layers_to_transform names more layers "
                             "than the model has", d->ctx, d->name), -1;
        if (tfm__doc_ids(d, "layers_to_transform", chosen, max_layers - 1, layers) < 0)
            return -1;
        o->n_layers = (int32_t)chosen->count;
    } else if (chosen && chosen->type != TFM__JSON_NULL) {
        return tfm__fail(TFM_ERR_FORMAT, "%s: %s's layers_to_transform is not a list of layers",
                         d->ctx, d->name), -1;
    }
    o->layers = o->n_layers ? layers : NULL;
    return 0;
}

/* The adapter's tensors from the file: each of its parameters by name and
 * shape, finite, and nothing else in the file. */
static int read_weights(const char *ctx, tfm__adapter *a, const tfm_safetensors *file)
{
    int64_t n = tfm_params_count(a->params), in_file = tfm_safetensors_count(file);
    for (int64_t i = 0; i < n; i++) {
        const char *name = tfm_params_name(a->params, i);
        tfm_tensor *p = tfm_params_at(a->params, i);
        int64_t at = tfm__safetensors_find(file, name);
        if (at < 0)
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s has no tensor %s", ctx, WEIGHTS_FILE,
                             name), -1;
        tfm__tensor_info info;
        tfm__safetensors_info(file, at, &info);
        int64_t where;
        if (!info.is_float || info.ndim != 2 || info.shape[0] != p->shape[0] ||
            info.shape[1] != p->shape[1])
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s is %s [%lld, %lld]%s, not float [%lld, "
                             "%lld]", ctx, WEIGHTS_FILE, name, info.dtype_name,
                             (long long)info.shape[0],
                             (long long)(info.ndim > 1 ? info.shape[1] : 0),
                             info.ndim != 2 ? " (not 2-D)" : "", (long long)p->shape[0],
                             (long long)p->shape[1]), -1;
        if (!tfm__safetensors_all_finite(file, at, &where))
            return tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s holds a NaN or infinity at %lld", ctx,
                             WEIGHTS_FILE, name, (long long)where), -1;
        tfm__safetensors_read_f32(file, at, tfm__f32(p));
    }
    if (in_file != n)
        for (int64_t i = 0; i < in_file; i++) {
            const char *name = tfm_safetensors_name(file, i);
            if (tfm__params_index_of(a->params, name) < 0)
                return tfm__fail(TFM_ERR_FORMAT, "%s: %s's tensor %s is no weight of the "
                                 "adapter its config describes for this model", ctx,
                                 WEIGHTS_FILE, name), -1;
        }
    return 0;
}

tfm_status tfm_model_load_adapter(tfm_model *m, const char *name, const char *folder)
{
    const char *op = "tfm_model_load_adapter";
    if (check_name(op, m, name) < 0)
        return tfm_last_status();
    if (!folder)
        return tfm__fail(TFM_ERR_NULL, "%s: folder is NULL", op);
    char config[4096], weights[4096], ctx[4200];
    if (tfm__in_folder(op, folder, CONFIG_FILE, config, sizeof config) < 0 ||
        tfm__in_folder(op, folder, WEIGHTS_FILE, weights, sizeof weights) < 0)
        return tfm_last_status();
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, folder);
    char *bytes = NULL;
    size_t size = 0;
    tfm__json json = {0};
    int32_t most = most_layers(m);
    int32_t *layers = malloc((size_t)(most > 0 ? most : 1) * sizeof *layers);
    tfm_safetensors *file = NULL;
    tfm__adapter *a = NULL;
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    int32_t rslora = 0;
    char context[4300];
    snprintf(context, sizeof context, "%s: %s", ctx, CONFIG_FILE);
    tfm__json_doc doc = {ctx, &json, CONFIG_FILE};
    int ok = layers != NULL;
    if (!ok)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    ok = ok && tfm__read_whole_file(op, config, CONFIG_MAX_BYTES, &bytes, &size) == TFM_OK &&
         tfm__json_parse(context, bytes, size, (int64_t)(size / 2 + 1), &json) == TFM_OK;
    if (ok && json.nodes[0].type != TFM__JSON_OBJECT) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s is not a JSON object", ctx, CONFIG_FILE);
        ok = 0;
    }
    ok = ok && read_config(&doc, m, &o, &rslora, layers, most) == 0;
    if (ok && check_options(op, m, &o) < 0) {
        tfm__fail_because(TFM_ERR_FORMAT, "%s: %s describes no adapter of this model", ctx,
                          CONFIG_FILE);
        ok = 0;
    }
    ok = ok && (a = adapter_make(op, m, name, &o, rslora, 0)) != NULL;
    if (ok && !(file = tfm__safetensors_open(op, weights)))
        ok = 0;
    ok = ok && read_weights(ctx, a, file) == 0;
    tfm_safetensors_close(file);
    if (json.nodes)
        tfm__json_free(&json);
    free(bytes);
    free(layers);
    if (!ok) {
        adapter_free(a);
        return tfm_last_status();
    }
    a->options.layers = a->layers;
    return attach(op, m, a);
}
