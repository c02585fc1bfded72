/* json_out.c - JSON string output for other front ends (e.g. 'scry dump --json'). */
#include "report.h"
#include "report_internal.h"

#include "scry_err.h"

int report_json_fputs(FILE *out, const char *s)
{
    if (!out)
        return SCRY_E_INVAL;
    report__sb_t b = {0};
    report__sb_json(&b, s ? s : "");
    int err = report__sb_flush(&b, out);
    report__sb_free(&b);
    return err;
}
