/* json_out.c - JSON string output for other front ends (e.g. 'scry dump --json'). */
#include "report.h"
#include "report_internal.h"

int report_json_fputs(FILE *out, const char *s)
{
    report__sb_t b = {0};
    report__sb_json(&b, s ? s : "");
    int err = b.oom ? -1 : 0;
    if (!err && b.len && fwrite(b.buf, 1, b.len, out) != b.len)
        err = -1;
    report__sb_free(&b);
    return err;
}
