/* chrF and BLEU as sacrebleu 2 computes them with its defaults: per segment
 * the n-gram counts of both sides and their clipped matches, summed over
 * the corpus, then one score from the sums.
 *
 * An n-gram of either kind is a 128-bit key (six code points of 21 bits,
 * or four token ids of 32 bits); a segment's keys of one order are sorted
 * and the two sides merged to count the matches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "text/text.h"
#include "tfm/score.h"

enum {
    CHRF_ORDER = 6, /* character n-grams, sacrebleu's CHRF.CHAR_ORDER */
    BLEU_ORDER = 4  /* word n-grams, sacrebleu's MAX_NGRAM_ORDER */
};
static const double CHRF_BETA = 2.0;

typedef struct ngram_key {
    uint64_t high, low;
} ngram_key;

/* A token of a tokenised segment: where its text is, and where its id goes. */
typedef struct token {
    const char *text;
    size_t offset, length;
    size_t slot;
} token;

/* Buffers grown as segments need, kept for the whole corpus. */
typedef struct scratch {
    uint32_t *symbols;   /* code points or token ids, hypothesis then reference */
    size_t symbols_cap;
    ngram_key *keys;     /* one order's keys, hypothesis then reference */
    size_t keys_cap;
    char *text[2];       /* a segment through the 13a passes, one buffer each side */
    size_t text_cap[2];
    char *words;         /* both segments' tokens */
    size_t words_cap, words_length;
    token *tokens;
    size_t tokens_cap, tokens_count;
} scratch;

static void scratch_free(scratch *s)
{
    free(s->symbols);
    free(s->keys);
    free(s->text[0]);
    free(s->text[1]);
    free(s->words);
    free(s->tokens);
}

/* Grows *buffer to hold count elements of size bytes. */
static tfm_status reserve(const char *op, void **buffer, size_t *cap, size_t count, size_t size)
{
    if (count <= *cap)
        return TFM_OK;
    if (count > SIZE_MAX / size / 2)
        return tfm__fail(TFM_ERR_SIZE, "%s: a segment of %zu symbols is too long", op, count);
    count *= 2; /* a corpus grows its buffers a few times, not once a segment */
    void *grown = realloc(*buffer, count * size);
    if (!grown)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a segment of %zu symbols", op,
                         count / 2);
    *buffer = grown;
    *cap = count;
    return TFM_OK;
}

/* --- UTF-8 (Python's whitespace: tfm__is_python_space) --------------------------- */

/* The code point at s (a NUL-terminated string) and its length in bytes,
 * or 0 when s does not start with a well-formed sequence (overlong,
 * surrogate, past U+10FFFF, cut short). */
static size_t decode_utf8(const unsigned char *s, uint32_t *code_point)
{
    if (s[0] < 0x80) {
        *code_point = s[0];
        return 1;
    }
    size_t length = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (length == 0 || s[0] > 0xF4)
        return 0;
    uint32_t c = s[0] & (0x7Fu >> length);
    for (size_t i = 1; i < length; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the NUL */
            return 0;
        c = c << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < smallest[length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *code_point = c;
    return length;
}


/* Segments are checked whole before any is scored. */
static tfm_status check_segments(const char *op, const char *name,
                                 const char *const *segments, int64_t count)
{
    for (int64_t i = 0; i < count; i++) {
        const unsigned char *s = (const unsigned char *)segments[i];
        if (!s)
            return tfm__fail(TFM_ERR_NULL, "%s: %s[%lld] is NULL", op, name, (long long)i);
        for (size_t at = 0, length; s[at]; at += length) {
            uint32_t c;
            length = decode_utf8(s + at, &c);
            if (length == 0)
                return tfm__fail(TFM_ERR_ARG, "%s: %s[%lld] is not UTF-8 (byte %zu)", op,
                                 name, (long long)i, at);
        }
    }
    return TFM_OK;
}

static tfm_status check_arguments(const char *op, const char *const *hypotheses,
                                  const char *const *references, int64_t count,
                                  const double *score)
{
    if (!hypotheses || !references || !score)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !hypotheses ? "hypotheses" : !references ? "references" : "score");
    if (count < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: count %lld is negative", op, (long long)count);
    tfm_status status = check_segments(op, "hypotheses", hypotheses, count);
    return status ? status : check_segments(op, "references", references, count);
}

/* --- n-gram matching, shared by both scores ------------------------------------- */

static int compare_keys(const void *pa, const void *pb)
{
    const ngram_key *a = pa, *b = pb;
    if (a->high != b->high)
        return a->high < b->high ? -1 : 1;
    return a->low < b->low ? -1 : a->low > b->low;
}

/* The n-grams of symbols[0, length) as keys of bits per symbol. */
static size_t ngram_keys(const uint32_t *symbols, size_t length, int n, int bits,
                         ngram_key *keys)
{
    size_t count = length >= (size_t)n ? length - (size_t)n + 1 : 0;
    int per_word = 64 / bits;
    for (size_t i = 0; i < count; i++) {
        ngram_key key = {0, 0};
        for (int j = 0; j < n; j++) {
            uint64_t *word = j < per_word ? &key.high : &key.low;
            *word = *word << bits | symbols[i + (size_t)j];
        }
        keys[i] = key;
    }
    return count;
}

/* How many n-grams of the hypothesis the reference matches, each
 * reference n-gram at most once (Counter's clipped intersection). */
static int64_t clipped_matches(ngram_key *hypothesis, size_t hyp_count, ngram_key *reference,
                               size_t ref_count)
{
    qsort(hypothesis, hyp_count, sizeof *hypothesis, compare_keys);
    qsort(reference, ref_count, sizeof *reference, compare_keys);
    int64_t matches = 0;
    for (size_t h = 0, r = 0; h < hyp_count && r < ref_count;) {
        int order = compare_keys(&hypothesis[h], &reference[r]);
        matches += order == 0;
        h += order <= 0;
        r += order >= 0;
    }
    return matches;
}

/* One segment pair's statistics for orders 1..order, from s->symbols (the
 * hypothesis' hyp_length symbols, then the reference's): the hypothesis'
 * n-grams, the reference's and the matches in segment[3 * (n - 1) + 0, 1, 2]. */
static tfm_status count_ngrams(const char *op, scratch *s, size_t hyp_length,
                               size_t ref_length, int order, int bits, int64_t *segment)
{
    tfm_status status = reserve(op, (void **)&s->keys, &s->keys_cap,
                                hyp_length + ref_length + 1, sizeof *s->keys);
    const uint32_t *ref_symbols = s->symbols + hyp_length;
    for (int n = 1; status == TFM_OK && n <= order; n++) {
        size_t hyp = ngram_keys(s->symbols, hyp_length, n, bits, s->keys);
        size_t ref = ngram_keys(ref_symbols, ref_length, n, bits, s->keys + hyp);
        segment[3 * (n - 1)] = (int64_t)hyp;
        segment[3 * (n - 1) + 1] = (int64_t)ref;
        segment[3 * (n - 1) + 2] = clipped_matches(s->keys, hyp, s->keys + hyp, ref);
    }
    return status;
}

/* --- chrF ------------------------------------------------------------------------ */

/* The code points of a well-formed segment but its whitespace, into out. */
static size_t code_points_without_spaces(const char *segment, uint32_t *out)
{
    const unsigned char *p = (const unsigned char *)segment;
    size_t count = 0;
    while (*p) {
        uint32_t c;
        p += decode_utf8(p, &c);
        if (!tfm__is_python_space(c))
            out[count++] = c;
    }
    return count;
}

/* sacrebleu's CHRF._compute_f_score without eps smoothing. */
static double chrf_from_stats(const int64_t *stats)
{
    double precision = 0, recall = 0;
    int effective_order = 0;
    for (int i = 0; i < CHRF_ORDER; i++) {
        int64_t hyp = stats[3 * i], ref = stats[3 * i + 1], matches = stats[3 * i + 2];
        if (hyp > 0 && ref > 0) {
            precision += (double)matches / (double)hyp;
            recall += (double)matches / (double)ref;
            effective_order++;
        }
    }
    if (effective_order == 0)
        return 0;
    precision /= effective_order;
    recall /= effective_order;
    if (precision + recall == 0)
        return 0;
    double factor = CHRF_BETA * CHRF_BETA;
    return 100 * (1 + factor) * precision * recall / (factor * precision + recall);
}

/* Adds a segment pair's chrF statistics to stats[3 * CHRF_ORDER]. */
static tfm_status add_chrf_segment(const char *op, scratch *s, const char *hypothesis,
                                   const char *reference, int64_t *stats)
{
    /* a code point takes at least a byte */
    size_t bytes = strlen(hypothesis) + strlen(reference);
    tfm_status status = reserve(op, (void **)&s->symbols, &s->symbols_cap, bytes + 1,
                                sizeof *s->symbols);
    if (status)
        return status;
    size_t hyp = code_points_without_spaces(hypothesis, s->symbols);
    size_t ref = code_points_without_spaces(reference, s->symbols + hyp);
    int64_t segment[3 * CHRF_ORDER];
    status = count_ngrams(op, s, hyp, ref, CHRF_ORDER, 21, segment);
    for (int j = 0; status == TFM_OK && j < CHRF_ORDER; j++) {
        /* sacrebleu counts no hypothesis n-gram of an order the reference lacks */
        stats[3 * j] += segment[3 * j + 1] ? segment[3 * j] : 0;
        stats[3 * j + 1] += segment[3 * j + 1];
        stats[3 * j + 2] += segment[3 * j + 2];
    }
    return status;
}

/* --- BLEU ------------------------------------------------------------------------ */

/* Python's text.replace(from, to) in place, to no longer than from; the new length. */
static size_t replace_all(char *text, size_t length, const char *from, const char *to)
{
    size_t from_length = strlen(from), to_length = strlen(to), kept = 0;
    for (size_t at = 0; at < length;) {
        if (length - at >= from_length && memcmp(text + at, from, from_length) == 0) {
            memcpy(text + kept, to, to_length);
            kept += to_length;
            at += from_length;
        } else {
            text[kept++] = text[at++];
        }
    }
    return kept;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_period_or_comma(char c)
{
    return c == '.' || c == ',';
}

/* sacrebleu's TokenizerRegexp rules, each a re.sub over the whole text.
 * The patterns are ASCII and a UTF-8 sequence's bytes are never ASCII,
 * so working on bytes gives the result Python's characters give. */
enum { SPLIT_SYMBOLS, SPLIT_AFTER_NON_DIGIT, SPLIT_BEFORE_NON_DIGIT, SPLIT_DIGIT_DASH };

/* Rule 1, ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 ". */
static int is_split_symbol(char c)
{
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
           (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

/* One rule from in[0, length) into out (room for 3 * length); the new length. */
static size_t apply_rule(int rule, const char *in, size_t length, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < length;) {
        char a = in[i], b = i + 1 < length ? in[i + 1] : '\0';
        if (rule == SPLIT_SYMBOLS && is_split_symbol(a)) {
            out[n++] = ' ', out[n++] = a, out[n++] = ' ';
            i++;
        } else if ((rule == SPLIT_AFTER_NON_DIGIT && b && !is_digit(a) &&
                    is_period_or_comma(b)) ||
                   (rule == SPLIT_DIGIT_DASH && is_digit(a) && b == '-')) {
            /* ([^0-9])([\.,]) -> "\1 \2 ", ([0-9])(-) -> "\1 \2 " */
            out[n++] = a, out[n++] = ' ', out[n++] = b, out[n++] = ' ';
            i += 2;
        } else if (rule == SPLIT_BEFORE_NON_DIGIT && b && is_period_or_comma(a) && !is_digit(b)) {
            /* ([\.,])([^0-9]) -> " \1 \2" */
            out[n++] = ' ', out[n++] = a, out[n++] = ' ', out[n++] = b;
            i += 2;
        } else {
            out[n++] = a;
            i++;
        }
    }
    return n;
}

/* Bytes of segment less its trailing whitespace (Python's rstrip()). */
static size_t rstripped_length(const char *segment)
{
    const unsigned char *p = (const unsigned char *)segment;
    size_t end = 0;
    for (size_t at = 0, length; p[at]; at += length) {
        uint32_t c;
        length = decode_utf8(p + at, &c);
        if (!tfm__is_python_space(c))
            end = at + length;
    }
    return end;
}

/* Appends the tokens of segment, tokenised as sacrebleu's Tokenizer13a
 * tokenises segment.rstrip(), to s->words and s->tokens. */
static tfm_status tokenize_13a(const char *op, scratch *s, const char *segment)
{
    size_t length = rstripped_length(segment);
    tfm_status status = reserve(op, (void **)&s->text[0], &s->text_cap[0], length + 2, 1);
    if (status)
        return status;
    char *text = s->text[0];
    memcpy(text, segment, length);
    length = replace_all(text, length, "<skipped>", "");
    length = replace_all(text, length, "-\n", "");
    length = replace_all(text, length, "\n", " ");
    if (memchr(text, '&', length)) {
        length = replace_all(text, length, "&quot;", "\"");
        length = replace_all(text, length, "&amp;", "&");
        length = replace_all(text, length, "&lt;", "<");
        length = replace_all(text, length, "&gt;", ">");
    }
    memmove(text + 1, text, length);
    text[0] = text[length + 1] = ' ';
    length += 2;
    int from = 0;
    for (int rule = SPLIT_SYMBOLS; rule <= SPLIT_DIGIT_DASH; rule++, from = 1 - from) {
        status = reserve(op, (void **)&s->text[1 - from], &s->text_cap[1 - from], 3 * length, 1);
        if (status)
            return status;
        length = apply_rule(rule, s->text[from], length, s->text[1 - from]);
    }
    text = s->text[from];
    status = reserve(op, (void **)&s->words, &s->words_cap, s->words_length + length, 1);
    if (status == TFM_OK)
        status = reserve(op, (void **)&s->tokens, &s->tokens_cap,
                         s->tokens_count + length / 2 + 1, sizeof *s->tokens);
    if (status)
        return status;
    /* split(): runs of whitespace end tokens */
    const unsigned char *p = (const unsigned char *)text;
    for (size_t at = 0, start = 0, step; at <= length; at += step) {
        uint32_t c = ' ';
        step = at < length ? decode_utf8(p + at, &c) : 1;
        if (!tfm__is_python_space(c))
            continue;
        if (at > start) {
            token *t = &s->tokens[s->tokens_count];
            t->offset = s->words_length;
            t->length = at - start;
            t->slot = s->tokens_count++;
            memcpy(s->words + s->words_length, text + start, t->length);
            s->words_length += t->length;
        }
        start = at + step;
    }
    return TFM_OK;
}

static int compare_tokens(const void *pa, const void *pb)
{
    const token *a = pa, *b = pb;
    int order = memcmp(a->text, b->text, a->length < b->length ? a->length : b->length);
    return order ? order : (a->length > b->length) - (a->length < b->length);
}

/* s->symbols[slot] = an id per distinct token text, for every token. */
static tfm_status number_tokens(const char *op, scratch *s)
{
    tfm_status status = reserve(op, (void **)&s->symbols, &s->symbols_cap,
                                s->tokens_count + 1, sizeof *s->symbols);
    if (status)
        return status;
    for (size_t i = 0; i < s->tokens_count; i++)
        s->tokens[i].text = s->words + s->tokens[i].offset;
    qsort(s->tokens, s->tokens_count, sizeof *s->tokens, compare_tokens);
    uint32_t id = 0;
    for (size_t i = 0; i < s->tokens_count; i++) {
        id += i > 0 && compare_tokens(&s->tokens[i - 1], &s->tokens[i]) != 0;
        s->symbols[s->tokens[i].slot] = id;
    }
    return TFM_OK;
}

/* sacrebleu's BLEU.compute_bleu with smooth_method "exp", no effective order. */
static double bleu_from_stats(const int64_t *stats)
{
    int64_t hyp_length = stats[0], ref_length = stats[1];
    const int64_t *total = stats + 2, *correct = stats + 2 + BLEU_ORDER;
    double brevity = 1;
    if (hyp_length < ref_length)
        brevity = hyp_length > 0 ? exp(1 - (double)ref_length / (double)hyp_length) : 0;
    int any_correct = 0;
    for (int n = 0; n < BLEU_ORDER; n++)
        any_correct |= correct[n] > 0;
    if (!any_correct)
        return 0;
    double log_sum = 0, smoothing = 1;
    for (int n = 0; n < BLEU_ORDER; n++) {
        if (total[n] == 0)
            return 0; /* its precision stays 0, whose log sacrebleu takes as -1e10 */
        double precision;
        if (correct[n] == 0) {
            smoothing *= 2;
            precision = 100 / (smoothing * (double)total[n]);
        } else {
            precision = 100 * (double)correct[n] / (double)total[n];
        }
        log_sum += log(precision);
    }
    return brevity * exp(log_sum / BLEU_ORDER);
}

/* Adds a segment pair's BLEU statistics to stats: the hypothesis' and the
 * reference's lengths in tokens, then per order the hypothesis' n-grams
 * and the matches. */
static tfm_status add_bleu_segment(const char *op, scratch *s, const char *hypothesis,
                                   const char *reference, int64_t *stats)
{
    s->words_length = s->tokens_count = 0;
    tfm_status status = tokenize_13a(op, s, hypothesis);
    size_t hyp = s->tokens_count;
    if (status == TFM_OK)
        status = tokenize_13a(op, s, reference);
    size_t ref = s->tokens_count - hyp;
    int64_t segment[3 * BLEU_ORDER];
    if (status == TFM_OK)
        status = number_tokens(op, s);
    if (status == TFM_OK)
        status = count_ngrams(op, s, hyp, ref, BLEU_ORDER, 32, segment);
    if (status)
        return status;
    stats[0] += (int64_t)hyp;
    stats[1] += (int64_t)ref;
    for (int n = 0; n < BLEU_ORDER; n++) {
        stats[2 + n] += segment[3 * n];
        stats[2 + BLEU_ORDER + n] += segment[3 * n + 2];
    }
    return TFM_OK;
}

/* --- a corpus, either score ------------------------------------------------------ */

typedef struct metric {
    const char *op;
    tfm_status (*add_segment)(const char *op, scratch *s, const char *hypothesis,
                              const char *reference, int64_t *stats);
    double (*from_stats)(const int64_t *stats);
} metric;

enum { MOST_STATS = 3 * CHRF_ORDER > 2 + 2 * BLEU_ORDER ? 3 * CHRF_ORDER : 2 + 2 * BLEU_ORDER };

static tfm_status score_corpus(const metric *m, const char *const *hypotheses,
                               const char *const *references, int64_t count, double *score)
{
    tfm_status status = check_arguments(m->op, hypotheses, references, count, score);
    if (status)
        return status;
    scratch s = {0};
    int64_t stats[MOST_STATS] = {0};
    for (int64_t i = 0; i < count && status == TFM_OK; i++)
        status = m->add_segment(m->op, &s, hypotheses[i], references[i], stats);
    scratch_free(&s);
    if (status == TFM_OK)
        *score = m->from_stats(stats);
    return status;
}

tfm_status tfm_score_chrf(const char *const *hypotheses, const char *const *references,
                          int64_t count, double *score)
{
    static const metric chrf = {"tfm_score_chrf", add_chrf_segment, chrf_from_stats};
    return score_corpus(&chrf, hypotheses, references, count, score);
}

tfm_status tfm_score_bleu(const char *const *hypotheses, const char *const *references,
                          int64_t count, double *score)
{
    static const metric bleu = {"tfm_score_bleu", add_bleu_segment, bleu_from_stats};
    return score_corpus(&bleu, hypotheses, references, count, score);
}
