/* grab.c - a small native library the shim's attach tests load with ctypes AFTER the shim
 * was injected: its malloc/memcpy calls are seen only if the objects loaded later are
 * patched too (shim_got.c's dlopen hook). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "grab_keep.h"

#define GRAB_MAX 4096

static void *kept[GRAB_MAX];
static int nkept;

int grab_keep(size_t size, int count);
int grab_release(void);
size_t grab_copy(size_t size, int count);
int grab_dep_keep(const char *soname, size_t size, int count);

/* Allocates COUNT blocks of SIZE bytes and keeps them. Returns how many were kept. */
int grab_keep(size_t size, int count)
{
    return grab_keep_blocks(kept, &nkept, GRAB_MAX, size, count);
}

/* Frees what grab_keep kept. Returns how many blocks. */
int grab_release(void)
{
    int n = nkept;
    while (nkept > 0)
        free(kept[--nkept]);
    return n;
}

/* Copies SIZE bytes COUNT times between two buffers. Returns the bytes copied. */
size_t grab_copy(size_t size, int count)
{
    char *a = calloc(1, size), *b = malloc(size);
    size_t done = 0;
    if (a && b) {
        for (int i = 0; i < count; i++) {
            memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
            done += size;
        }
    }
    free(a);
    free(b);
    return done;
}

/* dlopen()s SONAME by its bare name, which only this library's RUNPATH can find (the shim's
 * dlopen hook must call dlopen as this library), then calls its grab_dep_keep(SIZE, COUNT).
 * Returns that result, -1 when dlopen failed, -2 when the symbol is missing. */
int grab_dep_keep(const char *soname, size_t size, int count)
{
    void *h = dlopen(soname, RTLD_NOW);
    if (!h)
        return -1;
    int (*keep)(size_t, int) = (int (*)(size_t, int))dlsym(h, "grab_dep_keep");
    return keep ? keep(size, count) : -2;
}
