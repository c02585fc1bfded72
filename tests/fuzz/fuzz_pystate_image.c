/* fuzz_pystate_image.c - code-object, frame and thread-name reading over a fake memory
 * image: the input is the target's memory (an rmem image at IMG), read with the layout of
 * one real CPython version, as the sampler, the memory shim's resolver and the thread-name
 * refresh read a live target, and (the selector's top bit) as a dump reads it, rereading a
 * torn stack with every check of a careful reader (pystate_set_torn_retries). Input:
 * version selector, code-object offset, instruction offset, then the image
 * (fuzz_pystate.h). */
#include "fuzz_pystate.h"
#include "scry_err.h"
#include "threadnames.h"

#define IMG FUZZ_IMG

static const int minors[] = {6, 7, 8, 9, 10, 11, 12, 13};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct __attribute__((packed)) {
        uint8_t vsel;
        uint16_t code_off;
        uint32_t insn;
    } in; /* the input's header, as laid out in the file */
    fuzz_take(&data, &size, &in, sizeof in);
    uint16_t code_off = in.code_off;
    int minor = minors[in.vsel % (sizeof minors / sizeof minors[0])];
    const pystate_layout_t *layout = pystate_layout_for(3, minor);
    if (!layout)
        return 0;
    static pystate_name_map_t map;
    pystate_target_t *t = fuzz_pystate_target(data, size, layout, minor);
    t->interp_head_addr = IMG;
    t->tstate_current_addr = IMG + 8;
    t->finalizing_addr =
        layout->runtime_finalizing >= 0 ? IMG + (uint64_t)layout->runtime_finalizing : 0;

    scry_frame_t fr;
    int rc = pystate_resolve_code(t, IMG + code_off, in.insn, &fr);
    (void)rc;
    /* one snapshot for the run, as the sampler keeps one (a fresh one per input, up to 4096
     * threads of buffers each, churned ASan's quarantine past libFuzzer's RSS limit) */
    static pystate_snapshot_t *snap;
    if (!snap && !(snap = pystate_snapshot_new()))
        abort();
    pystate_set_torn_retries(t, in.vsel & 0x80 ? 8 : 0);
    (void)pystate_sample(t, snap);
    size_t n = pystate_snapshot_count(snap);
    for (size_t i = 0; i < n; i++)
        FUZZ_ASSERT(pystate_snapshot_thread(snap, i) != NULL);
    map.count = 0;
    rc = pystate__thread_names(t, IMG + (code_off & 0xff8), &map);
    FUZZ_ASSERT(map.count <= PYSTATE_NAMES_MAX);
    /* the code cache's tables stay within their budget (plus the one loaded last) */
    FUZZ_ASSERT(t->codes.bytes <= PYSTATE_CODE_CACHE_BYTES + 2 * PYSTATE_TABLE_MAX);
    return 0;
}
