/* tfm-sampling (tutorial 000, "Temperature"): decoding strategies side by
 * side on a model trained by tfm-average. One source (a row of the
 * tutorials' data or ten numbers of your own) is decoded greedily, by
 * sampling at several temperatures, with top-k and with nucleus (top-p)
 * filtering. Each line shows the tokens decoded and the number they read
 * as; then, for the first few steps, the five most likely tokens of the
 * distribution each strategy drew from. The sampling strategies share one
 * seed, so they see the same random numbers and differ only by how each
 * reshapes the model's distribution. */
#include <math.h>

#include "average_data.h"
#include "cli.h"

enum { SHOWN = 5, MAX_STEPS = AVG_TGT_LEN - 1 };

typedef struct strategy {
    const char *name;
    tfm_decode_strategy kind;
    double temperature, top_p;
    int64_t top_k;
} strategy;

/* Ten comma-separated numbers in [0, 1]; 0 or -1. */
static int parse_numbers(const char *text, double x[AVG_FEATURES])
{
    for (int i = 0; i < AVG_FEATURES; i++) {
        char *end;
        x[i] = strtod(text, &end);
        if (end == text || !(x[i] >= 0.0 && x[i] <= 1.0) ||
            *end != (i + 1 < AVG_FEATURES ? ',' : '\0'))
            return -1;
        text = end + 1;
    }
    return 0;
}

static void print_tokens(const int32_t *tokens, int32_t length)
{
    char text[AVG_TGT_LEN + 1];
    double value = 0.0;
    avg_tokens_to_text(tokens, length, text);
    int well_formed = avg_decode(tokens + 1, length - 1, &value);
    printf("%-12s %.8f%s\n", text, value, well_formed == 1 ? "" : "  (malformed)");
}

/* The SHOWN most likely tokens of one step's distribution. */
static void print_top(const float *p)
{
    int used[AVG_VOCAB] = {0};
    for (int k = 0; k < SHOWN; k++) {
        int best = -1;
        for (int v = 0; v < AVG_VOCAB; v++)
            if (!used[v] && (best < 0 || p[v] > p[best]))
                best = v;
        used[best] = 1;
        printf("  '%c' %.3f", avg_vocab[best], (double)p[best]);
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *program = cli_name(argv[0]);
    const char *checkpoint = NULL, *numbers = NULL;
    int64_t row = AVG_TRAIN, top_k = 3, steps = 3, seed = 0;
    double top_p = 0.9;
    const cli_flag flags[] = {
        {"checkpoint", CLI_STRING, &checkpoint, 0, 0, "a model saved by tfm-average --save"},
        {"row", CLI_INT, &row, 0, AVG_SAMPLES - 1,
         "the source: this row of the tutorials' data (4000 on are the test rows)"},
        {"numbers", CLI_STRING, &numbers, 0, 0,
         "the source: ten comma-separated numbers in [0, 1] instead of a row"},
        {"top-k", CLI_INT, &top_k, 1, AVG_VOCAB, "top-k sampling keeps this many tokens"},
        {"top-p", CLI_FLOAT, &top_p, 1e-6, 1, "nucleus sampling keeps this much probability"},
        {"steps", CLI_INT, &steps, 0, MAX_STEPS, "steps whose distributions are shown"},
        {"seed", CLI_INT, &seed, 0, 1e15, "sampling seed"},
    };
    int exit_now = cli_parse(argc, argv,
                             "Tutorial 000: greedy, temperature, top-k and nucleus decoding of "
                             "the digit-average model (the checkpoint describes it).",
                             flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    if (!checkpoint) {
        fprintf(stderr, "%s: needs a trained model: --checkpoint FILE.\nMake one with\n"
                "  tfm-average --save average.safetensors\n(the tutorial's 25 epochs; "
                "--epochs 3 gives a rough model sooner), then\n  %s --checkpoint "
                "average.safetensors\n", program, program);
        return CLI_USAGE_ERROR;
    }

    double x[AVG_FEATURES], truth = 0.0;
    int32_t src_ids[AVG_SRC_LEN];
    avg_data *data = numbers ? NULL : avg_data_create(123);
    if (numbers && parse_numbers(numbers, x) < 0) {
        fprintf(stderr, "%s: --numbers takes ten numbers in [0, 1] separated by commas, "
                "not '%s'\n", program, numbers);
        return cli_usage_error(program);
    }
    if (!numbers && !data) {
        fprintf(stderr, "%s: out of memory\n", program);
        return EXIT_FAILURE;
    }
    if (data) {
        memcpy(x, data->x[row], sizeof x);
        memcpy(src_ids, data->src[row], sizeof src_ids);
        truth = data->y[row];
        free(data);
    } else {
        avg_tokenize_source(x, src_ids);
        truth = avg_numpy_mean(x, AVG_FEATURES);
    }

    tfm_model *model = tfm_model_load(checkpoint);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, AVG_SRC_LEN}, src_ids);
    if (!model || !src) {
        tfm_model_free(model);
        tfm_tensor_free(src);
        return cli_fail(program, checkpoint);
    }
    if (tfm_model_src_vocab(model) != AVG_VOCAB || tfm_model_tgt_vocab(model) != AVG_VOCAB) {
        fprintf(stderr, "%s: %s is not a digit-average model (vocabularies %lld and %lld, not "
                "%d)\n", program, checkpoint, (long long)tfm_model_src_vocab(model),
                (long long)tfm_model_tgt_vocab(model), AVG_VOCAB);
        tfm_model_free(model);
        tfm_tensor_free(src);
        return EXIT_FAILURE;
    }

    printf("source:");
    for (int i = 0; i < AVG_FEATURES; i++)
        printf(" %.8f", x[i]);
    printf("\naverage: %.8f\n\n", truth);

    char top_k_name[32], top_p_name[32];
    snprintf(top_k_name, sizeof top_k_name, "top-k %lld", (long long)top_k);
    snprintf(top_p_name, sizeof top_p_name, "top-p %g", top_p);
    const strategy strategies[] = {
        {"greedy", TFM_DECODE_GREEDY, 1.0, 1.0, 0},
        {"temperature 0.5", TFM_DECODE_SAMPLE, 0.5, 1.0, 0},
        {"temperature 1", TFM_DECODE_SAMPLE, 1.0, 1.0, 0},
        {"temperature 2", TFM_DECODE_SAMPLE, 2.0, 1.0, 0},
        {top_k_name, TFM_DECODE_SAMPLE, 1.0, 1.0, top_k},
        {top_p_name, TFM_DECODE_SAMPLE, 1.0, top_p, 0},
    };
    enum { COUNT = sizeof strategies / sizeof strategies[0] };
    int32_t tokens[COUNT][AVG_TGT_LEN], lengths[COUNT];
    float probs[COUNT][MAX_STEPS * AVG_VOCAB];
    int status = EXIT_SUCCESS;
    for (int s = 0; s < COUNT && status == EXIT_SUCCESS; s++) {
        tfm_decode_options o;
        tfm_decode_options_init(&o);
        o.strategy = strategies[s].kind;
        o.max_length = MAX_STEPS;
        o.bos_id = AVG_START;
        o.eos_id = AVG_END;
        o.temperature = (float)strategies[s].temperature;
        o.top_k = (int32_t)strategies[s].top_k;
        o.top_p = (float)strategies[s].top_p;
        o.seed = (uint64_t)seed;
        tfm_decoding *d = tfm_decoding_create(model, &o, 1, AVG_SRC_LEN);
        if (!d || tfm_decoding_run(d, src, tokens[s], AVG_TGT_LEN, &lengths[s], 1, NULL, 0, NULL, 0,
                                   probs[s], MAX_STEPS * AVG_VOCAB) != TFM_OK)
            status = cli_fail(program, "decoding");
        tfm_decoding_free(d);
    }
    for (int s = 0; s < COUNT && status == EXIT_SUCCESS; s++) {
        printf("%-16s ", strategies[s].name);
        print_tokens(tokens[s], lengths[s]);
    }
    for (int64_t t = 0; t < steps && status == EXIT_SUCCESS; t++) {
        printf("\nstep %lld: the %d most likely tokens each strategy drew from\n",
               (long long)t + 1, SHOWN);
        for (int s = 0; s < COUNT; s++) {
            printf("  %-16s", strategies[s].name);
            if (t + 1 < lengths[s])
                print_top(probs[s] + t * AVG_VOCAB);
            else
                printf("  (ended)\n");
        }
    }
    tfm_tensor_free(src);
    tfm_model_free(model);
    return status;
}
