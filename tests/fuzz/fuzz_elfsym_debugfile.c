/* fuzz_elfsym_debugfile.c - the separate debug file lookup: an object path (as under
 * /proc/PID/root), a .gnu_debuglink name and a build-id, all from the target. Input: path,
 * NUL, debuglink, NUL, build-id bytes. Only paths are built and stat'ed. */
#include "elfsym_internal.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    const char *path = s;
    size_t pl = strlen(path);
    const char *link = pl < size ? s + pl + 1 : NULL;
    size_t ll = link ? strlen(link) : 0;
    const uint8_t *bid = link && pl + ll + 2 <= size ? data + pl + ll + 2 : NULL;
    size_t blen = bid ? size - (pl + ll + 2) : 0;
    char *hit = elfsym__find_debug_file(path, bid, blen, link, 0);
    if (hit)
        FUZZ_ASSERT(hit[0]);
    free(hit);
    free(s);
    return 0;
}
