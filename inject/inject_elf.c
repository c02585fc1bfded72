/* inject_elf.c - symbols and code caves of a target, through elfsym. */
#include "inject_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elf.h>

#include "buildid.h"
#include "elfobj.h"
#include "interp.h"
#include "scry_err.h"

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int inject__runtime_kind(const char *path)
{
    const char *b = base_name(path);
    if (starts(b, "ld-linux") || starts(b, "ld-2.") || starts(b, "ld-musl") || starts(b, "ld.so"))
        return 2;
    if (starts(b, "libc.so") || starts(b, "libc-2.") || starts(b, "libpthread") ||
        starts(b, "libdl.") || starts(b, "libdl-"))
        return 1;
    return 0;
}

int inject__object_matches(const char *path, const char *object, const char *root)
{
    if (!path[0] || !object || !object[0])
        return 0;
    if (strchr(object, '/')) {
        if (strcmp(path, object) == 0)
            return 1;
        /* a target under chroot: the kernel shows its files with its root in front */
        size_t n = root ? strlen(root) : 0;
        if (n > 1 && strncmp(path, root, n) == 0 && strcmp(path + n, object) == 0)
            return 1;
        char real[PATH_MAX];
        return !n && realpath(object, real) && strcmp(path, real) == 0;
    }
    return starts(base_name(path), object);
}

/* Reads (WRITE 0) or writes LEN bytes at ADDR through MEMFD, over partial transfers and
 * EINTR: 0, SCRY_E_GONE (the target exited) or the errno's code. */
static int mem_rw(int memfd, raddr_t addr, void *buf, size_t len, int write)
{
    size_t done = 0;
    while (done < len) {
        char *at = (char *)buf + done;
        off_t off = (off_t)(addr + done);
        ssize_t n = write ? pwrite(memfd, at, len - done, off) : pread(memfd, at, len - done, off);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return SCRY_E_GONE;
        return errno == ESRCH ? SCRY_E_GONE : scry_err_from_errno(errno);
    }
    return 0;
}

int inject__mem_read(int memfd, raddr_t addr, void *buf, size_t len)
{
    return mem_rw(memfd, addr, buf, len, 0);
}

int inject__mem_write(int memfd, raddr_t addr, const void *buf, size_t len)
{
    return mem_rw(memfd, addr, (void *)(uintptr_t)buf, len, 1);
}

/* Same file as the previous mapping examined (maps of one file are adjacent). */
static int same_path(const elfsym_map_t *a, const elfsym_map_t *b)
{
    return a && b && a->inode == b->inode && strcmp(a->path, b->path) == 0;
}

/* SYMBOL of the object mapped at index I of MAPS, read from the file ALT, which must be
 * the mapped file: same build-id as the one mapped at the file's offset 0. For a mapping
 * scry cannot open (a deleted private copy, and map_files needs CAP_SYS_ADMIN) whose
 * contents scry has (its own shim). Returns 0 with *ADDR or SCRY_E_NOTFOUND. */
static int lookup_as(pid_t pid, const elfsym_maps_t *maps, size_t i, const char *alt,
                     const char *symbol, raddr_t *addr)
{
    const elfsym_map_t *e = elfsym_maps_get(maps, i);
    uint64_t base = 0;
    size_t n = elfsym_maps_count(maps);
    for (size_t k = 0; k < n && !base; k++) {
        const elfsym_map_t *m = elfsym_maps_get(maps, k);
        if (m->offset == 0 && same_path(m, e))
            base = m->start;
    }
    int rc = SCRY_E_NOTFOUND;
    rmem_t *mem = base ? rmem_open_pid(pid) : NULL;
    elfsym_obj_t *obj = mem ? elfsym_obj_open(alt, NULL) : NULL;
    elfsym_sym_t sym;
    raddr_t bias = 0;
    if (obj && elfsym_map_matches(mem, base, obj) && elfsym_module_bias(obj, maps, i, &bias) == 0 &&
        elfsym_obj_lookup(obj, symbol, &sym) == 0 && sym.value != 0 &&
        (sym.type == STT_FUNC || sym.type == STT_OBJECT)) {
        *addr = sym.value + bias;
        rc = 0;
    }
    elfsym_obj_free(obj);
    rmem_free(mem);
    return rc;
}

int inject__lookup(pid_t pid, const elfsym_maps_t *maps, const char *object, const char *symbol,
                   const char *alt, raddr_t *addr)
{
    if (!maps || !object || !symbol || !addr)
        return SCRY_E_INVAL;
    elfsym_module_t *mod = malloc(sizeof *mod);
    if (!mod)
        return SCRY_E_NOMEM;
    int rc = SCRY_E_NOTFOUND;
    const elfsym_map_t *prev = NULL;
    size_t n = elfsym_maps_count(maps);
    /* OBJECT is a path as the target sees it: its root as scry sees it ("" when unknown) */
    char root[PATH_MAX] = "", link[64];
    snprintf(link, sizeof link, "/proc/%d/root", (int)pid);
    ssize_t len = readlink(link, root, sizeof root - 1);
    root[len > 0 ? len : 0] = 0;
    if (!strcmp(root, "/"))
        root[0] = 0;
    for (size_t i = 0; i < n && rc != 0; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        if (!elfsym_map_is_file(e) || same_path(e, prev))
            continue;
        prev = e;
        if (!inject__object_matches(e->path, object, root))
            continue;
        if (elfsym_module_locate(pid, maps, i, mod) != 0) {
            rc = alt && lookup_as(pid, maps, i, alt, symbol, addr) == 0 ? 0 : SCRY_E_PERM;
            continue;
        }
        elfsym_sym_t sym;
        int found = elfsym_obj_lookup(mod->obj, symbol, &sym) == 0 && sym.value != 0 &&
                    (sym.type == STT_FUNC || sym.type == STT_OBJECT || sym.type == STT_NOTYPE);
        elfsym_obj_free(mod->obj);
        if (found) {
            *addr = sym.value + mod->bias;
            rc = 0;
        }
    }
    free(mod);
    return rc;
}

static int cave_rank(const char *path)
{
    if (inject__runtime_kind(path))
        return 0;
    const char *b = base_name(path);
    if (starts(b, "python") || starts(b, "libpython"))
        return 0;
    return 1;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

int inject__find_cave(pid_t pid, const elfsym_maps_t *maps, int memfd, size_t min, raddr_t *addr,
                      size_t *size)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    elfsym_module_t *mod = malloc(sizeof *mod);
    uint8_t *buf = malloc((size_t)page);
    int rc = SCRY_E_NOTFOUND;
    if (!mod || !buf) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    int best_rank = 99;
    size_t best_size = 0;
    size_t n = elfsym_maps_count(maps);
    for (size_t i = 0; i < n; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        /* Private executable file mappings only: a shared one would write the file. */
        if (!elfsym_map_is_file(e) || !(e->perms & ELFSYM_PERM_X) || !(e->perms & ELFSYM_PERM_P))
            continue;
        int rank = cave_rank(e->path);
        if (rank > best_rank)
            continue;
        if (elfsym_module_locate(pid, maps, i, mod) != 0)
            continue;
        size_t nseg = elfsym_obj_nsegments(mod->obj);
        for (size_t k = 0; k < nseg && k < ELFSYM_MAX_SEGMENTS; k++) {
            const elfsym_segment_t *sg = elfsym_obj_segment(mod->obj, k);
            if (!(sg->flags & PF_X))
                continue;
            raddr_t seg_end = mod->bias + sg->vaddr + sg->memsz;
            raddr_t start = (seg_end + 15) & ~(raddr_t)15;
            raddr_t end = (seg_end + (raddr_t)page - 1) & ~((raddr_t)page - 1);
            /* The tail must lie inside this very mapping, past the segment's last byte. */
            if (seg_end <= e->start || end > e->end || start >= end)
                continue;
            size_t len = (size_t)(end - start);
            if (len < min || (rank == best_rank && len <= best_size))
                continue;
            if (inject__mem_read(memfd, start, buf, len) != 0 || !all_zero(buf, len))
                continue;
            best_rank = rank;
            best_size = len;
            *addr = start;
            *size = len;
            rc = 0;
        }
        elfsym_obj_free(mod->obj);
        if (best_rank == 0 && best_size >= 2048)
            break;
    }
out:
    free(mod);
    free(buf);
    return rc;
}

int inject__exported_function_at(pid_t pid, const elfsym_maps_t *maps, raddr_t addr)
{
    long idx = elfsym_maps_find_index(maps, addr);
    if (idx < 0)
        return 0;
    elfsym_module_t *mod = malloc(sizeof *mod);
    if (!mod)
        return 1;
    int named = 1; /* when in doubt, say exported (= not a bare IFUNC target) */
    if (elfsym_module_locate(pid, maps, (size_t)idx, mod) == 0) {
        elfsym_sym_t sym;
        uint64_t off = 0;
        named = elfsym_obj_addr_lookup(mod->obj, addr - mod->bias, &sym, &off) == 0 &&
                sym.size > 0 && off < sym.size && sym.bind != STB_LOCAL;
        elfsym_obj_free(mod->obj);
    }
    free(mod);
    return named;
}
