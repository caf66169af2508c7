/* chrF and BLEU against the reference scores of fixtures/score_reference.py
 * (sacrebleu's definitions, checked there against sacrebleu itself): real
 * catalog pairs with perturbed hypotheses, corpus and sentence level, and
 * edge cases. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "fixtures/score_cases.h"
#include "tfm/tfm.h"

static const double TOLERANCE = 1e-4;

typedef tfm_status (*scorer)(const char *const *, const char *const *, int64_t, double *);

static double score_of(scorer score, const char *const *hypotheses,
                       const char *const *references, int64_t count)
{
    double value = -1;
    ck_assert_int_eq(score(hypotheses, references, count, &value), TFM_OK);
    return value;
}

START_TEST(corpora_match_the_reference)
{
    for (size_t i = 0; i < sizeof score_corpora / sizeof *score_corpora; i++) {
        const struct score_corpus *c = &score_corpora[i];
        double chrf = score_of(tfm_score_chrf, c->hypotheses, score_references, SCORE_PAIRS);
        double bleu = score_of(tfm_score_bleu, c->hypotheses, score_references, SCORE_PAIRS);
        ck_assert_msg(fabs(chrf - c->chrf) < TOLERANCE, "%s: chrF %.6f, reference %.6f",
                      c->name, chrf, c->chrf);
        ck_assert_msg(fabs(bleu - c->bleu) < TOLERANCE, "%s: BLEU %.6f, reference %.6f",
                      c->name, bleu, c->bleu);
    }
}
END_TEST

START_TEST(sentences_match_the_reference)
{
    for (size_t i = 0; i < sizeof score_corpora / sizeof *score_corpora; i++) {
        const struct score_corpus *c = &score_corpora[i];
        for (int j = 0; j < SCORE_PAIRS; j++) {
            double chrf = score_of(tfm_score_chrf, c->hypotheses + j, score_references + j, 1);
            double bleu = score_of(tfm_score_bleu, c->hypotheses + j, score_references + j, 1);
            ck_assert_msg(fabs(chrf - c->sentence_chrf[j]) < TOLERANCE,
                          "%s, pair %d (\"%s\" / \"%s\"): chrF %.6f, reference %.6f", c->name,
                          j, c->hypotheses[j], score_references[j], chrf, c->sentence_chrf[j]);
            ck_assert_msg(fabs(bleu - c->sentence_bleu[j]) < TOLERANCE,
                          "%s, pair %d (\"%s\" / \"%s\"): BLEU %.6f, reference %.6f", c->name,
                          j, c->hypotheses[j], score_references[j], bleu, c->sentence_bleu[j]);
        }
    }
}
END_TEST

enum { EDGE_CASES = sizeof score_edge_cases / sizeof *score_edge_cases };

START_TEST(edge_cases_match_the_reference)
{
    const char *hypotheses[EDGE_CASES], *references[EDGE_CASES];
    for (int i = 0; i < EDGE_CASES; i++) {
        const struct score_edge_case *e = &score_edge_cases[i];
        hypotheses[i] = e->hypothesis;
        references[i] = e->reference;
        double chrf = score_of(tfm_score_chrf, &e->hypothesis, &e->reference, 1);
        double bleu = score_of(tfm_score_bleu, &e->hypothesis, &e->reference, 1);
        ck_assert_msg(fabs(chrf - e->chrf) < TOLERANCE, "%s: chrF %.6f, reference %.6f",
                      e->name, chrf, e->chrf);
        ck_assert_msg(fabs(bleu - e->bleu) < TOLERANCE, "%s: BLEU %.6f, reference %.6f",
                      e->name, bleu, e->bleu);
    }
    double chrf = score_of(tfm_score_chrf, hypotheses, references, EDGE_CASES);
    double bleu = score_of(tfm_score_bleu, hypotheses, references, EDGE_CASES);
    ck_assert_double_eq_tol(chrf, score_edge_corpus_chrf, TOLERANCE);
    ck_assert_double_eq_tol(bleu, score_edge_corpus_bleu, TOLERANCE);
}
END_TEST

/* The references of the "reference" corpus are its hypotheses: 100 each. */
START_TEST(identical_text_scores_100_and_nothing_scores_0)
{
    ck_assert_double_eq_tol(score_of(tfm_score_chrf, score_references, score_references,
                                     SCORE_PAIRS), 100, 1e-9);
    ck_assert_double_eq_tol(score_of(tfm_score_bleu, score_references, score_references,
                                     SCORE_PAIRS), 100, 1e-9);
    /* an empty corpus, as sacrebleu's */
    ck_assert_double_eq(score_of(tfm_score_chrf, score_references, score_references, 0), 0);
    ck_assert_double_eq(score_of(tfm_score_bleu, score_references, score_references, 0), 0);
}
END_TEST

/* A refused call sets its status and a message holding text, and leaves
 * the result as it was. */
static void check_refused(scorer score, const char *const *hypotheses,
                          const char *const *references, int64_t count, tfm_status status,
                          const char *text)
{
    double value = 42;
    ck_assert_int_eq(score(hypotheses, references, count, &value), status);
    ck_assert_int_eq(tfm_last_status(), status);
    ck_assert_msg(strstr(tfm_last_error(), text) != NULL, "\"%s\" not in \"%s\"", text,
                  tfm_last_error());
    ck_assert_double_eq(value, 42);
    tfm_clear_error();
}

START_TEST(bad_arguments_are_refused)
{
    static const scorer scorers[] = {tfm_score_chrf, tfm_score_bleu};
    static const char *const names[] = {"tfm_score_chrf", "tfm_score_bleu"};
    const char *good[2] = {"un", "deux"};
    const char *with_null[2] = {"un", NULL};
    /* cut short, overlong, a surrogate, past U+10FFFF, a lone continuation byte */
    const char *not_utf8[] = {"caf\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "a\x80"};
    for (int s = 0; s < 2; s++) {
        check_refused(scorers[s], NULL, good, 2, TFM_ERR_NULL, "hypotheses is NULL");
        check_refused(scorers[s], good, NULL, 2, TFM_ERR_NULL, "references is NULL");
        ck_assert_int_eq(scorers[s](good, good, 2, NULL), TFM_ERR_NULL);
        ck_assert_str_eq(tfm_last_error(), names[s] == names[0]
                                               ? "tfm_score_chrf: score is NULL"
                                               : "tfm_score_bleu: score is NULL");
        tfm_clear_error();
        check_refused(scorers[s], good, good, -1, TFM_ERR_ARG, "count -1 is negative");
        check_refused(scorers[s], good, with_null, 2, TFM_ERR_NULL, "references[1] is NULL");
        check_refused(scorers[s], with_null, good, 2, TFM_ERR_NULL, "hypotheses[1] is NULL");
        for (size_t i = 0; i < sizeof not_utf8 / sizeof *not_utf8; i++) {
            const char *bad[2] = {"un", not_utf8[i]};
            check_refused(scorers[s], good, bad, 2, TFM_ERR_ARG, "references[1] is not UTF-8");
            check_refused(scorers[s], bad, good, 2, TFM_ERR_ARG, "hypotheses[1] is not UTF-8");
        }
    }
}
END_TEST

static Suite *score_suite(void)
{
    Suite *suite = suite_create("score");
    TCase *reference = tcase_create("reference");
    tcase_add_test(reference, corpora_match_the_reference);
    tcase_add_test(reference, sentences_match_the_reference);
    tcase_add_test(reference, edge_cases_match_the_reference);
    tcase_add_test(reference, identical_text_scores_100_and_nothing_scores_0);
    suite_add_tcase(suite, reference);
    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, bad_arguments_are_refused);
    suite_add_tcase(suite, errors);
    return suite;
}

TFM_CHECK_MAIN(score_suite)
