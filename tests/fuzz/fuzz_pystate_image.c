/* fuzz_pystate_image.c - code-object, frame and thread-name reading over a fake memory
 * image: the input is the target's memory (an rmem image at IMG), read with the layout of
 * one real CPython version, as the sampler, the memory shim's resolver and the thread-name
 * refresh read a live target. Input: version selector, code-object offset, instruction
 * offset, then the image. Pointers in the image that fall inside [IMG, IMG + size) lead
 * back into it, so the fuzzer can build chains of objects. */
#include "fuzz.h"
#include "internal.h"
#include "scry_err.h"
#include "threadnames.h"

#include <unistd.h>

#define IMG 0x100000ull

static const int minors[] = {6, 7, 8, 9, 10, 11, 12, 13};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t vsel;
    uint16_t code_off;
    uint32_t insn;
    fuzz_take(&data, &size, &vsel, 1);
    fuzz_take(&data, &size, &code_off, 2);
    fuzz_take(&data, &size, &insn, 4);
    if (size > (1u << 16))
        size = 1u << 16;
    int minor = minors[vsel % (sizeof minors / sizeof minors[0])];
    const pystate_layout_t *layout = pystate_layout_for(3, minor);
    if (!layout)
        return 0;
    /* One target for the whole run (its code cache and prefetch plan are megabytes):
     * each input gets a fresh memory image, layout and thread-name state. The code cache
     * validates every hit against the image, as it does against a live target. */
    static pystate_target_t *t;
    static pystate_name_map_t map;
    if (!t) {
        strtab_t *strings = strtab_new();
        t = calloc(1, sizeof *t);
        if (!strings || !t)
            abort();
        t->pid = getpid(); /* /proc/self/task for pthread -> tid: harmless */
        t->strings = strings;
        t->s_unknown = strtab_intern(strings, "<unknown>");
        t->s_empty = strtab_intern(strings, "");
        t->prefetch = pystate__pf_new();
        if (!t->prefetch || pystate__codecache_init(&t->codes) != 0)
            abort();
    }
    rmem_free(t->mem);
    t->mem = rmem_open_image();
    if (!t->mem || (size && rmem_image_add(t->mem, IMG, data, size) != 0))
        abort();
    t->layout = *layout;
    t->pthread_tid_offset = -1;
    t->code_type = 0;
    pystate__choose_code_key(t);
    memset(&t->names, 0, sizeof t->names);
    t->runtime = IMG;
    t->interp_head_addr = IMG;
    t->tstate_current_addr = IMG + 8;
    t->info.major = 3;
    t->info.minor = minor;
    t->info.runtime_addr = IMG;
    t->finalizing_addr =
        layout->runtime_finalizing >= 0 ? IMG + (uint64_t)layout->runtime_finalizing : 0;

    scry_frame_t fr;
    int rc = pystate_resolve_code(t, IMG + code_off, insn, &fr);
    (void)rc;
    pystate_snapshot_t *snap = pystate_snapshot_new();
    if (snap) {
        (void)pystate_sample(t, snap);
        size_t n = pystate_snapshot_count(snap);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(pystate_snapshot_thread(snap, i) != NULL);
        pystate_snapshot_free(snap);
    }
    map.count = 0;
    rc = pystate__thread_names(t, IMG + (code_off & 0xff8), &map);
    FUZZ_ASSERT(map.count <= PYSTATE_NAMES_MAX);
    return 0;
}
