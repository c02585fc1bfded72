#include "strtab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct strtab_entry {
    uint64_t hash;
    size_t len;
    char *str;
} strtab_entry_t;

struct strtab {
    strtab_entry_t *slots;
    size_t cap; /* power of two */
    size_t count;
};

static uint64_t strtab_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

strtab_t *strtab_new(void)
{
    strtab_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->cap = 256;
    t->slots = calloc(t->cap, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

void strtab_free(strtab_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].str);
    free(t->slots);
    free(t);
}

static int strtab_grow(strtab_t *t)
{
    size_t ncap = t->cap * 2;
    strtab_entry_t *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].str)
            continue;
        size_t j = t->slots[i].hash & (ncap - 1);
        while (n[j].str)
            j = (j + 1) & (ncap - 1);
        n[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = n;
    t->cap = ncap;
    return 0;
}

const char *strtab_intern_n(strtab_t *t, const char *s, size_t len)
{
    uint64_t h = strtab_hash(s, len);
    size_t j = h & (t->cap - 1);
    while (t->slots[j].str) {
        strtab_entry_t *e = &t->slots[j];
        if (e->hash == h && e->len == len && memcmp(e->str, s, len) == 0)
            return e->str;
        j = (j + 1) & (t->cap - 1);
    }
    if ((t->count + 1) * 4 > t->cap * 3) {
        if (strtab_grow(t) != 0)
            return NULL;
        return strtab_intern_n(t, s, len);
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = 0;
    t->slots[j] = (strtab_entry_t){.hash = h, .len = len, .str = copy};
    t->count++;
    return copy;
}

const char *strtab_intern(strtab_t *t, const char *s)
{
    return strtab_intern_n(t, s, strlen(s));
}

size_t strtab_count(const strtab_t *t)
{
    return t->count;
}
