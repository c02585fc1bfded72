/* fuzz_pystate_asyncio.c - the asyncio reader (pystate/asyncio.c) over a fake memory image:
 * the _AsyncioDebug block parser, then the task-list walk (lists, tasks, names, awaited_by
 * sets, coroutine chains) over an rmem image at IMG, as 'scry dump --async' reads a live
 * 3.14/3.15 target. Input: version selector (1 byte), the 104-byte block (parsed; one that does
 * not validate is replaced by 3.14's task layout, so the walk is always fuzzed), 8 bytes that
 * choose the generator/set offsets, then the image. Pointers inside [IMG, IMG + size) lead
 * back into it, so the fuzzer can build lists and chains. */
#include "asyncio.h"
#include "debug_offsets.h"
#include "fuzz_pystate.h"
#include "scry_err.h"

#define IMG FUZZ_IMG

/* The block of Debian's 3.14.10 (_asyncio.cpython-314-x86_64-linux-gnu.so). */
static const uint64_t real_314[13] = {168, 136,   96,  108, 109, 128, 152,
                                      0,   10880, 936, 864, 872, 880};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t vsel;
    uint8_t block[PYSTATE_ASYNC_DEBUG_SIZE];
    uint8_t gsel[8];
    fuzz_take(&data, &size, &vsel, 1);
    fuzz_take(&data, &size, block, sizeof block);
    fuzz_take(&data, &size, gsel, sizeof gsel);
    const pystate_layout_t *layout = pystate_layout_for(3, 13);
    if (!layout)
        return 0;
    /* frame states and the awaited slot differ between 3.14 and 3.15 */
    pystate_target_t *t = fuzz_pystate_target(data, size, layout, 14 + (vsel & 1));

    /* The parser on the input's block; the walk with it when it validates, else with 3.14's
     * task layout and list heads placed after this layout's structs. */
    pystate_async_offsets_t o;
    char why[160];
    if (pystate_async_offsets_parse(block, sizeof block, &t->layout, &o, why, sizeof why) != 0) {
        uint64_t v[13];
        memcpy(v, real_314, sizeof v);
        v[7] = (uint64_t)t->layout.interp_size;
        v[9] = (uint64_t)t->layout.tstate_size + 64;
        v[10] = v[9] - 64;
        v[11] = v[9] - 56;
        v[12] = v[9] - 48;
        FUZZ_ASSERT(pystate_async_offsets_parse(v, sizeof v, &t->layout, &o, why, sizeof why) == 0);
    }
    int64_t ls = t->layout.iframe_localsplus > 8 ? t->layout.iframe_localsplus : 8;
    pystate_dbg_async_t g = {
        .gen_size = 8 * (int64_t)(gsel[0] % 64) + ls,
        .gen_iframe = 8 * (int64_t)(gsel[1] % 16),
        .gen_frame_state = gsel[2] % 128,
        .iframe_stackpointer = 8 * (int64_t)(gsel[3] % (uint64_t)(ls / 8)),
        .set_size = 64,
        .set_used = 8 * (int64_t)(gsel[4] % 8),
        .set_table = 8 * (int64_t)(gsel[5] % 8),
        .set_mask = 8 * (int64_t)(gsel[6] % 8),
        .llist_next = 8 * (int64_t)(gsel[7] & 1),
        .llist_prev = 8 * (int64_t) !(gsel[7] & 1),
    };
    pystate_async_snapshot_t *s = NULL;
    int rc = pystate__async_walk(t, &o, &g, &s);
    FUZZ_ASSERT((rc == 0) == (s != NULL));
    if (s) {
        FUZZ_ASSERT(s->ntasks <= PYSTATE_ASYNC_MAX_TASKS);
        for (size_t i = 0; i < s->ntasks; i++) {
            FUZZ_ASSERT(s->tasks[i].nframes <= PYSTATE_ASYNC_MAX_DEPTH);
            FUZZ_ASSERT(s->tasks[i].nawaited_by <= PYSTATE_ASYNC_MAX_AWAITERS);
            FUZZ_ASSERT(s->tasks[i].name != NULL);
        }
        pystate_async_snapshot_free(s);
    }
    /* record --async's labels: the running task of a thread state and its awaiters */
    pystate_async_labels_t *l = pystate_async_labels_new(t);
    if (l) {
        const char *lab[PYSTATE_ASYNC_LABEL_DEPTH];
        pystate__async_labels_use(l, &o, &g);
        size_t n = pystate_async_labels_get(l, IMG + 0x8000u, 1, lab, PYSTATE_ASYNC_LABEL_DEPTH);
        FUZZ_ASSERT(n <= PYSTATE_ASYNC_LABEL_DEPTH);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(lab[i] && !strncmp(lab[i], "task ", 5));
        pystate_async_labels_free(l);
    }
    return 0;
}
