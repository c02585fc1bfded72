/* grab_dep.c - found only through libshim_test_grab.so's RUNPATH; loaded by it with dlopen
 * after the shim was injected (see grab.c). */
#include <stdlib.h>

#define DEP_MAX 4096

static void *kept[DEP_MAX];
static int nkept;

int grab_dep_keep(size_t size, int count);

/* Allocates COUNT blocks of SIZE bytes and keeps them. Returns how many were kept. */
int grab_dep_keep(size_t size, int count)
{
    int n = 0;
    for (int i = 0; i < count && nkept < DEP_MAX; i++) {
        char *p = malloc(size);
        if (!p)
            break;
        p[0] = 1;
        kept[nkept++] = p;
        n++;
    }
    return n;
}
