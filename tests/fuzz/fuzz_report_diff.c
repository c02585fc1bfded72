/* fuzz_report_diff.c - the JSON report loader of 'scry diff' (report/diff.c): any bytes in a
 * file give 0 or a negative code with a message, never a crash; what loads is compared
 * with itself in both formats. */
#include "fuzz.h"
#include "report.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so ASan sees any read past the end */
    char *buf = fuzz_copy(data, size);
    report_diff_t *d = report_diff_new();
    if (!buf || !d) {
        free(buf);
        report_diff_free(d);
        return 0;
    }
    char msg[256];
    msg[0] = '\0';
    int rc = report_diff_load(d, 0, buf, size, msg, sizeof msg);
    FUZZ_ASSERT(rc == 0 || (rc < 0 && (msg[0] != '\0' || rc == SCRY_E_NOMEM)));
    if (rc == 0 && report_diff_load(d, 1, buf, size, msg, sizeof msg) == 0) {
        FILE *out = fopen("/dev/null", "w");
        if (out) {
            FUZZ_ASSERT(report_diff_write(d, REPORT_FORMAT_TEXT, out, NULL) == 0);
            FUZZ_ASSERT(report_diff_write(d, REPORT_FORMAT_FLAMEGRAPH, out, NULL) == 0);
            FUZZ_ASSERT(report_diff_write(d, REPORT_FORMAT_HTML, out, NULL) == SCRY_E_INVAL);
            fclose(out);
        }
    }
    report_diff_free(d);
    free(buf);
    return 0;
}
