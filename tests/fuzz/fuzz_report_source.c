/* fuzz_report_source.c - source loading in the report: a file's bytes (from the target's
 * root: hostile) split into lines, then the lines looked up as the text and HTML reports
 * do, through a reader that serves the input. */
#include "fuzz.h"
#include "report_internal.h"
#include "scry_err.h"

typedef struct serve {
    const uint8_t *data;
    size_t size;
} serve_t;

static int serve(void *ctx, const char *file, char **data, size_t *len)
{
    serve_t *s = ctx;
    (void)file;
    char *d = fuzz_cstr(s->data, s->size);
    if (!d)
        return SCRY_E_NOMEM;
    *data = d;
    *len = s->size;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    serve_t s = {data, size};
    report_options_t o = {.read_source = serve, .source_ctx = &s};
    report__src_t *c = report__src_new(&o);
    if (!c)
        return 0;
    static const char file[] = "/srv/app.py";
    size_t n;
    for (int32_t line = -1; line < 70; line++) {
        const char *l = report__src_line(c, file, line, &n);
        if (l)
            FUZZ_ASSERT(n <= strlen(l) && n <= size);
    }
    (void)report__src_line(c, file, INT32_MAX, &n);
    FUZZ_ASSERT(report__src_error(c, file) == 0);
    report__src_free(c);
    return 0;
}
