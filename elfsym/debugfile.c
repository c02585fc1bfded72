/* debugfile.c - finding the separate debug file, its CRC, and C++ demangling.
 *
 * Search order (the GDB convention), under the target's root first when the object was
 * opened through /proc/PID/root/, then under scry's own root:
 *   /usr/lib/debug/.build-id/xx/yyyy.debug          (build-id: xx = first byte in hex)
 *   /usr/lib/debug/<dir>/<debuglink>
 *   <dir>/<debuglink>  (when that is not the object itself)
 *   <dir>/.debug/<debuglink>
 * (in scry's own root only the two under /usr/lib/debug for a target's object: its <dir> is
 * the target's name). Files in the target's root resolve inside it (common/inroot.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(ELFSYM_HAVE_LIBIBERTY)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wundef" /* libiberty.h tests undefined HAVE_DECL_* macros */
#include <demangle.h>
#pragma GCC diagnostic pop
#endif

#include "elfsym_internal.h"
#include "inroot.h"

#define DEBUG_ROOT "/usr/lib/debug"

static int is_file(const char *path, const struct stat *self)
{
    struct stat st;
    if (inroot_stat_path(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    /* Never take the object itself as its own debug file. */
    return !(self && st.st_dev == self->st_dev && st.st_ino == self->st_ino);
}

static char *try_path(const char *path, const struct stat *self)
{
    return is_file(path, self) ? strdup(path) : NULL;
}

char *elfsym__find_debug_file(const char *path, const uint8_t *build_id, size_t build_id_len,
                              const char *debuglink, uint32_t debuglink_crc)
{
    char buf[PATH_MAX];
    char *hit = NULL;
    struct stat self, *selfp = NULL;
    (void)debuglink_crc; /* checked by the caller once the file is open */
    if (!path)
        return NULL;
    if (inroot_stat_path(path, &self) == 0)
        selfp = &self;

    size_t rl = inroot_proc_root_len(path);
    const char *roots[2] = {"", NULL};
    char root[64] = "";
    if (rl > 0 && rl < sizeof root) {
        memcpy(root, path, rl);
        root[rl] = '\0';
        roots[0] = root;
        roots[1] = "";
    }
    const char *rest = path + rl;

    for (int r = 0; r < 2 && roots[r] && !hit; r++) {
        if (build_id_len >= 2) {
            int n = snprintf(buf, sizeof buf, "%s" DEBUG_ROOT "/.build-id/%02x/", roots[r],
                             build_id[0]);
            for (size_t i = 1; i < build_id_len && n > 0 && (size_t)n + 3 < sizeof buf; i++)
                n += snprintf(buf + n, sizeof buf - (size_t)n, "%02x", build_id[i]);
            if (n > 0 && (size_t)n + 7 < sizeof buf) {
                memcpy(buf + n, ".debug", 7);
                hit = try_path(buf, selfp);
            }
        }
        if (hit || !debuglink || strchr(debuglink, '/'))
            continue;
        const char *slash = strrchr(rest, '/');
        if (!slash || (rl == 0 && strncmp(path, "/proc/", 6) == 0))
            continue; /* /proc/N/map_files/...: no directory to search */
        int dl = (int)(slash - rest);
        if (snprintf(buf, sizeof buf, "%s" DEBUG_ROOT "%.*s/%s", roots[r], dl, rest, debuglink) <
            (int)sizeof buf)
            hit = try_path(buf, selfp);
        if (r > 0 && rl > 0)
            continue; /* a target's directory names no directory of scry's own root */
        if (!hit &&
            snprintf(buf, sizeof buf, "%s%.*s/%s", roots[r], dl, rest, debuglink) < (int)sizeof buf)
            hit = try_path(buf, selfp);
        if (!hit && snprintf(buf, sizeof buf, "%s%.*s/.debug/%s", roots[r], dl, rest, debuglink) <
                        (int)sizeof buf)
            hit = try_path(buf, selfp);
    }
    return hit;
}

static uint32_t crc_table[256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

int64_t elfsym__file_crc32(int fd)
{
    enum { CHUNK = 1 << 16 };
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init(); /* idempotent: racing initialisers write the same table */
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -1;
    uint32_t crc = 0xffffffffu;
    int64_t result = -1;
    off_t off = 0;
    for (;;) {
        ssize_t r = pread(fd, buf, CHUNK, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto out;
        if (r == 0)
            break;
        for (ssize_t i = 0; i < r; i++)
            crc = crc_table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
        off += r;
    }
    result = (int64_t)(crc ^ 0xffffffffu);
out:
    free(buf);
    return result;
}

char *elfsym__demangle(const char *name)
{
#if defined(ELFSYM_HAVE_LIBIBERTY)
    if (!name || name[0] != '_' || name[1] != 'Z')
        return NULL;
    return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
#else
    (void)name;
    return NULL;
#endif
}
