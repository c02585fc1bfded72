/* fuzz_elfsym_pyversion.c - version strings (Py_GetVersion, PY_VERSION) and interpreter or
 * libpython file names. */
#include "fuzz.h"
#include "pyversion.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *raw = fuzz_copy(data, size);
    char *s = fuzz_cstr(data, size);
    if (!raw || !s)
        goto out;
    elfsym_pyversion_t v;
    int rc = elfsym_pyversion_parse(raw, size, &v);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_NOTFOUND);
    if (rc == 0)
        FUZZ_ASSERT(v.major >= 0 && v.minor >= 0 && v.micro >= 0 && v.serial >= 0);
    int major = -1, minor = -1;
    rc = elfsym_pyversion_from_name(s, &major, &minor);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_NOTFOUND);
    if (rc == 0)
        FUZZ_ASSERT(major >= 0 && minor >= 0);
    (void)elfsym_is_libpython_name(s);
out:
    free(raw);
    free(s);
    return 0;
}
