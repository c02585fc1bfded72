/* elfobj_cache.c - the process-wide cache of loaded ELF objects.
 *
 * Key: the GNU build-id when the file has one, else the file identity (device, inode,
 * size, mtime). Every path an object was reached through is remembered (an alias), so a
 * second open of any of them is a stat and a list walk, with no ELF parsing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "elfsym_internal.h"
#include "inroot.h"
#include "scry_err.h"

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static elfsym_obj_t *cache_head;
static size_t cache_n;
static uint64_t cache_loads;
static elfsym_obj_t *vdso_obj; /* loaded once, never freed by cache_clear */

int elfsym__file_err(int errnum)
{
    switch (errnum) {
    case ENOENT:
    case ENOTDIR:
    case ESRCH:
        return SCRY_E_NOTFOUND;
    case EACCES:
    case EPERM:
        return SCRY_E_PERM;
    case ENOMEM:
        return SCRY_E_NOMEM;
    default:
        return SCRY_E_IO;
    }
}

void elfsym__alias_from_stat(elfsym_alias_t *a, const struct stat *st)
{
    a->dev = st->st_dev;
    a->ino = st->st_ino;
    a->size = st->st_size;
    a->mtime = st->st_mtim;
}

static int same_identity(const elfsym_alias_t *a, const elfsym_alias_t *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Under the lock: an object already reached through a file of this identity. */
static elfsym_obj_t *find_by_identity(const elfsym_alias_t *id)
{
    for (elfsym_obj_t *o = cache_head; o; o = o->next)
        for (size_t i = 0; i < o->nalias; i++)
            if (same_identity(&o->alias[i], id))
                return o;
    return NULL;
}

/* Under the lock: an object with this build-id. */
static elfsym_obj_t *find_by_build_id(const uint8_t *id, size_t len)
{
    if (len == 0)
        return NULL;
    for (elfsym_obj_t *o = cache_head; o; o = o->next)
        if (o->build_id_len == len && memcmp(o->build_id, id, len) == 0)
            return o;
    return NULL;
}

/* Under the lock: remembers PATH/ID as one more way to reach O (bounded; best effort). */
static void add_alias(elfsym_obj_t *o, const char *path, const elfsym_alias_t *id)
{
    for (size_t i = 0; i < o->nalias; i++)
        if (same_identity(&o->alias[i], id) && strcmp(o->alias[i].path, path) == 0)
            return;
    if (o->nalias >= ELFSYM_MAX_ALIASES)
        return;
    char *p = strdup(path);
    if (!p)
        return;
    o->alias[o->nalias] = *id;
    o->alias[o->nalias].path = p;
    o->nalias++;
}

/* Under the lock: a cached object found for PATH/ID, or NULL. HIT (when not NULL) gains a
 * reference and PATH/ID as an alias. Returns HIT. */
static elfsym_obj_t *take_hit(elfsym_obj_t *hit, const char *path, const elfsym_alias_t *id)
{
    if (hit) {
        hit->refs++;
        add_alias(hit, path, id);
    }
    return hit;
}

void elfsym__obj_destroy(elfsym_obj_t *obj)
{
    if (!obj)
        return;
    for (size_t i = 0; i < obj->nalias; i++)
        free(obj->alias[i].path);
    free(obj->debuglink);
    free(obj->debug_path);
    elfsym_symtab_t *full = atomic_load(&obj->full);
    if (full && full != &obj->dyn) {
        elfsym__symtab_free(full);
        free(full);
    }
    elfsym__symtab_free(&obj->dyn);
    pthread_mutex_destroy(&obj->full_lock);
    free(obj->secs);
    free(obj->secnames);
    free(obj);
}

elfsym_obj_t *elfsym_obj_open(const char *path, int *err)
{
    int rc = 0, fd = -1;
    Elf *elf = NULL;
    elfsym_obj_t *obj = NULL, *hit = NULL;
    struct stat st;
    elfsym_alias_t id = {0};

    if (!path || !path[0]) {
        rc = SCRY_E_INVAL;
        goto out;
    }
    elfsym__elf_init();
    /* The path is the target's: O_NONBLOCK so a FIFO put in its place cannot hang us (it
     * is refused below: regular files only). */
    fd = inroot_open_path(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        rc = elfsym__file_err(errno);
        goto out;
    }
    if (fstat(fd, &st) != 0) {
        rc = elfsym__file_err(errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = SCRY_E_ELF;
        goto out;
    }
    elfsym__alias_from_stat(&id, &st);

    pthread_mutex_lock(&cache_lock);
    hit = take_hit(find_by_identity(&id), path, &id);
    pthread_mutex_unlock(&cache_lock);
    if (hit)
        goto out;

    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        rc = SCRY_E_ELF;
        goto out;
    }
    obj = calloc(1, sizeof *obj);
    if (obj)
        pthread_mutex_init(&obj->full_lock, NULL);
    if (!obj) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    if (elfsym__read_build_id(elf, obj->build_id, &obj->build_id_len) == 0) {
        for (size_t i = 0; i < obj->build_id_len; i++)
            snprintf(obj->build_id_hex + 2 * i, 3, "%02x", obj->build_id[i]);
        /* Same build-id reached through another path (another container, a copy). */
        pthread_mutex_lock(&cache_lock);
        hit = take_hit(find_by_build_id(obj->build_id, obj->build_id_len), path, &id);
        pthread_mutex_unlock(&cache_lock);
        if (hit)
            goto out;
    }
    rc = elfsym__obj_load(obj, elf, path, (uint64_t)st.st_size, 1);
    if (rc)
        goto out;
    obj->alias[0] = id;
    obj->alias[0].path = strdup(path);
    if (!obj->alias[0].path) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    obj->nalias = 1;
    obj->refs = 1;

    pthread_mutex_lock(&cache_lock);
    /* Another thread may have loaded it meanwhile: keep theirs. */
    hit = take_hit(obj->build_id_len ? find_by_build_id(obj->build_id, obj->build_id_len)
                                     : find_by_identity(&id),
                   path, &id);
    if (!hit) {
        obj->next = cache_head;
        cache_head = obj;
        cache_n++;
        cache_loads++;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!hit) {
        hit = obj;
        obj = NULL;
    }
out:
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
    elfsym__obj_destroy(obj);
    if (err)
        *err = hit ? 0 : rc;
    return hit;
}

/* Size of the ELF image at P: the furthest byte its headers describe (bounded). */
static size_t vdso_size(const unsigned char *p)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return 0;
    uint64_t end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    for (unsigned i = 0; i < eh->e_phnum && i < 64; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(p + eh->e_phoff + i * eh->e_phentsize);
        if (ph->p_offset + ph->p_filesz > end)
            end = ph->p_offset + ph->p_filesz;
    }
    return end <= (1u << 20) ? (size_t)end : 0;
}

elfsym_obj_t *elfsym_obj_open_vdso(int *err)
{
    int rc = 0;
    elfsym_obj_t *obj = NULL, *hit = NULL;
    Elf *elf = NULL;
    char *copy = NULL;

    pthread_mutex_lock(&cache_lock);
    if (vdso_obj) {
        hit = vdso_obj;
        hit->refs++;
    }
    pthread_mutex_unlock(&cache_lock);
    if (hit)
        goto out;
    const unsigned char *base = (const unsigned char *)(uintptr_t)getauxval(AT_SYSINFO_EHDR);
    size_t size = base ? vdso_size(base) : 0;
    if (!size) {
        rc = SCRY_E_NOTFOUND;
        goto out;
    }
    elfsym__elf_init();
    copy = malloc(size);
    obj = calloc(1, sizeof *obj);
    if (obj)
        pthread_mutex_init(&obj->full_lock, NULL);
    if (!copy || !obj) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    memcpy(copy, base, size);
    elf = elf_memory(copy, size);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        rc = SCRY_E_ELF;
        goto out;
    }
    if (elfsym__read_build_id(elf, obj->build_id, &obj->build_id_len) == 0)
        for (size_t i = 0; i < obj->build_id_len; i++)
            snprintf(obj->build_id_hex + 2 * i, 3, "%02x", obj->build_id[i]);
    rc = elfsym__obj_load(obj, elf, "[vdso]", size, 0);
    if (rc)
        goto out;
    obj->alias[0].path = strdup("[vdso]");
    if (!obj->alias[0].path) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    obj->nalias = 1;
    obj->refs = 2; /* the caller's, and the one that keeps it for the next call */
    pthread_mutex_lock(&cache_lock);
    if (vdso_obj) {
        hit = vdso_obj;
        hit->refs++;
    } else {
        vdso_obj = obj;
        hit = obj;
        obj = NULL;
        cache_loads++;
    }
    pthread_mutex_unlock(&cache_lock);
out:
    if (elf)
        elf_end(elf);
    free(copy);
    elfsym__obj_destroy(obj);
    if (err)
        *err = hit ? 0 : rc;
    return hit;
}

elfsym_obj_t *elfsym_obj_ref(elfsym_obj_t *obj)
{
    if (!obj)
        return NULL;
    pthread_mutex_lock(&cache_lock);
    obj->refs++;
    pthread_mutex_unlock(&cache_lock);
    return obj;
}

void elfsym_obj_free(elfsym_obj_t *obj)
{
    if (!obj)
        return;
    pthread_mutex_lock(&cache_lock);
    if (obj->refs > 0)
        obj->refs--;
    pthread_mutex_unlock(&cache_lock);
}

size_t elfsym_cache_clear(void)
{
    size_t freed = 0;
    elfsym_obj_t *dead = NULL;
    pthread_mutex_lock(&cache_lock);
    elfsym_obj_t **pp = &cache_head;
    while (*pp) {
        elfsym_obj_t *o = *pp;
        if (o->refs == 0) {
            *pp = o->next;
            o->next = dead;
            dead = o;
            cache_n--;
            freed++;
        } else {
            pp = &o->next;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    while (dead) {
        elfsym_obj_t *n = dead->next;
        elfsym__obj_destroy(dead);
        dead = n;
    }
    return freed;
}

size_t elfsym_cache_count(void)
{
    pthread_mutex_lock(&cache_lock);
    size_t n = cache_n;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

uint64_t elfsym_cache_loads(void)
{
    pthread_mutex_lock(&cache_lock);
    uint64_t n = cache_loads;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

int elfsym__obj_reopen(const elfsym_obj_t *obj)
{
    int rc = SCRY_E_IO;
    elfsym_alias_t copy[ELFSYM_MAX_ALIASES];
    char *paths[ELFSYM_MAX_ALIASES] = {0};
    size_t n;

    /* Aliases may grow concurrently: copy them under the lock. */
    pthread_mutex_lock(&cache_lock);
    n = obj->nalias;
    for (size_t i = 0; i < n; i++) {
        copy[i] = obj->alias[i];
        paths[i] = strdup(obj->alias[i].path);
    }
    pthread_mutex_unlock(&cache_lock);

    for (size_t i = 0; i < n; i++) {
        if (!paths[i])
            continue;
        int fd = inroot_open_path(paths[i], O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
            rc = elfsym__file_err(errno);
            continue;
        }
        struct stat st;
        elfsym_alias_t now;
        if (fstat(fd, &st) == 0) {
            elfsym__alias_from_stat(&now, &st);
            if (same_identity(&now, &copy[i])) {
                rc = fd;
                break;
            }
        }
        close(fd);
        rc = SCRY_E_IO; /* replaced since it was loaded */
    }
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    return rc;
}

int elfsym__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return SCRY_E_IO;
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}
