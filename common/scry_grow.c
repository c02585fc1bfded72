/* scry_grow.c - arrays that grow by doubling. */
#include "scry_grow.h"

#include "scry_err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *scry_grow(void *arr, size_t *cap, size_t elem, size_t need, size_t first, size_t max)
{
    if (need <= *cap)
        return arr;
    if (need > max || elem == 0 || need > SIZE_MAX / elem)
        return NULL;
    size_t ncap = *cap ? *cap : (first ? first : 1);
    while (ncap < need)
        ncap = ncap > max / 2 ? max : ncap * 2;
    if (ncap > max)
        ncap = max;
    if (ncap > SIZE_MAX / elem)
        ncap = need;
    void *n = realloc(arr, ncap * elem);
    if (n)
        *cap = ncap;
    return n;
}

int scry_pool_put(char **pool, size_t *used, size_t *cap, size_t first, const char *s, size_t len,
                  size_t *off)
{
    if (len >= SIZE_MAX - *used)
        return SCRY_E_NOMEM;
    char *p = scry_grow(*pool, cap, 1, *used + len + 1, first, SIZE_MAX);
    if (!p)
        return SCRY_E_NOMEM;
    *pool = p;
    memcpy(p + *used, s, len);
    p[*used + len] = '\0';
    *off = *used;
    *used += len + 1;
    return 0;
}
