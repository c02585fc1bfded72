/* grab_keep.h - the allocation loop of the test libraries grab.c and grab_dep.c. Static, so
 * each library has its own copy: its malloc calls go through that library's own GOT, which
 * is what the attach tests check the shim patched. */
#ifndef SHIM_TEST_GRAB_KEEP_H
#define SHIM_TEST_GRAB_KEEP_H

#include <stdlib.h>

/* Allocates COUNT blocks of SIZE bytes (touching each) into KEPT, which holds *NKEPT of at
 * most MAX. Returns how many were kept. */
static int grab_keep_blocks(void **kept, int *nkept, int max, size_t size, int count)
{
    int n = 0;
    for (int i = 0; i < count && *nkept < max; i++) {
        char *p = malloc(size);
        if (!p)
            break;
        p[0] = 1;
        kept[(*nkept)++] = p;
        n++;
    }
    return n;
}

#endif
