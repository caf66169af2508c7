/* Reading the options structs of the public API, which all begin with
 * uint32_t struct_size so that they can grow without breaking binaries. */
#ifndef TFM_CORE_OPTIONS_H
#define TFM_CORE_OPTIONS_H

#include <stddef.h>

/* Copies the caller's struct over the defaults already in *out, as far as
 * the caller's struct_size goes: a program built against an older, shorter
 * layout keeps the newer fields' defaults; one built against a newer layout
 * has the fields this library knows read. Sets out's struct_size to its own
 * size. 0, or -1 with the error set when given is NULL or its struct_size
 * does not reach min_size bytes (init names the function that sets it). */
int tfm__read_options(const char *op, const char *init, const void *given, void *out,
                      size_t out_size, size_t min_size);

/* The reverse, for getters: copies the library's struct src into the
 * caller's out as far as out's struct_size goes, keeping that size. 0, or
 * -1 with the error set when out's struct_size is below min_size. */
int tfm__write_options(const char *op, const char *init, const void *src, void *out,
                       size_t src_size, size_t min_size);

#endif
