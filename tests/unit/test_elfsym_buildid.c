/* test_elfsym_buildid.c - the build-id of a mapped object read from memory (elfsym/buildid.h):
 * this process's own executable and libc against their files, a file that is not the mapped
 * one, and hostile images (no ELF header, notes whose sizes run past their segment). */
#include "buildid.h"
#include "check.h"
#include "interp.h"
#include "maps.h"
#include "scry_err.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The mapping at file offset 0 of the file whose path ends with SUFFIX, or NULL. */
static const elfsym_map_t *offset0(const elfsym_maps_t *maps, const char *suffix)
{
    for (size_t i = 0; i < elfsym_maps_count(maps); i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        size_t n = strlen(e->path), k = strlen(suffix);
        if (e->offset == 0 && n >= k && strcmp(e->path + n - k, suffix) == 0)
            return e;
    }
    return NULL;
}

static void test_live(void)
{
    int err = 0;
    elfsym_maps_t *maps = elfsym_maps_new(getpid(), &err);
    rmem_t *mem = rmem_open_pid(getpid());
    CHECK(maps && mem, "maps and reader (%d)", err);
    if (!maps || !mem)
        return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *base = strrchr(exe, '/');
    const elfsym_map_t *me = offset0(maps, base ? base : exe);
    const elfsym_map_t *libc = offset0(maps, "/libc.so.6");
    CHECK(me && libc, "this executable's and libc's first mappings");
    if (!me || !libc)
        goto out;
    uint8_t id[64];
    size_t len = 0;
    CHECK_INT(elfsym_mapped_build_id(mem, me->start, id, &len), ==, 0, "own build-id from memory");
    elfsym_obj_t *own = elfsym_obj_open(exe, &err);
    elfsym_obj_t *lc = elfsym_obj_open(libc->path, &err);
    CHECK(own && lc, "the files open");
    size_t flen = 0;
    const uint8_t *fid = own ? elfsym_obj_build_id(own, &flen) : NULL;
    CHECK(fid && flen == len && memcmp(fid, id, len) == 0, "memory and file agree (%zu bytes)",
          len);
    CHECK_INT(elfsym_map_matches(mem, me->start, own), ==, 1, "the executable is the mapped one");
    CHECK_INT(elfsym_map_matches(mem, libc->start, lc), ==, 1, "libc is the mapped one");
    CHECK_INT(elfsym_map_matches(mem, me->start, lc), ==, 0, "libc is not the executable");
    CHECK_INT(elfsym_map_matches(mem, libc->start, own), ==, 0, "nor the other way");
    /* the checked open of a verified mapping is the plain one */
    char buf[4200];
    CHECK_INT(elfsym_map_open_checked(getpid(), mem, me, me->start, buf, sizeof buf), ==, 0,
              "checked open of our own mapping");
    elfsym_obj_free(own);
    elfsym_obj_free(lc);
out:
    rmem_free(mem);
    elfsym_maps_free(maps);
}

/* An image at 0x10000 holding an ELF header, one PT_LOAD at offset 0 and one PT_NOTE. */
static rmem_t *image(uint32_t namesz, uint32_t descsz, uint32_t note_filesz)
{
    static uint8_t img[4096];
    memset(img, 0, sizeof img);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = 2;
    eh->e_phoff = sizeof *eh;
    Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof *eh);
    ph[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_offset = 0, .p_filesz = sizeof img};
    ph[1] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = 512, .p_filesz = note_filesz};
    Elf64_Nhdr nh = {.n_namesz = namesz, .n_descsz = descsz, .n_type = NT_GNU_BUILD_ID};
    memcpy(img + 512, &nh, sizeof nh);
    memcpy(img + 512 + sizeof nh, "GNU", 4);
    memset(img + 512 + sizeof nh + 4, 0xab, 20);
    rmem_t *m = rmem_open_image();
    if (m)
        rmem_image_add(m, 0x10000, img, sizeof img);
    return m;
}

static void test_hostile(void)
{
    uint8_t id[64];
    size_t len = 0;
    rmem_t *m = image(4, 20, 12 + 4 + 20);
    CHECK_INT(elfsym_mapped_build_id(m, 0x10000, id, &len), ==, 0, "a well-formed note");
    CHECK(len == 20 && id[0] == 0xab && id[19] == 0xab, "its 20 bytes (%zu)", len);
    CHECK(elfsym_mapped_build_id(m, 0x10400, id, &len) < 0, "no ELF header there");
    CHECK(elfsym_mapped_build_id(m, 0x90000, id, &len) < 0, "unmapped");
    rmem_free(m);
    m = image(4, 0xffffff00u, 12 + 4 + 20);
    CHECK(elfsym_mapped_build_id(m, 0x10000, id, &len) < 0, "a descriptor past the segment");
    rmem_free(m);
    m = image(0xfffffffcu, 20, 12 + 4 + 20);
    CHECK(elfsym_mapped_build_id(m, 0x10000, id, &len) < 0, "a name past the segment");
    rmem_free(m);
    m = image(4, 100, 4000);
    CHECK(elfsym_mapped_build_id(m, 0x10000, id, &len) < 0 && len == 0,
          "a build-id over 64 bytes is none");
    rmem_free(m);
    m = image(4, 20, 0xffffffffu);
    CHECK(elfsym_mapped_build_id(m, 0x10000, id, &len) == 0 && len == 20,
          "a segment claiming 4 GiB: read within the first PT_LOAD");
    rmem_free(m);
    CHECK(elfsym_mapped_build_id(NULL, 0x10000, id, &len) < 0, "no reader");
}

int main(void)
{
    test_live();
    test_hostile();
    return check_summary("test_elfsym_buildid");
}
