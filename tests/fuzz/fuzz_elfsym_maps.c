/* fuzz_elfsym_maps.c - the /proc/PID/maps parser and its lookups. */
#include "fuzz.h"
#include "maps.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_copy(data, size); /* not terminated: the parser takes LEN */
    if (!text)
        return 0;
    int err = 0;
    elfsym_maps_t *m = elfsym_maps_parse(text, size, &err);
    free(text);
    if (!m)
        return 0;
    size_t n = elfsym_maps_count(m);
    raddr_t prev_start = 0;
    for (size_t i = 0; i < n; i++) {
        const elfsym_map_t *e = elfsym_maps_get(m, i);
        FUZZ_ASSERT(e && e->path && e->start < e->end);
        FUZZ_ASSERT(i == 0 || e->start >= prev_start);
        prev_start = e->start;
        const elfsym_map_t *f = elfsym_maps_find(m, e->start);
        FUZZ_ASSERT(f && f->start <= e->start && e->start < f->end);
        FUZZ_ASSERT(elfsym_maps_find_index(m, e->end - 1) >= 0);
        (void)elfsym_map_is_file(e);
    }
    FUZZ_ASSERT(elfsym_maps_get(m, n) == NULL);
    elfsym_maps_free(m);
    return 0;
}
