/* The main() every Check suite of libtfm uses. */
#ifndef TFM_TESTS_CHECK_MAIN_H
#define TFM_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define TFM_CHECK_MAIN(make_suite)                                             \
    int main(void)                                                             \
    {                                                                          \
        SRunner *runner = srunner_create(make_suite());                        \
        srunner_run_all(runner, CK_NORMAL);                                    \
        int failed = srunner_ntests_failed(runner);                            \
        srunner_free(runner);                                                  \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;                           \
    }

#endif
