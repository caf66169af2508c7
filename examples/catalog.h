/* gettext catalogs in, gettext catalogs out, for tfm-translate --po: a
 * .pot or .po read with libgettextpo (contexts, plural forms, flags,
 * comments, obsolete entries, the header), its untranslated entries (or
 * all) translated in a few batched tfm_translate calls, and the catalog
 * written back whole, atomically, with each machine translation marked
 * fuzzy, plural entries filled per the target's Plural-Forms, and every
 * translation that would fail msgfmt's checks left out (and said so). */
#ifndef TFM_EXAMPLES_CATALOG_H
#define TFM_EXAMPLES_CATALOG_H

#include <stdint.h>

#include <tfm/tfm.h>

typedef struct catalog_job {
    const char *in, *out;
    /* the catalog's language (gettext's code: fr, pt_BR); NULL: derived
     * from the model's target_language, else the catalog's header */
    const char *language, *target_language;
    int all;       /* translate every entry, not only the untranslated ones */
    int overwrite; /* replace a file at out */
    const char *program;
} catalog_job;

/* Translates the catalog at job->in into job->out with the translator and
 * options, saying what it did on standard error; EXIT_SUCCESS, or
 * EXIT_FAILURE after a message (nothing written at out then). */
int catalog_translate(const catalog_job *job, tfm_translator *translator,
                      const tfm_translate_options *options);

#endif
