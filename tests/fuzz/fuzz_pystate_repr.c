/* fuzz_pystate_repr.c - dump --locals' value formatter and frame-locals reader over a fake
 * memory image: the input picks a version's layout and two offsets (the object to show,
 * the frame to read), then is the target's memory (fuzz_pystate.h), where the fuzzer can build
 * type objects, names, ints, strs, tuples, lists, cells and code objects. */
#include "fuzz_pystate.h"
#include "pyrepr.h"

#include <string.h>

#define IMG FUZZ_IMG

static const int minors[] = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t vsel;
    uint16_t obj_off, frame_off;
    fuzz_take(&data, &size, &vsel, 1);
    fuzz_take(&data, &size, &obj_off, 2);
    fuzz_take(&data, &size, &frame_off, 2);
    const pystate_layout_t *layout =
        pystate_layout_for(3, minors[vsel % (sizeof minors / sizeof minors[0])]);
    if (!layout)
        return 0;
    static pystate_local_t locals[PYSTATE_LOCALS_MAX];
    pystate_target_t *t = fuzz_pystate_target(data, size, layout, layout->minor);
    pystate_value_t v;
    if (pystate_repr(t, IMG + obj_off, &v) == 0) {
        if (strlen(v.repr) >= sizeof v.repr || strlen(v.type) >= sizeof v.type)
            abort();
    }
    size_t n = 0;
    size_t max = 1 + vsel / 16; /* also fewer slots than the frame has */
    if (pystate_frame_locals(t, IMG + frame_off, locals, max, &n) == 0 && n > max)
        abort();
    return 0;
}
