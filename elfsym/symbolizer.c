/* symbolizer.c - per-process native symbolisation over the shared object cache. */
#include "symbolizer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elfobj.h"
#include "interp.h"
#include "scry_err.h"
#include "strtab.h"
#include "scry_time.h"

#define REFRESH_MIN_NS (100ull * 1000 * 1000)
#define HELD_MAX       65536 /* distinct objects one symbolizer keeps alive */

enum mod_state { MOD_UNLOADED = 0, MOD_READY = 1, MOD_FAILED = -1 };

typedef struct module {
    uint64_t inode;
    uint32_t dev_major, dev_minor;
    raddr_t start;    /* start of its first mapping (identity across refreshes) */
    size_t first_map; /* index of its first mapping in the current maps */
    const char *path; /* interned */
    const char *lib;  /* interned base name */
    raddr_t bias;
    elfsym_obj_t *obj; /* borrowed from held[] */
    int state;
} module_t;

struct elfsym_symbolizer {
    pid_t pid;
    elfsym_maps_t *maps;
    int32_t *map_mod; /* per maps entry: module index or -1 */
    module_t *mods;
    size_t nmods;
    elfsym_obj_t **held; /* one reference each, released at free */
    size_t nheld, held_cap;
    strtab_t *strs;
    uint64_t last_refresh_ns;
    elfsym_symbolizer_stats_t st;
};

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Keeps one reference to OBJ for the symbolizer's lifetime (consumes the caller's). */
static int hold(elfsym_symbolizer_t *s, elfsym_obj_t *obj)
{
    for (size_t i = 0; i < s->nheld; i++) {
        if (s->held[i] == obj) {
            elfsym_obj_free(obj); /* already held: drop the extra reference */
            return 0;
        }
    }
    if (s->nheld == s->held_cap) {
        size_t cap = s->held_cap ? s->held_cap * 2 : 32;
        if (cap > HELD_MAX)
            return SCRY_E_NOMEM;
        elfsym_obj_t **h = realloc(s->held, cap * sizeof *h);
        if (!h)
            return SCRY_E_NOMEM;
        s->held = h;
        s->held_cap = cap;
    }
    s->held[s->nheld++] = obj;
    s->st.modules_loaded++;
    return 0;
}

/* Builds the module table of MAPS, reusing what OLD (may be NULL) had already loaded. */
static int build_modules(elfsym_symbolizer_t *s, const elfsym_maps_t *maps, module_t **mods_out,
                         size_t *nmods_out, int32_t **map_mod_out, const module_t *old, size_t nold)
{
    size_t n = elfsym_maps_count(maps);
    int32_t *map_mod = malloc((n ? n : 1) * sizeof *map_mod);
    module_t *mods = calloc(n ? n : 1, sizeof *mods);
    size_t nm = 0;
    long last = -1;
    if (!map_mod || !mods)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        map_mod[i] = -1;
        if (e->path[0] == '\0')
            continue; /* anonymous */
        int is_file = elfsym_map_is_file(e);
        if (is_file && last >= 0) {
            module_t *m = &mods[last];
            if (m->inode == e->inode && m->dev_major == e->dev_major &&
                m->dev_minor == e->dev_minor && strcmp(m->path, e->path) == 0) {
                map_mod[i] = (int32_t)last;
                continue;
            }
        }
        module_t *m = &mods[nm];
        memset(m, 0, sizeof *m);
        m->inode = e->inode;
        m->dev_major = e->dev_major;
        m->dev_minor = e->dev_minor;
        m->start = e->start;
        m->first_map = i;
        m->path = strtab_intern(s->strs, e->path);
        m->lib = m->path ? strtab_intern(s->strs, base_name(e->path)) : NULL;
        if (!m->path || !m->lib)
            goto nomem;
        int is_vdso = strcmp(e->path, "[vdso]") == 0;
        m->state = (is_file || is_vdso) ? MOD_UNLOADED : MOD_FAILED; /* [heap], [stack] */
        for (size_t k = 0; (is_file || is_vdso) && k < nold; k++) {
            const module_t *o = &old[k];
            if (o->state == MOD_READY && o->start == m->start && o->inode == m->inode &&
                o->dev_major == m->dev_major && o->dev_minor == m->dev_minor &&
                o->path == m->path) {
                m->obj = o->obj;
                m->bias = o->bias;
                m->state = MOD_READY;
                break;
            }
        }
        map_mod[i] = (int32_t)nm;
        last = is_file ? (long)nm : -1;
        nm++;
    }
    *mods_out = mods;
    *nmods_out = nm;
    *map_mod_out = map_mod;
    return 0;
nomem:
    free(map_mod);
    free(mods);
    return SCRY_E_NOMEM;
}

elfsym_symbolizer_t *elfsym_symbolizer_new(pid_t pid, int *err)
{
    int rc = 0;
    elfsym_symbolizer_t *s = calloc(1, sizeof *s);
    if (!s) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    s->pid = pid;
    s->strs = strtab_new();
    if (!s->strs) {
        rc = SCRY_E_NOMEM;
        goto out;
    }
    s->maps = elfsym_maps_new(pid, &rc);
    if (!s->maps)
        goto out;
    rc = build_modules(s, s->maps, &s->mods, &s->nmods, &s->map_mod, NULL, 0);
    s->last_refresh_ns = scry_now_ns();
out:
    if (rc) {
        elfsym_symbolizer_free(s);
        s = NULL;
    }
    if (err)
        *err = rc;
    return s;
}

void elfsym_symbolizer_free(elfsym_symbolizer_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nheld; i++)
        elfsym_obj_free(s->held[i]);
    free(s->held);
    free(s->mods);
    free(s->map_mod);
    elfsym_maps_free(s->maps);
    strtab_free(s->strs);
    free(s);
}

int elfsym_symbolizer_refresh(elfsym_symbolizer_t *s)
{
    int rc;
    module_t *mods;
    size_t nmods;
    int32_t *map_mod;
    if (!s)
        return SCRY_E_INVAL;
    s->last_refresh_ns = scry_now_ns();
    elfsym_maps_t *maps = elfsym_maps_new(s->pid, &rc);
    if (!maps)
        return rc;
    rc = build_modules(s, maps, &mods, &nmods, &map_mod, s->mods, s->nmods);
    if (rc) {
        elfsym_maps_free(maps);
        return rc;
    }
    elfsym_maps_free(s->maps);
    free(s->mods);
    free(s->map_mod);
    s->maps = maps;
    s->mods = mods;
    s->nmods = nmods;
    s->map_mod = map_mod;
    s->st.refreshes++;
    return 0;
}

static void load_module(elfsym_symbolizer_t *s, module_t *m)
{
    elfsym_module_t info;
    m->state = MOD_FAILED;
    if (m->inode == 0) { /* [vdso]: the kernel's image, the same as ours */
        int err;
        raddr_t bias;
        elfsym_obj_t *v = elfsym_obj_open_vdso(&err);
        if (!v || elfsym_module_bias(v, s->maps, m->first_map, &bias) != 0 || hold(s, v) != 0) {
            elfsym_obj_free(v);
            return;
        }
        m->obj = v;
        m->bias = bias;
        m->state = MOD_READY;
        return;
    }
    if (elfsym_module_locate(s->pid, s->maps, m->first_map, &info) != 0)
        return;
    if (hold(s, info.obj) != 0) {
        elfsym_obj_free(info.obj);
        return;
    }
    m->obj = info.obj;
    m->bias = info.bias;
    m->state = MOD_READY;
}

int elfsym_symbolize(elfsym_symbolizer_t *s, raddr_t addr, elfsym_loc_t *out)
{
    elfsym_loc_t loc = {NULL, "", "", 0, 0, 0};
    int rc = SCRY_E_NOTFOUND;
    if (!s) {
        if (out)
            *out = loc;
        return SCRY_E_INVAL;
    }
    s->st.lookups++;
    long idx = elfsym_maps_find_index(s->maps, addr);
    if (idx < 0 && scry_now_ns() - s->last_refresh_ns >= REFRESH_MIN_NS &&
        elfsym_symbolizer_refresh(s) == 0)
        idx = elfsym_maps_find_index(s->maps, addr);
    if (idx < 0 || s->map_mod[idx] < 0)
        goto out;
    module_t *m = &s->mods[s->map_mod[idx]];
    loc.lib = m->lib;
    loc.path = m->path;
    if (m->state == MOD_UNLOADED)
        load_module(s, m);
    if (m->state != MOD_READY) {
        const elfsym_map_t *e = elfsym_maps_get(s->maps, (size_t)idx);
        loc.lib_offset = addr - e->start + e->offset;
        goto out;
    }
    loc.lib_offset = addr - m->bias;
    elfsym_sym_t sym;
    uint64_t off;
    if (elfsym_obj_addr_lookup(m->obj, loc.lib_offset, &sym, &off) == 0) {
        loc.symbol = sym.name;
        loc.sym_offset = off;
        loc.sym_start = addr - off;
        s->st.hits++;
        rc = 0;
    }
out:
    if (out)
        *out = loc;
    return rc;
}

const elfsym_maps_t *elfsym_symbolizer_maps(const elfsym_symbolizer_t *s)
{
    return s ? s->maps : NULL;
}

elfsym_symbolizer_stats_t elfsym_symbolizer_stats(const elfsym_symbolizer_t *s)
{
    elfsym_symbolizer_stats_t z = {0};
    return s ? s->st : z;
}
