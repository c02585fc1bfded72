/* fuzz.h - what every libFuzzer target of tests/fuzz shares (header-only). */
#ifndef SCRY_FUZZ_H
#define SCRY_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the code under test promises was broken: report and crash, so libFuzzer keeps
 * the input. */
#define FUZZ_ASSERT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: FUZZ_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Takes N bytes from the front of *DATA (zero-filled past its end) into OUT. */
static inline void fuzz_take(const uint8_t **data, size_t *size, void *out, size_t n)
{
    size_t k = *size < n ? *size : n;
    memset(out, 0, n);
    memcpy(out, *data, k);
    *data += k;
    *size -= k;
}

/* A malloc'd copy of the input of exactly SIZE bytes (at least 1), so ASan sees any read
 * past its end (NULL when out of memory). */
static inline void *fuzz_copy(const uint8_t *data, size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p)
        memcpy(p, data, size);
    return p;
}

/* A malloc'd NUL-terminated copy of the input (NULL when out of memory). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = 0;
    }
    return s;
}

#endif
