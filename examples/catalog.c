/* tfm-translate --po: see catalog.h. libgettextpo reads and writes the
 * catalog (so everything a translator or msgfmt sees survives as gettext
 * itself writes it) and checks each machine translation as msgfmt does
 * (po_message_check_all: format directives by the entry's flags, leading
 * and trailing newlines). */
#include "catalog.h"

#include <errno.h>
#include <fcntl.h>
#include <gettext-po.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A translator comment on each entry a machine translation was refused
 * for; taken out again when a later run translates the entry. */
#define CATALOG_NOTE "tfm-translate: no machine translation: "

/* --- libgettextpo's problems -------------------------------------------------------- */

/* libgettextpo reports through a handler that must not return on a fatal
 * error (po_file_write that cannot create its file): it jumps back to the
 * call. The handler counts the errors (po_file_read goes on after a syntax
 * error) and keeps the first; it prints them, except while checking a
 * translation. */
static struct {
    const char *program;
    jmp_buf *fatal;
    int checking, problems;
    char first[200];
} report;

static void on_problem(int severity, po_message_t message, const char *filename, size_t line,
                       size_t column, int multiline, const char *text)
{
    (void)message, (void)column, (void)multiline;
    if (severity != PO_SEVERITY_WARNING && report.problems++ == 0)
        snprintf(report.first, sizeof report.first, "%.*s", (int)strcspn(text, "\n"), text);
    if (report.checking) {
    } else if (filename && line != (size_t)-1) {
        fprintf(stderr, "%s: %s:%zu: %s%s%s", report.program, filename, line,
                severity == PO_SEVERITY_WARNING ? "warning: " : "", text,
                text[0] && text[strlen(text) - 1] == '\n' ? "" : "\n");
    } else {
        fprintf(stderr, "%s: %s%s%s", report.program,
                severity == PO_SEVERITY_WARNING ? "warning: " : "", text,
                text[0] && text[strlen(text) - 1] == '\n' ? "" : "\n");
    }
    if (severity == PO_SEVERITY_FATAL_ERROR && report.fatal)
        longjmp(*report.fatal, 1);
}

static void on_problem2(int severity, po_message_t message1, const char *filename1,
                        size_t line1, size_t column1, int multiline1, const char *text1,
                        po_message_t message2, const char *filename2, size_t line2,
                        size_t column2, int multiline2, const char *text2)
{
    /* the first half never ends the operation: the second says how bad */
    on_problem(PO_SEVERITY_WARNING < severity ? PO_SEVERITY_ERROR : severity, message1,
               filename1, line1, column1, multiline1, text1);
    on_problem(severity, message2, filename2, line2, column2, multiline2, text2);
}

static const struct po_xerror_handler handler = {on_problem, on_problem2};

/* --- languages ---------------------------------------------------------------------- */

/* gettext's code, the three-letter one (NLLB's codes begin with it), and
 * the Plural-Forms msginit writes for the language (gettext's table). */
static const struct language {
    const char *code, *code3, *plural_forms;
} languages[] = {
    {"fr", "fra", "nplurals=2; plural=(n > 1);"},
    {"de", "deu", "nplurals=2; plural=(n != 1);"},
    {"es", "spa", "nplurals=2; plural=(n != 1);"},
    {"it", "ita", "nplurals=2; plural=(n != 1);"},
    {"pt", "por", "nplurals=2; plural=(n != 1);"},
    {"pt_BR", NULL, "nplurals=2; plural=(n > 1);"},
    {"nl", "nld", "nplurals=2; plural=(n != 1);"},
    {"en", "eng", "nplurals=2; plural=(n != 1);"},
    {"sv", "swe", "nplurals=2; plural=(n != 1);"},
    {"da", "dan", "nplurals=2; plural=(n != 1);"},
    {"fi", "fin", "nplurals=2; plural=(n != 1);"},
    {"el", "ell", "nplurals=2; plural=(n != 1);"},
    {"hu", "hun", "nplurals=2; plural=(n != 1);"},
    {"tr", "tur", "nplurals=2; plural=(n != 1);"},
    {"ro", "ron", "nplurals=3; plural=n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2;"},
    {"ru", "rus", "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
                  "(n%100<10 || n%100>=20) ? 1 : 2);"},
    {"uk", "ukr", "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
                  "(n%100<10 || n%100>=20) ? 1 : 2);"},
    {"pl", "pol", "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && "
                  "(n%100<10 || n%100>=20) ? 1 : 2);"},
    {"cs", "ces", "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"},
    {"ja", "jpn", "nplurals=1; plural=0;"},
    {"zh", "zho", "nplurals=1; plural=0;"},
    {"ko", "kor", "nplurals=1; plural=0;"},
};

/* The table's row for a gettext code (zh_CN: zh's) or a three-letter one. */
static const struct language *language_find(const char *code)
{
    size_t primary = strcspn(code, "_@.");
    for (size_t i = 0; i < sizeof languages / sizeof languages[0]; i++)
        if (!strcmp(languages[i].code, code))
            return &languages[i];
    for (size_t i = 0; i < sizeof languages / sizeof languages[0]; i++)
        if ((strlen(languages[i].code) == primary && !strncmp(languages[i].code, code, primary)) ||
            (languages[i].code3 && strlen(languages[i].code3) == primary &&
             !strncmp(languages[i].code3, code, primary)))
            return &languages[i];
    return NULL;
}

/* A header field's value that is a template's (a .pot's) or none. */
static int unset(const char *value)
{
    return !value || !*value || !strcmp(value, "LANGUAGE") ||
           !strcmp(value, "nplurals=INTEGER; plural=EXPRESSION;");
}

/* The catalog's language as gettext spells it (into code): --language; a
 * multilingual model's target (fr_XX: fr, zh_CN, fra_Latn: fr); else the
 * header's. 0, or -1 after a message. */
static int resolve_language(const catalog_job *job, const char *in_header, char *code,
                            size_t size)
{
    if (job->language) {
        snprintf(code, size, "%s", job->language);
    } else if (job->target_language) {
        const char *t = job->target_language;
        size_t primary = strcspn(t, "_");
        const struct language *known = language_find(t);
        if (primary == 2 && t[2] == '_' && strcmp(t + 3, "XX") && strlen(t + 3) == 2)
            snprintf(code, size, "%s", t); /* zh_CN */
        else if (known && primary == 3 && known->code3 && !strncmp(t, known->code3, 3))
            snprintf(code, size, "%s", known->code);
        else
            snprintf(code, size, "%.*s", (int)primary, t);
    } else if (!unset(in_header)) {
        snprintf(code, size, "%s", in_header);
    } else {
        fprintf(stderr, "%s: say which language the catalog is for (--language fr): the "
                "model and %s do not\n", report.program, job->in);
        return -1;
    }
    if (!unset(in_header) &&
        (strcspn(in_header, "_@.") != strcspn(code, "_@.") ||
         strncmp(in_header, code, strcspn(code, "_@.")))) {
        fprintf(stderr, "%s: %s is a catalog for '%s', not '%s'\n", report.program, job->in,
                in_header, code);
        return -1;
    }
    return 0;
}

/* --- the header --------------------------------------------------------------------- */

/* Sets a header field, keeping the header otherwise as it was. */
static void set_field(po_message_t header, const char *field, const char *value)
{
    char *changed = po_header_set_field(po_message_msgstr(header), field, value);
    po_message_set_msgstr(header, changed);
    free(changed);
}

/* The domain's header made ready for the language's translations: UTF-8
 * (a template's CHARSET; another charset is refused: msgconv it first),
 * Language and Plural-Forms (the table's, unless the catalog has its own),
 * PO-Revision-Date now. Its plural forms into *nplurals. 0, or -1 after a
 * message. */
static int prepare_header(const catalog_job *job, po_file_t file, const char *domain,
                          char *language, size_t size, int *nplurals)
{
    po_message_iterator_t it = po_message_iterator(file, domain);
    po_message_t header = NULL, m;
    while ((m = po_next_message(it)))
        if (!po_message_is_obsolete(m) && !po_message_msgctxt(m) && !*po_message_msgid(m)) {
            header = m;
            break;
        }
    po_message_iterator_free(it);
    if (!header) { /* a catalog without one gets gettext's least */
        header = po_message_create();
        po_message_set_msgid(header, "");
        po_message_set_msgstr(header, "MIME-Version: 1.0\n"
                                      "Content-Type: text/plain; charset=UTF-8\n"
                                      "Content-Transfer-Encoding: 8bit\n");
        it = po_message_iterator(file, domain);
        po_message_insert(it, header);
        po_message_iterator_free(it);
    }
    const char *fields = po_message_msgstr(header);
    char *type = po_header_field(fields, "Content-Type");
    const char *charset = type ? strstr(type, "charset=") : NULL;
    charset = charset ? charset + 8 : "CHARSET";
    int utf8 = !strcasecmp(charset, "UTF-8") || !strcasecmp(charset, "UTF8") ||
               !strcasecmp(charset, "ASCII") || !strcasecmp(charset, "US-ASCII") ||
               !strcmp(charset, "CHARSET");
    if (!utf8)
        fprintf(stderr, "%s: %s is in %s; translations are UTF-8: convert it first "
                "(msgconv --to-code=UTF-8)\n", report.program, job->in, charset);
    free(type);
    if (!utf8)
        return -1;
    set_field(header, "Content-Type", "text/plain; charset=UTF-8");
    char *in_header = po_header_field(po_message_msgstr(header), "Language");
    int resolved = resolve_language(job, in_header, language, size);
    free(in_header);
    if (resolved < 0)
        return -1;
    set_field(header, "Language", language);
    char *plural_forms = po_header_field(po_message_msgstr(header), "Plural-Forms");
    const struct language *known = language_find(language);
    if (unset(plural_forms)) {
        free(plural_forms);
        if (!known) {
            fprintf(stderr, "%s: no Plural-Forms known for '%s': put one in %s's header\n",
                    report.program, language, job->in);
            return -1;
        }
        set_field(header, "Plural-Forms", known->plural_forms);
        plural_forms = strdup(known->plural_forms);
    }
    const char *count = plural_forms ? strstr(plural_forms, "nplurals=") : NULL;
    *nplurals = count ? atoi(count + 9) : 0;
    free(plural_forms);
    if (*nplurals < 1 || *nplurals > 100) {
        fprintf(stderr, "%s: %s's Plural-Forms gives no number of plural forms\n",
                report.program, job->in);
        return -1;
    }
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%d %H:%M%z", gmtime(&t));
    set_field(header, "PO-Revision-Date", now);
    return 0;
}

/* --- texts to translate: each line of a message alone ------------------------------ */

/* A message is translated line by line, as the model learnt sentences;
 * each line's surrounding spaces (indentation, a trailing space before
 * what the program appends) are kept, and the newlines are gettext's own
 * (msgfmt checks that they begin and end the msgstr as the msgid). */
typedef struct texts {
    char **text;
    int64_t count, capacity;
} texts;

/* Visits each line of source: with out NULL, adds its text to t; else
 * appends its translation (t's next) to *out. 0, or -1 when out of
 * memory or when a line's translation is empty. */
static int each_line(const char *source, texts *t, int64_t *next, char **out, size_t *length)
{
    for (const char *line = source;;) {
        size_t n = strcspn(line, "\n");
        size_t lead = strspn(line, " \t");
        size_t end = n;
        while (end > lead && (line[end - 1] == ' ' || line[end - 1] == '\t'))
            end--;
        const char *core = line + lead;
        size_t core_length = end > lead ? end - lead : 0;
        if (!out && core_length) {
            if (t->count == t->capacity) {
                int64_t capacity = t->capacity ? 2 * t->capacity : 256;
                char **grown = realloc(t->text, (size_t)capacity * sizeof *grown);
                if (!grown)
                    return -1;
                t->text = grown;
                t->capacity = capacity;
            }
            if (!(t->text[t->count] = strndup(core, core_length)))
                return -1;
            t->count++;
        } else if (out) {
            const char *translated = core_length ? t->text[(*next)++] : "";
            if (core_length && !*translated)
                return -1;
            size_t more = lead + strlen(translated) + (n - end) + 1;
            char *grown = realloc(*out, *length + more + 1);
            if (!grown)
                return -1;
            *out = grown;
            memcpy(*out + *length, line, lead);
            memcpy(*out + *length + lead, translated, strlen(translated));
            memcpy(*out + *length + lead + strlen(translated), line + end, n - end);
            *length += more - 1;
            if (line[n] == '\n')
                (*out)[(*length)++] = '\n';
            (*out)[*length] = '\0';
        }
        if (!line[n])
            return 0;
        line += n + 1;
    }
}

/* source's translation from the translated texts from *next on (malloc'd);
 * NULL when a line has none (or out of memory). */
static char *joined(const char *source, texts *translated, int64_t *next)
{
    char *out = calloc(1, 1);
    size_t length = 0;
    if (out && each_line(source, translated, next, &out, &length) < 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void texts_free(texts *t)
{
    for (int64_t i = 0; i < t->count; i++)
        free(t->text[i]);
    free(t->text);
    *t = (texts){0};
}

/* --- entries ------------------------------------------------------------------------ */

typedef struct tally {
    int64_t translated, refused, empty, kept_fuzzy, kept;
} tally;

static int is_untranslated(po_message_t m)
{
    if (!po_message_msgid_plural(m))
        return !*po_message_msgstr(m);
    const char *form;
    for (int i = 0; (form = po_message_msgstr_plural(m, i)); i++)
        if (*form)
            return 0;
    return 1;
}

/* Whether run translates the message: never the header or an obsolete
 * one; the untranslated ones, or all with --all. */
static int wanted(const catalog_job *job, po_message_t m, tally *count)
{
    if (po_message_is_obsolete(m) || (!po_message_msgctxt(m) && !*po_message_msgid(m)))
        return 0;
    if (job->all || is_untranslated(m))
        return 1;
    count->kept += !po_message_is_fuzzy(m);
    count->kept_fuzzy += po_message_is_fuzzy(m);
    return 0;
}

/* The message's translator comments without this tool's note (malloc'd). */
static char *comments_without_note(po_message_t m)
{
    const char *comments = po_message_comments(m);
    char *kept = malloc(strlen(comments) + 1), *at = kept;
    if (!kept)
        return NULL;
    for (const char *line = comments; *line;) {
        size_t n = strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n');
        if (strncmp(line, CATALOG_NOTE, strlen(CATALOG_NOTE))) {
            memcpy(at, line, n);
            at += n;
        }
        line += n;
    }
    *at = '\0';
    return kept;
}

/* Notes why the message has no machine translation (one note at most). */
static void add_note(po_message_t m, const char *why)
{
    char *kept = comments_without_note(m);
    size_t size = (kept ? strlen(kept) : 0) + strlen(CATALOG_NOTE) + strlen(why) + 2;
    char *comments = kept ? malloc(size) : NULL;
    if (comments) {
        snprintf(comments, size, "%s%s%s\n", kept, CATALOG_NOTE, why);
        po_message_set_comments(m, comments);
    }
    free(comments);
    free(kept);
}

/* Gives the message its machine translation (singular: forms[0]; plural:
 * nplurals forms), fuzzy, when msgfmt's checks accept it; else leaves it
 * as it was (a note on an untranslated one). */
static void apply(po_message_t m, po_message_iterator_t it, char **forms, int nplurals,
                  tally *count)
{
    int plural = po_message_msgid_plural(m) != NULL, was_fuzzy = po_message_is_fuzzy(m);
    int was_untranslated = is_untranslated(m), had = 0;
    char *before[101] = {0};
    if (plural) {
        const char *form;
        while (had < 100 && (form = po_message_msgstr_plural(m, had)))
            before[had++] = strdup(form);
        for (int i = 0; i < nplurals; i++)
            po_message_set_msgstr_plural(m, i, forms[i]);
        if (had > nplurals)
            po_message_set_msgstr_plural(m, nplurals, NULL);
    } else {
        before[0] = strdup(po_message_msgstr(m));
        po_message_set_msgstr(m, forms[0]);
    }
    /* msgfmt checks only the entries it compiles, not fuzzy ones: this
     * one is checked as it will be once a translator has reviewed it */
    po_message_set_fuzzy(m, 0);
    report.checking = 1;
    report.problems = 0;
    po_message_check_all(m, it, &handler);
    report.checking = 0;
    po_message_set_fuzzy(m, 1);
    if (report.problems == 0) {
        char *comments = comments_without_note(m);
        if (comments)
            po_message_set_comments(m, comments);
        free(comments);
        count->translated++;
    } else {
        if (plural) {
            for (int i = 0; i < had; i++)
                po_message_set_msgstr_plural(m, i, before[i] ? before[i] : "");
            if (nplurals > had)
                po_message_set_msgstr_plural(m, had, NULL);
        } else {
            po_message_set_msgstr(m, before[0] ? before[0] : "");
        }
        po_message_set_fuzzy(m, was_fuzzy);
        if (was_untranslated)
            add_note(m, report.first);
        count->refused++;
    }
    for (int i = 0; i < had || (!plural && i == 0); i++)
        free(before[i]);
}

/* --- writing ------------------------------------------------------------------------ */

/* May out be written? It must be a regular file or nothing, and an
 * existing one is replaced only with --overwrite. 0, or -1 after a
 * message. */
static int check_out(const catalog_job *job)
{
    struct stat about;
    if (stat(job->out, &about) != 0)
        return 0;
    if (!S_ISREG(about.st_mode)) {
        fprintf(stderr, "%s: '%s' is not a regular file: --out replaces only one\n",
                report.program, job->out);
        return -1;
    }
    if (!job->overwrite) {
        fprintf(stderr, "%s: '%s' already exists: give --overwrite to replace it, or another "
                "--out\n", report.program, job->out);
        return -1;
    }
    return 0;
}

static int same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Whether the catalog at path holds what file holds: every domain's
 * messages, in order, with their texts, comments, flags and marks. */
static int read_back(po_file_t file, const char *path)
{
    jmp_buf failed;
    po_file_t volatile again = NULL;
    report.fatal = &failed;
    report.checking = 1;
    report.problems = 0;
    if (!setjmp(failed))
        again = po_file_read(path, &handler);
    report.fatal = NULL;
    report.checking = 0;
    int equal = again && !report.problems;
    const char *const *domains = po_file_domains(file);
    for (int d = 0; equal && domains[d]; d++) {
        po_message_iterator_t i = po_message_iterator(file, domains[d]);
        po_message_iterator_t j = po_message_iterator(again, domains[d]);
        po_message_t a, b;
        do {
            a = po_next_message(i);
            b = po_next_message(j);
            if (!a || !b) {
                equal = !a && !b;
                break;
            }
            equal = same(po_message_msgctxt(a), po_message_msgctxt(b)) &&
                    same(po_message_msgid(a), po_message_msgid(b)) &&
                    same(po_message_msgid_plural(a), po_message_msgid_plural(b)) &&
                    same(po_message_msgstr(a), po_message_msgstr(b)) &&
                    same(po_message_comments(a), po_message_comments(b)) &&
                    same(po_message_extracted_comments(a), po_message_extracted_comments(b)) &&
                    po_message_is_obsolete(a) == po_message_is_obsolete(b) &&
                    po_message_is_fuzzy(a) == po_message_is_fuzzy(b);
            for (int k = 0; equal && po_message_msgid_plural(a) &&
                            (po_message_msgstr_plural(a, k) || po_message_msgstr_plural(b, k));
                 k++)
                equal = same(po_message_msgstr_plural(a, k), po_message_msgstr_plural(b, k));
        } while (equal);
        po_message_iterator_free(i);
        po_message_iterator_free(j);
    }
    if (again)
        po_file_free(again);
    return equal;
}

/* Writes the catalog into a new file beside out, syncs it, and renames it
 * over out, so a failure leaves out as it was. 0, or -1 after a message. */
static int write_atomically(const catalog_job *job, po_file_t file)
{
    if (check_out(job) < 0)
        return -1;
    const char *slash = strrchr(job->out, '/');
    int folder_length = slash ? (int)(slash - job->out) : 0;
    char temp[4096], folder[4096];
    snprintf(folder, sizeof folder, "%.*s", slash ? (folder_length ? folder_length : 1) : 1,
             slash ? job->out : ".");
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        if (snprintf(temp, sizeof temp, "%.*s%s.%s.tfm-%ld.%d", folder_length, job->out,
                     slash ? "/" : "", slash ? slash + 1 : job->out, (long)getpid(),
                     attempt) >= (int)sizeof temp) {
            errno = ENAMETOOLONG;
            break;
        }
        fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create a file beside '%s': %s\n", report.program,
                job->out, strerror(errno));
        return -1;
    }
    close(fd);
    jmp_buf failed;
    report.fatal = &failed;
    if (setjmp(failed)) {
        report.fatal = NULL;
        unlink(temp);
        fprintf(stderr, "%s: nothing written to '%s'\n", report.program, job->out);
        return -1;
    }
    po_file_write(file, temp, &handler);
    report.fatal = NULL;
    const char *what = "syncing";
    fd = open(temp, O_RDONLY | O_CLOEXEC);
    int synced = fd >= 0 && fsync(fd) == 0;
    /* po_file_write says nothing of a write that fails (a full disk, the
     * file size limit): the file is read back and compared whole */
    if (synced && !read_back(file, temp)) {
        what = "writing (it does not read back as written)";
        synced = 0;
        errno = EIO;
    }
    if (fd >= 0 && close(fd) != 0)
        synced = 0;
    if (synced) {
        what = "renaming";
        synced = rename(temp, job->out) == 0;
    }
    if (!synced) {
        fprintf(stderr, "%s: %s '%s' failed: %s; nothing written to '%s'\n", report.program,
                what, temp, strerror(errno), job->out);
        unlink(temp);
        return -1;
    }
    fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        fprintf(stderr, "%s: '%s' is written, but syncing its folder failed: %s\n",
                report.program, job->out, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* --- the whole run ------------------------------------------------------------------ */

/* Translated texts[0, n) into out (malloc'd each), in a few batched calls
 * (the translator sorts each by length); 0, or -1 after a message. */
static int translate_all(tfm_translator *translator, const tfm_translate_options *options,
                         const texts *in, texts *out)
{
    enum { CALL = 2048 }; /* texts a call: a few calls for a large catalog */
    out->text = calloc((size_t)in->count + 1, sizeof *out->text);
    if (!out->text)
        return -1;
    out->capacity = in->count;
    for (int64_t first = 0; first < in->count; first += CALL) {
        int64_t n = in->count - first < CALL ? in->count - first : CALL;
        tfm_translation *r = NULL;
        if (tfm_translate(translator, (const char *const *)in->text + first, n, options, &r) !=
            TFM_OK) {
            fprintf(stderr, "%s: translating: %s\n", report.program, tfm_last_error());
            return -1;
        }
        for (int64_t i = 0; i < n; i++, out->count++) {
            int32_t truncated = 0;
            tfm_translation_source_tokens(r, i, NULL, &truncated);
            if (truncated)
                fprintf(stderr, "%s: a line of the catalog is cut to the model's sources\n",
                        report.program);
            if (!(out->text[out->count] = strdup(tfm_translation_text(r, i, 0)))) {
                tfm_translation_free(r);
                return -1;
            }
        }
        tfm_translation_free(r);
    }
    return 0;
}

/* Each wanted message of a domain, in order: its texts added to t (out
 * NULL), or its translation applied. 0, or -1 out of memory. */
static int each_message(const catalog_job *job, po_file_t file, const char *domain,
                        int nplurals, texts *t, const texts *out, int64_t *next, tally *count)
{
    po_message_iterator_t it = po_message_iterator(file, domain);
    po_message_t m;
    int status = 0;
    tally ignored = {0};
    while (status == 0 && (m = po_next_message(it))) {
        if (!wanted(job, m, out ? count : &ignored))
            continue;
        const char *singular = po_message_msgid(m), *plural = po_message_msgid_plural(m);
        if (!out) {
            if (each_line(singular, t, NULL, NULL, NULL) < 0 ||
                (plural && each_line(plural, t, NULL, NULL, NULL) < 0))
                status = -1;
            continue;
        }
        texts view = {out->text + *next, out->count - *next, 0};
        int64_t used = 0;
        char *one = joined(singular, &view, &used);
        char *many = plural ? joined(plural, &view, &used) : NULL;
        *next += used;
        if (!one || (plural && !many)) {
            /* a line with no translation: the entry as it was (skip its
             * texts; joined stopped at the empty one) */
            int64_t lines = 0;
            texts counting = {0};
            each_line(singular, &counting, NULL, NULL, NULL);
            if (plural)
                each_line(plural, &counting, NULL, NULL, NULL);
            lines = counting.count;
            texts_free(&counting);
            *next += lines - used;
            if (is_untranslated(m))
                add_note(m, "the model gave an empty translation");
            count->empty++;
        } else {
            /* a translator's rule: the forms a single item takes (form 0,
             * in every language with two forms or more) from msgid, the
             * others from msgid_plural */
            char *forms[100];
            for (int i = 0; i < nplurals && i < 100; i++)
                forms[i] = plural && (i > 0 || nplurals == 1) ? many : one;
            apply(m, it, forms, plural ? nplurals : 1, count);
        }
        free(one);
        free(many);
    }
    po_message_iterator_free(it);
    return status;
}

int catalog_translate(const catalog_job *job, tfm_translator *translator,
                      const tfm_translate_options *options)
{
    report.program = job->program;
    struct stat about;
    if (check_out(job) < 0)
        return EXIT_FAILURE;
    int readable = stat(job->in, &about) == 0;
    if (!readable || !S_ISREG(about.st_mode)) {
        fprintf(stderr, "%s: cannot read the catalog '%s': %s\n", job->program, job->in,
                readable ? "not a regular file" : strerror(errno));
        return EXIT_FAILURE;
    }
    jmp_buf failed;
    report.fatal = &failed;
    po_file_t file = NULL;
    if (setjmp(failed)) {
        report.fatal = NULL;
        fprintf(stderr, "%s: cannot read the catalog '%s'\n", job->program, job->in);
        return EXIT_FAILURE;
    }
    errno = 0;
    report.problems = 0;
    file = po_file_read(job->in, &handler);
    report.fatal = NULL;
    if (file && report.problems) {
        fprintf(stderr, "%s: cannot read the catalog '%s': %d error%s\n", job->program,
                job->in, report.problems, report.problems > 1 ? "s" : "");
        po_file_free(file);
        return EXIT_FAILURE;
    }
    if (!file) {
        fprintf(stderr, "%s: cannot read the catalog '%s': %s\n", job->program, job->in,
                strerror(errno ? errno : EIO));
        return EXIT_FAILURE;
    }
    int status = EXIT_FAILURE;
    texts in = {0}, out = {0};
    tally count = {0};
    const char *const *domains = po_file_domains(file);
    int nplurals[64] = {0};
    char language[64];
    int n_domains = 0;
    for (; domains[n_domains] && n_domains < 64; n_domains++)
        if (prepare_header(job, file, domains[n_domains], language, sizeof language,
                           &nplurals[n_domains]) < 0)
            goto done;
    for (int d = 0; d < n_domains; d++)
        if (each_message(job, file, domains[d], nplurals[d], &in, NULL, NULL, NULL) < 0)
            goto nomem;
    if (translate_all(translator, options, &in, &out) < 0) {
        if (out.count < in.count && tfm_last_status() == TFM_OK)
            goto nomem;
        goto done;
    }
    int64_t next = 0;
    for (int d = 0; d < n_domains; d++)
        if (each_message(job, file, domains[d], nplurals[d], NULL, &out, &next, &count) < 0)
            goto nomem;
    if (write_atomically(job, file) < 0)
        goto done;
    fprintf(stderr, "%s: %s (%s): %lld entries machine-translated, marked fuzzy; left as "
            "they were: %lld whose translation failed msgfmt's checks and %lld with an empty "
            "one (a comment on each untranslated one says why), %lld translated and %lld "
            "fuzzy ones%s\n", job->program, job->out, language, (long long)count.translated,
            (long long)count.refused, (long long)count.empty, (long long)count.kept,
            (long long)count.kept_fuzzy, count.kept + count.kept_fuzzy && !job->all
                                              ? " (--all translates them too)" : "");
    status = EXIT_SUCCESS;
    goto done;
nomem:
    fprintf(stderr, "%s: out of memory for the texts of '%s'\n", job->program, job->in);
done:
    texts_free(&in);
    texts_free(&out);
    po_file_free(file);
    return status;
}
