/* fuzz_pystate.h - the fake target the pystate fuzzers read (header-only): a
 * pystate_target_t whose memory is the fuzzer's input, mapped at FUZZ_IMG, read with the
 * layout of one real CPython version. Pointers in the image that fall inside
 * [FUZZ_IMG, FUZZ_IMG + size) lead back into it, so the fuzzer can build chains of objects. */
#ifndef SCRY_FUZZ_PYSTATE_H
#define SCRY_FUZZ_PYSTATE_H

#include "fuzz.h"
#include "internal.h"

#include <unistd.h>

#define FUZZ_IMG 0x100000ull

/* The one target of the run (its code cache and prefetch plan are megabytes, so it is made
 * once), given a fresh memory image of DATA (at most 64 KiB of it), LAYOUT with its minor
 * version set to MINOR, and fresh per-target state (code type, code key, thread names).
 * The code cache validates every hit against the new image, as against a live target.
 * Aborts when out of memory. */
static inline pystate_target_t *fuzz_pystate_target(const uint8_t *data, size_t size,
                                                    const pystate_layout_t *layout, int minor)
{
    static pystate_target_t *t;
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
    if (size > (1u << 16))
        size = 1u << 16;
    rmem_free(t->mem);
    t->mem = rmem_open_image();
    if (!t->mem || (size && rmem_image_add(t->mem, FUZZ_IMG, data, size) != 0))
        abort();
    t->layout = *layout;
    t->layout.minor = minor;
    t->pthread_tid_offset = -1;
    t->code_type = 0;
    pystate__choose_code_key(t);
    memset(&t->names, 0, sizeof t->names);
    t->runtime = FUZZ_IMG;
    t->info.major = 3;
    t->info.minor = minor;
    t->info.runtime_addr = FUZZ_IMG;
    return t;
}

#endif
