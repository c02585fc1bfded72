/* fuzz_pystate_pystr.c - str state words and code-point decoding (latin-1/UCS2/UCS4, ascii).
 * Input: style, state word, kind, ascii, length (uint64), output size, then the characters.
 * Checks that the output is a NUL-terminated string of the promised size. */
#include "fuzz.h"
#include "pystr.h"
#include "scry_err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct __attribute__((packed)) {
        uint8_t style;
        uint32_t word;
        uint8_t kind, ascii;
        uint64_t length;
        uint16_t outsz;
    } in; /* the input's header, as laid out in the file */
    fuzz_take(&data, &size, &in, sizeof in);
    pystate_str_state_t st;
    int rc = pystate_str_decode_state(in.style % 3, in.word, &st);
    FUZZ_ASSERT(rc == 0 || rc == SCRY_E_UNSUPPORTED || rc == SCRY_E_CORRUPT || rc == SCRY_E_INVAL);
    size_t cap = (size_t)in.outsz % 4096 + 1;
    char *out = malloc(cap);
    if (!out)
        return 0;
    size_t written = (size_t)-1;
    /* a copy, so ASan sees reads past the characters given */
    void *chars = fuzz_copy(data, size);
    if (chars) {
        rc = pystate_str_to_utf8(chars, size, in.kind % 5, in.ascii & 1, in.length, out, cap,
                                 &written);
        if (rc == 0 || rc == SCRY_E_TRUNC) {
            FUZZ_ASSERT(written < cap && out[written] == 0 && strlen(out) == written);
        } else {
            FUZZ_ASSERT(rc == SCRY_E_INVAL);
        }
    }
    free(chars);
    free(out);
    return 0;
}
