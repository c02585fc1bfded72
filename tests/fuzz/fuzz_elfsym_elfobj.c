/* fuzz_elfsym_elfobj.c - an ELF object as scry loads it from a target's mapping: headers,
 * sections, segments, symbol tables, build-id note, .gnu_debuglink, the debug-file lookup,
 * then every query the sampler and the injector make. The input is written to a private
 * file and opened by path, as a mapped file is. */
#include "elfobj.h"
#include "elfsym_internal.h"
#include "fuzz.h"
#include "pyversion.h"
#include "scry_err.h"

#include <fcntl.h>
#include <unistd.h>

static char dir[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        strcpy(dir, "/tmp/scry-fuzz-elf-XXXXXX");
        if (!mkdtemp(dir))
            abort();
    }
    char path[96];
    snprintf(path, sizeof path, "%s/obj.so", dir);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    int err = 0;
    elfsym_obj_t *obj = elfsym_obj_open(path, &err);
    if (obj) {
        size_t blen = 0;
        const uint8_t *bid = elfsym_obj_build_id(obj, &blen);
        FUZZ_ASSERT(!bid || blen > 0);
        (void)elfsym_obj_build_id_hex(obj);
        const char *dl = elfsym_obj_debuglink(obj);
        char *dbg = elfsym__find_debug_file("/proc/1/root/usr/lib/x.so", bid, blen, dl, 0);
        free(dbg);
        size_t n = elfsym_obj_nsyms(obj);
        uint64_t probe = 0;
        for (size_t i = 0; i < n && i < 64; i++) {
            const elfsym_sym_t *s = elfsym_obj_sym(obj, i);
            FUZZ_ASSERT(s && s->name && s->raw_name);
            elfsym_sym_t out;
            (void)elfsym_obj_lookup(obj, s->raw_name, &out);
            uint64_t off = 0;
            (void)elfsym_obj_addr_lookup(obj, s->value, &out, &off);
            probe = s->value;
        }
        for (size_t i = 0; i < elfsym_obj_nsections(obj) && i < 64; i++) {
            const elfsym_section_t *sec = elfsym_obj_section_at(obj, i);
            FUZZ_ASSERT(sec);
        }
        for (size_t i = 0; i < elfsym_obj_nsegments(obj) && i < 64; i++)
            FUZZ_ASSERT(elfsym_obj_segment(obj, i));
        uint8_t buf[64];
        (void)elfsym_obj_read_section(obj, ".PyRuntime", buf, sizeof buf);
        (void)elfsym_obj_read_section(obj, ".text", buf, sizeof buf);
        (void)elfsym_obj_read_vaddr(obj, probe, buf, sizeof buf);
        uint64_t target = 0;
        (void)elfsym_obj_resolve_slot(obj, probe, &target);
        elfsym_pyversion_t v;
        (void)elfsym_obj_pyversion(obj, &v);
        elfsym_obj_free(obj);
    }
    elfsym_cache_clear();
    return 0;
}
