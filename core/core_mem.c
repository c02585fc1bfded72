/* core_mem.c - the memory a core holds, the files it maps (opened under the sysroot and
 * checked by build-id) and its mappings as maps text: the rmem source of a core. */
#include "core_internal.h"

#include "buildid.h"
#include "inroot.h"
#include "scry_err.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- the memory ---------------------------------------------------------------------- */

/* How many of the N entries at BASE (STRIDE bytes apart, sorted by the uint64_t KEY bytes
 * into each) have a key <= ADDR: one more than the index of the last that may hold ADDR. */
static size_t count_le(const void *base, size_t n, size_t stride, size_t key, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, (const char *)base + mid * stride + key, sizeof k);
        if (k <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static long seg_index(const core_t *c, uint64_t addr)
{
    size_t lo = count_le(c->segs, c->nsegs, sizeof *c->segs, offsetof(core_seg_t, vaddr), addr);
    if (lo == 0)
        return -1;
    const core_seg_t *s = &c->segs[lo - 1];
    return addr - s->vaddr < s->memsz ? (long)(lo - 1) : -1;
}

long core__fmap_index(const core_t *c, uint64_t addr)
{
    size_t lo = count_le(c->fmaps, c->nfmaps, sizeof *c->fmaps, offsetof(core_fmap_t, start), addr);
    if (lo == 0)
        return -1;
    const core_fmap_t *f = &c->fmaps[lo - 1];
    return addr < f->end ? (long)(lo - 1) : -1;
}

/* Bytes at ADDR held by the core itself (DUMPED) or also by the mapped files: up to LEN
 * from one segment or one file mapping into BUF. Returns how many (0: not held). */
static size_t read_piece(core_t *c, uint64_t addr, void *buf, size_t len, int dumped)
{
    long si = seg_index(c, addr);
    if (si >= 0) {
        const core_seg_t *s = &c->segs[si];
        uint64_t in = addr - s->vaddr;
        if (in < s->filesz) {
            uint64_t n = s->filesz - in < len ? s->filesz - in : len;
            memcpy(buf, c->data + s->offset + in, n);
            return (size_t)n;
        }
    }
    if (dumped)
        return 0;
    long fi = core__fmap_index(c, addr);
    if (fi < 0)
        return 0;
    const core_fmap_t *f = &c->fmaps[fi];
    if (core__file_use(c, f->file) != 0)
        return 0;
    const core_file_t *file = &c->files[f->file];
    uint64_t at = f->offset + (addr - f->start);
    if (at < f->offset || at >= file->len)
        return 0;
    uint64_t n = file->len - at;
    if (n > f->end - addr)
        n = f->end - addr;
    if (n > len)
        n = len;
    memcpy(buf, file->map + at, n);
    return (size_t)n;
}

size_t core__read_span(core_t *c, uint64_t addr, void *buf, size_t len, int dumped)
{
    size_t done = 0;
    while (done < len) {
        if (addr + done < addr)
            break;
        size_t got = read_piece(c, addr + done, (uint8_t *)buf + done, len - done, dumped);
        if (got == 0)
            break;
        done += got;
    }
    return done;
}

/* ---- files --------------------------------------------------------------------------- */

/* A reader over the LEN bytes at DATA at address 0 (a file's bytes, for its build-id). */
typedef struct bytes_src {
    const uint8_t *data;
    size_t len;
} bytes_src_t;

static size_t bytes_read(void *ctx, raddr_t addr, void *buf, size_t len)
{
    const bytes_src_t *b = ctx;
    if (addr >= b->len)
        return 0;
    size_t n = b->len - addr < len ? b->len - (size_t)addr : len;
    memcpy(buf, b->data + addr, n);
    return n;
}

static const rmem_source_ops_t bytes_ops = {.read = bytes_read};

static size_t dumped_read(void *ctx, raddr_t addr, void *buf, size_t len)
{
    return core__read_span(ctx, addr, buf, len, 1);
}

static const rmem_source_ops_t dumped_ops = {.read = dumped_read};

/* The build-id of the object whose offset 0 is mapped at BASE, from the bytes the core
 * holds (DUMPED) or from the file's bytes (FILE, mapped at 0). */
static int build_id_of(core_t *c, const bytes_src_t *file, uint64_t base, uint8_t *id, size_t *len)
{
    rmem_t *m =
        file ? rmem_open_source(&bytes_ops, (void *)file) : rmem_open_source(&dumped_ops, c);
    if (!m)
        return SCRY_E_NOMEM;
    int rc = elfsym_mapped_build_id(m, file ? 0 : base, id, len);
    rmem_free(m);
    return rc;
}

static void hex(const uint8_t *id, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", id[i]);
    out[2 * n] = 0;
}

static void refuse(core_t *c, core_file_t *f, const char *fmt, const char *a, const char *b)
{
    char msg[CORE_PATH_MAX + 256];
    snprintf(msg, sizeof msg, fmt, f->path, a, b);
    f->state = FILE_REFUSED;
    free(f->problem);
    f->problem = strdup(msg);
    size_t used = strlen(c->problems);
    if (used + strlen(msg) + 2 < sizeof c->problems)
        snprintf(c->problems + used, sizeof c->problems - used, "%s\n", msg);
}

/* 1 when PATH has a ".." component (it would leave the sysroot). */
static int has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
            return 1;
    return 0;
}

/* Opens F read-only: under the sysroot resolved as the core's process would have, inside
 * that root (absolute symlinks included: openat2 RESOLVE_IN_ROOT), else as it is named.
 * Returns the descriptor or -1. */
static int open_file(const core_t *c, const core_file_t *f)
{
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
    if (f->given || c->rootfd < 0)
        return open(f->path, flags);
    return inroot_openat(c->rootfd, f->path, flags, RESOLVE_IN_ROOT);
}

/* Opens and maps file I under the sysroot and checks its build-id against the one the core
 * holds for its first mapping at offset 0. Returns 0 when usable, else SCRY_E_NOTFOUND. */
int core__file_use(core_t *c, uint32_t i)
{
    core_file_t *f = &c->files[i];
    if (f->state != FILE_UNTRIED)
        return f->state == FILE_OK ? 0 : SCRY_E_NOTFOUND;
    char path[2 * CORE_PATH_MAX];
    if (!f->given && (f->path[0] != '/' || has_dotdot(f->path))) {
        refuse(c, f, "%s: not an absolute path inside the root%s%s", "", "");
        return SCRY_E_NOTFOUND;
    }
    snprintf(path, sizeof path, "%s%s", f->given ? "" : c->sysroot, f->path);
    int fd = open_file(c, f);
    struct stat st;
    char magic[4];
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        (uint64_t)st.st_size > CORE_FILE_MAX || pread(fd, magic, 4, 0) != 4 ||
        memcmp(magic, ELFMAG, SELFMAG) != 0) {
        /* only ELF objects are read: what the walkers need, and never a data file a
         * hostile core names */
        const char *why = fd < 0                 ? "not found"
                          : !S_ISREG(st.st_mode) ? "not a regular file"
                                                 : "not an ELF object";
        if (fd >= 0)
            close(fd);
        refuse(c, f, "%s: %s%s", why, c->sysroot[0] && !f->given ? " under the --sysroot" : "");
        return SCRY_E_NOTFOUND;
    }
    /* the file opened, by its real path (what elfsym/ opens later: inside the root too) */
    char self[64], real[CORE_PATH_MAX];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t rl = readlink(self, real, sizeof real - 1);
    if (rl > 0) {
        real[rl] = 0;
        snprintf(path, sizeof path, "%s", real);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        refuse(c, f, "%s: cannot be mapped%s%s", "", "");
        return SCRY_E_NOTFOUND;
    }
    f->map = map;
    f->len = (size_t)st.st_size;
    f->open_path = strdup(path);
    /* the core's build-id: at the mapping of the file's offset 0 */
    uint8_t want[64], have[64];
    size_t wlen = 0, hlen = 0;
    int core_has = 0;
    for (size_t k = 0; k < c->nfmaps && !core_has; k++)
        if (c->fmaps[k].file == i && c->fmaps[k].offset == 0)
            core_has = build_id_of(c, NULL, c->fmaps[k].start, want, &wlen) == 0;
    bytes_src_t b = {f->map, f->len};
    if (!f->open_path) {
        refuse(c, f, "%s: out of memory%s%s", "", "");
        return SCRY_E_NOTFOUND;
    }
    if (core_has) {
        char w[129], h[129] = "none";
        if (build_id_of(c, &b, 0, have, &hlen) == 0)
            hex(have, hlen, h);
        if (hlen != wlen || memcmp(have, want, wlen) != 0) {
            hex(want, wlen, w);
            refuse(c, f, "%s: build-id %s in the core, %s in the file: another build, refused", w,
                   h);
            return SCRY_E_NOTFOUND;
        }
    }
    f->state = FILE_OK;
    return 0;
}

/* ---- the mappings as /proc/PID/maps text --------------------------------------------- */

typedef struct maps_line {
    uint64_t start, end, offset;
    uint32_t file; /* index + 1, 0 anonymous */
    uint32_t flags;
} maps_line_t;

static int cmp_line(const void *a, const void *b)
{
    const maps_line_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The permissions of a file mapping the core has no segment for (gdb leaves out what it
 * did not dump): those of the file's own PT_LOAD that holds OFFSET, else read-only. */
static uint32_t file_flags(core_t *c, uint32_t file, uint64_t offset)
{
    if (core__file_use(c, file) != 0)
        return PF_R;
    const core_file_t *f = &c->files[file];
    Elf64_Ehdr eh;
    if (f->len < sizeof eh)
        return PF_R;
    memcpy(&eh, f->map, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phoff >= f->len || eh.e_phnum > 256 ||
        eh.e_phnum * sizeof(Elf64_Phdr) > f->len - eh.e_phoff)
        return PF_R;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, f->map + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && offset >= (ph.p_offset & ~(uint64_t)4095) &&
            offset < ph.p_offset + ph.p_filesz)
            return ph.p_flags;
    }
    return PF_R;
}

static int core_maps(void *ctx, char **text, size_t *len)
{
    core_t *c = ctx;
    size_t n = 0, cap = c->nfmaps + c->nsegs;
    maps_line_t *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!v)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < c->nfmaps; i++) {
        const core_fmap_t *f = &c->fmaps[i];
        long si = seg_index(c, f->start);
        uint32_t flags = si >= 0 && c->segs[si].vaddr == f->start
                             ? c->segs[si].flags
                             : file_flags(c, f->file, f->offset);
        v[n++] = (maps_line_t){f->start, f->end, f->offset, f->file + 1, flags};
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        const core_seg_t *s = &c->segs[i];
        long fi = core__fmap_index(c, s->vaddr);
        if (fi >= 0 || (s->memsz && core__fmap_index(c, s->vaddr + s->memsz - 1) >= 0))
            continue; /* a file's mapping, listed above */
        v[n++] = (maps_line_t){s->vaddr, s->vaddr + s->memsz, 0, 0, s->flags};
    }
    qsort(v, n, sizeof *v, cmp_line);
    FILE *out = open_memstream(text, len);
    if (!out) {
        free(v);
        return SCRY_E_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const maps_line_t *l = &v[i];
        /* inode: the file's index + 1, which tells files apart as the kernel's would */
        fprintf(out, "%llx-%llx %c%c%cp %08llx 00:00 %u %s\n", (unsigned long long)l->start,
                (unsigned long long)l->end, l->flags & PF_R ? 'r' : '-',
                l->flags & PF_W ? 'w' : '-', l->flags & PF_X ? 'x' : '-',
                (unsigned long long)l->offset, l->file, l->file ? c->files[l->file - 1].path : "");
    }
    free(v);
    return fclose(out) == 0 ? 0 : SCRY_E_NOMEM;
}

static int core_file_op(void *ctx, const char *path, char *buf, size_t size)
{
    core_t *c = ctx;
    for (uint32_t i = 0; i < c->nfiles; i++) {
        if (strcmp(c->files[i].path, path) != 0)
            continue;
        if (core__file_use(c, i) != 0)
            return SCRY_E_NOTFOUND;
        size_t l = strlen(c->files[i].open_path);
        if (l >= size)
            return SCRY_E_TRUNC;
        memcpy(buf, c->files[i].open_path, l + 1);
        return 0;
    }
    return SCRY_E_NOTFOUND;
}

static int core_exe_op(void *ctx, char *buf, size_t size)
{
    core_t *c = ctx;
    if (!c->exe[0])
        return SCRY_E_NOTFOUND;
    snprintf(buf, size, "%s", c->exe);
    return strlen(c->exe) < size ? 0 : SCRY_E_TRUNC;
}

static size_t core_read_op(void *ctx, raddr_t addr, void *buf, size_t len)
{
    return core__read_span(ctx, addr, buf, len, 0);
}

static const rmem_source_ops_t core_ops = {
    .read = core_read_op, .maps = core_maps, .file = core_file_op, .exe = core_exe_op};

rmem_t *core_reader(core_t *c)
{
    return c ? rmem_open_source(&core_ops, c) : NULL;
}
