/* Writes the fuzzers' seed corpus with the library itself: into
 * FOLDER/files/ small valid files of every kind libtfm reads (parameters,
 * optimizer states, a model with metadata and in int8, a training state, every dtype
 * by hand), into FOLDER/json/ their headers and a few JSON texts, and into
 * FOLDER/tokenizer/ a trained SentencePiece BPE model (with byte fallback),
 * a byte-level BPE tokenizer's bytes and the SentencePiece model numbered by
 * a vocabulary; model files carrying tokenizers, as they are and with their
 * "tfm.tokenizer" damaged, go in files/; into FOLDER/pretrained/
 * published Marian, BART and T5 folders (config.json, model.safetensors,
 * generation_config.json, tokenizer files), each checked to load, as
 * fuzz_pretrained reads them (records: file, length, bytes). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static char folder[512];

static const char *in(const char *kind, const char *name)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/%s/%s", folder, kind, name);
    return path;
}

static int check(tfm_status s, const char *what)
{
    if (s != TFM_OK)
        fprintf(stderr, "make_seeds: %s: %s\n", what, tfm_last_error());
    return s != TFM_OK;
}

static void write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(bytes, 1, n, f);
        fclose(f);
    }
}

/* The JSON header of a safetensors file, as a seed of its own. */
static void header_of(const char *name)
{
    FILE *f = fopen(in("files", name), "rb");
    unsigned char prefix[8];
    char header[65536];
    if (!f || fread(prefix, 1, 8, f) != 8) {
        if (f)
            fclose(f);
        return;
    }
    size_t len = 0;
    for (int i = 7; i >= 0; i--)
        len = len << 8 | prefix[i];
    if (len <= sizeof header && fread(header, 1, len, f) == len)
        write_bytes(in("json", name), header, len);
    fclose(f);
}

/* One tensor of every dtype the reader converts, built by hand. */
static void every_dtype(void)
{
    static const struct { const char *dtype; int size; } d[] = {
        {"F32", 4}, {"I32", 4}, {"F64", 8}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I16", 2},
        {"I8", 1},  {"U8", 1},  {"U16", 2}, {"U32", 4}, {"U64", 8},  {"BOOL", 1},
    };
    char header[2048];
    size_t len = 1, offset = 0;
    header[0] = '{';
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        len += (size_t)snprintf(header + len, sizeof header - len,
                                "%s\"t%zu\":{\"dtype\":\"%s\",\"shape\":[2],\"data_offsets\":"
                                "[%zu,%zu]}", i ? "," : "", i, d[i].dtype, offset,
                                offset + 2 * (size_t)d[i].size);
        offset += 2 * (size_t)d[i].size;
    }
    len += (size_t)snprintf(header + len, sizeof header - len,
                            ",\"__metadata__\":{\"format\":\"pt\"}}");
    unsigned char file[4096] = {0};
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(file + 8, header, len);
    for (size_t i = 0; i < offset; i++)
        file[8 + len + i] = (unsigned char)(i * 37 + 1);
    write_bytes(in("files", "dtypes.safetensors"), file, 8 + len + offset);
}

/* The bytes tfm_tokenizer_save_bytes gives for tok, as a seed; with part
 * (not NULL) one more part after them, as a renumbered tokenizer's control
 * tokens follow its vocabulary and model file. */
static int save_tokenizer(tfm_tokenizer *tok, const char *name, const char *part)
{
    int64_t size = 0;
    char bytes[65536];
    size_t extra = part ? 8 + strlen(part) : 0;
    if (!tok ||
        tfm_tokenizer_save_bytes(tok, bytes, (int64_t)(sizeof bytes - extra), &size) != TFM_OK) {
        fprintf(stderr, "make_seeds: %s: %s\n", name, tfm_last_error());
        tfm_tokenizer_free(tok);
        return 1;
    }
    for (size_t i = 0; part && i < 8; i++)
        bytes[size + (int64_t)i] = (char)((uint64_t)(extra - 8) >> (8 * i));
    if (part)
        memcpy(bytes + size + 8, part, extra - 8);
    write_bytes(in("tokenizer", name), bytes, (size_t)size + extra);
    tfm_tokenizer_free(tok);
    return 0;
}

static int tokenizer_seeds(void)
{
    const char *lines[] = {"Fichier introuvable", "Datei nicht gefunden", "fichier: 42 octets",
                           "\xe8\xbb\xbd\xe9\x87\x8f \xd1\x84\xd0\xb0\xd0\xb9\xd0\xbb"};
    tfm_bpe_train_options o;
    tfm_bpe_train_options_init(&o);
    o.vocab_size = 3 + 256 + 30;
    o.byte_fallback = 1;
    tfm_tokenizer *tok = NULL;
    int failed = check(tfm_tokenizer_train_bpe(lines, NULL, 4, &o, &tok), "train_bpe");
    failed |= save_tokenizer(tok, "bpe.model", NULL);
    static const char vocab[] = "{\"<s>\": 0, \"<unk>\": 1, \"a\": 2, \"b\": 3, \"ab\": 4, "
                                "\"\\u0120\": 5, \"\\u0120ab\": 6}";
    static const char merges[] = "#version: 0.2\na b\n\xc4\xa0 ab\n";
    write_bytes(in("tokenizer", "vocab.json"), vocab, sizeof vocab - 1);
    write_bytes(in("tokenizer", "merges.txt"), merges, sizeof merges - 1);
    char vocab_path[600];
    snprintf(vocab_path, sizeof vocab_path, "%s", in("tokenizer", "vocab.json"));
    failed |= save_tokenizer(tfm_tokenizer_load_byte_bpe(vocab_path, in("tokenizer", "merges.txt")),
                             "byte_bpe.bin", NULL);
    /* the SentencePiece model numbered by a vocabulary (Marian's) */
    char model_path[600];
    snprintf(model_path, sizeof model_path, "%s", in("tokenizer", "bpe.model"));
    failed |= save_tokenizer(tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path),
                             "renumbered.bin", NULL);
    /* with language codes after the vocabulary, as fairseq's tokenizers */
    failed |= save_tokenizer(tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path),
                             "renumbered_codes.bin",
                             "{\"control_tokens\": [\"en_XX\", \"<mask>\"], \"unknown_ids\": 2}");
    return failed;
}

/* A file of a seed's folder: its index in fuzz_folder_files, and its text
 * or (text NULL) the file at path. */
typedef struct {
    int file;
    const char *text, *path;
} seed_file;

/* A seed named name of fuzz_pretrained (and, for the fairseq families, of
 * fuzz_pretrained_fairseq too): a folder of config, the n zero tensors
 * named (of the shapes given) as model.safetensors and the other files,
 * which must load (as tfm_model_from_pretrained's own seed should),
 * written as the harnesses' records (fuzz_folder). */
static int pretrained_seed(const char *name, const char *config, int n_tensors,
                           const char *const *names, const int64_t (*shapes)[2],
                           const seed_file *files, int n_files)
{
    char dir[600], paths[FUZZ_FOLDER_FILES][700];
    snprintf(dir, sizeof dir, "%s", in("pretrained", "folder.tmp"));
    mkdir(dir, 0700);
    for (int i = 0; i < FUZZ_FOLDER_FILES; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, fuzz_folder_files[i]);
    tfm_tensor *tensors[16];
    for (int i = 0; i < n_tensors; i++)
        tensors[i] = tfm_tensor_zeros(TFM_F32, shapes[i][1] ? 2 : 1, shapes[i]);
    int failed = check(tfm_safetensors_write(paths[1], n_tensors, names,
                                             (const tfm_tensor *const *)tensors),
                       "pretrained");
    for (int i = 0; i < n_tensors; i++)
        tfm_tensor_free(tensors[i]);
    write_bytes(paths[0], config, strlen(config));
    static unsigned char seed[65536], bytes[65536];
    for (int i = 0; i < n_files; i++) {
        FILE *f = files[i].text ? NULL : fopen(files[i].path, "rb");
        size_t n = files[i].text ? strlen(files[i].text) : f ? fread(bytes, 1, sizeof bytes, f) : 0;
        if (f)
            fclose(f);
        write_bytes(paths[files[i].file], files[i].text ? (const void *)files[i].text : bytes, n);
    }
    tfm_model *m = tfm_model_from_pretrained(dir);
    if (!m)
        fprintf(stderr, "make_seeds: pretrained %s: %s\n", name, tfm_last_error());
    failed |= m == NULL;
    if (m && tfm_model_tokenizer(m, 0)) {
        /* its tokenizer with the family's added tokens (TFM-ADDT), for
         * fuzz_tokenizer */
        char added[64];
        int64_t n = 0;
        snprintf(added, sizeof added, "%s_added.bin", name);
        failed |= tfm_tokenizer_save_bytes(tfm_model_tokenizer(m, 0), bytes, sizeof bytes, &n) ||
                  save_tokenizer(tfm_tokenizer_from_bytes(bytes, n), added, NULL);
    }
    tfm_model_free(m);
    size_t at = 0;
    for (int i = 0; i < FUZZ_FOLDER_FILES; i++) {
        FILE *f = fopen(paths[i], "rb");
        if (!f)
            continue;
        size_t n = fread(bytes, 1, sizeof bytes, f);
        fclose(f);
        remove(paths[i]);
        if (n > 0xffff || at + 3 + n > sizeof seed) {
            fprintf(stderr, "make_seeds: pretrained %s: %s is too large\n", name,
                    fuzz_folder_files[i]);
            failed = 1;
            continue;
        }
        seed[at] = (unsigned char)i;
        seed[at + 1] = (unsigned char)(n & 0xff);
        seed[at + 2] = (unsigned char)(n >> 8);
        memcpy(seed + at + 3, bytes, n);
        at += 3 + n;
    }
    rmdir(dir);
    write_bytes(in("pretrained", name), seed, at);
    if (strstr(config, "\"mbart\"") || strstr(config, "\"m2m_100\""))
        write_bytes(in("pretrained_fairseq", name), seed, at);
    return failed;
}

/* Models of no layers: Marian's shared table and final_logits_bias, with
 * OPUS-MT's generation_config.json and its tokenizer (source.spm and
 * target.spm the trained model, vocab.json with a ">>fra<<" code); BART's
 * with its learned positions, embedding norms, generation_config.json and
 * byte-level vocab.json and merges.txt; T5's shared table, final norms and
 * relative bias tables, with heads of d_kv d_model / num_heads and
 * (t5_narrow) of another width. */
static int pretrained_seeds(void)
{
    static const char marian[] =
        "{\"model_type\": \"marian\", \"vocab_size\": 6, \"d_model\": 4,"
        " \"encoder_layers\": 0, \"decoder_layers\": 0, \"encoder_attention_heads\": 2,"
        " \"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
        " \"max_position_embeddings\": 8, \"activation_function\": \"swish\","
        " \"pad_token_id\": 5, \"eos_token_id\": 0, \"decoder_start_token_id\": 5,"
        " \"scale_embedding\": true}";
    static const char *const marian_names[] = {"model.shared.weight", "final_logits_bias"};
    static const int64_t marian_shapes[][2] = {{6, 4}, {1, 6}};
    char spm[600];
    snprintf(spm, sizeof spm, "%s", in("tokenizer", "bpe.model"));
    const seed_file marian_files[] = {
        {2, "{\"bad_words_ids\": [[5]], \"bos_token_id\": 0, \"decoder_start_token_id\": 5,"
            " \"eos_token_id\": 0, \"forced_eos_token_id\": 0, \"max_length\": 8,"
            " \"num_beams\": 4, \"pad_token_id\": 5, \"renormalize_logits\": true}", NULL},
        {3, "{\"source_lang\": \"en\", \"target_lang\": \"fr\", \"unk_token\": \"<unk>\"}", NULL},
        {4, "{\"</s>\": 0, \"<unk>\": 1, \"\\u2581\": 2, \"a\": 3, \">>fra<<\": 4,"
            " \"<pad>\": 5}", NULL},
        {5, NULL, spm},
        {6, NULL, spm}};
    static const char bart[] =
        "{\"model_type\": \"bart\", \"vocab_size\": 9, \"d_model\": 4,"
        " \"encoder_layers\": 0, \"decoder_layers\": 0, \"encoder_attention_heads\": 2,"
        " \"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
        " \"max_position_embeddings\": 8, \"activation_function\": \"gelu\","
        " \"pad_token_id\": 1, \"eos_token_id\": 2, \"decoder_start_token_id\": 2}";
    static const char *const bart_names[] = {
        "model.shared.weight", "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight", "model.encoder.layernorm_embedding.weight",
        "model.encoder.layernorm_embedding.bias", "model.decoder.layernorm_embedding.weight",
        "model.decoder.layernorm_embedding.bias", "final_logits_bias"};
    static const int64_t bart_shapes[][2] = {{9, 4}, {10, 4}, {10, 4}, {4, 0},
                                             {4, 0}, {4, 0},  {4, 0},  {1, 9}};
    const seed_file bart_files[] = {
        {2, "{\"bos_token_id\": 0, \"decoder_start_token_id\": 2, \"early_stopping\": true,"
            " \"eos_token_id\": 2, \"forced_bos_token_id\": 0, \"forced_eos_token_id\": 2,"
            " \"no_repeat_ngram_size\": 3, \"num_beams\": 4, \"pad_token_id\": 1}", NULL},
        {4, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3, \"a\": 4, \"b\": 5,"
            " \"ab\": 6, \"\\u0120\": 7, \"\\u0120ab\": 8}", NULL},
        {7, "#version: 0.2\na b\n\xc4\xa0 ab\n", NULL}};
    static const char t5[] =
        "{\"model_type\": \"t5\", \"vocab_size\": 6, \"d_model\": 4, \"d_kv\": 2,"
        " \"num_heads\": 2, \"num_layers\": 0, \"d_ff\": 8,"
        " \"relative_attention_num_buckets\": 4, \"relative_attention_max_distance\": 8,"
        " \"n_positions\": 8, \"pad_token_id\": 0, \"eos_token_id\": 1,"
        " \"decoder_start_token_id\": 0}";
    static const char *const t5_names[] = {
        "shared.weight", "encoder.final_layer_norm.weight", "decoder.final_layer_norm.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"};
    static const int64_t t5_shapes[][2] = {{6, 4}, {4, 0}, {4, 0}, {4, 2}, {4, 2}};
    const seed_file t5_files[] = {
        {2, "{\"decoder_start_token_id\": 0, \"eos_token_id\": 1, \"pad_token_id\": 0}", NULL}};
    char t5_narrow[sizeof t5];
    memcpy(t5_narrow, t5, sizeof t5);
    strstr(t5_narrow, "\"d_kv\": 2")[sizeof "\"d_kv\": " - 1] = '3'; /* 2 heads of 3 in 4 */
    return pretrained_seed("marian", marian, 2, marian_names, marian_shapes, marian_files, 5) |
           pretrained_seed("bart", bart, 8, bart_names, bart_shapes, bart_files, 3) |
           pretrained_seed("t5", t5, 5, t5_names, t5_shapes, t5_files, 1) |
           pretrained_seed("t5_narrow", t5_narrow, 5, t5_names, t5_shapes, NULL, 0);
}

/* Models of no layers of the fairseq families: mBART-50 (learned
 * positions from row 2, embedding norms, the stacks' final norms,
 * final_logits_bias) with MBart50Tokenizer numbering the trained
 * SentencePiece model as fairseq does and its 52 language codes after it
 * (the vocabulary padded past them); M2M100 (fairseq's sinusoids, no
 * bias) with M2M100Tokenizer's vocab.json, its 100 "__xx__" codes and 8
 * made-up words after it. Each with tokenizer_config.json's src_lang and
 * tgt_lang and generation_config.json's forced first and last tokens. */
static int fairseq_seeds(void)
{
    static const char mbart[] =
        "{\"model_type\": \"mbart\", \"vocab_size\": 360, \"d_model\": 4,"
        " \"encoder_layers\": 0, \"decoder_layers\": 0, \"encoder_attention_heads\": 2,"
        " \"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
        " \"max_position_embeddings\": 16, \"activation_function\": \"gelu\","
        " \"pad_token_id\": 1, \"eos_token_id\": 2, \"decoder_start_token_id\": 2,"
        " \"scale_embedding\": true, \"tokenizer_class\": \"MBart50Tokenizer\"}";
    static const char *const mbart_names[] = {
        "model.shared.weight", "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight", "model.encoder.layernorm_embedding.weight",
        "model.encoder.layernorm_embedding.bias", "model.decoder.layernorm_embedding.weight",
        "model.decoder.layernorm_embedding.bias", "model.encoder.layer_norm.weight",
        "model.encoder.layer_norm.bias", "model.decoder.layer_norm.weight",
        "model.decoder.layer_norm.bias", "final_logits_bias"};
    static const int64_t mbart_shapes[][2] = {{360, 4}, {18, 4}, {18, 4}, {4, 0}, {4, 0}, {4, 0},
                                              {4, 0},   {4, 0},  {4, 0},  {4, 0}, {4, 0}, {1, 360}};
    char spm[600];
    snprintf(spm, sizeof spm, "%s", in("tokenizer", "bpe.model"));
    const seed_file mbart_files[] = {
        {2, "{\"bos_token_id\": 0, \"decoder_start_token_id\": 2, \"eos_token_id\": 2,"
            " \"forced_eos_token_id\": 2, \"max_length\": 8, \"num_beams\": 2,"
            " \"pad_token_id\": 1}", NULL},
        {3, "{\"tokenizer_class\": \"MBart50Tokenizer\", \"src_lang\": \"en_XX\","
            " \"tgt_lang\": \"fr_XX\"}", NULL},
        {8, NULL, spm}};
    static const char m2m100[] =
        "{\"model_type\": \"m2m_100\", \"vocab_size\": 116, \"d_model\": 4,"
        " \"encoder_layers\": 0, \"decoder_layers\": 0, \"encoder_attention_heads\": 2,"
        " \"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 8, \"decoder_ffn_dim\": 8,"
        " \"max_position_embeddings\": 16, \"activation_function\": \"relu\","
        " \"pad_token_id\": 1, \"eos_token_id\": 2, \"decoder_start_token_id\": 2,"
        " \"scale_embedding\": true}";
    static const char *const m2m100_names[] = {
        "model.shared.weight", "model.encoder.layer_norm.weight", "model.encoder.layer_norm.bias",
        "model.decoder.layer_norm.weight", "model.decoder.layer_norm.bias"};
    static const int64_t m2m100_shapes[][2] = {{116, 4}, {4, 0}, {4, 0}, {4, 0}, {4, 0}};
    const seed_file m2m100_files[] = {
        {2, "{\"bos_token_id\": 0, \"decoder_start_token_id\": 2, \"eos_token_id\": 2,"
            " \"max_length\": 8, \"num_beams\": 2, \"no_repeat_ngram_size\": 2,"
            " \"pad_token_id\": 1}", NULL},
        {3, "{\"tokenizer_class\": \"M2M100Tokenizer\", \"language_codes\": \"m2m100\","
            " \"num_madeup_words\": 8, \"src_lang\": \"en\", \"tgt_lang\": \"fr\"}", NULL},
        {4, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3, \"\\u2581F\": 4,"
            " \"ichier\": 5, \"\\u2581\": 6, \"a\": 7}", NULL},
        {8, NULL, spm}};
    return pretrained_seed("mbart50", mbart, 12, mbart_names, mbart_shapes, mbart_files, 3) |
           pretrained_seed("m2m100", m2m100, 5, m2m100_names, m2m100_shapes, m2m100_files, 4);
}

/* A seed of the harnesses that read their arguments from the input
 * (fuzz_bpe_train, fuzz_score, fuzz_batch, fuzz_decode_options): bytes
 * laid out as the harness reads them, in FOLDER/KIND/NAME. */
static void argument_seed(const char *kind, const char *name, const void *bytes, size_t n)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", in(kind, ""));
    mkdir(dir, 0755);
    write_bytes(in(kind, name), bytes, n);
}

/* fuzz_bpe_train's options (vocab_size in 2 bytes, byte_fallback,
 * character_coverage in 256ths of 1.01, max_piece_length, pad_piece)
 * before its lines: make_seeds' own training, and a small vocabulary
 * without byte fallback over text of several scripts. */
static void bpe_train_seeds(void)
{
    static const char trained[] = "\x21\x01\x01\xfc\x10\x00"
                                  "Fichier introuvable\nDatei nicht gefunden\nfichier: 42 octets\n"
                                  "\xe8\xbb\xbd\xe9\x87\x8f \xd1\x84\xd0\xb0\xd0\xb9\xd0\xbb";
    static const char small[] = "\x18\x00\x00\xfc\x04\x01"
                                "ab ab abc abcd\n  spaces   and\ttabs \n\xc3\xa9t\xc3\xa9 "
                                "\xce\xb1\xce\xb2\xce\xb3 12345 a1b2\n\xff\xfe not UTF-8";
    argument_seed("bpe_train", "trained", trained, sizeof trained - 1);
    argument_seed("bpe_train", "small", small, sizeof small - 1);
}

/* fuzz_score's hypothesis and reference pairs, cut by NUL bytes. */
static void score_seeds(void)
{
    static const char pairs[] = "The cat sat on the mat.\0The cat sat on a mat.\0"
                                "Le chat est assis.\0Le chat s'est assis.\0"
                                "\xe8\xbb\xbd\xe9\x87\x8f \xd1\x84\xd0\xb0\xd0\xb9\xd0\xbb\0"
                                "\xd1\x84\xd0\xb0\xd0\xb9\xd0\xbb\0"
                                "  \t \0word\0"
                                "It's 3.5 km-long, isn't it?\0it is 3.5km long , is n't it ?";
    argument_seed("score", "pairs", pairs, sizeof pairs - 1);
}

/* fuzz_batch's corpus: a count, source and target lengths, max_tokens
 * (2 bytes, less 8), max_rows (less 2), flags (1: an rng, 2: target
 * lengths), the rng's seed, a batch's indices (count, each less 2), pad,
 * bos and eos (each less 1). */
static void batch_seeds(void)
{
    static const unsigned char plan[] = {6,  3, 4, 7, 2, 1, 1, 5, 9, 2, 3, 7, 7, 40, 0, 5,
                                         3,  9, 3, 2, 3, 6, 1, 2, 3};
    static const unsigned char huge[] = {3, 255, 1, 2, 255, 4, 4, 12, 0, 0, 0, 0,
                                         2, 2,   4, 1, 2,   3};
    argument_seed("batch", "plan", plan, sizeof plan);
    argument_seed("batch", "huge", huge, sizeof huge);
}

/* fuzz_decode_options' options, each byte as the harness reads it (most
 * a value less its range's low end): model (1: int8), strategy,
 * max_length, bos, eos, src_pad, temperature * 32, top_k, top_p * 200,
 * seed, beam_size, length_penalty * 32 + 64, n_best, use_cache,
 * min_length, repetition_penalty * 64, no_repeat_ngram_size, suppressed
 * ids (count, ids), eos ids (count, ids), max_length_a * 64 + 8,
 * max_length_b (10: none), forced_bos_id, patience * 16, bad words
 * (count, each its length and ids), the callback's stop token,
 * return_attention, forced_eos_id, beam_rules, early_stopping,
 * renormalize_logits, cache_precision; then batch, source length, probs,
 * prefix length, the source ids and the prefix's. */
static void decode_options_seeds(void)
{
    static const unsigned char greedy[] = {
        0, 0, 8, 2, 4, 2, 32, 1, 200, 0, 4, 96, 1, 1, 1, 64, 1, 0, 0, 8, 10, 1, 16, 0, 0, 0,
        1, 0, 0, 0, 0, 1, 4, 0, 0, 3, 4, 5, 6, 7, 5, 4, 3, 0, 0};
    static const unsigned char sample[] = {
        1, 1, 8, 2, 4, 2, 24, 6, 180, 7, 4, 96, 1, 1, 3, 96, 3, 2, 4, 6, 1, 7, 40, 6, 1, 16,
        1, 2, 4, 6, 9, 1, 4, 0, 0, 0, 1, 2, 3, 1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1, 9, 8, 7, 6, 5};
    static const unsigned char beam[] = {
        0, 2, 8, 2, 4, 2, 32, 1, 200, 0, 4, 112, 3, 1, 2, 80, 3, 1, 7, 1, 5, 8, 10, 1, 24, 1,
        2, 5, 6, 0, 1, 4, 0, 0, 0, 1, 2, 4, 0, 1, 3, 4, 5, 6, 7, 5, 4, 3, 0, 0, 4, 0, 8, 0};
    static const unsigned char transformers_beam[] = {
        1, 2, 7, 2, 4, 2, 32, 1, 200, 0, 3, 96, 2, 1, 3, 72, 1, 0, 0, 8, 6, 2, 16, 0, 0, 1,
        4, 1, 1, 1, 2, 2, 6, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 4, 2, 0, 3, 6};
    argument_seed("decode_options", "greedy", greedy, sizeof greedy);
    argument_seed("decode_options", "sample_int8", sample, sizeof sample);
    argument_seed("decode_options", "beam", beam, sizeof beam);
    argument_seed("decode_options", "transformers_beam_int8", transformers_beam,
                  sizeof transformers_beam);
}

/* A model file that carries a source and a target tokenizer, and two
 * copies with its "tfm.tokenizer" damaged in place: not base64, and
 * base64 of bytes that are no tokenizer. */
static int model_tokenizer_seeds(void)
{
    const char *lines[2] = {"ab ab abc abcd", "xy xy xyz xyzw"};
    tfm_tokenizer *tok[2] = {NULL, NULL};
    tfm_bpe_train_options o;
    tfm_bpe_train_options_init(&o);
    o.vocab_size = 9;
    o.character_coverage = 1.0;
    int failed = 0;
    for (int i = 0; i < 2; i++)
        failed |= check(tfm_tokenizer_train_bpe(&lines[i], NULL, 1, &o, &tok[i]), "train_bpe");
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = 9;
    mo.max_src_len = mo.max_tgt_len = 4;
    mo.encoder_layers = mo.decoder_layers = 1;
    mo.d_model = 4;
    mo.heads = 2;
    mo.d_ff = 4;
    tfm_model *m = failed ? NULL : tfm_model_create(&mo);
    const char *path = in("files", "model_tokenizers.safetensors");
    failed |= !m || check(tfm_model_set_tokenizers(m, tok[0], tok[1]), "set_tokenizers") ||
              check(tfm_model_save(m, path), "model with tokenizers");
    tfm_model_free(m);
    tfm_tokenizer_free(tok[0]);
    tfm_tokenizer_free(tok[1]);
    char file[16384];
    FILE *f = failed ? NULL : fopen(path, "rb");
    size_t size = f ? fread(file, 1, sizeof file, f) : 0;
    if (f)
        fclose(f);
    static const char key[] = "\"tfm.tokenizer\":\"";
    char *value = size ? memmem(file, size, key, sizeof key - 1) : NULL;
    if (!value)
        return 1;
    value += sizeof key - 1;
    memcpy(value, "!!!!", 4);
    write_bytes(in("files", "model_tokenizer_not_base64.safetensors"), file, size);
    memcpy(value, "AAAA", 4);
    write_bytes(in("files", "model_tokenizer_not_a_tokenizer.safetensors"), file, size);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds FOLDER\n");
        return 2;
    }
    snprintf(folder, sizeof folder, "%s", argv[1]);
    mkdir(folder, 0755);
    mkdir(in("files", ""), 0755);
    mkdir(in("json", ""), 0755);
    mkdir(in("tokenizer", ""), 0755);
    mkdir(in("pretrained", ""), 0755);
    mkdir(in("pretrained_fairseq", ""), 0755);
    int failed = tokenizer_seeds() | pretrained_seeds();
    failed |= fairseq_seeds();
    failed |= model_tokenizer_seeds();
    bpe_train_seeds();
    score_seeds();
    batch_seeds();
    decode_options_seeds();

    tfm_params *p = fuzz_store();
    float *v = tfm_params_values(p);
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        v[i] = 0.5f * (float)i - 2.0f;
    failed |= check(tfm_params_save(p, in("files", "params.safetensors")), "params");
    for (int k = 0; k < 2; k++) {
        tfm_optimizer_options o;
        tfm_optimizer_options_init(&o, k ? TFM_OPTIMIZER_SGD : TFM_OPTIMIZER_ADAM);
        o.momentum = 0.9f;
        tfm_optimizer *opt = tfm_optimizer_create(p, &o);
        float *g = tfm_params_grads(p);
        for (int64_t i = 0; i < tfm_params_numel(p); i++)
            g[i] = 0.1f * (float)(i % 3);
        failed |= check(tfm_optimizer_step(opt), "step");
        failed |= check(tfm_optimizer_save(opt, in("files", k ? "sgd.safetensors"
                                                              : "adam.safetensors")),
                        "optimizer");
        tfm_optimizer_free(opt);
    }
    tfm_params_free(p);

    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = 6;
    mo.tgt_vocab = 6;
    mo.max_src_len = 4;
    mo.max_tgt_len = 4;
    mo.encoder_layers = 1;
    mo.decoder_layers = 1;
    mo.d_model = 4;
    mo.heads = 2;
    mo.d_ff = 4;
    mo.positions = TFM_POSITIONS_LEARNED;
    mo.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
    mo.bos_id = 1;
    mo.eos_id = 2;
    mo.pad_id = 0;
    tfm_model *m = tfm_model_create(&mo);
    failed |= m == NULL;
    const char *keys[1] = {"vocabulary"}, *values[1] = {"<pad> <s> </s> a b c"};
    failed |= check(tfm_model_save_with_metadata(m, in("files", "model.safetensors"), 1, keys,
                                                 values), "model");
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAMW);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    tfm_rng *rng = tfm_rng_create(7);
    failed |= check(tfm_training_save(in("files", "training.safetensors"), m, opt, 1,
                                      (const tfm_rng *const[]){rng}, 1, keys, values),
                    "training");
    tfm_rng_free(rng);
    tfm_optimizer_free(opt);
    /* the same model in int8: its I8 values and scales */
    failed |= check(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR),
                    "quantize");
    failed |= check(tfm_model_save(m, in("files", "model_int8.safetensors")), "int8 model");
    tfm_model_free(m);

    failed |= check(tfm_safetensors_write_with_metadata(in("files", "empty.safetensors"), 0,
                                                        NULL, NULL, 1, keys, values), "empty");
    every_dtype();

    const char *names[] = {"params.safetensors", "adam.safetensors", "sgd.safetensors",
                           "model.safetensors", "training.safetensors", "empty.safetensors",
                           "dtypes.safetensors", "model_int8.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        header_of(names[i]);
    const char *texts[] = {
        "{\"a\":[1,-2.5e+3,0,true,false,null],\"b\":{\"c\":\"\\u00e9\\ud83d\\ude00\\n\"}}",
        "[[[[[[[[[[]]]]]]]]]]",
        "  \"\\\"\\\\\\/\\b\\f\\n\\r\\t\"  ",
        "-9223372036854775808",
        "18446744073709551616",
        /* refused: a key twice (at any depth), a NUL escape */
        "{\"a\":[{\"k\":1,\"j\":2,\"k\":3}],\"b\":{\"k\":1}}",
        "{\"model_type\":\"marian\\u0000x\"}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "text%zu.json", i);
        write_bytes(in("json", name), texts[i], strlen(texts[i]));
    }
    return failed;
}
