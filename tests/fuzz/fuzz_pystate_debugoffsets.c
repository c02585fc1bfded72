/* fuzz_pystate_debugoffsets.c - _Py_DebugOffsets validation (3.13+): the start of the
 * target's _PyRuntime, as read. A block that passes must give a layout whose offsets stay
 * inside the sizes it declares (checked by the parser; here: no crash, known codes). */
#include "debug_offsets.h"
#include "fuzz.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    void *buf = fuzz_copy(data, size); /* exact size: ASan catches a read past LEN */
    if (!buf)
        return 0;
    pystate_layout_t layout;
    uint32_t ver = 0;
    int rc = pystate_debug_offsets_parse(buf, size, &layout, &ver);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_INVAL || rc == SCRY_E_CORRUPT || rc == SCRY_E_UNSUPPORTED);
    if (rc == 0)
        FUZZ_ASSERT(pystate_debug_offsets_size(ver) > 0 && pystate_debug_offsets_size(ver) <= size);
    free(buf);
    return 0;
}
