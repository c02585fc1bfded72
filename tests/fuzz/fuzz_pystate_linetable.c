/* fuzz_pystate_linetable.c - every line-table format (lnotab, 3.10 PEP 626, 3.11+ PEP 657).
 * Input: style byte, co_firstlineno (int32, host order), the table. Checks the walk's
 * promises (non-empty ranges in offset order) and that a lookup of each range's start gives
 * that range's line. */
#include "fuzz.h"
#include "linetable.h"
#include "scry_err.h"

typedef struct walk {
    uint32_t last_end;
    int n;
    pystate_line_range_t r[64];
} walk_t;

static int on_range(const pystate_line_range_t *r, void *ctx)
{
    walk_t *w = ctx;
    FUZZ_ASSERT(r->start < r->end);
    FUZZ_ASSERT(r->start >= w->last_end);
    w->last_end = r->end;
    if (w->n < 64)
        w->r[w->n++] = *r;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t style;
    int32_t first;
    fuzz_take(&data, &size, &style, 1);
    fuzz_take(&data, &size, &first, 4);
    style %= 4; /* 3: an invalid style, refused */
    walk_t w = {0};
    int rc = pystate_linetable_foreach(style, data, size, first, on_range, &w);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_CORRUPT || (style == 3 && rc == SCRY_E_INVAL));
    for (int i = 0; rc == 0 && i < w.n; i++) {
        int line = -7;
        int lr = pystate_line_for_offset(style, data, size, first, w.r[i].start, &line);
        if (w.r[i].line >= 0)
            FUZZ_ASSERT(lr == 0 && line == w.r[i].line);
        else
            FUZZ_ASSERT(lr == SCRY_E_NOTFOUND && line == -7);
    }
    for (uint32_t off = 0; off < 2 * size + 64 && off < 512; off += 2) {
        int line;
        int lr = pystate_line_for_offset(style, data, size, first, off, &line);
        FUZZ_ASSERT(lr == 0 || lr == SCRY_E_NOTFOUND || lr == SCRY_E_CORRUPT ||
                    (style == 3 && lr == SCRY_E_INVAL));
    }
    return 0;
}
