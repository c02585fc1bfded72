/* buildid.c - the GNU build-id of an object as it is mapped in a process, read from the
 * target's memory, to tell whether a file on disk is the file that is mapped (an image
 * replaced under a running container has the same path and another build-id). */
#include "buildid.h"

#include "elfsym_internal.h"
#include "scry_err.h"

#include <elf.h>
#include <string.h>

#define PHDRS_MAX 64   /* program headers looked at */
#define NOTES_MAX 4096 /* bytes of one PT_NOTE segment read */

/* The build-id note in the NLEN bytes of notes at N: its descriptor into ID. */
static int find_note(const uint8_t *n, size_t nlen, uint8_t *id, size_t *len)
{
    size_t off = 0;
    while (off + sizeof(Elf64_Nhdr) <= nlen) {
        Elf64_Nhdr h;
        memcpy(&h, n + off, sizeof h);
        size_t name = off + sizeof h;
        size_t desc = name + ((h.n_namesz + 3u) & ~3u);
        size_t next = desc + ((h.n_descsz + 3u) & ~3u);
        if (h.n_namesz > nlen || h.n_descsz > nlen || next > nlen || next <= off)
            return SCRY_E_NOTFOUND;
        if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && memcmp(n + name, "GNU", 4) == 0) {
            if (h.n_descsz == 0 || h.n_descsz > ELFSYM_BUILD_ID_MAX)
                return SCRY_E_CORRUPT;
            memcpy(id, n + desc, h.n_descsz);
            *len = h.n_descsz;
            return 0;
        }
        off = next;
    }
    return SCRY_E_NOTFOUND;
}

int elfsym_mapped_build_id(rmem_t *mem, uint64_t base, uint8_t *id, size_t *len)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[PHDRS_MAX];
    *len = 0;
    if (!mem || rmem_read(mem, base, &eh, sizeof eh) != 0)
        return SCRY_E_NOTFOUND;
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phoff > 65536)
        return SCRY_E_CORRUPT;
    size_t nph = eh.e_phnum < PHDRS_MAX ? eh.e_phnum : PHDRS_MAX;
    if (rmem_read(mem, base + eh.e_phoff, ph, nph * sizeof *ph) != 0)
        return SCRY_E_NOTFOUND;
    /* the notes lie in the first PT_LOAD (file offset 0, mapped at BASE): at BASE + offset */
    uint64_t first_end = 0;
    for (size_t i = 0; i < nph; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
            first_end = ph[i].p_filesz;
            break;
        }
    uint8_t notes[NOTES_MAX];
    for (size_t i = 0; i < nph; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz == 0 || ph[i].p_offset >= first_end)
            continue;
        size_t n = ph[i].p_filesz < sizeof notes ? (size_t)ph[i].p_filesz : sizeof notes;
        if (ph[i].p_offset + n > first_end)
            n = (size_t)(first_end - ph[i].p_offset);
        if (rmem_read(mem, base + ph[i].p_offset, notes, n) != 0)
            continue;
        if (find_note(notes, n, id, len) == 0)
            return 0;
    }
    return SCRY_E_NOTFOUND;
}

int elfsym_map_matches(rmem_t *mem, uint64_t base, const elfsym_obj_t *obj)
{
    uint8_t id[ELFSYM_BUILD_ID_MAX];
    size_t len = 0, flen = 0;
    const uint8_t *fid = elfsym_obj_build_id(obj, &flen);
    if (!fid || elfsym_mapped_build_id(mem, base, id, &len) != 0)
        return 0;
    return len == flen && memcmp(id, fid, len) == 0;
}
