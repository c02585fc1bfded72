/* elfobj_load.c - reading symbols, sections, segments and notes out of an ELF file. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym_internal.h"
#include "inroot.h"
#include "scry_err.h"
#include "scry_grow.h"

/* A symbol while building: names are offsets into the builder's pool. */
typedef struct rawsym {
    uint64_t value;
    uint64_t size;
    size_t raw;  /* offset of the raw name */
    size_t name; /* offset of the display name */
    uint8_t type;
    uint8_t bind;
} rawsym_t;

typedef struct builder {
    rawsym_t *v;
    size_t n, cap;
    char *pool;
    size_t plen, pcap;
} builder_t;

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;

static void elf_init_once(void)
{
    (void)elf_version(EV_CURRENT);
}

void elfsym__elf_init(void)
{
    pthread_once(&elf_once, elf_init_once);
}

static int pool_put(builder_t *b, const char *s, size_t len, size_t *off)
{
    return scry_pool_put(&b->pool, &b->plen, &b->pcap, 65536, s, len, off);
}

static int keep_symbol(const GElf_Sym *s)
{
    int type = GELF_ST_TYPE(s->st_info);
    if (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE && type != STT_GNU_IFUNC)
        return 0;
    if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS || s->st_shndx == SHN_COMMON)
        return 0;
    return s->st_value != 0;
}

/* Adds the symbols of every SHT_SYMTAB and SHT_DYNSYM section of ELF (only the sections of
 * type ONLY when it is not 0). */
static int add_symbols(builder_t *b, Elf *elf, uint32_t only)
{
    Elf_Scn *scn = NULL;
    size_t nscn = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL && nscn++ < ELFSYM_MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
            (only && sh.sh_type != only))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t ent = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
        if (!d || ent == 0)
            continue; /* broken section: skip it, keep the others */
        size_t n = d->d_size / ent;
        for (size_t i = 1; i < n; i++) {
            GElf_Sym s;
            if (!gelf_getsym(d, (int)i, &s) || !keep_symbol(&s))
                continue;
            const char *nm = elf_strptr(elf, sh.sh_link, s.st_name);
            if (!nm || !nm[0])
                continue;
            if (b->n >= ELFSYM_MAX_SYMS)
                return 0; /* bounded: keep what we have */
            rawsym_t *v = scry_grow(b->v, &b->cap, sizeof *v, b->n + 1, 1024, ELFSYM_MAX_SYMS);
            if (!v)
                return SCRY_E_NOMEM;
            b->v = v;
            rawsym_t *r = &b->v[b->n];
            int rc = pool_put(b, nm, strnlen(nm, 65536), &r->raw);
            if (rc)
                return rc;
            r->name = r->raw;
            r->value = s.st_value;
            r->size = s.st_size;
            r->type = (uint8_t)GELF_ST_TYPE(s.st_info);
            r->bind = (uint8_t)GELF_ST_BIND(s.st_info);
            b->n++;
        }
    }
    return 0;
}

/* Lower is better when several symbols share an address. */
static int sym_rank(uint8_t type, uint8_t bind, uint64_t size)
{
    int t = (type == STT_FUNC || type == STT_GNU_IFUNC) ? 0 : type == STT_OBJECT ? 1 : 2;
    int bd = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
    return t * 6 + bd * 2 + (size ? 0 : 1);
}

static int cmp_raw(const void *pa, const void *pb, void *ctx)
{
    const rawsym_t *a = pa, *b = pb;
    const char *pool = ctx;
    if (a->value != b->value)
        return a->value < b->value ? -1 : 1;
    int c = strcmp(pool + a->raw, pool + b->raw);
    if (c)
        return c;
    int ra = sym_rank(a->type, a->bind, a->size), rb = sym_rank(b->type, b->bind, b->size);
    return ra - rb;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int build_hash(elfsym_symtab_t *obj)
{
    size_t cap = 16;
    while (cap < obj->nsyms * 2)
        cap *= 2;
    obj->hash = calloc(cap, sizeof *obj->hash);
    if (!obj->hash)
        return SCRY_E_NOMEM;
    obj->hash_cap = cap;
    for (size_t i = 0; i < obj->nsyms; i++) {
        const elfsym_sym_t *s = &obj->syms[i];
        size_t k = (size_t)name_hash(s->raw_name) & (cap - 1);
        for (;;) {
            uint32_t slot = obj->hash[k];
            if (slot == 0) {
                obj->hash[k] = (uint32_t)(i + 1);
                break;
            }
            elfsym_sym_t *o = &obj->syms[slot - 1];
            if (strcmp(o->raw_name, s->raw_name) == 0) {
                /* Same name: a global beats an earlier local. */
                if (o->bind == STB_LOCAL && s->bind != STB_LOCAL)
                    obj->hash[k] = (uint32_t)(i + 1);
                break;
            }
            k = (k + 1) & (cap - 1);
        }
    }
    return 0;
}

/* Sorts, deduplicates, demangles and freezes the builder's symbols into OBJ. */
static int finish_symbols(elfsym_symtab_t *obj, builder_t *b)
{
    int rc = 0;
    if (b->n == 0)
        return build_hash(obj);
    qsort_r(b->v, b->n, sizeof *b->v, cmp_raw, b->pool);
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (n > 0 && b->v[n - 1].value == b->v[i].value &&
            strcmp(b->pool + b->v[n - 1].raw, b->pool + b->v[i].raw) == 0)
            continue; /* the same symbol from .dynsym and .symtab (or the debug file) */
        b->v[n++] = b->v[i];
    }
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        const char *raw = b->pool + b->v[i].raw;
        if (raw[0] != '_' || raw[1] != 'Z')
            continue;
        char *dm = elfsym__demangle(raw);
        if (dm) {
            rc = pool_put(b, dm, strlen(dm), &b->v[i].name);
            free(dm);
            if (rc)
                return rc;
        }
    }
    obj->syms = calloc(n, sizeof *obj->syms);
    obj->span = calloc(n, sizeof *obj->span);
    obj->maxend = calloc(n, sizeof *obj->maxend);
    obj->values = calloc(n, sizeof *obj->values);
    if (!obj->syms || !obj->span || !obj->maxend || !obj->values)
        return SCRY_E_NOMEM;
    obj->names = b->pool;
    b->pool = NULL;
    obj->nsyms = n;
    for (size_t i = 0; i < n; i++) {
        const rawsym_t *r = &b->v[i];
        elfsym_sym_t *s = &obj->syms[i];
        s->value = r->value;
        obj->values[i] = r->value;
        s->size = r->size;
        s->raw_name = obj->names + r->raw;
        s->name = obj->names + r->name;
        s->type = r->type;
        s->bind = r->bind;
    }
    /* What each symbol covers: its size, or for a size-0 function, up to the next one. */
    size_t next = n;
    for (size_t i = n; i-- > 0;) {
        const elfsym_sym_t *s = &obj->syms[i];
        if (i + 1 < n && obj->syms[i + 1].value != s->value)
            next = i + 1;
        if (s->size) {
            obj->span[i] = s->size;
        } else if ((s->type == STT_FUNC || s->type == STT_GNU_IFUNC) && next < n) {
            uint64_t gap = obj->syms[next].value - s->value;
            obj->span[i] = gap < ELFSYM_FUNC_SPAN_MAX ? gap : ELFSYM_FUNC_SPAN_MAX;
        }
    }
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t end = obj->syms[i].value + obj->span[i];
        if (end < obj->syms[i].value)
            end = UINT64_MAX; /* corrupt size: saturate */
        if (end > m)
            m = end;
        obj->maxend[i] = m;
    }
    return build_hash(obj);
}

static int load_sections(elfsym_obj_t *obj, Elf *elf)
{
    size_t shnum = 0, shstrndx = 0;
    if (elf_getshdrnum(elf, &shnum) != 0 || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return 0; /* no section headers: symbols and sections stay empty */
    if (shnum > ELFSYM_MAX_SECTIONS)
        shnum = ELFSYM_MAX_SECTIONS;
    obj->secs = calloc(shnum ? shnum : 1, sizeof *obj->secs);
    size_t *noff = calloc(shnum ? shnum : 1, sizeof *noff);
    size_t plen = 0, pcap = 4096;
    char *pool = malloc(pcap);
    int rc = 0;
    if (!obj->secs || !noff || !pool) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    Elf_Scn *scn = NULL;
    size_t n = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL && n < shnum) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!nm)
            nm = "";
        size_t len = strnlen(nm, 4096);
        if (plen + len + 1 > pcap) {
            while (plen + len + 1 > pcap)
                pcap *= 2;
            char *p = realloc(pool, pcap);
            if (!p) {
                rc = SCRY_E_NOMEM;
                goto out;
            }
            pool = p;
        }
        memcpy(pool + plen, nm, len);
        pool[plen + len] = '\0';
        noff[n] = plen;
        plen += len + 1;
        elfsym_section_t *s = &obj->secs[n++];
        s->addr = sh.sh_addr;
        s->size = sh.sh_size;
        s->offset = sh.sh_offset;
        s->type = sh.sh_type;
        s->flags = sh.sh_flags;
    }
    obj->nsecs = n;
    obj->secnames = pool;
    pool = NULL;
    for (size_t i = 0; i < n; i++)
        obj->secs[i].name = obj->secnames + noff[i];
out:
    free(pool);
    free(noff);
    return rc;
}

static void load_segments(elfsym_obj_t *obj, Elf *elf)
{
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) != 0)
        return;
    for (size_t i = 0; i < phnum && i < 65536 && obj->nsegs < ELFSYM_MAX_SEGMENTS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        elfsym_segment_t *s = &obj->segs[obj->nsegs++];
        s->vaddr = ph.p_vaddr;
        s->memsz = ph.p_memsz;
        s->offset = ph.p_offset;
        s->filesz = ph.p_filesz;
        s->align = ph.p_align;
        s->flags = ph.p_flags;
    }
}

/* Looks for a GNU build-id note in DATA. */
static int note_build_id(Elf_Data *d, uint8_t *id, size_t *len)
{
    size_t off = 0, guard = 0;
    GElf_Nhdr nh;
    size_t name_off, desc_off;
    while (off < d->d_size && guard++ < 4096) {
        size_t next = gelf_getnote(d, off, &nh, &name_off, &desc_off);
        if (next == 0 || next <= off)
            break;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
            memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
            nh.n_descsz <= ELFSYM_BUILD_ID_MAX) {
            memcpy(id, (const char *)d->d_buf + desc_off, nh.n_descsz);
            *len = nh.n_descsz;
            return 0;
        }
        off = next;
    }
    return SCRY_E_NOTFOUND;
}

int elfsym__read_build_id(Elf *elf, uint8_t *id, size_t *len)
{
    Elf_Scn *scn = NULL;
    size_t nscn = 0;
    *len = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL && nscn++ < ELFSYM_MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (d && d->d_buf && note_build_id(d, id, len) == 0)
            return 0;
    }
    /* No section headers: try the PT_NOTE segments. */
    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) != 0)
        return SCRY_E_NOTFOUND;
    for (size_t i = 0; i < phnum && i < 65536; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE || ph.p_filesz > (1u << 20))
            continue;
        Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
        if (d && d->d_buf && note_build_id(d, id, len) == 0)
            return 0;
    }
    return SCRY_E_NOTFOUND;
}

static void load_debuglink(elfsym_obj_t *obj, Elf *elf)
{
    size_t shstrndx = 0, guard = 0;
    Elf_Scn *scn = NULL;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return;
    while ((scn = elf_nextscn(elf, scn)) != NULL && guard++ < ELFSYM_MAX_SECTIONS) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
            continue;
        const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!nm || strcmp(nm, ".gnu_debuglink") != 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size < 6)
            return;
        const char *p = d->d_buf;
        size_t len = strnlen(p, d->d_size);
        size_t crc_off = (len + 4) & ~(size_t)3;
        if (len == 0 || crc_off + 4 > d->d_size)
            return;
        obj->debuglink = strndup(p, len);
        memcpy(&obj->debuglink_crc, p + crc_off, 4);
        return;
    }
}

/* Merges the symbols of the separate debug file at PATH when it belongs to OBJ. */
static int add_debug_symbols(elfsym_obj_t *obj, builder_t *b, const char *path)
{
    int fd = inroot_open_path(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return 0;
    int rc = 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* swapped since it was stat'ed */
        close(fd);
        return 0;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF)
        goto out;
    uint8_t id[ELFSYM_BUILD_ID_MAX];
    size_t idlen = 0;
    if (elfsym__read_build_id(elf, id, &idlen) == 0 && obj->build_id_len > 0) {
        if (idlen != obj->build_id_len || memcmp(id, obj->build_id, idlen) != 0)
            goto out; /* someone else's debug file */
    } else if (obj->debuglink) {
        if (elfsym__file_crc32(fd) != (int64_t)obj->debuglink_crc)
            goto out;
    } else {
        goto out;
    }
    size_t before = b->n;
    rc = add_symbols(b, elf, 0);
    if (rc == 0 && b->n > before)
        obj->debug_path = strdup(path);
out:
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

/* True when [off, off+len) lies inside a file of SIZE bytes. */
static int in_file(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* Rejects a truncated file: every table and every byte a section or segment claims must
 * be in the file. */
static int check_extent(const elfsym_obj_t *obj, const GElf_Ehdr *eh, uint64_t size)
{
    if (eh->e_phnum && !in_file(eh->e_phoff, (uint64_t)eh->e_phnum * eh->e_phentsize, size))
        return SCRY_E_ELF;
    if (eh->e_shoff && !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * eh->e_shentsize, size))
        return SCRY_E_ELF;
    for (size_t i = 0; i < obj->nsecs; i++) {
        const elfsym_section_t *s = &obj->secs[i];
        if (s->type != SHT_NOBITS && s->type != SHT_NULL && !in_file(s->offset, s->size, size))
            return SCRY_E_ELF;
    }
    for (size_t i = 0; i < obj->nsegs; i++)
        if (!in_file(obj->segs[i].offset, obj->segs[i].filesz, size))
            return SCRY_E_ELF;
    return 0;
}

/* Reads every symbol of ELF (opened from PATH) and of its separate debug file into T. */
static int load_full(elfsym_obj_t *obj, Elf *elf, const char *path, elfsym_symtab_t *t)
{
    builder_t b = {0};
    int rc = add_symbols(&b, elf, 0);
    if (rc)
        goto out;
    char *dbg = elfsym__find_debug_file(path, obj->build_id, obj->build_id_len, obj->debuglink,
                                        obj->debuglink_crc);
    if (dbg) {
        rc = add_debug_symbols(obj, &b, dbg);
        free(dbg);
        if (rc)
            goto out;
    }
    rc = finish_symbols(t, &b);
out:
    free(b.v);
    free(b.pool);
    return rc;
}

/* 1 when ELF has a non-empty .dynsym. */
static int has_dynsym(Elf *elf)
{
    Elf_Scn *scn = NULL;
    size_t nscn = 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL && nscn++ < ELFSYM_MAX_SECTIONS) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM && sh.sh_entsize &&
            sh.sh_size / sh.sh_entsize > 1)
            return 1;
    }
    return 0;
}

int elfsym__obj_load(elfsym_obj_t *obj, Elf *elf, const char *path, uint64_t file_size, int lazy)
{
    GElf_Ehdr eh;
    int rc;
    if (!gelf_getehdr(elf, &eh))
        return SCRY_E_ELF;
    obj->type = eh.e_type;
    obj->elf_class = gelf_getclass(elf);
    rc = load_sections(obj, elf);
    if (rc)
        return rc;
    load_segments(obj, elf);
    rc = check_extent(obj, &eh, file_size);
    if (rc)
        return rc;
    load_debuglink(obj, elf);
    if (!lazy || !has_dynsym(elf)) {
        rc = load_full(obj, elf, path, &obj->dyn);
        atomic_store_explicit(&obj->full, &obj->dyn, memory_order_release);
        return rc;
    }
    builder_t b = {0};
    rc = add_symbols(&b, elf, SHT_DYNSYM);
    if (rc == 0)
        rc = finish_symbols(&obj->dyn, &b);
    free(b.v);
    free(b.pool);
    return rc;
}

void elfsym__symtab_free(elfsym_symtab_t *t)
{
    if (!t)
        return;
    free(t->syms);
    free(t->span);
    free(t->maxend);
    free(t->values);
    free(t->names);
    free(t->hash);
    memset(t, 0, sizeof *t);
}

/* Reads the full table of OBJ from the file of its first alias into T, when that file is
 * still the one OBJ was loaded from. */
static int reload_full(elfsym_obj_t *obj, elfsym_symtab_t *t)
{
    const elfsym_alias_t *a = &obj->alias[0];
    if (obj->nalias == 0 || !a->path)
        return SCRY_E_NOTFOUND;
    int fd = inroot_open_path(a->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return elfsym__file_err(errno);
    int rc = SCRY_E_NOTFOUND;
    Elf *elf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != a->dev || st.st_ino != a->ino ||
        st.st_size != a->size || st.st_mtim.tv_sec != a->mtime.tv_sec ||
        st.st_mtim.tv_nsec != a->mtime.tv_nsec)
        goto out; /* replaced since it was opened: keep what was read then */
    elfsym__elf_init();
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        rc = SCRY_E_ELF;
        goto out;
    }
    rc = load_full(obj, elf, a->path, t);
out:
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}

const elfsym_symtab_t *elfsym__obj_full(const elfsym_obj_t *cobj)
{
    elfsym_obj_t *obj = (elfsym_obj_t *)cobj; /* logically const: a cache filled once */
    elfsym_symtab_t *t = atomic_load_explicit(&obj->full, memory_order_acquire);
    if (t)
        return t;
    pthread_mutex_lock(&obj->full_lock);
    t = atomic_load_explicit(&obj->full, memory_order_acquire);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t || reload_full(obj, t) != 0) {
            elfsym__symtab_free(t);
            free(t);
            t = &obj->dyn;
        }
        atomic_store_explicit(&obj->full, t, memory_order_release);
    }
    pthread_mutex_unlock(&obj->full_lock);
    return t;
}
