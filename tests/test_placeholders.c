/* The placeholder rules (lib/translate/placeholders.c) on software
 * messages: each message's spans, as text, in order, with their kinds. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "translate/placeholders.h"

/* The spans of text joined by '|' ("" for none) must be `expected`, and
 * the unnumbered printf directives `ordered` of them. */
static void check_spans(const char *text, const char *const *literals, int64_t n_literals,
                        const char *expected, int64_t ordered)
{
    tfm__span *spans = NULL;
    int64_t count = -1;
    ck_assert_int_eq(tfm__placeholders_find("test", text, (int64_t)strlen(text), literals,
                                            n_literals, &spans, &count),
                     TFM_OK);
    char got[512] = "";
    int64_t in_order = 0;
    for (int64_t i = 0; i < count; i++) {
        if (i)
            strcat(got, "|");
        strncat(got, text + spans[i].start, (size_t)spans[i].length);
        in_order += tfm__span_ordered(&spans[i]);
        if (i)
            ck_assert_int_ge(spans[i].start, spans[i - 1].start + spans[i - 1].length);
    }
    ck_assert_msg(strcmp(got, expected) == 0, "%s: spans \"%s\", expected \"%s\"", text, got,
                  expected);
    ck_assert_msg(in_order == ordered, "%s: %lld ordered, expected %lld", text,
                  (long long)in_order, (long long)ordered);
    free(spans);
}

START_TEST(printf_directives)
{
    check_spans("Computing size for %s", NULL, 0, "%s", 1);
    check_spans("File \"%s\" was renamed to \"%s\".", NULL, 0, "%s|%s", 2);
    check_spans("%d of %d files (%-10.3lf%%)", NULL, 0, "%d|%d|%-10.3lf|%%", 3);
    check_spans("%'d bytes, %zu items, %lld ms, %*d wide, %.*s", NULL, 0,
                "%'d|%zu|%lld|%*d|%.*s", 5);
    check_spans("%2$s is owned by %1$s", NULL, 0, "%2$s|%1$s", 0);
    check_spans("%1$*2$d", NULL, 0, "%1$*2$d", 0);
    check_spans("%hhx %hu %Lf %jd %td %p %n %c %X %#o %+e %G %a", NULL, 0,
                "%hhx|%hu|%Lf|%jd|%td|%p|%n|%c|%X|%#o|%+e|%G|%a", 13);
    /* not directives: a lone percent, no conversion */
    check_spans("100%", NULL, 0, "", 0);
    check_spans("50%! %y %-", NULL, 0, "", 0);
    /* as gettext reads it: "%-o" is a directive */
    check_spans("50%-off", NULL, 0, "%-o", 1);
    /* as gettext reads it: "% s" is a directive with the space flag */
    check_spans("100% sure", NULL, 0, "% s", 1);
}
END_TEST

START_TEST(python_fields)
{
    check_spans("Deleted %(count)d files from %(dir)s", NULL, 0, "%(count)d|%(dir)s", 0);
    check_spans("%(size)-10.2f", NULL, 0, "%(size)-10.2f", 0);
    check_spans("Hello {name}, you have {0} messages {}", NULL, 0, "{name}|{0}|{}", 0);
    check_spans("{name!r:>10} {user.name} {items[0]}", NULL, 0,
                "{name!r:>10}|{user.name}|{items[0]}", 0);
    /* escaped braces are text, and so is an unclosed field */
    check_spans("{{literal}} and {open", NULL, 0, "", 0);
    check_spans("{{{x}}}", NULL, 0, "{x}", 0);
}
END_TEST

START_TEST(shell_and_markup)
{
    check_spans("Set $HOME or ${XDG_CONFIG_HOME} first; costs $5", NULL, 0,
                "$HOME|${XDG_CONFIG_HOME}", 0);
    check_spans("<b>Bold</b> and <a href=\"http://x.org/?a<b\">link</a><br/>", NULL, 0,
                "<b>|</b>|<a href=\"http://x.org/?a<b\">|</a>|<br/>", 0);
    check_spans("Tom &amp; Jerry&#160;&#xA0; & co; a < b > c", NULL, 0,
                "&amp;|&#160;|&#xA0;", 0);
    check_spans("if a <3 then", NULL, 0, "", 0);
}
END_TEST

START_TEST(caller_literals)
{
    const char *const literals[] = {"GNOME", "@@", "@@VERSION@@"};
    check_spans("GNOME @@VERSION@@ and @@ with %s", literals, 3, "GNOME|@@VERSION@@|@@|%s", 1);
    /* a literal wins over the rules where both begin */
    const char *const percent[] = {"%s%s"};
    check_spans("%s%s %s", percent, 1, "%s%s|%s", 1);
}
END_TEST

START_TEST(plain_text_has_none)
{
    check_spans("", NULL, 0, "", 0);
    check_spans("Cannot open the file", NULL, 0, "", 0);
    check_spans("Save the document before closing?", NULL, 0, "", 0);
}
END_TEST

static Suite *placeholders_suite(void)
{
    Suite *s = suite_create("placeholders");
    TCase *c = tcase_create("rules");
    tcase_add_test(c, printf_directives);
    tcase_add_test(c, python_fields);
    tcase_add_test(c, shell_and_markup);
    tcase_add_test(c, caller_literals);
    tcase_add_test(c, plain_text_has_none);
    suite_add_tcase(s, c);
    return s;
}

TFM_CHECK_MAIN(placeholders_suite)
