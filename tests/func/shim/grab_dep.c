/* grab_dep.c - found only through libshim_test_grab.so's RUNPATH; loaded by it with dlopen
 * after the shim was injected (see grab.c). */
#include <stdlib.h>

#include "grab_keep.h"

#define DEP_MAX 4096

static void *kept[DEP_MAX];
static int nkept;

int grab_dep_keep(size_t size, int count);

/* Allocates COUNT blocks of SIZE bytes and keeps them. Returns how many were kept. */
int grab_dep_keep(size_t size, int count)
{
    return grab_keep_blocks(kept, &nkept, DEP_MAX, size, count);
}
