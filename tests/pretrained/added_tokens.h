/* Made by tests/pretrained/make_added_tokens.py (which says how): the
 * input_ids transformers' tokenizer of each fixture folder gives texts that
 * spell its special and added tokens, the family's ids around them. */
static const struct added_case {
    const char *folder, *text;
    int32_t count, ids[32];
} added_cases[] = {
    {"t5", "Translate <extra_id_0> this </s> now", 15, {3, 46, 12, 50, 4, 118, 51, 399, 3, 137, 67, 1, 75, 76, 1}},
    {"t5", "a<extra_id_1>b", 4, {56, 398, 122, 1}},
    {"t5", "<extra_id_10>x<extra_id_1>", 5, {389, 3, 85, 398, 1}},
    {"t5", "hello <pad><unk> world", 11, {3, 35, 121, 117, 0, 2, 91, 41, 17, 14, 1}},
    {"t5", "  <extra_id_0>  ", 2, {399, 1}},
    {"t5", "<extra_id_100> <extra_id_99>", 15, {3, 253, 5, 85, 173, 163, 9, 14, 163, 59, 93, 93, 237, 300, 1}},
    {"marian", "Translate </s> this <unk> now", 17, {2, 73, 17, 47, 3, 9, 7, 48, 0, 2, 57, 10, 3, 1, 103, 46, 0}},
    {"marian", "a</s>b", 5, {38, 0, 2, 33, 0}},
    {"marian", "<pad>", 2, {306, 0}},
    {"marian", "file<unk>s </s></s>", 7, {44, 1, 2, 3, 0, 0, 0}},
    {"bart", "Hello <mask> world", 10, {0, 76, 393, 397, 510, 349, 271, 112, 104, 2}},
    {"bart", " <mask> x", 5, {0, 510, 36, 124, 2}},
    {"bart", "a<mask>b", 5, {0, 101, 510, 102, 2}},
    {"bart", "Hello </s>world <s> x", 15, {0, 76, 393, 397, 36, 2, 123, 271, 112, 104, 36, 0, 36, 124, 2}},
    {"bart", "<pad><unk>", 4, {0, 1, 3, 2}},
    {"bart", "no  <mask>  spaces", 10, {0, 470, 510, 36, 269, 116, 101, 103, 288, 2}},
    {"mbart", "en_XX hello", 7, {304, 304, 161, 86, 170, 145, 2}},
    {"mbart", "a <mask> b", 5, {304, 15, 353, 44, 2}},
    {"mbart", "hello fr_XX</s>", 8, {304, 161, 86, 170, 145, 308, 2, 2}},
    {"mbart", " <mask>", 3, {304, 353, 2}},
    {"mbart", "the en_XXfile", 6, {304, 160, 304, 25, 95, 2}},
    {"m2m100", "__en__ hello", 7, {319, 319, 161, 86, 170, 145, 2}},
    {"m2m100", "hello __fr__ x</s>", 10, {319, 161, 86, 170, 145, 325, 161, 197, 2, 2}},
    {"m2m100", "<s>a", 4, {319, 0, 15, 2}},
    {"m2m100", "__en__", 3, {319, 319, 2}},
    {"m2m100/nllb", "eng_Latn hello", 7, {347, 347, 161, 86, 170, 145, 2}},
    {"m2m100/nllb", "x <mask> y", 7, {347, 161, 197, 503, 161, 188, 2}},
    {"m2m100/nllb", "fra_Latn</s>", 4, {347, 357, 2, 2}},
    {"m2m100/nllb", "file <unk>", 5, {347, 25, 95, 3, 2}},
};
