/* scry_grow.h - arrays that grow by doubling. */
#ifndef SCRY_GROW_H
#define SCRY_GROW_H

#include <stddef.h>

/* ARR (room for *CAP elements of ELEM bytes; NULL when *CAP is 0) with room for NEED
 * elements: ARR itself when it has it (NULL for NEED 0 and no array yet: grow only when
 * NEED > *CAP where that can happen), else ARR reallocated to *CAP doubled (FIRST when
 * *CAP is 0) until NEED fits, at most MAX, and *CAP updated. Returns NULL without memory
 * or when NEED is over MAX; ARR and *CAP are then unchanged (the caller still owns ARR). */
void *scry_grow(void *arr, size_t *cap, size_t elem, size_t need, size_t first, size_t max);

/* Appends the LEN bytes at S and a NUL to the string pool *POOL (*USED of *CAP bytes taken;
 * grown by scry_grow from FIRST bytes). Returns 0 with the string's offset in *OFF, or
 * SCRY_E_NOMEM (the pool unchanged). */
int scry_pool_put(char **pool, size_t *used, size_t *cap, size_t first, const char *s, size_t len,
                  size_t *off);

#endif
