/* objects.c - executable mappings of the target and their unwind tables.
 *
 * For each r-x file mapping we read the ELF program headers and the .eh_frame_hdr header
 * from the FILE (through /proc/PID/root), once, and describe its binary-search table as a
 * UNW_INFO_FORMAT_REMOTE_TABLE for libunwind's dwarf_search_unwind_table. The table
 * entries and the FDEs are then read through our accessors, i.e. the page cache, which
 * keeps them across samples. Objects without a usable .eh_frame_hdr (only .debug_frame,
 * or an unusual encoding) go to libunwind's own _UPT_find_proc_info.
 */
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <libunwind-ptrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inroot.h"
#include "interp.h"
#include "scry_err.h"
#include "unwind_internal.h"

#define DW_EH_PE_omit    0xff
#define DW_EH_PE_datarel 0x30
#define DW_EH_PE_sdata4  0x0b
#define MAX_PHDRS        256

void unwind__objs_fini(struct unwind *u)
{
    free(u->objs);
    u->objs = NULL;
    u->nobjs = 0;
    elfsym_maps_free(u->maps);
    u->maps = NULL;
}

static int is_python_lib(const char *base, const char *exe_base)
{
    if (!base)
        return 0;
    if (strncmp(base, "libpython", 9) == 0)
        return 1;
    return exe_base && strcmp(base, exe_base) == 0 && strncmp(base, "python", 6) == 0;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Size of a DWARF pointer encoding's value; 0 when unsupported. */
static size_t enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c:
        return 8;
    case 0x03:
    case 0x0b:
        return 4;
    case 0x02:
    case 0x0a:
        return 2;
    default:
        return 0;
    }
}

static uint64_t read_uval(const uint8_t *p, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, p, size); /* little endian */
    return v;
}

/* Where the ELF image is read from: its file, or (the vDSO) the target's memory. */
typedef struct image {
    int fd;        /* >= 0: the file */
    rmem_t *mem;   /* else: the target, */
    uint64_t base; /* the image mapped at base (file offset 0) */
} image_t;

static int image_read(const image_t *im, void *buf, size_t len, uint64_t off)
{
    if (im->fd >= 0)
        return pread(im->fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
    return rmem_read(im->mem, im->base + off, buf, len) == 0 ? 0 : -1;
}

/* Fills O's table from its file (or the vDSO's memory). Returns 0 or a negative code. */
static int load_table(struct unwind *u, unwind_obj_t *o, const elfsym_map_t *m)
{
    image_t im = {.fd = -1, .mem = u->mem, .base = m->start - m->offset};
    if (elfsym_map_is_file(m)) {
        if (!o->open_path)
            return SCRY_E_NOTFOUND;
        /* The target's file: never block on what it put there, regular files only. */
        im.fd = inroot_open_path(o->open_path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (im.fd < 0)
            return SCRY_E_NOTFOUND;
        struct stat st;
        if (fstat(im.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(im.fd);
            return SCRY_E_NOTFOUND;
        }
    }
    int rc = SCRY_E_ELF;
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_PHDRS];
    if (image_read(&im, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS)
        goto out;
    size_t phsz = (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
    if (image_read(&im, ph, phsz, eh.e_phoff) != 0)
        goto out;

    /* The load bias: elfsym's one rule over the PT_LOAD segments. */
    const Elf64_Phdr *ehp = NULL;
    elfsym_segment_t segs[MAX_PHDRS];
    size_t nsegs = 0;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        const Elf64_Phdr *p = &ph[i];
        if (p->p_type == PT_GNU_EH_FRAME)
            ehp = p;
        if (p->p_type == PT_LOAD)
            segs[nsegs++] = (elfsym_segment_t){.vaddr = p->p_vaddr,
                                               .memsz = p->p_memsz,
                                               .offset = p->p_offset,
                                               .filesz = p->p_filesz,
                                               .align = p->p_align,
                                               .flags = p->p_flags};
    }
    if (elfsym_segments_bias(segs, nsegs, m->start, m->offset, (m->perms & ELFSYM_PERM_X) != 0,
                             &o->bias) != 0)
        goto out;
    if (!ehp || ehp->p_filesz < 12)
        goto out;
    uint8_t hdr[4 + 8 + 8];
    if (image_read(&im, hdr, sizeof hdr, ehp->p_offset) != 0)
        goto out;
    uint8_t version = hdr[0], ptr_enc = hdr[1], cnt_enc = hdr[2], tab_enc = hdr[3];
    size_t psz = enc_size(ptr_enc), csz = enc_size(cnt_enc);
    if (version != 1 || cnt_enc == DW_EH_PE_omit || ptr_enc == DW_EH_PE_omit || !psz || !csz ||
        (cnt_enc & 0x70) != 0 || tab_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        goto out;
    uint64_t count = read_uval(hdr + 4 + psz, csz);
    uint64_t table_off = 4 + psz + csz;
    if (count == 0 || count > (ehp->p_filesz - table_off) / 8)
        goto out;
    uint64_t hdr_addr = o->bias + ehp->p_vaddr;
    memset(&o->di, 0, sizeof o->di);
    o->di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    o->di.start_ip = o->start;
    o->di.end_ip = o->end;
    o->di.gp = 0;
    o->di.u.rti.name_ptr = 0;
    o->di.u.rti.segbase = hdr_addr;
    o->di.u.rti.table_len = count * 8 / sizeof(unw_word_t);
    o->di.u.rti.table_data = hdr_addr + table_off;
    rc = 0;
out:
    if (im.fd >= 0)
        close(im.fd);
    return rc;
}

/* Reads the maps at most once per sample. */
static void refresh_maps(struct unwind *u)
{
    if (u->maps && u->maps_gen == u->gen)
        return;
    int err = 0;
    elfsym_maps_t *m = elfsym_maps_of(u->mem, &err);
    u->maps_gen = u->gen;
    if (!m)
        return;
    elfsym_maps_free(u->maps);
    u->maps = m;
}

static unwind_obj_t *obj_lookup(struct unwind *u, uint64_t ip)
{
    size_t lo = 0, hi = u->nobjs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ip < u->objs[mid].start)
            hi = mid;
        else if (ip >= u->objs[mid].end)
            lo = mid + 1;
        else
            return &u->objs[mid];
    }
    return NULL;
}

unwind_obj_t *unwind__obj_find(struct unwind *u, uint64_t ip)
{
    unwind_obj_t *o = obj_lookup(u, ip);
    if (o)
        return o;
    const elfsym_map_t *m = u->maps ? elfsym_maps_find(u->maps, ip) : NULL;
    if (!m) {
        refresh_maps(u);
        m = u->maps ? elfsym_maps_find(u->maps, ip) : NULL;
    }
    if (!m || !(m->perms & ELFSYM_PERM_X) ||
        !(elfsym_map_is_file(m) || strcmp(m->path, "[vdso]") == 0))
        return NULL;
    if (u->nobjs >= UNWIND_MAX_OBJS)
        return NULL;
    unwind_obj_t *v = realloc(u->objs, (u->nobjs + 1) * sizeof *v);
    if (!v)
        return NULL;
    u->objs = v;
    size_t pos = 0;
    while (pos < u->nobjs && u->objs[pos].start < m->start)
        pos++;
    memmove(&u->objs[pos + 1], &u->objs[pos], (u->nobjs - pos) * sizeof *v);
    u->nobjs++;
    o = &u->objs[pos];
    memset(o, 0, sizeof *o);
    o->start = m->start;
    o->end = m->end;
    o->path = strtab_intern(u->strings, m->path);
    o->lib = strtab_intern(u->strings, base_name(m->path));
    char open_path[4096 + 64];
    if (elfsym_map_is_file(m) &&
        elfsym_map_open_src(u->mem, m, m->start - m->offset, open_path, sizeof open_path) == 0)
        o->open_path = strtab_intern(u->strings, open_path);
    else if (elfsym_map_is_file(m))
        o->no_file = 1;
    o->in_python = (uint8_t)is_python_lib(o->lib, u->exe_base);
    o->state = load_table(u, o, m) == 0 ? 1 : 2;
    if (o->state == 1)
        u->st.tables++;
    return o;
}

int unwind__find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                           int need_unwind_info, void *arg)
{
    struct unwind *u = arg;
    unwind_obj_t *o = unwind__obj_find(u, ip);
    if (o && o->state == 1) {
        /* ENOINFO here means the object has no FDE for IP: libunwind then tries frame
         * pointers; its own search would find nothing more. */
        return _Ux86_64_dwarf_search_unwind_table(as, ip, &o->di, pi, need_unwind_info, u);
    }
    if (!o || o->no_file || !u->upt)
        return -UNW_ENOINFO; /* libunwind's search would open the path: maybe another file
                                (and reads /proc/PID: none for a core) */
    /* No usable .eh_frame_hdr: libunwind's per-ELF search (maps the file, .debug_frame). */
    u->st.table_fallback++;
    return _UPT_find_proc_info(as, ip, pi, need_unwind_info, u->upt);
}
