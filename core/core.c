/* core.c - parsing a core file and reading the memory it holds. */
#include "core.h"

#include "buildid.h"
#include "corezip.h"
#include "scry_err.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <signal.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef NT_SIGINFO
#define NT_SIGINFO 0x53494749
#endif
#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

#define PRSTATUS_SIZE    336 /* x86-64 struct elf_prstatus */
#define PRSTATUS_CURSIG  12
#define PRSTATUS_PID     32
#define PRSTATUS_REG     112
#define PRPSINFO_SIZE    136
#define PRPSINFO_PID     24
#define PRPSINFO_FNAME   40
#define PRPSINFO_PSARGS  56
#define SIGINFO_MIN      24
#define CORE_PATH_MAX    4096
#define CORE_PROBLEMS    8192 /* bytes of refusal sentences kept */
#define CORE_FILE_MAX    ((uint64_t)1 << 40) /* bytes of one mapped file */

typedef struct core_seg {
    uint64_t vaddr, memsz, filesz, offset;
    uint32_t flags; /* PF_R/W/X */
} core_seg_t;

enum file_state { FILE_UNTRIED = 0, FILE_OK, FILE_REFUSED };

typedef struct core_file {
    const char *path; /* as the target named it, in the core's NT_FILE strings (copied) */
    char *open_path;  /* under the sysroot */
    int state;        /* enum file_state */
    int given;        /* --exe: a path of scry's machine, opened as it is */
    const uint8_t *map;
    size_t len;
    char *problem; /* why it was refused */
} core_file_t;

typedef struct core_fmap {
    uint64_t start, end, offset; /* offset in bytes */
    uint32_t file;               /* index into files */
} core_fmap_t;

struct core {
    const uint8_t *data; /* the core's bytes */
    size_t len;
    void *owned; /* munmap'd at free when not NULL */
    size_t owned_len;
    Elf *elf;
    core_seg_t *segs; /* sorted by vaddr, not overlapping */
    size_t nsegs;
    core_fmap_t *fmaps; /* sorted by start, not overlapping */
    size_t nfmaps;
    core_file_t *files;
    size_t nfiles;
    core_thread_t *threads;
    size_t nthreads, threads_cap;
    core_siginfo_t sig;
    uint64_t at_entry; /* AT_ENTRY of NT_AUXV, 0 unknown */
    uint64_t at_phdr;  /* AT_PHDR: where the executable's program headers are mapped */
    int32_t pid;
    char comm[17];
    char args[81];
    char exe[CORE_PATH_MAX];
    char sysroot[CORE_PATH_MAX];
    int rootfd; /* --sysroot opened (O_PATH), else -1 */
    char problems[CORE_PROBLEMS];
};

/* ---- the memory ---------------------------------------------------------------------- */

static long seg_index(const core_t *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->segs[mid].vaddr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const core_seg_t *s = &c->segs[lo - 1];
    return addr - s->vaddr < s->memsz ? (long)(lo - 1) : -1;
}

static long fmap_index(const core_t *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nfmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->fmaps[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const core_fmap_t *f = &c->fmaps[lo - 1];
    return addr < f->end ? (long)(lo - 1) : -1;
}

static int file_use(core_t *c, uint32_t i);

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
    long fi = fmap_index(c, addr);
    if (fi < 0)
        return 0;
    const core_fmap_t *f = &c->fmaps[fi];
    if (file_use(c, f->file) != 0)
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

static size_t read_span(core_t *c, uint64_t addr, void *buf, size_t len, int dumped)
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
    return read_span(ctx, addr, buf, len, 1);
}

static const rmem_source_ops_t dumped_ops = {.read = dumped_read};

/* The build-id of the object whose offset 0 is mapped at BASE, from the bytes the core
 * holds (DUMPED) or from the file's bytes (FILE, mapped at 0). */
static int build_id_of(core_t *c, const bytes_src_t *file, uint64_t base, uint8_t *id,
                       size_t *len)
{
    rmem_t *m = file ? rmem_open_source(&bytes_ops, (void *)file) : rmem_open_source(&dumped_ops, c);
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
    struct open_how how = {.flags = (uint64_t)flags,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    const char *rel = f->path;
    while (*rel == '/')
        rel++;
    return (int)syscall(SYS_openat2, c->rootfd, rel, &how, sizeof how);
}

/* Opens and maps file I under the sysroot and checks its build-id against the one the core
 * holds for its first mapping at offset 0. Returns 0 when usable, else SCRY_E_NOTFOUND. */
static int file_use(core_t *c, uint32_t i)
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
        const char *why = fd < 0 ? "not found" : !S_ISREG(st.st_mode) ? "not a regular file"
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
            refuse(c, f, "%s: build-id %s in the core, %s in the file: another build, refused",
                   w, h);
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
    if (file_use(c, file) != 0)
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
        uint32_t flags = si >= 0 && c->segs[si].vaddr == f->start ? c->segs[si].flags
                                                                   : file_flags(c, f->file, f->offset);
        v[n++] = (maps_line_t){f->start, f->end, f->offset, f->file + 1, flags};
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        const core_seg_t *s = &c->segs[i];
        long fi = fmap_index(c, s->vaddr);
        if (fi >= 0 || (s->memsz && fmap_index(c, s->vaddr + s->memsz - 1) >= 0))
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
        if (file_use(c, i) != 0)
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
    return read_span(ctx, addr, buf, len, 0);
}

static const rmem_source_ops_t core_ops = {
    .read = core_read_op, .maps = core_maps, .file = core_file_op, .exe = core_exe_op};

rmem_t *core_reader(core_t *c)
{
    return c ? rmem_open_source(&core_ops, c) : NULL;
}

/* ---- parsing ------------------------------------------------------------------------- */

static int cmp_seg(const void *a, const void *b)
{
    const core_seg_t *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int cmp_fmap(const void *a, const void *b)
{
    const core_fmap_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The PT_LOAD segments, bounded by the file (a truncated core keeps what it holds), sorted,
 * overlaps dropped. */
static int read_segments(core_t *c, size_t phnum)
{
    c->segs = calloc(phnum ? phnum : 1, sizeof *c->segs);
    if (!c->segs)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_LOAD || ph.p_memsz == 0)
            continue;
        if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            continue;
        uint64_t filesz = ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz;
        if (ph.p_offset >= c->len)
            filesz = 0;
        else if (filesz > c->len - ph.p_offset)
            filesz = c->len - ph.p_offset;
        c->segs[c->nsegs++] = (core_seg_t){ph.p_vaddr, ph.p_memsz, filesz, ph.p_offset, ph.p_flags};
    }
    qsort(c->segs, c->nsegs, sizeof *c->segs, cmp_seg);
    size_t k = 0;
    for (size_t i = 0; i < c->nsegs; i++)
        if (k == 0 || c->segs[i].vaddr >= c->segs[k - 1].vaddr + c->segs[k - 1].memsz)
            c->segs[k++] = c->segs[i];
    c->nsegs = k;
    return 0;
}

static int read_prstatus(core_t *c, const uint8_t *d, size_t n)
{
    if (n < PRSTATUS_SIZE || c->nthreads >= CORE_MAX_THREADS)
        return 0;
    if (c->nthreads == c->threads_cap) {
        size_t cap = c->threads_cap ? 2 * c->threads_cap : 64;
        core_thread_t *v = realloc(c->threads, cap * sizeof *v);
        if (!v)
            return SCRY_E_NOMEM;
        c->threads = v;
        c->threads_cap = cap;
    }
    core_thread_t *t = &c->threads[c->nthreads++];
    int16_t cursig;
    memcpy(&cursig, d + PRSTATUS_CURSIG, 2);
    memcpy(&t->tid, d + PRSTATUS_PID, 4);
    memcpy(&t->regs, d + PRSTATUS_REG, sizeof t->regs);
    t->signo = cursig;
    t->in_syscall = 0;
    return 0;
}

/* 1 for a signal whose default action dumps core (signal(7)): a core's fatal signal. A
 * gcore of a running process records the SIGSTOP gdb attached with: no signal. */
static int dumps_core(int signo)
{
    switch (signo) {
    case SIGQUIT:
    case SIGILL:
    case SIGTRAP:
    case SIGABRT:
    case SIGBUS:
    case SIGFPE:
    case SIGSEGV:
    case SIGXCPU:
    case SIGXFSZ:
    case SIGSYS:
        return 1;
    default:
        return 0;
    }
}

static void read_siginfo(core_t *c, const uint8_t *d, size_t n)
{
    int32_t signo, err, code;
    if (n < SIGINFO_MIN || c->sig.signo)
        return;
    memcpy(&signo, d, 4);
    memcpy(&err, d + 4, 4);
    memcpy(&code, d + 8, 4);
    if (!dumps_core(signo))
        return;
    c->sig.signo = signo;
    c->sig.err = err;
    c->sig.code = code;
    memcpy(&c->sig.addr, d + 16, 8);
    c->sig.tid = c->nthreads ? c->threads[c->nthreads - 1].tid : 0;
}

static void read_prpsinfo(core_t *c, const uint8_t *d, size_t n)
{
    if (n < PRPSINFO_SIZE)
        return;
    memcpy(&c->pid, d + PRPSINFO_PID, 4);
    memcpy(c->comm, d + PRPSINFO_FNAME, 16);
    c->comm[16] = 0;
    memcpy(c->args, d + PRPSINFO_PSARGS, 80);
    c->args[80] = 0;
}

static void read_auxv(core_t *c, const uint8_t *d, size_t n)
{
    for (size_t off = 0; off + 16 <= n; off += 16) {
        uint64_t key, val;
        memcpy(&key, d + off, 8);
        memcpy(&val, d + off + 8, 8);
        if (key == AT_ENTRY)
            c->at_entry = val;
        if (key == AT_PHDR)
            c->at_phdr = val;
        if (key == AT_NULL)
            break;
    }
}

/* NT_FILE: count, page size, COUNT x (start, end, page offset), then COUNT paths. */
static int read_files(core_t *c, const uint8_t *d, size_t n)
{
    uint64_t count, page;
    if (c->fmaps || n < 16)
        return 0; /* the first NT_FILE note counts */
    memcpy(&count, d, 8);
    memcpy(&page, d + 8, 8);
    if (count > CORE_MAX_FILES || count > (n - 16) / 24 || page == 0 || (page & (page - 1)))
        return SCRY_E_CORRUPT;
    const char *names = (const char *)d + 16 + count * 24;
    size_t left = n - 16 - count * 24;
    c->fmaps = calloc(count ? count : 1, sizeof *c->fmaps);
    c->files = calloc(count ? count : 1, sizeof *c->files);
    if (!c->fmaps || !c->files)
        return SCRY_E_NOMEM;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t e[3];
        memcpy(e, d + 16 + i * 24, 24);
        const char *nul = memchr(names, 0, left);
        if (!nul)
            return SCRY_E_CORRUPT;
        size_t plen = (size_t)(nul - names);
        uint64_t off = e[2] * page;
        if (e[1] > e[0] && plen > 0 && plen < CORE_PATH_MAX && off / page == e[2]) {
            uint32_t f = 0;
            while (f < c->nfiles && strcmp(c->files[f].path, names) != 0)
                f++;
            if (f == c->nfiles) {
                char *p = strdup(names);
                if (!p)
                    return SCRY_E_NOMEM;
                c->files[c->nfiles++].path = p;
            }
            c->fmaps[c->nfmaps++] = (core_fmap_t){e[0], e[1], off, f};
        }
        left -= plen + 1;
        names = nul + 1;
    }
    qsort(c->fmaps, c->nfmaps, sizeof *c->fmaps, cmp_fmap);
    size_t k = 0;
    for (size_t i = 0; i < c->nfmaps; i++)
        if (k == 0 || c->fmaps[i].start >= c->fmaps[k - 1].end)
            c->fmaps[k++] = c->fmaps[i];
    c->nfmaps = k;
    return 0;
}

static int read_notes(core_t *c, const GElf_Phdr *ph)
{
    if (ph->p_filesz == 0 || ph->p_offset >= c->len || ph->p_filesz > c->len - ph->p_offset ||
        ph->p_filesz > CORE_MAX_NOTES)
        return SCRY_E_CORRUPT;
    Elf_Data *data = elf_getdata_rawchunk(c->elf, (int64_t)ph->p_offset, ph->p_filesz, ELF_T_NHDR);
    if (!data)
        return SCRY_E_CORRUPT;
    size_t off = 0, name_off, desc_off;
    GElf_Nhdr nh;
    while (off < data->d_size && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        if (desc_off > data->d_size || nh.n_descsz > data->d_size - desc_off)
            return SCRY_E_CORRUPT;
        const uint8_t *d = (const uint8_t *)data->d_buf + desc_off;
        const char *name = (const char *)data->d_buf + name_off;
        int is_core = nh.n_namesz == 5 && memcmp(name, "CORE", 5) == 0;
        if (!is_core)
            continue;
        int rc = 0;
        switch (nh.n_type) {
        case NT_PRSTATUS:
            rc = read_prstatus(c, d, nh.n_descsz);
            break;
        case NT_PRPSINFO:
            read_prpsinfo(c, d, nh.n_descsz);
            break;
        case NT_SIGINFO:
            read_siginfo(c, d, nh.n_descsz);
            break;
        case NT_AUXV:
            read_auxv(c, d, nh.n_descsz);
            break;
        case NT_FILE:
            rc = read_files(c, d, nh.n_descsz);
            break;
        default:
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* The thread that took the signal first; the others in the core's order. */
static void crashing_first(core_t *c)
{
    if (!c->sig.signo) {
        for (size_t i = 0; i < c->nthreads && !c->sig.signo; i++)
            if (dumps_core(c->threads[i].signo)) {
                c->sig.signo = c->threads[i].signo;
                c->sig.tid = c->threads[i].tid;
            }
    }
    for (size_t i = 1; i < c->nthreads && c->sig.signo; i++) {
        if (c->threads[i].tid != c->sig.tid)
            continue;
        core_thread_t t = c->threads[i];
        memmove(&c->threads[1], &c->threads[0], i * sizeof t);
        c->threads[0] = t;
        break;
    }
}

/* A thread waits in the kernel when the two bytes before its PC are a syscall (0f 05). */
static void mark_syscalls(core_t *c)
{
    for (size_t i = 0; i < c->nthreads; i++) {
        uint8_t insn[2];
        core_thread_t *t = &c->threads[i];
        t->in_syscall = t->regs.ip >= 2 && read_span(c, t->regs.ip - 2, insn, 2, 0) == 2 &&
                        insn[0] == 0x0f && insn[1] == 0x05;
    }
}

/* A core without NT_FILE (no file is named): the executable given as --exe, mapped where
 * the auxiliary vector says its program headers are (AT_PHDR), one file mapping per PT_LOAD.
 * Returns 0 (nothing to add, or added) or SCRY_E_NOMEM. */
static int exe_mappings(core_t *c, const char *exe)
{
    c->fmaps = calloc(64, sizeof *c->fmaps);
    c->files = calloc(1, sizeof *c->files);
    if (!c->fmaps || !c->files || !(c->files[0].path = strdup(exe)))
        return SCRY_E_NOMEM;
    c->nfiles = 1;
    c->files[0].given = 1;
    /* its headers only: the file is used (and its build-id checked against the core's)
     * once its mappings are known */
    Elf64_Ehdr eh;
    Elf64_Phdr ph[64];
    int fd = open(exe, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int ok = pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
             memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
             eh.e_phnum <= 64 &&
             pread(fd, ph, eh.e_phnum * sizeof *ph, (off_t)eh.e_phoff) ==
                 (ssize_t)(eh.e_phnum * sizeof *ph);
    close(fd);
    if (!ok)
        return 0;
    uint64_t phdr_vaddr = 0, bias = 0;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_PHDR)
            phdr_vaddr = ph[i].p_vaddr;
        else if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0 && !phdr_vaddr)
            phdr_vaddr = ph[i].p_vaddr + eh.e_phoff;
    }
    if (eh.e_type == ET_DYN) {
        if (!c->at_phdr || !phdr_vaddr)
            return 0;
        bias = c->at_phdr - phdr_vaddr;
    }
    for (size_t i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD || ph[i].p_filesz == 0)
            continue;
        uint64_t start = (bias + ph[i].p_vaddr) & ~(uint64_t)4095;
        uint64_t end = (bias + ph[i].p_vaddr + ph[i].p_filesz + 4095) & ~(uint64_t)4095;
        if (end > start)
            c->fmaps[c->nfmaps++] = (core_fmap_t){start, end, ph[i].p_offset & ~(uint64_t)4095, 0};
    }
    qsort(c->fmaps, c->nfmaps, sizeof *c->fmaps, cmp_fmap);
    size_t k = 0;
    for (size_t i = 0; i < c->nfmaps; i++)
        if (k == 0 || c->fmaps[i].start >= c->fmaps[k - 1].end)
            c->fmaps[k++] = c->fmaps[i];
    c->nfmaps = k;
    return 0;
}

/* The executable: the file mapping that holds AT_ENTRY, else --exe (mapped by
 * exe_mappings when the core names no file). */
static int find_exe(core_t *c, const core_opts_t *opts)
{
    if (!c->files && opts && opts->exe) {
        int rc = exe_mappings(c, opts->exe);
        if (rc)
            return rc;
    }
    long fi = c->at_entry ? fmap_index(c, c->at_entry) : -1;
    if (fi >= 0)
        snprintf(c->exe, sizeof c->exe, "%s", c->files[c->fmaps[fi].file].path);
    else if (opts && opts->exe)
        snprintf(c->exe, sizeof c->exe, "%s", opts->exe);
    return 0;
}

static int parse(core_t *c, const core_opts_t *opts, char *errbuf, size_t errlen)
{
    GElf_Ehdr eh;
    size_t phnum = 0;
    c->elf = elf_memory((char *)(uintptr_t)c->data, c->len);
    if (!c->elf || elf_kind(c->elf) != ELF_K_ELF || !gelf_getehdr(c->elf, &eh) ||
        eh.e_type != ET_CORE || eh.e_machine != EM_X86_64 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        snprintf(errbuf, errlen, "not an x86-64 ELF core file");
        return SCRY_E_ELF;
    }
    if (elf_getphdrnum(c->elf, &phnum) != 0 || phnum > CORE_MAX_SEGMENTS) {
        snprintf(errbuf, errlen, "its program headers are malformed");
        return SCRY_E_CORRUPT;
    }
    int rc = read_segments(c, phnum);
    if (rc)
        return rc;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(c->elf, (int)i, &ph) || ph.p_type != PT_NOTE)
            continue;
        if ((rc = read_notes(c, &ph)) != 0) {
            snprintf(errbuf, errlen, rc == SCRY_E_NOMEM ? "out of memory" : "a note segment is malformed");
            return rc;
        }
    }
    if (c->nthreads == 0) {
        snprintf(errbuf, errlen, "it holds no thread (no NT_PRSTATUS note)");
        return SCRY_E_CORRUPT;
    }
    if (!c->pid)
        c->pid = c->threads[0].tid;
    crashing_first(c);
    if ((rc = find_exe(c, opts)) != 0)
        return rc;
    mark_syscalls(c);
    return 0;
}

static core_t *open_common(core_t *c, const core_opts_t *opts, int *err, char *errbuf,
                           size_t errlen)
{
    int rc = 0;
    if (opts && opts->sysroot) {
        size_t l = strlen(opts->sysroot);
        while (l > 0 && opts->sysroot[l - 1] == '/')
            l--; /* "/" and "" are the root itself */
        if (l >= sizeof c->sysroot) {
            snprintf(errbuf, errlen, "the --sysroot path is too long");
            rc = SCRY_E_INVAL;
            goto fail;
        }
        memcpy(c->sysroot, opts->sysroot, l);
        c->sysroot[l] = 0;
        if (l && (c->rootfd = open(c->sysroot, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
            snprintf(errbuf, errlen, "the --sysroot %s is not a directory scry can open: %s",
                     c->sysroot, strerror(errno));
            rc = SCRY_E_NOTFOUND;
            goto fail;
        }
    }
    elf_version(EV_CURRENT);
    if ((rc = parse(c, opts, errbuf, errlen)) != 0)
        goto fail;
    if (err)
        *err = 0;
    return c;
fail:
    if (rc == SCRY_E_NOMEM)
        snprintf(errbuf, errlen, "out of memory");
    core_free(c);
    if (err)
        *err = rc;
    return NULL;
}

core_t *core_open_mem(const void *data, size_t len, const core_opts_t *opts, int *err,
                      char *errbuf, size_t errlen)
{
    core_t *c = calloc(1, sizeof *c);
    if (!c) {
        if (err)
            *err = SCRY_E_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    c->data = data;
    c->len = len;
    c->rootfd = -1;
    return open_common(c, opts, err, errbuf, errlen);
}

core_t *core_open(const char *path, const core_opts_t *opts, int *err, char *errbuf,
                  size_t errlen)
{
    void *map = NULL;
    size_t len = 0;
    char why[256] = "";
    int rc = corezip_map(path, &map, &len, why, sizeof why);
    if (rc) {
        snprintf(errbuf, errlen, "%s", why);
        if (err)
            *err = rc;
        return NULL;
    }
    core_t *c = calloc(1, sizeof *c);
    if (!c) {
        munmap(map, len);
        if (err)
            *err = SCRY_E_NOMEM;
        snprintf(errbuf, errlen, "out of memory");
        return NULL;
    }
    c->data = map;
    c->len = len;
    c->owned = map;
    c->owned_len = len;
    c->rootfd = -1;
    return open_common(c, opts, err, errbuf, errlen);
}

void core_free(core_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].map)
            munmap((void *)(uintptr_t)c->files[i].map, c->files[i].len);
        free((void *)c->files[i].path);
        free(c->files[i].open_path);
        free(c->files[i].problem);
    }
    free(c->files);
    free(c->fmaps);
    free(c->segs);
    free(c->threads);
    if (c->elf)
        elf_end(c->elf);
    if (c->owned)
        munmap(c->owned, c->owned_len);
    if (c->rootfd >= 0)
        close(c->rootfd);
    free(c);
}

int32_t core_pid(const core_t *c)
{
    return c->pid;
}

const char *core_comm(const core_t *c)
{
    return c->comm;
}

const char *core_args(const core_t *c)
{
    return c->args;
}

size_t core_nthreads(const core_t *c)
{
    return c->nthreads;
}

const core_thread_t *core_thread(const core_t *c, size_t i)
{
    return i < c->nthreads ? &c->threads[i] : NULL;
}

const core_siginfo_t *core_siginfo(const core_t *c)
{
    return &c->sig;
}

const char *core_exe(const core_t *c)
{
    return c->exe;
}

const char *core_file_problem(core_t *c, const char *path)
{
    for (uint32_t i = 0; i < c->nfiles; i++)
        if (strcmp(c->files[i].path, path) == 0)
            return file_use(c, i) == 0 ? NULL : c->files[i].problem;
    return NULL;
}

size_t core_check_files(core_t *c)
{
    size_t bad = 0;
    for (uint32_t i = 0; i < c->nfiles; i++)
        bad += file_use(c, i) != 0;
    return bad;
}

const char *core_problems(const core_t *c)
{
    return c->problems;
}
