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

#endif
