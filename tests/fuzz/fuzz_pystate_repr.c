/* fuzz_pystate_repr.c - dump --locals' value formatter and frame-locals reader over a fake
 * memory image: the input picks a version's layout and two offsets (the object to show,
 * the frame to read), then is the target's memory at IMG. Pointers in the image that fall
 * inside [IMG, IMG + size) lead back into it, so the fuzzer can build type objects, names,
 * ints, strs, tuples, lists, cells and code objects. */
#include "fuzz.h"
#include "internal.h"
#include "pyrepr.h"

#include <string.h>

#define IMG 0x100000ull

static const int minors[] = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t vsel;
    uint16_t obj_off, frame_off;
    fuzz_take(&data, &size, &vsel, 1);
    fuzz_take(&data, &size, &obj_off, 2);
    fuzz_take(&data, &size, &frame_off, 2);
    if (size > (1u << 16))
        size = 1u << 16;
    const pystate_layout_t *layout =
        pystate_layout_for(3, minors[vsel % (sizeof minors / sizeof minors[0])]);
    if (!layout)
        return 0;
    static pystate_target_t t;
    static pystate_local_t locals[PYSTATE_LOCALS_MAX];
    rmem_free(t.mem);
    t.mem = rmem_open_image();
    if (!t.mem || (size && rmem_image_add(t.mem, IMG, data, size) != 0))
        abort();
    t.layout = *layout;
    pystate_value_t v;
    if (pystate_repr(&t, IMG + obj_off, &v) == 0) {
        if (strlen(v.repr) >= sizeof v.repr || strlen(v.type) >= sizeof v.type)
            abort();
    }
    size_t n = 0;
    size_t max = 1 + vsel / 16; /* also fewer slots than the frame has */
    if (pystate_frame_locals(&t, IMG + frame_off, locals, max, &n) == 0 && n > max)
        abort();
    return 0;
}
