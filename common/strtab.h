/* strtab.h - a string interner.
 *
 * Interned strings live as long as the table: equal strings get the same pointer, so
 * frames compare by pointer. Not thread-safe.
 */
#ifndef SCRY_STRTAB_H
#define SCRY_STRTAB_H

#include <stddef.h>

typedef struct strtab strtab_t;

/* Creates an empty table. Returns NULL when out of memory. */
strtab_t *strtab_new(void);

/* Frees the table and every string it interned. NULL is a no-op. */
void strtab_free(strtab_t *t);

/* Returns the interned copy of the LEN bytes at S (need not be NUL-terminated; a NUL
 * inside is kept as part of the key but ends the C string). The result is
 * NUL-terminated and valid until strtab_free. Returns NULL only when out of memory. */
const char *strtab_intern_n(strtab_t *t, const char *s, size_t len);

/* Same for a NUL-terminated string. */
const char *strtab_intern(strtab_t *t, const char *s);

/* Number of distinct strings held. */
size_t strtab_count(const strtab_t *t);

#endif
