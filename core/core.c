/* core.c - parsing a core file: its segments and notes (threads, signal, process,
 * auxiliary vector, mapped files); the memory and files are core_mem.c's. */
#include "core_internal.h"

#include "corezip.h"
#include "scry_err.h"
#include "scry_grow.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Sorts the file mappings by address, dropping any that overlaps the one before it. */
static void sort_fmaps(core_t *c)
{
    qsort(c->fmaps, c->nfmaps, sizeof *c->fmaps, cmp_fmap);
    size_t k = 0;
    for (size_t i = 0; i < c->nfmaps; i++)
        if (k == 0 || c->fmaps[i].start >= c->fmaps[k - 1].end)
            c->fmaps[k++] = c->fmaps[i];
    c->nfmaps = k;
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
    core_thread_t *v =
        scry_grow(c->threads, &c->threads_cap, sizeof *v, c->nthreads + 1, 64, CORE_MAX_THREADS);
    if (!v)
        return SCRY_E_NOMEM;
    c->threads = v;
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
    sort_fmaps(c);
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
        t->in_syscall = t->regs.ip >= 2 && core__read_span(c, t->regs.ip - 2, insn, 2, 0) == 2 &&
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
    sort_fmaps(c);
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
    long fi = c->at_entry ? core__fmap_index(c, c->at_entry) : -1;
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
        eh.e_type != ET_CORE || eh.e_machine != EM_X86_64 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB) {
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
            snprintf(errbuf, errlen,
                     rc == SCRY_E_NOMEM ? "out of memory" : "a note segment is malformed");
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

/* The open of an image of LEN bytes at DATA; OWNED: DATA's mapping, munmap'd by core_free
 * (or here on failure), or NULL when the caller keeps DATA. */
static core_t *open_common(const void *data, size_t len, void *owned, const core_opts_t *opts,
                           int *err, char *errbuf, size_t errlen)
{
    int rc = 0;
    core_t *c = calloc(1, sizeof *c);
    if (!c) {
        if (owned)
            munmap(owned, len);
        rc = SCRY_E_NOMEM;
        goto fail;
    }
    c->data = data;
    c->len = len;
    c->owned = owned;
    c->owned_len = owned ? len : 0;
    c->rootfd = -1;
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

core_t *core_open_mem(const void *data, size_t len, const core_opts_t *opts, int *err, char *errbuf,
                      size_t errlen)
{
    return open_common(data, len, NULL, opts, err, errbuf, errlen);
}

core_t *core_open(const char *path, const core_opts_t *opts, int *err, char *errbuf, size_t errlen)
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
    return open_common(map, len, map, opts, err, errbuf, errlen);
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
            return core__file_use(c, i) == 0 ? NULL : c->files[i].problem;
    return NULL;
}

size_t core_check_files(core_t *c)
{
    size_t bad = 0;
    for (uint32_t i = 0; i < c->nfiles; i++)
        bad += core__file_use(c, i) != 0;
    return bad;
}

const char *core_problems(const core_t *c)
{
    return c->problems;
}
