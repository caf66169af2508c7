/* A published model's decoding defaults: what the model owns of them. */
#include <stdlib.h>

#include "translate/generation.h"

void tfm__generation_free(tfm__generation *g)
{
    if (!g)
        return;
    free(g->bad_words);
    free(g->bad_word_lengths);
    free(g->eos_ids);
    free(g);
}
