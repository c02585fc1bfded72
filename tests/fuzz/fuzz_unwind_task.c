/* fuzz_unwind_task.c - /proc/PID/task/TID/stat, syscall and schedstat parsers. Input: one
 * selector byte, then the file content. */
#include "classify.h"
#include "fuzz.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t which;
    fuzz_take(&data, &size, &which, 1);
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    int rc;
    switch (which % 3) {
    case 0: {
        char state = 0;
        rc = unwind_parse_stat_state(text, size, &state);
        break;
    }
    case 1: {
        unwind_syscall_t sc;
        rc = unwind_parse_syscall(text, size, &sc);
        break;
    }
    default: {
        uint64_t run, wait, slices;
        rc = unwind_parse_schedstat(text, size, &run, &wait, &slices);
        break;
    }
    }
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_CORRUPT);
    free(text);
    return 0;
}
