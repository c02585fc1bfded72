/* fuzz_core_parse.c - a core file as hostile input: its ELF and program headers, notes
 * (threads, signal, process, auxiliary vector, mapped files) and the memory reader over its
 * segments. Files the core names are looked for under an empty root, so the run never
 * depends on the host's files. */
#include "core.h"
#include "fuzz.h"
#include "maps.h"
#include "scry_err.h"

#include <stdlib.h>
#include <unistd.h>

static char root[] = "/tmp/scry-fuzz-core-XXXXXX"; /* empty: no file is ever found */

static void remove_root(void)
{
    rmdir(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int made;
    if (!made && mkdtemp(root) != NULL) {
        made = 1;
        atexit(remove_root);
    }
    core_opts_t opts = {.sysroot = root, .exe = "/nonexistent-scry-fuzz/python3"};
    char why[256];
    int err = 0;
    core_t *c = core_open_mem(data, size, &opts, &err, why, sizeof why);
    if (!c) {
        FUZZ_ASSERT(err < 0 && why[0]);
        return 0;
    }
    FUZZ_ASSERT(core_nthreads(c) > 0 && core_thread(c, core_nthreads(c)) == NULL);
    const core_siginfo_t *si = core_siginfo(c);
    if (si->signo)
        FUZZ_ASSERT(core_thread(c, 0)->tid == si->tid || si->tid == 0 || core_nthreads(c) > 0);
    (void)core_comm(c);
    (void)core_args(c);
    (void)core_exe(c);
    rmem_t *m = core_reader(c);
    if (m) {
        char *text = NULL;
        size_t len = 0;
        if (rmem_maps_text(m, &text, &len) == 0) {
            elfsym_maps_t *maps = elfsym_maps_parse(text, len, &err);
            for (size_t i = 0; maps && i < elfsym_maps_count(maps) && i < 64; i++) {
                const elfsym_map_t *e = elfsym_maps_get(maps, i);
                uint8_t buf[256];
                long got = rmem_read_partial(m, e->start, buf, sizeof buf);
                FUZZ_ASSERT(got >= 0 && (size_t)got <= sizeof buf);
                char path[64];
                (void)rmem_file_path(m, e->path, path, sizeof path);
            }
            elfsym_maps_free(maps);
        }
        free(text);
        for (size_t i = 0; i < core_nthreads(c) && i < 64; i++) {
            uint8_t buf[64];
            (void)rmem_read(m, core_thread(c, i)->regs.sp, buf, sizeof buf);
        }
        rmem_free(m);
    }
    (void)core_check_files(c);
    (void)core_problems(c);
    core_free(c);
    return 0;
}
