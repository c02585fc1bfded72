/* fuzz_report_glob.c - user's-code patterns (--include/--exclude, from the command line):
 * report_glob_check on any bytes, then an accepted pattern matched as the line views do. */
#include "fuzz.h"
#include "report.h"
#include "scry_err.h"

#include <fnmatch.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *pat = fuzz_cstr(data, size);
    if (!pat)
        return 0;
    const char *why = NULL;
    int rc = report_glob_check(pat, &why);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_INVAL);
    FUZZ_ASSERT((rc == 0) == (why == NULL));
    if (rc == 0) {
        FUZZ_ASSERT(pat[0] && strlen(pat) <= REPORT_GLOB_MAX);
        (void)fnmatch(pat, "/usr/lib/python3.12/json/decoder.py", 0);
        (void)fnmatch(pat, "<frozen importlib._bootstrap>", 0);
    }
    free(pat);
    return 0;
}
