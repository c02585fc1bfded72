/* shim_microbench.c - the cost of the shim's hooks per call: N malloc/free pairs of SIZE
 * bytes (and N memcpy of SIZE bytes), in ns per call. Run it with and without
 * LD_PRELOAD=libscry-shim.so (and SCRY_RING of a live ring) and subtract.
 *
 * usage: shim_microbench [N] [SIZE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "scry_time.h"

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 32;
    void *volatile keep[64];
    void *(*volatile mc)(void *, const void *, size_t) = memcpy; /* a real call */
    char src[256] = {1}, dst[256];
    double best_m = 1e9, best_c = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double t = ((double)scry_now_ns() / 1e9);
        for (long i = 0; i < n; i++) {
            void *p = malloc(size);
            keep[i & 63] = p;
            free(p);
        }
        double m = (((double)scry_now_ns() / 1e9) - t) / n * 1e9;
        t = ((double)scry_now_ns() / 1e9);
        for (long i = 0; i < n; i++)
            mc(dst, src, 64);
        double c = (((double)scry_now_ns() / 1e9) - t) / n * 1e9;
        best_m = m < best_m ? m : best_m;
        best_c = c < best_c ? c : best_c;
    }
    printf("malloc+free %.2f ns  memcpy(64) %.2f ns\n", best_m, best_c);
    (void)keep;
    return 0;
}
