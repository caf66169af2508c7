/* The options structs of the public API all begin with uint32_t
 * struct_size, the size of the struct the CALLER was compiled with: each
 * tfm_X_options_init is a macro that passes sizeof to its _sized function.
 * So a struct only ever grows at its end, no struct is nested in another,
 * and the library writes and reads exactly the caller's bytes: an older
 * program's shorter struct gets the newer fields' defaults, and a newer
 * program's longer struct is read as far as this library knows it, its
 * unknown tail required to be zero (unset). */
#ifndef TFM_CORE_OPTIONS_H
#define TFM_CORE_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

/* Options structs larger than this are not options structs. */
#define TFM__MAX_OPTIONS_SIZE 65536u

/* The body of every tfm_X_options_init_sized: the library's defaults
 * (defaults_size bytes) into the caller's struct of struct_size bytes,
 * zeros past what this library knows, and struct_size. */
void tfm__init_options(void *out, uint32_t struct_size, const void *defaults,
                       size_t defaults_size);

/* Copies the caller's struct over the defaults already in *out, as far as
 * the caller's struct_size goes: a program built against an older, shorter
 * layout keeps the newer fields' defaults; one built against a newer layout
 * has the fields this library knows read, provided the rest is zero. Sets
 * out's struct_size to its own size. 0, or -1 with the error set when given
 * is NULL, its struct_size does not reach min_size bytes or is absurd (init
 * names the function that sets it), or its unknown tail is set. */
int tfm__read_options(const char *op, const char *init, const void *given, void *out,
                      size_t out_size, size_t min_size);

/* The reverse, for getters: copies the library's struct src into the
 * caller's out as far as out's struct_size goes, keeping that size. 0, or
 * -1 with the error set when out's struct_size is below min_size. */
int tfm__write_options(const char *op, const char *init, const void *src, void *out,
                       size_t src_size, size_t min_size);

#endif
