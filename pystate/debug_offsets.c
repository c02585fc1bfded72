/* debug_offsets.c - parse and validate the target's _Py_DebugOffsets (3.13, 3.14).
 *
 * The block is an array of uint64_t after an 8-byte cookie. Its member order is fixed per
 * minor version (CPython documents it as stable across patch releases only), so each
 * known version gets its own mirror struct below, declared from CPython's
 * Include/internal/pycore_runtime.h (3.13) and pycore_debug_offsets.h (3.14.0). Both are
 * copied into one normalised form (the 3.14 superset, members 3.13 lacks left 0) and
 * validated there. The target is the same architecture as scry (x86_64, little-endian).
 */
#include "debug_offsets.h"

#include <string.h>

#include "scry_err.h"

#define DBG_MAX_STRUCT (1u << 20) /* no struct size or offset beyond 1 MiB */
#define DBG_PTR        8          /* pointer width on the supported targets */

typedef struct dbg_head {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
} dbg_head_t;

struct dbg_runtime {
    uint64_t size, finalizing, interpreters_head;
};
struct dbg_interp13 {
    uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
};
struct dbg_interp14 {
    uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
        ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder, code_object_generation, tlbc_generation;
};
struct dbg_tstate {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
};
struct dbg_iframe13 {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
};
struct dbg_iframe14 {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
};
struct dbg_code13 {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
};
struct dbg_code14 {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive, co_tlbc;
};
struct dbg_pyobject {
    uint64_t size, ob_type;
};
struct dbg_type {
    uint64_t size, tp_name, tp_repr, tp_flags;
};
struct dbg_seq { /* tuple_object and list_object */
    uint64_t size, ob_item, ob_size;
};
struct dbg_set {
    uint64_t size, used, table, mask;
};
struct dbg_dict {
    uint64_t size, ma_keys, ma_values;
};
struct dbg_float {
    uint64_t size, ob_fval;
};
struct dbg_long {
    uint64_t size, lv_tag, ob_digit;
};
struct dbg_bytes {
    uint64_t size, ob_size, ob_sval;
};
struct dbg_unicode {
    uint64_t size, state, length, asciiobject_size;
};
struct dbg_gc {
    uint64_t size, collecting;
};
struct dbg_gen {
    uint64_t size, gi_name, gi_iframe, gi_frame_state;
};
struct dbg_llist {
    uint64_t next, prev;
};
struct dbg_debugger {
    uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled, debugger_pending_call,
        debugger_script_path, debugger_script_path_size;
};

/* The 3.13 block (3.13.0rc1 .. 3.13.x). */
typedef struct dbg313 {
    dbg_head_t head;
    struct dbg_runtime runtime_state;
    struct dbg_interp13 interpreter_state;
    struct dbg_tstate thread_state;
    struct dbg_iframe13 interpreter_frame;
    struct dbg_code13 code_object;
    struct dbg_pyobject pyobject;
    struct dbg_type type_object;
    struct dbg_seq tuple_object;
    struct dbg_seq list_object;
    struct dbg_dict dict_object;
    struct dbg_float float_object;
    struct dbg_long long_object;
    struct dbg_bytes bytes_object;
    struct dbg_unicode unicode_object;
    struct dbg_gc gc;
} dbg313_t;

/* The 3.14 block (3.14.0rc1 .. 3.14.x), also the normalised form. */
typedef struct dbg314 {
    dbg_head_t head;
    struct dbg_runtime runtime_state;
    struct dbg_interp14 interpreter_state;
    struct dbg_tstate thread_state;
    struct dbg_iframe14 interpreter_frame;
    struct dbg_code14 code_object;
    struct dbg_pyobject pyobject;
    struct dbg_type type_object;
    struct dbg_seq tuple_object;
    struct dbg_seq list_object;
    struct dbg_set set_object;
    struct dbg_dict dict_object;
    struct dbg_float float_object;
    struct dbg_long long_object;
    struct dbg_bytes bytes_object;
    struct dbg_unicode unicode_object;
    struct dbg_gc gc;
    struct dbg_gen gen_object;
    struct dbg_llist llist_node;
    struct dbg_debugger debugger_support;
} dbg314_t;

_Static_assert(sizeof(dbg_head_t) == PYSTATE_DEBUG_OFFSETS_HEADER_SIZE, "header size");
_Static_assert(sizeof(dbg313_t) == 584, "3.13 _Py_DebugOffsets is 73 words");
_Static_assert(sizeof(dbg314_t) == PYSTATE_DEBUG_OFFSETS_MAX_SIZE, "3.14 is 95 words");

size_t pystate_debug_offsets_size(uint32_t version_hex)
{
    if ((version_hex >> 24) != 3)
        return 0;
    switch ((version_hex >> 16) & 0xff) {
    case 13:
        return sizeof(dbg313_t);
    case 14:
        return sizeof(dbg314_t);
    default:
        return 0;
    }
}

/* Copies a 3.13 block into the 3.14-shaped normalised form; 3.14-only members stay 0 and
 * are not validated (check_block knows the minor). */
static void widen_313(const dbg313_t *a, dbg314_t *b)
{
    memset(b, 0, sizeof *b);
    b->head = a->head;
    b->runtime_state = a->runtime_state;
    b->interpreter_state.size = a->interpreter_state.size;
    b->interpreter_state.id = a->interpreter_state.id;
    b->interpreter_state.next = a->interpreter_state.next;
    b->interpreter_state.threads_head = a->interpreter_state.threads_head;
    b->interpreter_state.gc = a->interpreter_state.gc;
    b->interpreter_state.imports_modules = a->interpreter_state.imports_modules;
    b->interpreter_state.sysdict = a->interpreter_state.sysdict;
    b->interpreter_state.builtins = a->interpreter_state.builtins;
    b->interpreter_state.ceval_gil = a->interpreter_state.ceval_gil;
    b->interpreter_state.gil_runtime_state = a->interpreter_state.gil_runtime_state;
    b->interpreter_state.gil_runtime_state_enabled = a->interpreter_state.gil_runtime_state_enabled;
    b->interpreter_state.gil_runtime_state_locked = a->interpreter_state.gil_runtime_state_locked;
    b->interpreter_state.gil_runtime_state_holder = a->interpreter_state.gil_runtime_state_holder;
    b->thread_state = a->thread_state;
    memcpy(&b->interpreter_frame, &a->interpreter_frame, sizeof a->interpreter_frame);
    memcpy(&b->code_object, &a->code_object, sizeof a->code_object);
    b->pyobject = a->pyobject;
    b->type_object = a->type_object;
    b->tuple_object = a->tuple_object;
    b->list_object = a->list_object;
    b->dict_object = a->dict_object;
    b->float_object = a->float_object;
    b->long_object = a->long_object;
    b->bytes_object = a->bytes_object;
    b->unicode_object = a->unicode_object;
    b->gc = a->gc;
}

/* Validation: any failed check sets ok to 0. */
typedef struct check {
    int ok;
} check_t;

/* A struct size: nonzero and at most 1 MiB. */
static void need_size(check_t *c, uint64_t size)
{
    if (size == 0 || size > DBG_MAX_STRUCT)
        c->ok = 0;
}

/* A member of WIDTH bytes at OFF lies inside a struct of SIZE bytes. */
static void need_in(check_t *c, uint64_t off, uint64_t width, uint64_t size)
{
    if (size > DBG_MAX_STRUCT || off > size || width > size - off)
        c->ok = 0;
}

/* A pointer member: inside and 8-aligned. */
static void need_ptr(check_t *c, uint64_t off, uint64_t size)
{
    need_in(c, off, DBG_PTR, size);
    if (off % DBG_PTR != 0)
        c->ok = 0;
}

/* An aligned integer member of WIDTH (4 or 8) bytes. */
static void need_int(check_t *c, uint64_t off, uint64_t width, uint64_t size)
{
    need_in(c, off, width, size);
    if (off % width != 0)
        c->ok = 0;
}

static void check_sizes(check_t *c, const dbg314_t *d, int minor)
{
    need_size(c, d->runtime_state.size);
    need_size(c, d->interpreter_state.size);
    need_size(c, d->thread_state.size);
    need_size(c, d->interpreter_frame.size);
    need_size(c, d->code_object.size);
    need_size(c, d->pyobject.size);
    need_size(c, d->type_object.size);
    need_size(c, d->tuple_object.size);
    need_size(c, d->list_object.size);
    need_size(c, d->dict_object.size);
    need_size(c, d->float_object.size);
    need_size(c, d->long_object.size);
    need_size(c, d->bytes_object.size);
    need_size(c, d->unicode_object.size);
    need_size(c, d->gc.size);
    if (minor >= 14) {
        need_size(c, d->set_object.size);
        need_size(c, d->gen_object.size);
    }
}

static void check_runtime_interp(check_t *c, const dbg314_t *d, int minor)
{
    const struct dbg_runtime *r = &d->runtime_state;
    const struct dbg_interp14 *i = &d->interpreter_state;
    uint64_t is = i->size;

    need_ptr(c, r->finalizing, r->size);
    /* interpreters.main (derived) follows head */
    need_ptr(c, r->interpreters_head + DBG_PTR, r->size);
    need_ptr(c, r->interpreters_head, r->size);
    need_int(c, i->id, 8, is);
    need_ptr(c, i->next, is);
    need_ptr(c, i->threads_head, is);
    need_in(c, i->gc, 1, is);
    need_ptr(c, i->imports_modules, is);
    need_ptr(c, i->sysdict, is);
    need_ptr(c, i->builtins, is);
    need_ptr(c, i->ceval_gil, is);
    need_in(c, i->gil_runtime_state, 1, is);
    /* 0 in default builds; offsetof(struct _gil_runtime_state, enabled) when free-threaded */
    need_in(c, i->gil_runtime_state_enabled, 1, is);
    need_int(c, i->gil_runtime_state_locked, 4, is);
    need_ptr(c, i->gil_runtime_state_holder, is);
    if (i->gil_runtime_state_locked < i->gil_runtime_state ||
        i->gil_runtime_state_holder < i->gil_runtime_state)
        c->ok = 0;
    if (minor >= 14) {
        need_ptr(c, i->threads_main, is);
        need_in(c, i->code_object_generation, 1, is);
        need_in(c, i->tlbc_generation, 1, is);
    }
}

static void check_thread_frame_code(check_t *c, const dbg314_t *d, int minor)
{
    const struct dbg_tstate *t = &d->thread_state;
    const struct dbg_iframe14 *f = &d->interpreter_frame;
    const struct dbg_code14 *co = &d->code_object;

    need_ptr(c, t->prev, t->size);
    need_ptr(c, t->next, t->size);
    need_ptr(c, t->interp, t->size);
    need_ptr(c, t->current_frame, t->size);
    need_int(c, t->thread_id, 8, t->size);
    need_int(c, t->native_thread_id, 8, t->size);
    need_ptr(c, t->datastack_chunk, t->size);
    need_in(c, t->status, 4, t->size);

    need_ptr(c, f->previous, f->size);
    need_ptr(c, f->executable, f->size);
    need_ptr(c, f->instr_ptr, f->size);
    need_ptr(c, f->localsplus, f->size);
    need_in(c, f->owner, 1, f->size);

    need_ptr(c, co->filename, co->size);
    need_ptr(c, co->name, co->size);
    need_ptr(c, co->qualname, co->size);
    need_ptr(c, co->linetable, co->size);
    need_int(c, co->firstlineno, 4, co->size);
    need_int(c, co->argcount, 4, co->size);
    need_ptr(c, co->localsplusnames, co->size);
    need_ptr(c, co->localspluskinds, co->size);
    need_in(c, co->co_code_adaptive, 2, co->size);

    if (minor >= 14) {
        need_ptr(c, f->stackpointer, f->size);
        need_in(c, f->tlbc_index, 1, f->size); /* 0 unless free-threaded */
        need_in(c, co->co_tlbc, 1, co->size);  /* likewise */
    }
}

static void check_objects(check_t *c, const dbg314_t *d, int minor)
{
    const struct dbg_unicode *u = &d->unicode_object;

    need_ptr(c, d->pyobject.ob_type, d->pyobject.size);
    need_ptr(c, d->type_object.tp_name, d->type_object.size);
    need_ptr(c, d->type_object.tp_repr, d->type_object.size);
    need_int(c, d->type_object.tp_flags, 8, d->type_object.size);
    need_ptr(c, d->tuple_object.ob_item, d->tuple_object.size);
    need_int(c, d->tuple_object.ob_size, 8, d->tuple_object.size);
    need_ptr(c, d->list_object.ob_item, d->list_object.size);
    need_int(c, d->list_object.ob_size, 8, d->list_object.size);
    need_ptr(c, d->dict_object.ma_keys, d->dict_object.size);
    need_ptr(c, d->dict_object.ma_values, d->dict_object.size);
    need_int(c, d->float_object.ob_fval, 8, d->float_object.size);
    need_int(c, d->long_object.lv_tag, 8, d->long_object.size);
    need_int(c, d->long_object.ob_digit, 4, d->long_object.size);
    need_int(c, d->bytes_object.ob_size, 8, d->bytes_object.size);
    need_in(c, d->bytes_object.ob_sval, 1, d->bytes_object.size);
    need_in(c, u->state, 4, u->size);
    need_int(c, u->length, 8, u->size);
    need_in(c, 0, u->asciiobject_size, u->size);
    /* What the derived unicode fields rely on: PyCompactUnicodeObject = PyASCIIObject +
     * utf8_length + utf8, and PyUnicodeObject = that + the data union. */
    if (u->asciiobject_size == 0 || u->size != u->asciiobject_size + 3 * DBG_PTR ||
        u->state >= u->asciiobject_size || u->length >= u->asciiobject_size)
        c->ok = 0;
    /* PyObject_VAR_HEAD: ob_size follows the PyObject header (var_size, code_size_field) */
    if (d->tuple_object.ob_size != d->pyobject.size || d->list_object.ob_size != d->pyobject.size)
        c->ok = 0;
    need_in(c, d->gc.collecting, 4, d->gc.size);

    if (minor >= 14) {
        const struct dbg_debugger *g = &d->debugger_support;

        need_int(c, d->set_object.used, 8, d->set_object.size);
        need_ptr(c, d->set_object.table, d->set_object.size);
        need_int(c, d->set_object.mask, 8, d->set_object.size);
        need_ptr(c, d->gen_object.gi_name, d->gen_object.size);
        need_in(c, d->gen_object.gi_iframe, 1, d->gen_object.size);
        need_in(c, d->gen_object.gi_frame_state, 1, d->gen_object.size);
        need_ptr(c, d->llist_node.next, 2 * DBG_PTR);
        need_ptr(c, d->llist_node.prev, 2 * DBG_PTR);
        need_in(c, g->eval_breaker, 1, d->thread_state.size);
        need_in(c, g->remote_debugger_support, 1, d->thread_state.size);
        need_in(c, g->remote_debugging_enabled, 1, d->interpreter_state.size);
        /* offsets into _PyRemoteDebuggerSupport, whose size the block does not give */
        need_in(c, g->debugger_pending_call, 1, DBG_MAX_STRUCT);
        need_in(c, g->debugger_script_path, 1, DBG_MAX_STRUCT);
        need_in(c, 0, g->debugger_script_path_size, DBG_MAX_STRUCT);
    }
}

/* Decodes and vets the version: 0, SCRY_E_CORRUPT or SCRY_E_UNSUPPORTED. */
static int check_version(uint64_t version, int *minor)
{
    unsigned major = (unsigned)(version >> 24) & 0xff;
    unsigned mnr = (unsigned)(version >> 16) & 0xff;
    unsigned level = (unsigned)(version >> 4) & 0xf;

    /* Only 3.13+ has the block: anything else behind a valid cookie is nonsense. */
    if ((version >> 32) != 0 || major != 3 || mnr < 13 || mnr > 99)
        return SCRY_E_CORRUPT;
    if (level != 0xa && level != 0xb && level != 0xc && level != 0xf)
        return SCRY_E_CORRUPT;
    /* The block changed during the 3.13 and 3.14 alphas and betas: trust rc and final. */
    if (mnr > 14 || level < 0xc)
        return SCRY_E_UNSUPPORTED;
    *minor = (int)mnr;
    return 0;
}

static int64_t i64(uint64_t v)
{
    return (int64_t)v; /* validated: every value is <= 1 MiB */
}

/* The dict, int and type fields the thread-name reader needs (pystate/threadnames.c): from
 * the block where it has them, else the generated 3.13 values (see debug_offsets.h). */
static void fill_names(const dbg314_t *d, const pystate_layout_t *g, pystate_layout_t *o)
{
    o->dict_keys = i64(d->dict_object.ma_keys);
    o->dict_values = i64(d->dict_object.ma_values);
    o->dictkeys_size = g->dictkeys_size;
    o->dictkeys_log2_size = g->dictkeys_log2_size;
    o->dictkeys_log2_index_bytes = g->dictkeys_log2_index_bytes;
    o->dictkeys_kind = g->dictkeys_kind;
    o->dictkeys_nentries = g->dictkeys_nentries;
    o->dictkeys_indices = g->dictkeys_indices;
    o->dictkeys_kind_general = g->dictkeys_kind_general;
    o->dictentry_size = g->dictentry_size;
    o->dictentry_key = g->dictentry_key;
    o->dictentry_value = g->dictentry_value;
    o->dictuentry_size = g->dictuentry_size;
    o->dictuentry_key = g->dictuentry_key;
    o->dictuentry_value = g->dictuentry_value;
    o->dictvalues_values = g->dictvalues_values;
    o->dictvalues_valid = g->dictvalues_valid;
    o->long_size = -1;
    o->long_tag = i64(d->long_object.lv_tag);
    o->long_tag_shift = g->long_tag_shift;
    o->long_digits = i64(d->long_object.ob_digit);
    o->long_shift = g->long_shift;
    o->long_digit_size = g->long_digit_size;
    o->type_size = i64(d->type_object.size);
    o->type_basicsize = g->type_basicsize;
    o->type_dictoffset = g->type_dictoffset;
    o->type_flags = i64(d->type_object.tp_flags);
    /* PyHeapTypeObject = PyTypeObject, the method suites, ht_name, ht_slots, ht_qualname,
     * ht_cached_keys: keep the generated distance from the end of PyTypeObject. */
    o->heaptype_cached_keys = g->heaptype_cached_keys - g->type_size + o->type_size;
    o->type_flag_managed_dict = g->type_flag_managed_dict;
    o->type_flag_inline_values = g->type_flag_inline_values;
    o->object_managed_dict_before = g->object_managed_dict_before;
    o->object_managed_values_before = -1;
    o->object_dict_values_tag = -1;
}

static void fill(const dbg314_t *d, int minor, const pystate_layout_t *g, pystate_layout_t *o)
{
    const struct dbg_interp14 *i = &d->interpreter_state;

    memset(o, 0, sizeof *o);
    o->major = 3;
    o->minor = minor;
    o->unicode_style = PYSTATE_UNICODE_312;
    o->frame_style = PYSTATE_FRAMES_313;
    o->linetable_style = PYSTATE_LOCATIONS_311;

    o->runtime_size = i64(d->runtime_state.size);
    o->runtime_interpreters_head = i64(d->runtime_state.interpreters_head);
    o->runtime_interpreters_main = i64(d->runtime_state.interpreters_head) + DBG_PTR;
    o->runtime_tstate_current = -1;
    o->runtime_finalizing = i64(d->runtime_state.finalizing);
    o->runtime_gil = -1;
    o->gil_locked = i64(i->gil_runtime_state_locked - i->gil_runtime_state);
    o->gil_last_holder = i64(i->gil_runtime_state_holder - i->gil_runtime_state);

    o->interp_size = i64(i->size);
    o->interp_next = i64(i->next);
    o->interp_tstate_head = i64(i->threads_head);
    o->interp_id = i64(i->id);
    o->interp_gil_ptr = i64(i->ceval_gil);
    o->interp_modules = i64(i->imports_modules);

    o->tstate_size = i64(d->thread_state.size);
    o->tstate_prev = i64(d->thread_state.prev);
    o->tstate_next = i64(d->thread_state.next);
    o->tstate_interp = i64(d->thread_state.interp);
    o->tstate_frame = i64(d->thread_state.current_frame);
    o->cframe_current_frame = -1;
    o->tstate_thread_id = i64(d->thread_state.thread_id);
    o->tstate_native_thread_id = i64(d->thread_state.native_thread_id);
    o->tstate_datastack_chunk = i64(d->thread_state.datastack_chunk);

    o->chunk_previous = g->chunk_previous;
    o->chunk_size = g->chunk_size;
    o->chunk_top = g->chunk_top;
    o->chunk_data = g->chunk_data;

    o->frame_back = o->frame_code = o->frame_lasti = o->frame_lineno = -1;

    o->iframe_code = i64(d->interpreter_frame.executable);
    o->iframe_previous = i64(d->interpreter_frame.previous);
    o->iframe_instr = i64(d->interpreter_frame.instr_ptr);
    o->iframe_owner = i64(d->interpreter_frame.owner);
    o->iframe_is_entry = -1;
    o->iframe_localsplus = i64(d->interpreter_frame.localsplus);

    o->code_size = i64(d->code_object.size);
    o->code_filename = i64(d->code_object.filename);
    o->code_name = i64(d->code_object.name);
    o->code_qualname = i64(d->code_object.qualname);
    o->code_firstlineno = i64(d->code_object.firstlineno);
    o->code_linetable = i64(d->code_object.linetable);
    o->code_code = -1;
    o->code_adaptive = i64(d->code_object.co_code_adaptive);
    o->code_size_field = i64(d->tuple_object.ob_size);

    o->object_type = i64(d->pyobject.ob_type);
    o->var_size = i64(d->tuple_object.ob_size);
    o->type_name = i64(d->type_object.tp_name);
    o->bytes_sval = i64(d->bytes_object.ob_sval);
    o->unicode_length = i64(d->unicode_object.length);
    o->unicode_state = i64(d->unicode_object.state);
    o->unicode_ascii_size = i64(d->unicode_object.asciiobject_size);
    o->unicode_compact_size = i64(d->unicode_object.asciiobject_size) + 2 * DBG_PTR;
    o->unicode_data_any = i64(d->unicode_object.size) - DBG_PTR;
    fill_names(d, g, o);
}

int pystate_debug_offsets_parse(const void *buf, size_t len, pystate_layout_t *out,
                                uint32_t *version_hex)
{
    dbg_head_t head;
    dbg313_t d313;
    dbg314_t d;
    check_t c = {1};
    pystate_layout_t tmp;
    const pystate_layout_t *g;
    size_t need;
    int minor = 0;
    int rc;

    if (!buf || !out || len < sizeof head)
        return SCRY_E_INVAL;
    memcpy(&head, buf, sizeof head);
    if (memcmp(head.cookie, "xdebugpy", sizeof head.cookie) != 0)
        return SCRY_E_CORRUPT;
    rc = check_version(head.version, &minor);
    if (rc != 0)
        return rc;
    need = pystate_debug_offsets_size((uint32_t)head.version);
    if (need == 0)
        return SCRY_E_UNSUPPORTED;
    if (len < need)
        return SCRY_E_INVAL;
    if (head.free_threaded > 1)
        return SCRY_E_CORRUPT;
    /* The walkers assume the default build (GIL, untagged frame pointers). */
    if (head.free_threaded != 0)
        return SCRY_E_UNSUPPORTED;

    if (minor == 13) {
        memcpy(&d313, buf, sizeof d313);
        widen_313(&d313, &d);
    } else {
        memcpy(&d, buf, sizeof d);
    }
    check_sizes(&c, &d, minor);
    check_runtime_interp(&c, &d, minor);
    check_thread_frame_code(&c, &d, minor);
    check_objects(&c, &d, minor);
    if (!c.ok)
        return SCRY_E_CORRUPT;

    g = pystate_layout_for(3, 13);
    if (!g)
        return SCRY_E_UNSUPPORTED;
    fill(&d, minor, g, &tmp);
    *out = tmp;
    if (version_hex)
        *version_hex = (uint32_t)head.version;
    return 0;
}

int pystate_debug_offsets_read(rmem_t *m, raddr_t runtime_addr, pystate_layout_t *out,
                               uint32_t *version_hex)
{
    unsigned char buf[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    dbg_head_t head;
    size_t need;
    int rc;

    if (!m || !out)
        return SCRY_E_INVAL;
    rc = rmem_read(m, runtime_addr, buf, sizeof head);
    if (rc != 0)
        return rc;
    memcpy(&head, buf, sizeof head);
    need = pystate_debug_offsets_size((uint32_t)head.version);
    if (need == 0 || (head.version >> 32) != 0 ||
        memcmp(head.cookie, "xdebugpy", sizeof head.cookie) != 0)
        return pystate_debug_offsets_parse(buf, sizeof head, out, version_hex);
    rc = rmem_read(m, runtime_addr + sizeof head, buf + sizeof head, need - sizeof head);
    if (rc != 0)
        return rc;
    return pystate_debug_offsets_parse(buf, need, out, version_hex);
}
