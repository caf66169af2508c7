/* docs/guide.md, part 7: translating with a published model's folder (or
 * a model file tfm-translate saved), text in, text out. */
#include <stdio.h>
#include <tfm/tfm.h>

int main(int argc, char **argv)
{
    const char *texts[] = {"The file could not be opened.", "Save changes before closing?"};
    tfm_translator *translator = tfm_translator_open(argc > 1 ? argv[1] : "opus-mt-en-fr", NULL);
    tfm_translation *result = NULL;
    if (!translator || tfm_translate(translator, texts, 2, NULL, &result) != TFM_OK) {
        fprintf(stderr, "%s\n", tfm_last_error());
        return 1;
    }
    for (int i = 0; i < 2; i++)
        printf("%s -> %s\n", texts[i], tfm_translation_text(result, i, 0));
    tfm_translation_free(result);
    tfm_translator_free(translator);
    return 0;
}
