/* elfobj.c - queries on a loaded ELF object. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym_internal.h"
#include "scry_err.h"

/* How far back an address lookup walks looking for an enclosing symbol. */
#define ADDR_SCAN_MAX 256

const char *elfsym_obj_path(const elfsym_obj_t *obj)
{
    return (obj && obj->nalias) ? obj->alias[0].path : "";
}

int elfsym_obj_type(const elfsym_obj_t *obj)
{
    return obj ? obj->type : 0;
}

const uint8_t *elfsym_obj_build_id(const elfsym_obj_t *obj, size_t *len)
{
    if (len)
        *len = obj ? obj->build_id_len : 0;
    return (obj && obj->build_id_len) ? obj->build_id : NULL;
}

const char *elfsym_obj_build_id_hex(const elfsym_obj_t *obj)
{
    return obj ? obj->build_id_hex : "";
}

const char *elfsym_obj_debuglink(const elfsym_obj_t *obj)
{
    return obj ? obj->debuglink : NULL;
}

const char *elfsym_obj_debug_path(const elfsym_obj_t *obj)
{
    return obj ? (elfsym__obj_full(obj), obj->debug_path) : NULL;
}

size_t elfsym_obj_nsyms(const elfsym_obj_t *obj)
{
    return obj ? elfsym__obj_full(obj)->nsyms : 0;
}

const elfsym_sym_t *elfsym_obj_sym(const elfsym_obj_t *obj, size_t i)
{
    if (!obj)
        return NULL;
    const elfsym_symtab_t *t = elfsym__obj_full(obj);
    return i < t->nsyms ? &t->syms[i] : NULL;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* NAME in table OBJ. */
static int tab_lookup(const elfsym_symtab_t *obj, const char *name, elfsym_sym_t *out)
{
    if (!obj->hash_cap)
        return SCRY_E_NOTFOUND;
    size_t mask = obj->hash_cap - 1;
    size_t k = (size_t)name_hash(name) & mask;
    for (size_t probes = 0; probes < obj->hash_cap; probes++) {
        uint32_t slot = obj->hash[k];
        if (slot == 0)
            return SCRY_E_NOTFOUND;
        const elfsym_sym_t *s = &obj->syms[slot - 1];
        if (strcmp(s->raw_name, name) == 0) {
            if (out)
                *out = *s;
            return 0;
        }
        k = (k + 1) & mask;
    }
    return SCRY_E_NOTFOUND;
}

int elfsym_obj_lookup(const elfsym_obj_t *obj, const char *name, elfsym_sym_t *out)
{
    if (!obj || !name)
        return SCRY_E_NOTFOUND;
    const elfsym_symtab_t *full = atomic_load_explicit(&obj->full, memory_order_acquire);
    if (full)
        return tab_lookup(full, name, out);
    if (tab_lookup(&obj->dyn, name, out) == 0)
        return 0; /* exported: no need to read .symtab */
    return tab_lookup(elfsym__obj_full(obj), name, out);
}

static int rank(const elfsym_sym_t *s)
{
    int t = (s->type == STT_FUNC || s->type == STT_GNU_IFUNC) ? 0 : s->type == STT_OBJECT ? 1 : 2;
    int b = s->bind == STB_GLOBAL ? 0 : s->bind == STB_WEAK ? 1 : 2;
    return t * 6 + b * 2 + (s->size ? 0 : 1);
}

int elfsym_obj_addr_lookup(const elfsym_obj_t *o, uint64_t addr, elfsym_sym_t *out,
                           uint64_t *offset)
{
    if (!o)
        return SCRY_E_NOTFOUND;
    const elfsym_symtab_t *obj = elfsym__obj_full(o);
    if (obj->nsyms == 0)
        return SCRY_E_NOTFOUND;
    /* First symbol whose value is > addr. */
    size_t lo = 0, hi = obj->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (obj->values[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Walk back one address group at a time: the first group with a symbol covering
     * ADDR is the innermost; inside it the best-ranked symbol wins. */
    size_t j = lo, steps = 0;
    while (j > 0 && steps < ADDR_SCAN_MAX && obj->maxend[j - 1] > addr) {
        uint64_t v = obj->values[j - 1];
        const elfsym_sym_t *best = NULL;
        while (j > 0 && obj->values[j - 1] == v && steps++ < ADDR_SCAN_MAX) {
            j--;
            if (addr - v < obj->span[j] && (!best || rank(&obj->syms[j]) <= rank(best))) {
                best = &obj->syms[j];
            }
        }
        if (best) {
            if (out)
                *out = *best;
            if (offset)
                *offset = addr - v;
            return 0;
        }
    }
    return SCRY_E_NOTFOUND;
}

size_t elfsym_obj_nsections(const elfsym_obj_t *obj)
{
    return obj ? obj->nsecs : 0;
}

const elfsym_section_t *elfsym_obj_section_at(const elfsym_obj_t *obj, size_t i)
{
    return (obj && i < obj->nsecs) ? &obj->secs[i] : NULL;
}

int elfsym_obj_section(const elfsym_obj_t *obj, const char *name, elfsym_section_t *out)
{
    if (!obj || !name)
        return SCRY_E_NOTFOUND;
    for (size_t i = 0; i < obj->nsecs; i++) {
        if (strcmp(obj->secs[i].name, name) == 0) {
            if (out)
                *out = obj->secs[i];
            return 0;
        }
    }
    return SCRY_E_NOTFOUND;
}

size_t elfsym_obj_nsegments(const elfsym_obj_t *obj)
{
    return obj ? obj->nsegs : 0;
}

const elfsym_segment_t *elfsym_obj_segment(const elfsym_obj_t *obj, size_t i)
{
    return (obj && i < obj->nsegs) ? &obj->segs[i] : NULL;
}

long elfsym_obj_read_section(const elfsym_obj_t *obj, const char *name, void *buf, size_t max)
{
    elfsym_section_t s;
    int rc = elfsym_obj_section(obj, name, &s);
    if (rc)
        return rc;
    if (s.type == SHT_NOBITS)
        return SCRY_E_INVAL;
    size_t n = s.size < max ? (size_t)s.size : max;
    if (n == 0)
        return 0;
    if (n > (size_t)LONG_MAX)
        n = (size_t)LONG_MAX;
    int fd = elfsym__obj_reopen(obj);
    if (fd < 0)
        return fd;
    rc = elfsym__pread_full(fd, buf, n, s.offset);
    close(fd);
    return rc ? rc : (long)n;
}

int elfsym_obj_read_vaddr(const elfsym_obj_t *obj, uint64_t vaddr, void *buf, size_t len)
{
    int fd = -1, rc = 0;
    char *p = buf;
    size_t guard = 0;
    if (!obj)
        return SCRY_E_INVAL;
    while (len > 0 && guard++ <= ELFSYM_MAX_SEGMENTS) {
        const elfsym_segment_t *seg = NULL;
        for (size_t i = 0; i < obj->nsegs; i++) {
            const elfsym_segment_t *s = &obj->segs[i];
            if (vaddr >= s->vaddr && vaddr - s->vaddr < s->memsz) {
                seg = s;
                break;
            }
        }
        if (!seg) {
            rc = SCRY_E_FAULT;
            goto out;
        }
        uint64_t in = vaddr - seg->vaddr;
        uint64_t avail = seg->memsz - in;
        size_t n = avail < len ? (size_t)avail : len;
        /* File bytes first, then the zero-filled tail (bss). */
        size_t from_file = 0;
        if (in < seg->filesz) {
            uint64_t f = seg->filesz - in;
            from_file = f < n ? (size_t)f : n;
        }
        if (from_file) {
            if (fd < 0) {
                fd = elfsym__obj_reopen(obj);
                if (fd < 0) {
                    rc = fd;
                    goto out;
                }
            }
            rc = elfsym__pread_full(fd, p, from_file, seg->offset + in);
            if (rc)
                goto out;
        }
        memset(p + from_file, 0, n - from_file);
        p += n;
        len -= n;
        vaddr += n;
    }
    if (len > 0)
        rc = SCRY_E_FAULT;
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Scans one SHT_RELA section for a relocation at SLOT. */
static int slot_in_rela(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, uint64_t slot,
                        uint64_t *target)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t ent = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);
    if (!d || ent == 0)
        return SCRY_E_NOTFOUND;
    size_t n = d->d_size / ent;
    Elf_Scn *symscn = elf_getscn(elf, sh->sh_link);
    Elf_Data *symd = symscn ? elf_getdata(symscn, NULL) : NULL;
    for (size_t i = 0; i < n && i < (1u << 24); i++) {
        GElf_Rela r;
        if (!gelf_getrela(d, (int)i, &r) || r.r_offset != slot)
            continue;
        unsigned type = (unsigned)GELF_R_TYPE(r.r_info);
        size_t symi = GELF_R_SYM(r.r_info);
        if (type == R_X86_64_RELATIVE) {
            *target = (uint64_t)r.r_addend;
            return 0;
        }
        if ((type == R_X86_64_GLOB_DAT || type == R_X86_64_64 || type == R_X86_64_JUMP_SLOT) &&
            symd && symi > 0) {
            GElf_Sym s;
            if (gelf_getsym(symd, (int)symi, &s) && s.st_shndx != SHN_UNDEF && s.st_value) {
                *target = s.st_value + (type == R_X86_64_64 ? (uint64_t)r.r_addend : 0);
                return 0;
            }
        }
        return SCRY_E_NOTFOUND; /* imported from another object */
    }
    return SCRY_E_NOTFOUND;
}

int elfsym_obj_resolve_slot(const elfsym_obj_t *obj, uint64_t slot, uint64_t *target)
{
    int rc = SCRY_E_NOTFOUND;
    if (!obj || !target)
        return SCRY_E_INVAL;
    elfsym__elf_init();
    int fd = elfsym__obj_reopen(obj);
    if (fd < 0)
        return fd;
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        rc = SCRY_E_ELF;
        goto out;
    }
    Elf_Scn *scn = NULL;
    size_t guard = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL && guard++ < ELFSYM_MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA)
            continue;
        if (slot_in_rela(elf, scn, &sh, slot, target) == 0) {
            rc = 0;
            break;
        }
    }
out:
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}
