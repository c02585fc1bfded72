/* interp.c - where a mapped file comes from, its load bias, and finding libpython. */
#include "interp.h"

#include "buildid.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "inroot.h"
#include "pyversion.h"
#include "scry_err.h"

/* How many mapping entries a file's run may span (guards, bss, holes). */
#define MODULE_SCAN_MAX 4096

/* 1 when ST is the file mapping E maps: the same device (maps' major:minor) and inode. */
static int is_mapped_file(const struct stat *st, const elfsym_map_t *e)
{
    return S_ISREG(st->st_mode) && (uint64_t)st->st_ino == e->inode &&
           major(st->st_dev) == e->dev_major && minor(st->st_dev) == e->dev_minor;
}

#define PATH_SAME_INODE 2 /* map_open_path: unverified, the root's file has the mapping's inode */

/* elfsym_map_open_path. SAME_INODE: the file in the target's root with the mapping's inode
 * on another device (overlayfs: maps name the layer's device) is taken before map_files, as
 * unverified (PATH_SAME_INODE): named in its root, its debug files are found there. */
static int map_open_path(pid_t pid, const elfsym_map_t *e, char *buf, size_t size, int same_inode)
{
    struct stat st;
    char root[PATH_MAX + 32];
    char mf[96];
    if (!elfsym_map_is_file(e) || !buf || size == 0)
        return SCRY_E_INVAL;
    int n = snprintf(root, sizeof root, "/proc/%d/root%s", (int)pid, e->path);
    /* Resolved inside the target's root: its links never lead to a file of scry's root. */
    int root_ok = n > 0 && (size_t)n < sizeof root && e->path[0] == '/' &&
                  inroot_stat_path(root, &st) == 0 && S_ISREG(st.st_mode);
    const char *pick = NULL;
    int rc = 0;
    if (root_ok && !e->deleted && is_mapped_file(&st, e)) {
        pick = root; /* the mapped file, named in its root: its debug files are found there */
    } else if (root_ok && !e->deleted && same_inode && (uint64_t)st.st_ino == e->inode) {
        pick = root;
        rc = PATH_SAME_INODE;
    } else {
        snprintf(mf, sizeof mf, "/proc/%d/map_files/%llx-%llx", (int)pid,
                 (unsigned long long)e->start, (unsigned long long)e->end);
        if (stat(mf, &st) == 0) {
            pick = mf; /* the mapped file itself (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) */
        } else if (root_ok) {
            pick = root; /* another inode (overlayfs shows its own) or another file */
            rc = ELFSYM_PATH_UNVERIFIED;
        } else if (stat(e->path, &st) == 0 && is_mapped_file(&st, e))
            pick = e->path; /* the target's root is not readable: scry's own file, if it
                               is the mapped one (a container's libc is not the host's) */
        else
            return SCRY_E_NOTFOUND;
    }
    size_t len = strlen(pick);
    if (len >= size)
        return SCRY_E_TRUNC;
    memcpy(buf, pick, len + 1);
    return rc;
}

int elfsym_map_open_path(pid_t pid, const elfsym_map_t *e, char *buf, size_t size)
{
    return map_open_path(pid, e, buf, size, 0);
}

/* 1 when the ELF file at PATH has the GNU build-id mapped at BASE in MEM (or PID's). */
static int matches_memory(pid_t pid, rmem_t *mem, uint64_t base, const char *path)
{
    int err;
    rmem_t *own = mem ? NULL : rmem_open_pid(pid);
    elfsym_obj_t *obj = elfsym_obj_open(path, &err);
    int same = obj && elfsym_map_matches(mem ? mem : own, base, obj);
    elfsym_obj_free(obj);
    rmem_free(own);
    return same;
}

int elfsym_map_open_checked(pid_t pid, rmem_t *mem, const elfsym_map_t *e, uint64_t base, char *buf,
                            size_t size)
{
    int rc = map_open_path(pid, e, buf, size, 1);
    if (rc == PATH_SAME_INODE) {
        if (matches_memory(pid, mem, base, buf))
            return 0;
        rc = map_open_path(pid, e, buf, size, 0); /* map_files, or the same file unverified */
        if (rc == ELFSYM_PATH_UNVERIFIED)
            return SCRY_E_NOTFOUND;
    }
    if (rc != ELFSYM_PATH_UNVERIFIED)
        return rc;
    return matches_memory(pid, mem, base, buf) ? 0 : SCRY_E_NOTFOUND;
}

int elfsym_map_open_src(rmem_t *src, const elfsym_map_t *e, uint64_t base, char *buf, size_t size)
{
    if (!src || !elfsym_map_is_file(e) || !buf || size == 0)
        return SCRY_E_INVAL;
    if (rmem_is_live(src))
        return elfsym_map_open_checked(rmem_pid(src), src, e, base, buf, size);
    int rc = rmem_file_path(src, e->path, buf, size);
    return rc == SCRY_E_INVAL ? SCRY_E_NOTFOUND : rc;
}

static int same_file(const elfsym_map_t *a, const elfsym_map_t *b)
{
    return a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
           strcmp(a->path, b->path) == 0;
}

/* The run of entries [*lo, *hi] holding the file of entry I: entries of the same file,
 * with anonymous entries (bss, guard gaps) allowed in between. */
static void module_run(const elfsym_maps_t *maps, size_t i, size_t *lo, size_t *hi)
{
    const elfsym_map_t *e = elfsym_maps_get(maps, i);
    size_t n = elfsym_maps_count(maps);
    size_t a = i, b = i;
    for (size_t k = i, steps = 0; k-- > 0 && steps++ < MODULE_SCAN_MAX;) {
        const elfsym_map_t *o = elfsym_maps_get(maps, k);
        if (same_file(o, e))
            a = k;
        else if (o->inode != 0)
            break;
    }
    for (size_t k = i + 1, steps = 0; k < n && steps++ < MODULE_SCAN_MAX; k++) {
        const elfsym_map_t *o = elfsym_maps_get(maps, k);
        if (same_file(o, e))
            b = k;
        else if (o->inode != 0)
            break;
    }
    *lo = a;
    *hi = b;
}

static uint64_t page_size(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 && (page & (page - 1)) == 0 ? (uint64_t)page : 4096;
}

int elfsym_segments_bias(const elfsym_segment_t *segs, size_t n, uint64_t start, uint64_t offset,
                         int exec, raddr_t *bias)
{
    if (!segs || !bias)
        return SCRY_E_INVAL;
    uint64_t page = page_size();
    const elfsym_segment_t *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        const elfsym_segment_t *seg = &segs[i];
        uint64_t first = seg->offset & ~(page - 1);
        if (offset < first || offset >= seg->offset + seg->filesz)
            continue;
        if (!pick || (!!(seg->flags & PF_X) == !!exec && !!(pick->flags & PF_X) != !!exec))
            pick = seg;
    }
    if (!pick)
        return SCRY_E_NOTFOUND;
    /* The mapping starts at file offset OFFSET, i.e. link-time address
     * p_vaddr + (OFFSET - p_offset). */
    raddr_t b = start - (pick->vaddr + (offset - pick->offset));
    if ((b & (page - 1)) != 0)
        return SCRY_E_NOTFOUND;
    *bias = b;
    return 0;
}

int elfsym_module_bias(const elfsym_obj_t *obj, const elfsym_maps_t *maps, size_t map_index,
                       raddr_t *bias)
{
    const elfsym_map_t *e = elfsym_maps_get(maps, map_index);
    if (!obj || !e || !bias)
        return SCRY_E_INVAL;
    size_t lo, hi;
    module_run(maps, map_index, &lo, &hi);
    size_t n = elfsym_obj_nsegments(obj);
    if (n == 0)
        return SCRY_E_NOTFOUND;
    const elfsym_segment_t *segs = elfsym_obj_segment(obj, 0);
    /* The executable mapping first (it is what symbols and unwind tables describe). */
    for (int want_exec = 1; want_exec >= 0; want_exec--) {
        for (size_t k = lo; k <= hi; k++) {
            const elfsym_map_t *m = elfsym_maps_get(maps, k);
            int exec = (m->perms & ELFSYM_PERM_X) != 0;
            if (!same_file(m, e) || exec != want_exec)
                continue;
            if (elfsym_segments_bias(segs, n, m->start, m->offset, exec, bias) == 0)
                return 0;
        }
    }
    return SCRY_E_NOTFOUND;
}

int elfsym_module_locate(pid_t pid, const elfsym_maps_t *maps, size_t map_index,
                         elfsym_module_t *out)
{
    rmem_t *src = rmem_open_pid(pid);
    if (!src)
        return SCRY_E_NOMEM;
    int rc = elfsym_module_locate_src(src, maps, map_index, out);
    rmem_free(src);
    return rc;
}

int elfsym_module_locate_src(rmem_t *src, const elfsym_maps_t *maps, size_t map_index,
                             elfsym_module_t *out)
{
    const elfsym_map_t *e = elfsym_maps_get(maps, map_index);
    int rc;
    if (!out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    if (!elfsym_map_is_file(e))
        return SCRY_E_INVAL;
    size_t lo, hi;
    module_run(maps, map_index, &lo, &hi);
    out->start = UINT64_MAX;
    for (size_t k = lo; k <= hi; k++) {
        const elfsym_map_t *m = elfsym_maps_get(maps, k);
        if (!same_file(m, e))
            continue;
        if (m->start < out->start)
            out->start = m->start;
        if (m->end > out->end)
            out->end = m->end;
    }
    /* Open from the mapping at offset 0 when there is one: map_files needs a real range. */
    size_t first = map_index;
    for (size_t k = lo; k <= hi; k++) {
        const elfsym_map_t *m = elfsym_maps_get(maps, k);
        if (same_file(m, e) && m->offset == 0) {
            first = k;
            break;
        }
    }
    size_t plen = strlen(e->path);
    if (plen >= sizeof out->path)
        return SCRY_E_TRUNC;
    memcpy(out->path, e->path, plen + 1);
    out->inode = e->inode;
    out->deleted = e->deleted;
    const elfsym_map_t *fm = elfsym_maps_get(maps, first);
    rc =
        elfsym_map_open_src(src, fm, fm->start - fm->offset, out->open_path, sizeof out->open_path);
    if (rc)
        return rc;
    out->obj = elfsym_obj_open(out->open_path, &rc);
    if (!out->obj)
        return rc;
    rc = elfsym_module_bias(out->obj, maps, map_index, &out->bias);
    if (rc) {
        elfsym_obj_free(out->obj);
        out->obj = NULL;
        return rc;
    }
    out->is_libpython = elfsym_is_libpython_name(out->path);
    if (elfsym_pyversion_from_name(out->path, &out->major, &out->minor) != 0)
        out->major = out->minor = 0;
    return 0;
}

/* The first file mapping of MAPS named PATH, or SCRY_E_NOTFOUND. */
static long mapping_named(const elfsym_maps_t *maps, const char *path)
{
    size_t cnt = elfsym_maps_count(maps);
    for (size_t i = 0; i < cnt; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        if (elfsym_map_is_file(e) && strcmp(e->path, path) == 0)
            return (long)i;
    }
    return SCRY_E_NOTFOUND;
}

long elfsym_find_exe_mapping_src(rmem_t *src, const elfsym_maps_t *maps)
{
    char exe[PATH_MAX];
    if (!src)
        return SCRY_E_INVAL;
    if (rmem_is_live(src))
        return elfsym_find_exe_mapping(rmem_pid(src), maps);
    if (rmem_exe_path(src, exe, sizeof exe) != 0)
        return SCRY_E_NOTFOUND;
    return mapping_named(maps, exe);
}

long elfsym_find_exe_mapping(pid_t pid, const elfsym_maps_t *maps)
{
    char link[64], target[PATH_MAX];
    struct stat st;
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) {
        if (errno == ENOENT || errno == ESRCH)
            return SCRY_E_NOPROC;
        if (errno == EACCES || errno == EPERM)
            return SCRY_E_PERM;
        return SCRY_E_NOTFOUND; /* kernel thread: no executable */
    }
    target[n] = '\0';
    static const char del[] = " (deleted)";
    size_t dl = sizeof del - 1;
    if ((size_t)n > dl && strcmp(target + n - dl, del) == 0)
        target[n - dl] = '\0';
    long named = mapping_named(maps, target);
    if (named >= 0)
        return named;
    size_t cnt = elfsym_maps_count(maps);
    /* Paths differ across mount namespaces: match the inode instead. */
    if (stat(link, &st) == 0) {
        for (size_t i = 0; i < cnt; i++) {
            const elfsym_map_t *e = elfsym_maps_get(maps, i);
            if (elfsym_map_is_file(e) && e->inode == (uint64_t)st.st_ino)
                return (long)i;
        }
    }
    return SCRY_E_NOTFOUND;
}

static int defines_python(const elfsym_obj_t *obj)
{
    static const char *const names[] = {"Py_GetVersion", "Py_Initialize", "_PyRuntime",
                                        "PyInterpreterState_Head"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (elfsym_obj_lookup(obj, names[i], NULL) == 0)
            return 1;
    return 0;
}

int elfsym_find_interpreter(pid_t pid, const elfsym_maps_t *maps, elfsym_module_t *out)
{
    rmem_t *src = rmem_open_pid(pid);
    if (!src)
        return SCRY_E_NOMEM;
    int rc = elfsym_find_interpreter_src(src, maps, out);
    rmem_free(src);
    return rc;
}

int elfsym_find_interpreter_src(rmem_t *src, const elfsym_maps_t *maps, elfsym_module_t *out)
{
    elfsym_maps_t *own = NULL;
    int rc = SCRY_E_NOTPY;
    if (!out || !src)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    if (!maps) {
        own = elfsym_maps_of(src, &rc);
        if (!own)
            return rc;
        maps = own;
    }
    long idx = -1;
    size_t cnt = elfsym_maps_count(maps);
    for (size_t i = 0; i < cnt; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        if (elfsym_map_is_file(e) && elfsym_is_libpython_name(e->path)) {
            idx = (long)i;
            break;
        }
    }
    if (idx < 0) {
        idx = elfsym_find_exe_mapping_src(src, maps);
        if (idx < 0) {
            rc = idx == SCRY_E_NOTFOUND ? SCRY_E_NOTPY : (int)idx;
            goto out;
        }
    }
    rc = elfsym_module_locate_src(src, maps, (size_t)idx, out);
    if (rc)
        goto out;
    if (!defines_python(out->obj)) {
        elfsym_obj_free(out->obj);
        out->obj = NULL;
        rc = SCRY_E_NOTPY;
    }
out:
    elfsym_maps_free(own);
    return rc;
}
