/* tfm-fit-line: the smallest libtfm program. Fits y = 3x + 2 by gradient
 * descent through the tape, printing the loss as it falls. It needs
 * nothing but the installed library:
 *
 *   cc fit_line.c $(pkg-config --cflags --libs tfm) -o fit-line
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

#define POINTS 64
#define STEPS 400
#define LEARNING_RATE 0.1f

/* What failed, with libtfm's message; returns EXIT_FAILURE. */
static int fail(const char *program, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", program, what, tfm_last_error());
    return EXIT_FAILURE;
}

int main(int argc, char **argv)
{
    const char *slash = strrchr(argv[0], '/'), *program = slash ? slash + 1 : argv[0];
    /* No flags but the two every example program answers. */
    if (argc == 2 && !strcmp(argv[1], "--help")) {
        printf("usage: %s [flags]\nFits y = 3x + 2 by gradient descent through the tape.\n\n"
               "flags:\n  --help    print this and exit\n  --version print the program's "
               "and libtfm's versions and exit\n", program);
        return EXIT_SUCCESS;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("%s (libtfm %s)\n", program, tfm_version_string());
        return EXIT_SUCCESS;
    }
    if (argc > 1) {
        fprintf(stderr, "%s: unknown argument '%s'\nTry '%s --help' for more information.\n",
                program, argv[1], program);
        return 2;
    }
    float xs[POINTS], ys[POINTS];
    tfm_rng *rng = tfm_rng_create(2024);
    if (!rng)
        return fail(program, "rng");
    for (int i = 0; i < POINTS; i++) {
        xs[i] = 2.0f * tfm_rng_uniform(rng) - 1.0f;
        ys[i] = 3.0f * xs[i] + 2.0f + 0.01f * tfm_rng_normal(rng);
    }
    const int64_t points[1] = {POINTS}, one[1] = {1};
    tfm_tensor *x = tfm_tensor_from_f32(1, points, xs);
    tfm_tensor *y = tfm_tensor_from_f32(1, points, ys);
    tfm_tensor *w = tfm_tensor_zeros(TFM_F32, 1, one);
    tfm_tensor *b = tfm_tensor_zeros(TFM_F32, 1, one);
    tfm_tape *tape = tfm_tape_create();
    int status = EXIT_FAILURE;
    if (!x || !y || !w || !b || !tape || tfm_tensor_set_requires_grad(w, 1) != TFM_OK ||
        tfm_tensor_set_requires_grad(b, 1) != TFM_OK) {
        fail(program, "setup");
        goto done;
    }
    float loss_value = 0.0f;
    for (int step = 1; step <= STEPS; step++) {
        tfm_tensor *error = tfm_sub(tape, tfm_add(tape, tfm_mul(tape, x, w), b), y);
        tfm_tensor *loss = tfm_mean(tape, tfm_mul(tape, error, error));
        if (!loss || tfm_tape_backward(tape, loss) != TFM_OK) {
            fail(program, "step");
            goto done;
        }
        tfm_tensor_item(loss, &loss_value);
        tfm_tensor_data_f32(w)[0] -= LEARNING_RATE * tfm_tensor_grad_f32(w)[0];
        tfm_tensor_data_f32(b)[0] -= LEARNING_RATE * tfm_tensor_grad_f32(b)[0];
        tfm_tensor_zero_grad(w);
        tfm_tensor_zero_grad(b);
        tfm_tape_reset(tape);
        if (step == 1 || step % 50 == 0)
            printf("step %3d  loss %.6f\n", step, loss_value);
    }
    float fitted_w = tfm_tensor_data_f32(w)[0], fitted_b = tfm_tensor_data_f32(b)[0];
    printf("fitted y = %.4f x + %.4f (truth: y = 3x + 2)\n", fitted_w, fitted_b);
    status = (fitted_w > 2.99f && fitted_w < 3.01f && fitted_b > 1.99f && fitted_b < 2.01f)
                 ? EXIT_SUCCESS
                 : EXIT_FAILURE;
    if (status != EXIT_SUCCESS)
        fprintf(stderr, "%s: the fit did not converge\n", program);
done:
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(y);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
    tfm_rng_free(rng);
    return status;
}
