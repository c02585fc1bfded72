/* asyncio.c - asyncio tasks of a 3.14+ CPython, read from outside (asyncio.h). */
#include "asyncio.h"
#include "debug_offsets.h"

#include "elfobj.h"
#include "internal.h"
#include "interp.h"
#include "maps.h"
#include "scry_err.h"
#include "scry_grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASYNC_MAX_STRUCT (1u << 20)
#define ASYNC_GEN_READ   1024 /* bytes of a generator read (header and frame) */
#define ASYNC_TYPES      64   /* type names cached per walk */
#define ASYNC_NAME_MAX   256  /* bytes of a task or type name kept */

const char *pystate_task_state_name(int state)
{
    switch (state) {
    case PYSTATE_TASK_RUNNING:
        return "running";
    case PYSTATE_TASK_CANCELLED:
        return "cancelled";
    case PYSTATE_TASK_FINISHED:
        return "finished";
    default:
        return "pending";
    }
}

/* ---- the block ---------------------------------------------------------------------- */

static int field_in(uint64_t off, uint64_t width, uint64_t size)
{
    return size <= ASYNC_MAX_STRUCT && off <= size && width <= size - off && off % width == 0;
}

int pystate_async_offsets_parse(const void *buf, size_t len, const pystate_layout_t *L,
                                pystate_async_offsets_t *out, char *why, size_t whylen)
{
    uint64_t v[PYSTATE_ASYNC_DEBUG_SIZE / 8];
    if (!buf || !L || !out || len < sizeof v)
        return SCRY_E_INVAL;
    memcpy(v, buf, sizeof v);
    uint64_t ts = v[0], name = v[1], aby = v[2], is_task = v[3], aby_set = v[4], coro = v[5],
             node = v[6];
    uint64_t is = v[7], i_head = v[8];
    uint64_t ths = v[9], t_loop = v[10], t_task = v[11], t_head = v[12];
    uint64_t hdr = L->object_type >= 0 ? (uint64_t)L->object_type + 8 : 0;
    const char *bad = NULL;
    if (ts == 0 || ts > PYSTATE_ASYNC_TASK_READ)
        bad = "asyncio_task_object.size";
    else if (!field_in(name, 8, ts) || !field_in(aby, 8, ts) || !field_in(coro, 8, ts) ||
             !field_in(node, 8, ts) || node + 16 > ts || !field_in(is_task, 1, ts) ||
             !field_in(aby_set, 1, ts))
        bad = "an asyncio_task_object field";
    else if (hdr == 0 || aby < hdr + 8 || is_task != aby + 12 || aby_set != is_task + 1 ||
             coro < aby_set + 8 || name != coro + 8 || node < name + 8)
        bad = "the TaskObj field order";
    else if (is == 0 || (int64_t)is != L->interp_size || !field_in(i_head, 8, is) ||
             i_head + 16 > is)
        bad = "asyncio_interpreter_state";
    else if (ths == 0 || ths > ASYNC_MAX_STRUCT || L->tstate_size <= 0 ||
             ths < (uint64_t)L->tstate_size || !field_in(t_loop, 8, ths) ||
             !field_in(t_task, 8, ths) || !field_in(t_head, 8, ths) || t_head + 16 > ths ||
             t_loop < (uint64_t)L->tstate_size || t_task < (uint64_t)L->tstate_size ||
             t_head < (uint64_t)L->tstate_size)
        bad = "asyncio_thread_state";
    if (bad) {
        scry_errmsg(why, whylen, "%s is out of bounds", bad);
        return SCRY_E_CORRUPT;
    }
    pystate_async_offsets_t o = {
        .task_size = (int64_t)ts,
        .task_name = (int64_t)name,
        .task_awaited_by = (int64_t)aby,
        .task_is_task = (int64_t)is_task,
        .task_awaited_by_is_set = (int64_t)aby_set,
        .task_coro = (int64_t)coro,
        .task_node = (int64_t)node,
        .task_loop = (int64_t)hdr,
        .task_state = (int64_t)aby + 8,
        .task_fut_waiter = (int64_t)coro - 8,
        .interp_size = (int64_t)is,
        .interp_tasks_head = (int64_t)i_head,
        .tstate_size = (int64_t)ths,
        .tstate_running_loop = (int64_t)t_loop,
        .tstate_running_task = (int64_t)t_task,
        .tstate_tasks_head = (int64_t)t_head,
    };
    *out = o;
    return 0;
}

/* ---- finding the block -------------------------------------------------------------- */

static int is_asyncio_file(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return !strncmp(b, "_asyncio.", 9) || !strncmp(b, "_asyncio_", 9);
}

/* Finds the .AsyncioDebug section in the interpreter's file or a mapped _asyncio module.
 * Returns 0 with *ADDR, SCRY_E_NOTFOUND, or a maps error. */
static int find_block(pystate_target_t *t, raddr_t *addr, char *source, size_t srclen)
{
    int err = 0;
    elfsym_maps_t *maps = elfsym_maps_of(t->mem, &err);
    if (!maps)
        return err ? err : SCRY_E_NOMEM;
    int rc = SCRY_E_NOTFOUND;
    const char *prev = NULL;
    size_t n = elfsym_maps_count(maps);
    for (size_t i = 0; i < n && rc == SCRY_E_NOTFOUND; i++) {
        const elfsym_map_t *e = elfsym_maps_get(maps, i);
        if (!elfsym_map_is_file(e) || (prev && !strcmp(prev, e->path)))
            continue;
        prev = e->path;
        if (!is_asyncio_file(e->path) && strcmp(e->path, t->info.interp_path) != 0)
            continue;
        elfsym_module_t mod;
        if (elfsym_module_locate_src(t->mem, maps, i, &mod) != 0)
            continue;
        elfsym_section_t sec;
        if (elfsym_obj_section(mod.obj, ".AsyncioDebug", &sec) == 0 && sec.addr &&
            sec.size >= PYSTATE_ASYNC_DEBUG_SIZE) {
            *addr = mod.bias + sec.addr;
            scry_errmsg(source, srclen, "%s section .AsyncioDebug", e->path);
            rc = 0;
        }
        elfsym_obj_free(mod.obj);
    }
    elfsym_maps_free(maps);
    return rc;
}

int pystate_async_check(const pystate_target_t *t, char *errbuf, size_t errlen)
{
    if (t->info.major != 3 || t->info.minor < 14 || !t->info.layout_from_debug_offsets) {
        scry_errmsg(
            errbuf, errlen,
            "asyncio tasks are read through the _asyncio module's debug offsets, which CPython "
            "exports from 3.14 on; process %d runs Python %s",
            (int)t->pid, t->info.version);
        return SCRY_E_UNSUPPORTED;
    }
    return 0;
}

int pystate_async_read(pystate_target_t *t, pystate_async_snapshot_t **out, char *errbuf,
                       size_t errlen)
{
    const pystate_layout_t *L = &t->layout;
    char why[160] = "";
    *out = NULL;
    int rc = pystate_async_check(t, errbuf, errlen);
    if (rc != 0)
        return rc;
    pystate_dbg_async_t g;
    rc = pystate_debug_offsets_read_async(t->mem, t->runtime, t->info.assumed_minor, &g);
    if (rc != 0) {
        scry_errmsg(errbuf, errlen,
                    "the _Py_DebugOffsets of process %d lack what asyncio needs: %s", (int)t->pid,
                    scry_strerror(rc));
        return rc == SCRY_E_GONE || rc == SCRY_E_PERM ? rc : SCRY_E_UNSUPPORTED;
    }
    raddr_t addr = 0;
    char source[320] = "";
    rc = find_block(t, &addr, source, sizeof source);
    if (rc == SCRY_E_NOTFOUND) {
        pystate_async_snapshot_t *s = calloc(1, sizeof *s);
        if (!s)
            return SCRY_E_NOMEM;
        *out = s; /* asyncio not imported: no tasks */
        return 0;
    }
    if (rc != 0) {
        scry_errmsg(errbuf, errlen, "cannot read the mappings of process %d: %s", (int)t->pid,
                    scry_strerror(rc));
        return rc;
    }
    uint8_t block[PYSTATE_ASYNC_DEBUG_SIZE];
    rc = rmem_read(t->mem, addr, block, sizeof block);
    if (rc != 0) {
        scry_errmsg(errbuf, errlen, "cannot read the asyncio debug offsets (%s): %s", source,
                    scry_strerror(rc));
        return rc == SCRY_E_FAULT ? SCRY_E_UNSUPPORTED : rc;
    }
    pystate_async_offsets_t o;
    rc = pystate_async_offsets_parse(block, sizeof block, L, &o, why, sizeof why);
    if (rc != 0) {
        scry_errmsg(errbuf, errlen, "the asyncio debug offsets (%s) do not validate: %s", source,
                    why);
        return SCRY_E_UNSUPPORTED;
    }
    pystate_async_snapshot_t *s = NULL;
    rc = pystate__async_walk(t, &o, &g, &s);
    if (rc != 0) {
        scry_errmsg(errbuf, errlen, "cannot read the asyncio tasks of process %d: %s", (int)t->pid,
                    scry_strerror(rc));
        return rc;
    }
    s->loaded = 1;
    snprintf(s->source, sizeof s->source, "%s", source);
    *out = s;
    return 0;
}

/* ---- the walk ----------------------------------------------------------------------- */

typedef struct type_slot {
    raddr_t type;
    const char *name;
} type_slot_t;

typedef struct walk {
    pystate_target_t *t;
    const pystate_async_offsets_t *o;
    const pystate_dbg_async_t *g;
    pystate_async_snapshot_t *s;
    size_t cap_tasks, cap_loops;
    type_slot_t types[ASYNC_TYPES];
    size_t ntypes;
    int fatal;           /* SCRY_E_GONE / SCRY_E_PERM / SCRY_E_NOMEM seen */
    raddr_t running[64]; /* running tasks of the threads seen */
    int32_t running_tid[64];
    size_t nrunning;
    raddr_t loop_of_thread[64];
    int32_t loop_tid[64];
    size_t nloop_threads;
} walk_t;

/* A read that may fault (torn: 1) or fail for good (the walk stops: -1). */
static int rd(walk_t *w, raddr_t addr, void *buf, size_t len)
{
    if (!addr)
        return 1;
    int err = rmem_read(w->t->mem, addr, buf, len);
    if (!err)
        return 0;
    if (err == SCRY_E_FAULT)
        return 1;
    w->fatal = err;
    return -1;
}

/* The type name of the object at OBJ (interned), or NULL. */
static const char *type_name(walk_t *w, raddr_t obj, raddr_t *type_out)
{
    const pystate_layout_t *L = &w->t->layout;
    raddr_t type = 0, tp_name = 0;
    if (type_out)
        *type_out = 0;
    if (!obj || (obj & 7) || rd(w, obj + (uint64_t)L->object_type, &type, 8) != 0 || !type ||
        (type & 7))
        return NULL;
    if (type_out)
        *type_out = type;
    for (size_t i = 0; i < w->ntypes; i++)
        if (w->types[i].type == type)
            return w->types[i].name;
    char name[ASYNC_NAME_MAX];
    if (rd(w, type + (uint64_t)L->type_name, &tp_name, 8) != 0 ||
        rmem_read_cstr(w->t->mem, tp_name, name, sizeof name) <= 0)
        return NULL;
    const char *dot = strrchr(name, '.');
    const char *s = strtab_intern(w->t->strings, dot ? dot + 1 : name);
    if (s && w->ntypes < ASYNC_TYPES) {
        w->types[w->ntypes].type = type;
        w->types[w->ntypes].name = s;
        w->ntypes++;
    }
    return s;
}

/* A small int's value (the automatic task names "Task-N" are stored as ints). */
static int read_small_int(walk_t *w, raddr_t obj, int64_t *v)
{
    const pystate_layout_t *L = &w->t->layout;
    if (L->long_tag < 0 || L->long_digits < 0 || L->long_tag_shift <= 0 || L->long_tag_shift >= 8)
        return SCRY_E_UNSUPPORTED;
    uint64_t tag = 0;
    uint32_t d[2] = {0, 0};
    if (rd(w, obj + (uint64_t)L->long_tag, &tag, 8) != 0)
        return SCRY_E_CORRUPT;
    uint64_t nd = tag >> L->long_tag_shift;
    if (nd > 2 || (tag & 3) == 2)
        return SCRY_E_CORRUPT;
    if (nd && rd(w, obj + (uint64_t)L->long_digits, d, 4 * nd) != 0)
        return SCRY_E_CORRUPT;
    *v = (int64_t)(d[0] & 0x3fffffff) | ((int64_t)(d[1] & 0x3fffffff) << 30);
    return 0;
}

static const char *task_name(walk_t *w, raddr_t obj)
{
    char buf[ASYNC_NAME_MAX];
    const char *tn = type_name(w, obj, NULL);
    if (!tn)
        return NULL;
    if (!strcmp(tn, "str")) {
        int n = pystate__read_str(w->t, obj, buf, sizeof buf);
        return n >= 0 ? strtab_intern(w->t->strings, buf) : NULL;
    }
    int64_t v = 0;
    if (!strcmp(tn, "int") && read_small_int(w, obj, &v) == 0) {
        snprintf(buf, sizeof buf, "Task-%lld", (long long)v);
        return strtab_intern(w->t->strings, buf);
    }
    snprintf(buf, sizeof buf, "<%s>", tn);
    return strtab_intern(w->t->strings, buf);
}

/* Frame states of gi_frame_state (pycore_frame.h). */
static int state_yield_from(int minor, int8_t st)
{
    return minor == 14 ? st == -1 : (st == 2 || st == 3);
}

static int state_done(int minor, int8_t st)
{
    return minor == 14 ? st >= 1 : st >= 5;
}

/* Where a suspended 'await' keeps the object it awaits: stackpointer[-1] in 3.14 (the
 * receiver on top, _PyGen_yf); 3.15 keeps the value slot (NULL) above it, so [-2]. */
static int yield_from_slot(int minor)
{
    return minor == 14 ? 1 : 2;
}

static int is_generator_type(const char *tn)
{
    return tn && (!strcmp(tn, "coroutine") || !strcmp(tn, "generator"));
}

/* Appends a frame for code object CODE at instruction pointer INSTR. 0 or a torn read. */
static int push_frame(walk_t *w, pystate_async_task_t *k, raddr_t code, raddr_t instr)
{
    pystate_target_t *t = w->t;
    const pystate_layout_t *L = &t->layout;
    uint8_t key[PYSTATE_CODE_KEY_MAX];
    if (t->code_key_len <= 0 || (size_t)t->code_key_len > sizeof key ||
        rd(w, code + (uint64_t)t->code_key_start, key, (size_t)t->code_key_len) != 0)
        return 1;
    pystate_code_t *c = (pystate_code_t *)pystate__code_get(t, code, key);
    if (!c)
        return 1;
    scry_frame_t *f = &k->frames[k->nframes++];
    f->function = c->function;
    f->file = c->file;
    f->kind = SCRY_FRAME_PYTHON;
    f->line = 0;
    raddr_t start = code + (uint64_t)L->code_adaptive;
    if (instr >= start && instr - start < (1u << 26))
        f->line = pystate__code_line(t, c, (uint32_t)(instr - start));
    return 0;
}

/* The coroutine chain of task K from CORO, innermost first. */
static void read_chain(walk_t *w, pystate_async_task_t *k, raddr_t coro)
{
    const pystate_layout_t *L = &w->t->layout;
    const pystate_dbg_async_t *g = w->g;
    uint8_t buf[ASYNC_GEN_READ];
    size_t len = (size_t)g->gen_iframe + (size_t)L->iframe_localsplus;
    if ((size_t)g->gen_frame_state + 1 > len)
        len = (size_t)g->gen_frame_state + 1;
    if (len > sizeof buf) {
        k->truncated = 1;
        return;
    }
    scry_frame_t tmp[PYSTATE_ASYNC_MAX_DEPTH];
    k->frames = tmp; /* outermost first while reading; reversed into the owned copy below */
    k->nframes = 0;
    for (int depth = 0; coro; depth++) {
        if (depth >= PYSTATE_ASYNC_MAX_DEPTH) {
            k->truncated = 1;
            break;
        }
        if (!is_generator_type(type_name(w, coro, NULL)))
            break; /* what the innermost coroutine waits on (a FutureIter, ...) */
        if (rd(w, coro, buf, len) != 0) {
            k->truncated = 1;
            break;
        }
        int8_t st = (int8_t)buf[g->gen_frame_state];
        if (state_done(L->minor, st))
            break;
        const uint8_t *fr = buf + g->gen_iframe;
        size_t flen = (size_t)L->iframe_localsplus;
        raddr_t code = pystate__u64_at(fr, flen, L->iframe_code) & ~(uint64_t)7;
        raddr_t instr = pystate__u64_at(fr, flen, L->iframe_instr);
        if (!code || push_frame(w, k, code, instr) != 0) {
            k->truncated = 1;
            break;
        }
        if (!state_yield_from(L->minor, st))
            break;
        raddr_t sp = pystate__u64_at(fr, flen, g->iframe_stackpointer);
        raddr_t yf = 0;
        uint64_t slot = 8 * (uint64_t)yield_from_slot(L->minor);
        if (sp < slot || rd(w, sp - slot, &yf, 8) != 0) {
            k->truncated = 1;
            break;
        }
        coro = yf & ~(uint64_t)7; /* a _PyStackRef: tag bits cleared */
    }
    uint32_t n = k->nframes;
    k->frames = malloc((n ? n : 1) * sizeof *k->frames);
    if (!k->frames) {
        k->nframes = 0;
        w->fatal = SCRY_E_NOMEM;
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        k->frames[i] = tmp[n - 1 - i];
}

/* The awaited_by field: one task, or a set of them. */
static void read_awaiters(walk_t *w, pystate_async_task_t *k, raddr_t aby, int is_set)
{
    const pystate_dbg_async_t *g = w->g;
    if (!aby)
        return;
    if (!is_set) {
        k->awaited_by = malloc(sizeof *k->awaited_by);
        if (!k->awaited_by) {
            w->fatal = SCRY_E_NOMEM;
            return;
        }
        k->awaited_by[0] = aby;
        k->nawaited_by = 1;
        return;
    }
    uint8_t sb[512];
    if (g->set_size > (int64_t)sizeof sb || rd(w, aby, sb, (size_t)g->set_size) != 0) {
        k->truncated = 1;
        return;
    }
    int64_t mask = (int64_t)pystate__u64_at(sb, sizeof sb, g->set_mask);
    raddr_t table = pystate__u64_at(sb, sizeof sb, g->set_table);
    if (mask < 0 || ((uint64_t)mask & ((uint64_t)mask + 1)) != 0 || !table) {
        k->truncated = 1;
        return;
    }
    uint64_t slots = (uint64_t)mask + 1;
    if (slots > PYSTATE_ASYNC_MAX_AWAITERS) {
        slots = PYSTATE_ASYNC_MAX_AWAITERS;
        k->truncated = 1;
    }
    uint64_t(*ents)[2] = malloc(slots * sizeof *ents);
    k->awaited_by = malloc(slots * sizeof *k->awaited_by);
    if (!ents || !k->awaited_by) {
        free(ents);
        w->fatal = SCRY_E_NOMEM;
        return;
    }
    if (rd(w, table, ents, slots * sizeof *ents) != 0) {
        k->truncated = 1;
    } else {
        for (uint64_t i = 0; i < slots; i++)
            if (ents[i][0] && !(ents[i][0] & 7))
                k->awaited_by[k->nawaited_by++] = ents[i][0]; /* filtered against tasks later */
    }
    free(ents);
}

static int add_task(walk_t *w, raddr_t task, int32_t tid)
{
    const pystate_async_offsets_t *o = w->o;
    pystate_async_snapshot_t *s = w->s;
    uint8_t buf[PYSTATE_ASYNC_TASK_READ];
    size_t len = (size_t)o->task_size;
    if (rd(w, task, buf, len) != 0 || buf[o->task_is_task] != 1) {
        s->dropped++;
        return 0;
    }
    pystate_async_task_t *nt =
        scry_grow(s->tasks, &w->cap_tasks, sizeof *nt, s->ntasks + 1, 64, SIZE_MAX);
    if (!nt)
        return SCRY_E_NOMEM;
    s->tasks = nt;
    pystate_async_task_t *k = &s->tasks[s->ntasks];
    memset(k, 0, sizeof *k);
    k->addr = task;
    k->tid = tid;
    k->loop = pystate__u64_at(buf, len, o->task_loop);
    uint32_t st = pystate__u32_at(buf, len, o->task_state);
    k->state = st == 1   ? PYSTATE_TASK_CANCELLED
               : st == 2 ? PYSTATE_TASK_FINISHED
                         : PYSTATE_TASK_PENDING;
    for (size_t i = 0; i < w->nrunning; i++)
        if (w->running[i] == task && st == 0)
            k->state = PYSTATE_TASK_RUNNING;
    k->name = task_name(w, pystate__u64_at(buf, len, o->task_name));
    if (!k->name)
        k->name = w->t->s_unknown;
    k->awaits = pystate__u64_at(buf, len, o->task_fut_waiter);
    if (k->awaits)
        k->awaits_type = type_name(w, k->awaits, NULL);
    s->ntasks++; /* owned from here on, whatever follows */
    read_awaiters(w, k, pystate__u64_at(buf, len, o->task_awaited_by),
                  pystate__u8_at(buf, len, o->task_awaited_by_is_set));
    read_chain(w, k, pystate__u64_at(buf, len, o->task_coro));
    return w->fatal;
}

/* Walks the circular list whose head node is at HEAD. */
static int walk_list(walk_t *w, raddr_t head, int32_t tid)
{
    const pystate_dbg_async_t *g = w->g;
    raddr_t node = 0;
    int r = rd(w, head + (uint64_t)g->llist_next, &node, 8);
    if (r < 0)
        return w->fatal;
    while (r == 0 && node && node != head) {
        if (w->s->ntasks + w->s->dropped >= PYSTATE_ASYNC_MAX_TASKS)
            return 0;
        int err = add_task(w, node - (uint64_t)w->o->task_node, tid);
        if (err)
            return err;
        r = rd(w, node + (uint64_t)g->llist_next, &node, 8);
    }
    if (r < 0)
        return w->fatal;
    if (r > 0 || !node)
        w->s->dropped++; /* the list broke under us */
    return 0;
}

static int cmp_addr(const void *a, const void *b)
{
    raddr_t x = *(const raddr_t *)a, y = *(const raddr_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_task(const void *a, const void *b)
{
    const pystate_async_task_t *x = a, *y = b;
    if (x->loop != y->loop)
        return x->loop < y->loop ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void free_task(pystate_async_task_t *k)
{
    free(k->frames);
    free(k->awaited_by);
}

/* Sorts the tasks, drops duplicates (a list read twice), keeps only awaiters that are
 * listed tasks, and lists the loops. */
static int finish(walk_t *w)
{
    pystate_async_snapshot_t *s = w->s;
    size_t n = s->ntasks;
    raddr_t *addrs = malloc((n ? n : 1) * sizeof *addrs);
    if (!addrs)
        return SCRY_E_NOMEM;
    if (n)
        qsort(s->tasks, n, sizeof *s->tasks, cmp_task);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && s->tasks[m - 1].addr == s->tasks[i].addr &&
            s->tasks[m - 1].loop == s->tasks[i].loop) {
            free_task(&s->tasks[i]);
            continue;
        }
        s->tasks[m++] = s->tasks[i];
    }
    s->ntasks = m;
    for (size_t i = 0; i < m; i++)
        addrs[i] = s->tasks[i].addr;
    qsort(addrs, m, sizeof *addrs, cmp_addr);
    for (size_t i = 0; i < m; i++) {
        pystate_async_task_t *k = &s->tasks[i];
        uint32_t keep = 0;
        for (uint32_t j = 0; j < k->nawaited_by; j++)
            if (bsearch(&k->awaited_by[j], addrs, m, sizeof *addrs, cmp_addr) &&
                k->awaited_by[j] != k->addr)
                k->awaited_by[keep++] = k->awaited_by[j];
        k->nawaited_by = keep;
        if (k->awaits && !bsearch(&k->awaits, addrs, m, sizeof *addrs, cmp_addr) && !k->awaits_type)
            k->awaits = 0;
    }
    free(addrs);
    /* loops */
    s->loops = calloc(m ? m : 1, sizeof *s->loops);
    if (!s->loops)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < m; i++) {
        raddr_t loop = s->tasks[i].loop;
        if (s->nloops && s->loops[s->nloops - 1].addr == loop)
            continue;
        pystate_async_loop_t *l = &s->loops[s->nloops++];
        l->addr = loop;
        l->type = type_name(w, loop, NULL);
        for (size_t j = 0; j < w->nloop_threads; j++)
            if (w->loop_of_thread[j] == loop)
                l->tid = w->loop_tid[j];
    }
    /* a running loop without tasks still shows */
    for (size_t j = 0; j < w->nloop_threads; j++) {
        int seen = 0;
        for (size_t i = 0; i < s->nloops; i++)
            seen |= s->loops[i].addr == w->loop_of_thread[j];
        if (seen || s->nloops >= m + 64)
            continue;
        pystate_async_loop_t *nl = realloc(s->loops, (s->nloops + 1) * sizeof *nl);
        if (!nl)
            return SCRY_E_NOMEM;
        s->loops = nl;
        s->loops[s->nloops].addr = w->loop_of_thread[j];
        s->loops[s->nloops].type = type_name(w, w->loop_of_thread[j], NULL);
        s->loops[s->nloops].tid = w->loop_tid[j];
        s->nloops++;
    }
    return w->fatal;
}

int pystate__async_walk(pystate_target_t *t, const pystate_async_offsets_t *o,
                        const pystate_dbg_async_t *g, pystate_async_snapshot_t **out)
{
    const pystate_layout_t *L = &t->layout;
    walk_t w = {.t = t, .o = o, .g = g};
    *out = NULL;
    if (!(w.s = calloc(1, sizeof *w.s)))
        return SCRY_E_NOMEM;
    raddr_t interp = 0;
    raddr_t tstates[64];
    int32_t tids[64];
    int rc = 0;
    if (!t->runtime || rd(&w, t->runtime + (uint64_t)L->runtime_interpreters_head, &interp, 8))
        interp = 0;
    for (int ni = 0; interp && ni < PYSTATE_MAX_INTERPS && !rc; ni++) {
        raddr_t next = 0, ts = 0;
        if (rd(&w, interp + (uint64_t)L->interp_next, &next, 8) ||
            rd(&w, interp + (uint64_t)L->interp_tstate_head, &ts, 8))
            break;
        /* Thread states first: the running tasks and loops, then every list. */
        size_t nts = 0;
        for (size_t nt = 0; ts && nt < PYSTATE_MAX_THREADS; nt++) {
            uint64_t v[4] = {0, 0, 0, 0};
            if (rd(&w, ts + (uint64_t)L->tstate_next, &v[0], 8) ||
                rd(&w, ts + (uint64_t)o->tstate_running_loop, &v[1], 8) ||
                rd(&w, ts + (uint64_t)o->tstate_running_task, &v[2], 8) ||
                (L->tstate_native_thread_id >= 0 &&
                 rd(&w, ts + (uint64_t)L->tstate_native_thread_id, &v[3], 8)))
                break;
            if (nts < 64) {
                tstates[nts] = ts;
                tids[nts++] = (int32_t)v[3];
            }
            if (v[1] && w.nloop_threads < 64) {
                w.loop_of_thread[w.nloop_threads] = v[1];
                w.loop_tid[w.nloop_threads++] = (int32_t)v[3];
            }
            if (v[2] && w.nrunning < 64) {
                w.running[w.nrunning] = v[2];
                w.running_tid[w.nrunning++] = (int32_t)v[3];
            }
            ts = v[0];
        }
        for (size_t i = 0; i < nts && !rc; i++)
            rc = walk_list(&w, tstates[i] + (uint64_t)o->tstate_tasks_head, tids[i]);
        if (!rc)
            rc = walk_list(&w, interp + (uint64_t)o->interp_tasks_head, 0);
        interp = next;
    }
    if (!rc)
        rc = w.fatal;
    if (!rc)
        rc = finish(&w);
    if (rc) {
        pystate_async_snapshot_free(w.s);
        return rc;
    }
    *out = w.s;
    return 0;
}

void pystate_async_snapshot_free(pystate_async_snapshot_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntasks; i++)
        free_task(&s->tasks[i]);
    free(s->tasks);
    free(s->loops);
    free(s);
}

/* ---- labels for samples ------------------------------------------------------------- */

#define LABEL_CACHE 256 /* task names cached (power of two) */

typedef struct label_slot {
    raddr_t task, name_obj;
    const char *label; /* "task NAME", interned */
} label_slot_t;

struct pystate_async_labels {
    pystate_target_t *t;
    int supported;         /* pystate_async_check passed */
    int found;             /* the block was found and validated */
    uint64_t next_find_ns; /* when to look for the block again */
    pystate_async_offsets_t o;
    pystate_dbg_async_t g;
    walk_t w; /* type-name cache and reads (no snapshot) */
    label_slot_t cache[LABEL_CACHE];
};

pystate_async_labels_t *pystate_async_labels_new(pystate_target_t *t)
{
    pystate_async_labels_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->t = t;
    l->supported = pystate_async_check(t, NULL, 0) == 0;
    return l;
}

void pystate_async_labels_free(pystate_async_labels_t *l)
{
    free(l);
}

/* Looks for the block (at most once a second until found). */
static int labels_ready(pystate_async_labels_t *l, uint64_t now_ns)
{
    if (l->found)
        return 1;
    if (!l->supported || now_ns < l->next_find_ns)
        return 0;
    l->next_find_ns = now_ns + 1000000000ull;
    pystate_target_t *t = l->t;
    raddr_t addr = 0;
    uint8_t block[PYSTATE_ASYNC_DEBUG_SIZE];
    if (pystate_debug_offsets_read_async(t->mem, t->runtime, t->info.assumed_minor, &l->g) != 0 ||
        find_block(t, &addr, NULL, 0) != 0 || rmem_read(t->mem, addr, block, sizeof block) != 0 ||
        pystate_async_offsets_parse(block, sizeof block, &t->layout, &l->o, NULL, 0) != 0)
        return 0;
    l->w.t = t;
    l->w.o = &l->o;
    l->w.g = &l->g;
    l->found = 1;
    return 1;
}

void pystate__async_labels_use(pystate_async_labels_t *l, const pystate_async_offsets_t *o,
                               const pystate_dbg_async_t *g)
{
    l->o = *o;
    l->g = *g;
    memset(&l->w, 0, sizeof l->w);
    l->w.t = l->t;
    l->w.o = &l->o;
    l->w.g = &l->g;
    l->found = 1;
}

size_t pystate_async_labels_get(pystate_async_labels_t *l, raddr_t tstate, uint64_t now_ns,
                                const char **out, size_t max)
{
    if (!l || !tstate || !labels_ready(l, now_ns))
        return 0;
    const pystate_async_offsets_t *o = &l->o;
    walk_t *w = &l->w;
    w->fatal = 0;
    if (max > PYSTATE_ASYNC_LABEL_DEPTH)
        max = PYSTATE_ASYNC_LABEL_DEPTH;
    raddr_t task = 0;
    if (rd(w, tstate + (uint64_t)o->tstate_running_task, &task, 8) != 0)
        return 0;
    size_t n = 0;
    uint8_t buf[PYSTATE_ASYNC_TASK_READ];
    size_t len = (size_t)o->task_size;
    raddr_t seen[PYSTATE_ASYNC_LABEL_DEPTH];
    while (task && !(task & 7) && n < max) {
        for (size_t i = 0; i < n; i++)
            if (seen[i] == task)
                return n; /* a cycle: a torn read */
        if (rd(w, task, buf, len) != 0 || buf[o->task_is_task] != 1)
            break;
        raddr_t name_obj = pystate__u64_at(buf, len, o->task_name);
        label_slot_t *slot = &l->cache[(task >> 4) & (LABEL_CACHE - 1)];
        if (slot->task != task || slot->name_obj != name_obj || !slot->label) {
            const char *name = task_name(w, name_obj);
            char lab[ASYNC_NAME_MAX + 8];
            snprintf(lab, sizeof lab, "task %s", name ? name : "?");
            slot->task = task;
            slot->name_obj = name_obj;
            slot->label = strtab_intern(l->t->strings, lab);
            if (!slot->label)
                break;
        }
        seen[n] = task;
        out[n++] = slot->label;
        if (pystate__u8_at(buf, len, o->task_awaited_by_is_set))
            break;
        task = pystate__u64_at(buf, len, o->task_awaited_by);
    }
    return n;
}
