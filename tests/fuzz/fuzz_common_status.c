/* fuzz_common_status.c - the credentials of /proc/PID/status used to read source files as
 * the target's user (common/srcread.c). */
#include "fuzz.h"
#include "scry_err.h"
#include "srcread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_copy(data, size);
    if (!text)
        return 0;
    srcread_creds_t c;
    int rc = srcread_parse_status(text, size, &c);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_CORRUPT);
    if (rc == 0)
        FUZZ_ASSERT(c.ngroups <= SRCREAD_MAX_GROUPS);
    free(text);
    return 0;
}
