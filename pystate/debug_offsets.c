/* debug_offsets.c - parse and validate the target's _Py_DebugOffsets (3.13 and newer).
 *
 * The block is char cookie[8] followed by uint64_t members. Their order is fixed per minor
 * version (stable across patch releases only) and comes from tables generated from each
 * version's own header (pystate/gen/gen_debug_offsets.py -> debug_layouts_gen.c). A block
 * is first gathered into one normalised form (a value per known member, with a flag for
 * the members the version has), then validated there: generically (every struct size in
 * (0, 1 MiB], every offset inside the struct it belongs to) and specifically for what the
 * walkers dereference (pointer members 8-aligned, integers of their width, the relations the
 * derived fields rely on). The target is the same architecture as scry (x86_64,
 * little-endian).
 */
#include "debug_offsets.h"

#include <stdio.h>
#include <string.h>

#include "debug_layouts_gen.h"
#include "scry_err.h"

#define DBG_MAX_STRUCT (1u << 20) /* no struct size or offset beyond 1 MiB */
#define DBG_PTR        8          /* pointer width on the supported targets */

typedef struct dbg_head {
    char cookie[8];
    uint64_t version;
    uint64_t free_threaded;
} dbg_head_t;

_Static_assert(sizeof(dbg_head_t) == PYSTATE_DEBUG_OFFSETS_HEADER_SIZE, "header size");

/* The normalised block: v[f] for every member f the version has (has[f] = 1). */
typedef struct dbg_block {
    const pystate_dbg_layout_t *lay;
    uint64_t v[DBGF_COUNT];
    uint8_t has[DBGF_COUNT];
} dbg_block_t;

/* Members the walkers need: every known layout has them (3.13 is the smallest). A layout
 * that lacks one cannot be read. */
static const int required[] = {
    DBGF_RUNTIME_STATE_SIZE,
    DBGF_RUNTIME_STATE_FINALIZING,
    DBGF_RUNTIME_STATE_INTERPRETERS_HEAD,
    DBGF_INTERPRETER_STATE_SIZE,
    DBGF_INTERPRETER_STATE_ID,
    DBGF_INTERPRETER_STATE_NEXT,
    DBGF_INTERPRETER_STATE_THREADS_HEAD,
    DBGF_INTERPRETER_STATE_IMPORTS_MODULES,
    DBGF_INTERPRETER_STATE_CEVAL_GIL,
    DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE,
    DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_LOCKED,
    DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_HOLDER,
    DBGF_THREAD_STATE_SIZE,
    DBGF_THREAD_STATE_PREV,
    DBGF_THREAD_STATE_NEXT,
    DBGF_THREAD_STATE_INTERP,
    DBGF_THREAD_STATE_CURRENT_FRAME,
    DBGF_THREAD_STATE_THREAD_ID,
    DBGF_THREAD_STATE_NATIVE_THREAD_ID,
    DBGF_THREAD_STATE_DATASTACK_CHUNK,
    DBGF_INTERPRETER_FRAME_SIZE,
    DBGF_INTERPRETER_FRAME_PREVIOUS,
    DBGF_INTERPRETER_FRAME_EXECUTABLE,
    DBGF_INTERPRETER_FRAME_INSTR_PTR,
    DBGF_INTERPRETER_FRAME_LOCALSPLUS,
    DBGF_INTERPRETER_FRAME_OWNER,
    DBGF_CODE_OBJECT_SIZE,
    DBGF_CODE_OBJECT_FILENAME,
    DBGF_CODE_OBJECT_NAME,
    DBGF_CODE_OBJECT_QUALNAME,
    DBGF_CODE_OBJECT_LINETABLE,
    DBGF_CODE_OBJECT_FIRSTLINENO,
    DBGF_CODE_OBJECT_CO_CODE_ADAPTIVE,
    DBGF_PYOBJECT_SIZE,
    DBGF_PYOBJECT_OB_TYPE,
    DBGF_TYPE_OBJECT_SIZE,
    DBGF_TYPE_OBJECT_TP_NAME,
    DBGF_TYPE_OBJECT_TP_FLAGS,
    DBGF_TUPLE_OBJECT_SIZE,
    DBGF_TUPLE_OBJECT_OB_SIZE,
    DBGF_DICT_OBJECT_SIZE,
    DBGF_DICT_OBJECT_MA_KEYS,
    DBGF_DICT_OBJECT_MA_VALUES,
    DBGF_LONG_OBJECT_SIZE,
    DBGF_LONG_OBJECT_LV_TAG,
    DBGF_LONG_OBJECT_OB_DIGIT,
    DBGF_BYTES_OBJECT_SIZE,
    DBGF_BYTES_OBJECT_OB_SVAL,
    DBGF_UNICODE_OBJECT_SIZE,
    DBGF_UNICODE_OBJECT_STATE,
    DBGF_UNICODE_OBJECT_LENGTH,
    DBGF_UNICODE_OBJECT_ASCIIOBJECT_SIZE,
};

static const pystate_dbg_layout_t *layout_of(int minor)
{
    for (size_t i = 0; i < PYSTATE_DBG_NLAYOUTS; i++)
        if (pystate_dbg_layouts[i].minor == minor)
            return &pystate_dbg_layouts[i];
    return NULL;
}

static const pystate_dbg_layout_t *newest(void)
{
    return &pystate_dbg_layouts[PYSTATE_DBG_NLAYOUTS - 1];
}

int pystate_debug_offsets_newest_minor(void)
{
    return newest()->minor;
}

int pystate_debug_offsets_oldest_minor(void)
{
    return pystate_dbg_layouts[0].minor;
}

size_t pystate_debug_offsets_size(uint32_t version_hex)
{
    if ((version_hex >> 24) != 3)
        return 0;
    const pystate_dbg_layout_t *l = layout_of((int)((version_hex >> 16) & 0xff));
    return l ? l->words * 8 : 0;
}

static uint64_t V(const dbg_block_t *d, int f)
{
    return d->v[f];
}

static int64_t i64(uint64_t v)
{
    return (int64_t)v; /* validated: every value is <= 1 MiB */
}

/* Member F of the block where the version has it, else GEN (the generated table's). */
static int64_t VG(const dbg_block_t *d, int f, int64_t gen)
{
    return d->has[f] ? i64(V(d, f)) : gen;
}

/* Gathers the block at BUF (at least LAY->words * 8 bytes) into *D. */
static void gather(const void *buf, const pystate_dbg_layout_t *lay, dbg_block_t *d)
{
    memset(d, 0, sizeof *d);
    d->lay = lay;
    for (int f = 0; f < DBGF_COUNT; f++) {
        int w = lay->word[f];
        if (w < 0 || (size_t)w >= lay->words)
            continue;
        memcpy(&d->v[f], (const unsigned char *)buf + 8 * (size_t)w, 8);
        d->has[f] = 1;
    }
}

/* Validation: any failed check sets ok to 0 and remembers the first member at fault. */
typedef struct check {
    int ok;
    int bad; /* DBGF_* of the first failure, -1 for a relation between members */
} check_t;

static void fail(check_t *c, int f)
{
    if (c->ok)
        c->bad = f;
    c->ok = 0;
}

/* A member of WIDTH bytes at offset V(F) lies inside a struct of SIZE bytes. */
static void need_in(check_t *c, const dbg_block_t *d, int f, uint64_t width, uint64_t size)
{
    uint64_t off = V(d, f);
    if (size > DBG_MAX_STRUCT || off > size || width > size - off)
        fail(c, f);
}

/* A pointer member: inside and 8-aligned. */
static void need_ptr(check_t *c, const dbg_block_t *d, int f, uint64_t size)
{
    need_in(c, d, f, DBG_PTR, size);
    if (V(d, f) % DBG_PTR != 0)
        fail(c, f);
}

/* An aligned integer member of WIDTH (4 or 8) bytes. */
static void need_int(check_t *c, const dbg_block_t *d, int f, uint64_t width, uint64_t size)
{
    need_in(c, d, f, width, size);
    if (V(d, f) % width != 0)
        fail(c, f);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Every member, whatever the version: sizes in (0, 1 MiB] ("size", and a "*_size" member
 * of a struct without a size of its own), other "*_size" members within 1 MiB (they are
 * sizes of other structs), offsets inside their struct (or under 1 MiB for the few structs
 * whose size the block does not give). */
static void check_generic(check_t *c, const dbg_block_t *d)
{
    for (int f = DBGF_FREE_THREADED + 1; f < DBGF_COUNT; f++) {
        if (!d->has[f])
            continue;
        int sz = pystate_dbg_field_struct_size(f);
        const char *name = pystate_dbg_field_name(f);
        if (sz == f) {
            if (V(d, f) == 0 || V(d, f) > DBG_MAX_STRUCT)
                fail(c, f);
        } else if (ends_with(name, "_size")) {
            if (V(d, f) > DBG_MAX_STRUCT)
                fail(c, f);
        } else if (sz >= 0 && d->has[sz]) {
            need_in(c, d, f, 1, V(d, sz));
        } else {
            need_in(c, d, f, 1, DBG_MAX_STRUCT);
        }
    }
}

/* What the walkers and the derived fields rely on. */
static void check_specific(check_t *c, const dbg_block_t *d)
{
    uint64_t rs = V(d, DBGF_RUNTIME_STATE_SIZE), is = V(d, DBGF_INTERPRETER_STATE_SIZE);
    uint64_t ts = V(d, DBGF_THREAD_STATE_SIZE), fs = V(d, DBGF_INTERPRETER_FRAME_SIZE);
    uint64_t cs = V(d, DBGF_CODE_OBJECT_SIZE), us = V(d, DBGF_UNICODE_OBJECT_SIZE);

    need_ptr(c, d, DBGF_RUNTIME_STATE_FINALIZING, rs);
    need_ptr(c, d, DBGF_RUNTIME_STATE_INTERPRETERS_HEAD, rs);
    /* interpreters.main (derived) follows head */
    if (V(d, DBGF_RUNTIME_STATE_INTERPRETERS_HEAD) + 2 * DBG_PTR > rs)
        fail(c, DBGF_RUNTIME_STATE_INTERPRETERS_HEAD);
    need_int(c, d, DBGF_INTERPRETER_STATE_ID, 8, is);
    need_ptr(c, d, DBGF_INTERPRETER_STATE_NEXT, is);
    need_ptr(c, d, DBGF_INTERPRETER_STATE_THREADS_HEAD, is);
    need_ptr(c, d, DBGF_INTERPRETER_STATE_IMPORTS_MODULES, is);
    need_ptr(c, d, DBGF_INTERPRETER_STATE_CEVAL_GIL, is);
    need_int(c, d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_LOCKED, 4, is);
    need_ptr(c, d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_HOLDER, is);
    if (V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_LOCKED) <
            V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE) ||
        V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_HOLDER) <
            V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE))
        fail(c, -1);

    need_ptr(c, d, DBGF_THREAD_STATE_PREV, ts);
    need_ptr(c, d, DBGF_THREAD_STATE_NEXT, ts);
    need_ptr(c, d, DBGF_THREAD_STATE_INTERP, ts);
    need_ptr(c, d, DBGF_THREAD_STATE_CURRENT_FRAME, ts);
    need_int(c, d, DBGF_THREAD_STATE_THREAD_ID, 8, ts);
    need_int(c, d, DBGF_THREAD_STATE_NATIVE_THREAD_ID, 8, ts);
    need_ptr(c, d, DBGF_THREAD_STATE_DATASTACK_CHUNK, ts);
    if (d->has[DBGF_THREAD_STATE_HOLDS_GIL])
        need_in(c, d, DBGF_THREAD_STATE_HOLDS_GIL, 4, ts);

    need_ptr(c, d, DBGF_INTERPRETER_FRAME_PREVIOUS, fs);
    need_ptr(c, d, DBGF_INTERPRETER_FRAME_EXECUTABLE, fs);
    need_ptr(c, d, DBGF_INTERPRETER_FRAME_INSTR_PTR, fs);
    need_in(c, d, DBGF_INTERPRETER_FRAME_LOCALSPLUS, 0, fs);

    need_ptr(c, d, DBGF_CODE_OBJECT_FILENAME, cs);
    need_ptr(c, d, DBGF_CODE_OBJECT_NAME, cs);
    need_ptr(c, d, DBGF_CODE_OBJECT_QUALNAME, cs);
    need_ptr(c, d, DBGF_CODE_OBJECT_LINETABLE, cs);
    need_int(c, d, DBGF_CODE_OBJECT_FIRSTLINENO, 4, cs);
    need_in(c, d, DBGF_CODE_OBJECT_CO_CODE_ADAPTIVE, 2, cs);
    if (d->has[DBGF_CODE_OBJECT_ARGCOUNT])
        need_int(c, d, DBGF_CODE_OBJECT_ARGCOUNT, 4, cs);
    if (d->has[DBGF_CODE_OBJECT_LOCALSPLUSNAMES])
        need_ptr(c, d, DBGF_CODE_OBJECT_LOCALSPLUSNAMES, cs);
    if (d->has[DBGF_CODE_OBJECT_LOCALSPLUSKINDS])
        need_ptr(c, d, DBGF_CODE_OBJECT_LOCALSPLUSKINDS, cs);
    /* dump --locals reads these scalars and item arrays */
    if (d->has[DBGF_FLOAT_OBJECT_OB_FVAL])
        need_int(c, d, DBGF_FLOAT_OBJECT_OB_FVAL, 8, V(d, DBGF_FLOAT_OBJECT_SIZE));
    if (d->has[DBGF_TUPLE_OBJECT_OB_ITEM])
        need_ptr(c, d, DBGF_TUPLE_OBJECT_OB_ITEM, V(d, DBGF_TUPLE_OBJECT_SIZE));
    if (d->has[DBGF_LIST_OBJECT_OB_ITEM])
        need_ptr(c, d, DBGF_LIST_OBJECT_OB_ITEM, V(d, DBGF_LIST_OBJECT_SIZE));
    if (d->has[DBGF_SET_OBJECT_USED])
        need_int(c, d, DBGF_SET_OBJECT_USED, 8, V(d, DBGF_SET_OBJECT_SIZE));

    need_ptr(c, d, DBGF_PYOBJECT_OB_TYPE, V(d, DBGF_PYOBJECT_SIZE));
    need_ptr(c, d, DBGF_TYPE_OBJECT_TP_NAME, V(d, DBGF_TYPE_OBJECT_SIZE));
    need_int(c, d, DBGF_TYPE_OBJECT_TP_FLAGS, 8, V(d, DBGF_TYPE_OBJECT_SIZE));
    if (d->has[DBGF_TYPE_OBJECT_TP_BASICSIZE])
        need_int(c, d, DBGF_TYPE_OBJECT_TP_BASICSIZE, 8, V(d, DBGF_TYPE_OBJECT_SIZE));
    if (d->has[DBGF_TYPE_OBJECT_TP_DICTOFFSET])
        need_int(c, d, DBGF_TYPE_OBJECT_TP_DICTOFFSET, 8, V(d, DBGF_TYPE_OBJECT_SIZE));
    if (d->has[DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS]) {
        need_ptr(c, d, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS, V(d, DBGF_HEAP_TYPE_OBJECT_SIZE));
        if (V(d, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS) < V(d, DBGF_TYPE_OBJECT_SIZE))
            fail(c, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS);
    }
    need_int(c, d, DBGF_TUPLE_OBJECT_OB_SIZE, 8, V(d, DBGF_TUPLE_OBJECT_SIZE));
    need_ptr(c, d, DBGF_DICT_OBJECT_MA_KEYS, V(d, DBGF_DICT_OBJECT_SIZE));
    need_ptr(c, d, DBGF_DICT_OBJECT_MA_VALUES, V(d, DBGF_DICT_OBJECT_SIZE));
    need_int(c, d, DBGF_LONG_OBJECT_LV_TAG, 8, V(d, DBGF_LONG_OBJECT_SIZE));
    need_int(c, d, DBGF_LONG_OBJECT_OB_DIGIT, 4, V(d, DBGF_LONG_OBJECT_SIZE));
    need_in(c, d, DBGF_BYTES_OBJECT_OB_SVAL, 1, V(d, DBGF_BYTES_OBJECT_SIZE));
    need_in(c, d, DBGF_UNICODE_OBJECT_STATE, 4, us);
    need_int(c, d, DBGF_UNICODE_OBJECT_LENGTH, 8, us);
    need_in(c, d, DBGF_UNICODE_OBJECT_ASCIIOBJECT_SIZE, 0, us);
    /* What the derived unicode fields rely on: PyCompactUnicodeObject = PyASCIIObject +
     * utf8_length + utf8, and PyUnicodeObject = that + the data union. */
    uint64_t as = V(d, DBGF_UNICODE_OBJECT_ASCIIOBJECT_SIZE);
    if (as == 0 || us != as + 3 * DBG_PTR || V(d, DBGF_UNICODE_OBJECT_STATE) >= as ||
        V(d, DBGF_UNICODE_OBJECT_LENGTH) >= as)
        fail(c, DBGF_UNICODE_OBJECT_SIZE);
    if (d->has[DBGF_UNICODE_OBJECT_COMPACTUNICODEOBJECT_SIZE] &&
        V(d, DBGF_UNICODE_OBJECT_COMPACTUNICODEOBJECT_SIZE) != as + 2 * DBG_PTR)
        fail(c, DBGF_UNICODE_OBJECT_COMPACTUNICODEOBJECT_SIZE);
    /* PyObject_VAR_HEAD: ob_size follows the PyObject header (var_size, code_size_field) */
    if (V(d, DBGF_TUPLE_OBJECT_OB_SIZE) != V(d, DBGF_PYOBJECT_SIZE) ||
        (d->has[DBGF_LIST_OBJECT_OB_SIZE] &&
         V(d, DBGF_LIST_OBJECT_OB_SIZE) != V(d, DBGF_PYOBJECT_SIZE)))
        fail(c, DBGF_TUPLE_OBJECT_OB_SIZE);

    if (d->has[DBGF_LLIST_NODE_NEXT]) {
        need_ptr(c, d, DBGF_LLIST_NODE_NEXT, 2 * DBG_PTR);
        need_ptr(c, d, DBGF_LLIST_NODE_PREV, 2 * DBG_PTR);
    }
    if (d->has[DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER]) {
        need_in(c, d, DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER, 1, ts);
        need_in(c, d, DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGER_SUPPORT, 1, ts);
        need_in(c, d, DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGING_ENABLED, 1, is);
    }
    if (d->has[DBGF_THREAD_STATE_EXC_STATE])
        need_ptr(c, d, DBGF_THREAD_STATE_EXC_STATE, ts);
}

/* The dict, int and type fields the thread-name reader needs (pystate/threadnames.c): from
 * the block where it has them, else the generated values (see debug_offsets.h). */
static void fill_names(const dbg_block_t *d, const pystate_layout_t *g, pystate_layout_t *o)
{
    o->dict_keys = i64(V(d, DBGF_DICT_OBJECT_MA_KEYS));
    o->dict_values = i64(V(d, DBGF_DICT_OBJECT_MA_VALUES));
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
    o->long_tag = i64(V(d, DBGF_LONG_OBJECT_LV_TAG));
    o->long_tag_shift = g->long_tag_shift;
    o->long_digits = i64(V(d, DBGF_LONG_OBJECT_OB_DIGIT));
    o->long_shift = g->long_shift;
    o->long_digit_size = g->long_digit_size;
    o->type_size = i64(V(d, DBGF_TYPE_OBJECT_SIZE));
    o->type_basicsize = VG(d, DBGF_TYPE_OBJECT_TP_BASICSIZE, g->type_basicsize);
    o->type_dictoffset = VG(d, DBGF_TYPE_OBJECT_TP_DICTOFFSET, g->type_dictoffset);
    o->type_flags = i64(V(d, DBGF_TYPE_OBJECT_TP_FLAGS));
    /* PyHeapTypeObject = PyTypeObject, the method suites, ht_name, ht_slots, ht_qualname,
     * ht_cached_keys: from the block (3.15+), else the generated distance from the end of
     * PyTypeObject. */
    o->heaptype_cached_keys = VG(d, DBGF_HEAP_TYPE_OBJECT_HT_CACHED_KEYS,
                                 g->heaptype_cached_keys - g->type_size + o->type_size);
    o->type_flag_managed_dict = g->type_flag_managed_dict;
    /* dump --locals: from the block where it has the member, else the generated table */
    o->code_argcount = VG(d, DBGF_CODE_OBJECT_ARGCOUNT, g->code_argcount);
    o->code_localsplusnames = VG(d, DBGF_CODE_OBJECT_LOCALSPLUSNAMES, g->code_localsplusnames);
    o->code_localspluskinds = VG(d, DBGF_CODE_OBJECT_LOCALSPLUSKINDS, g->code_localspluskinds);
    o->code_posonlyargcount = g->code_posonlyargcount;
    o->code_kwonlyargcount = g->code_kwonlyargcount;
    o->code_flags = g->code_flags;
    o->code_nlocals = o->code_varnames = o->code_cellvars = o->code_freevars = -1;
    o->frame_localsplus = -1;
    o->float_fval = VG(d, DBGF_FLOAT_OBJECT_OB_FVAL, g->float_fval);
    o->tuple_items = VG(d, DBGF_TUPLE_OBJECT_OB_ITEM, g->tuple_items);
    o->list_items = VG(d, DBGF_LIST_OBJECT_OB_ITEM, g->list_items);
    o->dict_used = g->dict_used;
    o->set_used = VG(d, DBGF_SET_OBJECT_USED, g->set_used);
    o->cell_ref = g->cell_ref;
    o->type_flag_inline_values = g->type_flag_inline_values;
    o->object_managed_dict_before = g->object_managed_dict_before;
    o->object_managed_values_before = -1;
    o->object_dict_values_tag = -1;
}

static void fill(const dbg_block_t *d, int minor, const pystate_layout_t *g, pystate_layout_t *o)
{
    uint64_t gil = V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE);

    memset(o, 0, sizeof *o);
    o->major = 3;
    o->minor = minor;
    o->unicode_style = PYSTATE_UNICODE_312;
    o->frame_style = PYSTATE_FRAMES_313;
    o->linetable_style = PYSTATE_LOCATIONS_311;

    o->runtime_size = i64(V(d, DBGF_RUNTIME_STATE_SIZE));
    o->runtime_interpreters_head = i64(V(d, DBGF_RUNTIME_STATE_INTERPRETERS_HEAD));
    o->runtime_interpreters_main = o->runtime_interpreters_head + DBG_PTR;
    o->runtime_tstate_current = -1;
    o->runtime_finalizing = i64(V(d, DBGF_RUNTIME_STATE_FINALIZING));
    o->runtime_gil = -1;
    o->gil_locked = i64(V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_LOCKED) - gil);
    o->gil_last_holder = i64(V(d, DBGF_INTERPRETER_STATE_GIL_RUNTIME_STATE_HOLDER) - gil);

    o->interp_size = i64(V(d, DBGF_INTERPRETER_STATE_SIZE));
    o->interp_next = i64(V(d, DBGF_INTERPRETER_STATE_NEXT));
    o->interp_tstate_head = i64(V(d, DBGF_INTERPRETER_STATE_THREADS_HEAD));
    o->interp_id = i64(V(d, DBGF_INTERPRETER_STATE_ID));
    o->interp_gil_ptr = i64(V(d, DBGF_INTERPRETER_STATE_CEVAL_GIL));
    o->interp_modules = i64(V(d, DBGF_INTERPRETER_STATE_IMPORTS_MODULES));

    o->tstate_size = i64(V(d, DBGF_THREAD_STATE_SIZE));
    o->tstate_prev = i64(V(d, DBGF_THREAD_STATE_PREV));
    o->tstate_next = i64(V(d, DBGF_THREAD_STATE_NEXT));
    o->tstate_interp = i64(V(d, DBGF_THREAD_STATE_INTERP));
    o->tstate_frame = i64(V(d, DBGF_THREAD_STATE_CURRENT_FRAME));
    o->cframe_current_frame = -1;
    o->tstate_thread_id = i64(V(d, DBGF_THREAD_STATE_THREAD_ID));
    o->tstate_native_thread_id = i64(V(d, DBGF_THREAD_STATE_NATIVE_THREAD_ID));
    o->tstate_datastack_chunk = i64(V(d, DBGF_THREAD_STATE_DATASTACK_CHUNK));

    o->chunk_previous = g->chunk_previous;
    o->chunk_size = g->chunk_size;
    o->chunk_top = g->chunk_top;
    o->chunk_data = g->chunk_data;

    o->frame_back = o->frame_code = o->frame_lasti = o->frame_lineno = -1;

    o->iframe_code = i64(V(d, DBGF_INTERPRETER_FRAME_EXECUTABLE));
    o->iframe_previous = i64(V(d, DBGF_INTERPRETER_FRAME_PREVIOUS));
    o->iframe_instr = i64(V(d, DBGF_INTERPRETER_FRAME_INSTR_PTR));
    o->iframe_owner = i64(V(d, DBGF_INTERPRETER_FRAME_OWNER));
    o->iframe_is_entry = -1;
    o->iframe_localsplus = i64(V(d, DBGF_INTERPRETER_FRAME_LOCALSPLUS));

    o->code_size = i64(V(d, DBGF_CODE_OBJECT_SIZE));
    o->code_filename = i64(V(d, DBGF_CODE_OBJECT_FILENAME));
    o->code_name = i64(V(d, DBGF_CODE_OBJECT_NAME));
    o->code_qualname = i64(V(d, DBGF_CODE_OBJECT_QUALNAME));
    o->code_firstlineno = i64(V(d, DBGF_CODE_OBJECT_FIRSTLINENO));
    o->code_linetable = i64(V(d, DBGF_CODE_OBJECT_LINETABLE));
    o->code_code = -1;
    o->code_adaptive = i64(V(d, DBGF_CODE_OBJECT_CO_CODE_ADAPTIVE));
    o->code_size_field = i64(V(d, DBGF_TUPLE_OBJECT_OB_SIZE));

    o->object_type = i64(V(d, DBGF_PYOBJECT_OB_TYPE));
    o->var_size = i64(V(d, DBGF_TUPLE_OBJECT_OB_SIZE));
    o->type_name = i64(V(d, DBGF_TYPE_OBJECT_TP_NAME));
    o->bytes_sval = i64(V(d, DBGF_BYTES_OBJECT_OB_SVAL));
    o->unicode_length = i64(V(d, DBGF_UNICODE_OBJECT_LENGTH));
    o->unicode_state = i64(V(d, DBGF_UNICODE_OBJECT_STATE));
    o->unicode_ascii_size = i64(V(d, DBGF_UNICODE_OBJECT_ASCIIOBJECT_SIZE));
    o->unicode_compact_size = o->unicode_ascii_size + 2 * DBG_PTR;
    o->unicode_data_any = i64(V(d, DBGF_UNICODE_OBJECT_SIZE)) - DBG_PTR;
    fill_names(d, g, o);
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
    *minor = (int)mnr;
    return 0;
}

/* The layout to read a block of MINOR (at release LEVEL) with: its own when known (rc and
 * final only: the block changes during alphas and betas), else the newest when
 * ASSUME_MINOR names it and MINOR is newer; NULL when there is none. */
static const pystate_dbg_layout_t *choose(int minor, unsigned level, int assume_minor)
{
    const pystate_dbg_layout_t *own = layout_of(minor);
    if (own && level >= 0xc)
        return own;
    if (assume_minor > 0 && assume_minor == newest()->minor && minor > assume_minor)
        return newest();
    return NULL;
}

int pystate_debug_offsets_parse_as(const void *buf, size_t len, int assume_minor,
                                   pystate_layout_t *out, uint32_t *version_hex, char *why,
                                   size_t whylen)
{
    dbg_head_t head;
    static dbg_block_t zero;
    dbg_block_t d = zero;
    check_t c = {1, -1};
    pystate_layout_t tmp;
    const pystate_layout_t *g;
    const pystate_dbg_layout_t *lay;
    int minor = 0;
    int rc;

    if (why && whylen)
        why[0] = '\0';
    if (!buf || !out || len < sizeof head)
        return SCRY_E_INVAL;
    memcpy(&head, buf, sizeof head);
    if (memcmp(head.cookie, "xdebugpy", sizeof head.cookie) != 0) {
        if (why && whylen)
            snprintf(why, whylen, "no xdebugpy cookie");
        return SCRY_E_CORRUPT;
    }
    rc = check_version(head.version, &minor);
    if (rc != 0) {
        if (why && whylen)
            snprintf(why, whylen, "nonsense version 0x%llx", (unsigned long long)head.version);
        return rc;
    }
    lay = choose(minor, (unsigned)(head.version >> 4) & 0xf, assume_minor);
    if (!lay) {
        if (why && whylen)
            snprintf(why, whylen, "no block layout for 3.%d%s (known: 3.%d to 3.%d)", minor,
                     layout_of(minor) ? " pre-releases" : "", pystate_dbg_layouts[0].minor,
                     newest()->minor);
        return SCRY_E_UNSUPPORTED;
    }
    if (len < lay->words * 8)
        return SCRY_E_INVAL;
    if (head.free_threaded > 1) {
        if (why && whylen)
            snprintf(why, whylen, "free_threaded is %llu", (unsigned long long)head.free_threaded);
        return SCRY_E_CORRUPT;
    }
    /* The walkers assume the default build (GIL, untagged frame pointers). */
    if (head.free_threaded != 0) {
        if (why && whylen)
            snprintf(why, whylen, "a free-threaded build");
        return SCRY_E_UNSUPPORTED;
    }
    gather(buf, lay, &d);
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (!d.has[required[i]]) {
            if (why && whylen)
                snprintf(why, whylen, "the 3.%d block has no %s", lay->minor,
                         pystate_dbg_field_name(required[i]));
            return SCRY_E_UNSUPPORTED;
        }
    }
    check_generic(&c, &d);
    check_specific(&c, &d);
    if (!c.ok) {
        if (why && whylen) {
            if (c.bad >= 0)
                snprintf(why, whylen, "%s = %llu is out of bounds", pystate_dbg_field_name(c.bad),
                         (unsigned long long)d.v[c.bad]);
            else
                snprintf(why, whylen, "inconsistent GIL offsets");
        }
        return SCRY_E_CORRUPT;
    }

    g = pystate_layout_for(3, lay->minor);
    if (!g)
        g = pystate_layout_for(3, 13);
    if (!g)
        return SCRY_E_UNSUPPORTED;
    fill(&d, minor, g, &tmp);
    *out = tmp;
    if (version_hex)
        *version_hex = (uint32_t)head.version;
    return 0;
}

int pystate_debug_offsets_parse(const void *buf, size_t len, pystate_layout_t *out,
                                uint32_t *version_hex)
{
    return pystate_debug_offsets_parse_as(buf, len, 0, out, version_hex, NULL, 0);
}

/* Reads the block at RUNTIME_ADDR into BUF (PYSTATE_DEBUG_OFFSETS_MAX_SIZE bytes): the
 * header, then as much as its version (or ASSUME_MINOR) needs. Sets *LEN to the bytes read
 * (only the header when the version has no known layout). Returns 0 or a read error. */
static int read_block(rmem_t *m, raddr_t runtime_addr, int assume_minor, unsigned char *buf,
                      size_t *len)
{
    dbg_head_t head;
    size_t need = 0;
    int rc = rmem_read(m, runtime_addr, buf, sizeof head);
    if (rc != 0)
        return rc;
    memcpy(&head, buf, sizeof head);
    if ((head.version >> 24) == 3 && (head.version >> 32) == 0 &&
        memcmp(head.cookie, "xdebugpy", sizeof head.cookie) == 0) {
        int minor = (int)((head.version >> 16) & 0xff);
        const pystate_dbg_layout_t *lay =
            choose(minor, (unsigned)(head.version >> 4) & 0xf, assume_minor);
        need = lay ? lay->words * 8 : 0;
    }
    *len = sizeof head;
    if (need == 0 || need > PYSTATE_DEBUG_OFFSETS_MAX_SIZE)
        return 0;
    rc = rmem_read(m, runtime_addr + sizeof head, buf + sizeof head, need - sizeof head);
    if (rc != 0)
        return rc;
    *len = need;
    return 0;
}

int pystate_debug_offsets_read_as(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                  pystate_layout_t *out, uint32_t *version_hex, char *why,
                                  size_t whylen)
{
    unsigned char buf[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    size_t len = 0;
    if (!m || !out)
        return SCRY_E_INVAL;
    int rc = read_block(m, runtime_addr, assume_minor, buf, &len);
    if (rc != 0)
        return rc;
    return pystate_debug_offsets_parse_as(buf, len, assume_minor, out, version_hex, why, whylen);
}

/* Parses the block at BUF (LEN bytes) as pystate_debug_offsets_parse_as does into *LAY and
 * gathers its members into *D; SCRY_E_UNSUPPORTED when one of the N members NEED is not in
 * the version's block. Returns 0 or a negative code. */
static int gather_needed(const void *buf, size_t len, int assume_minor, const int *need, size_t n,
                         pystate_layout_t *lay, dbg_block_t *d)
{
    uint32_t hex = 0;
    dbg_head_t head;
    int rc = pystate_debug_offsets_parse_as(buf, len, assume_minor, lay, &hex, NULL, 0);
    if (rc != 0)
        return rc;
    memcpy(&head, buf, sizeof head);
    const pystate_dbg_layout_t *l = choose((int)((head.version >> 16) & 0xff),
                                           (unsigned)(head.version >> 4) & 0xf, assume_minor);
    if (!l || len < l->words * 8)
        return SCRY_E_INVAL;
    gather(buf, l, d);
    for (size_t i = 0; i < n; i++)
        if (!d->has[need[i]])
            return SCRY_E_UNSUPPORTED;
    return 0;
}

int pystate_debug_offsets_parse_async(const void *buf, size_t len, int assume_minor,
                                      pystate_dbg_async_t *out)
{
    static const int need[] = {
        DBGF_GEN_OBJECT_SIZE,           DBGF_GEN_OBJECT_GI_IFRAME,
        DBGF_GEN_OBJECT_GI_FRAME_STATE, DBGF_INTERPRETER_FRAME_STACKPOINTER,
        DBGF_SET_OBJECT_SIZE,           DBGF_SET_OBJECT_USED,
        DBGF_SET_OBJECT_TABLE,          DBGF_SET_OBJECT_MASK,
        DBGF_LLIST_NODE_NEXT,           DBGF_LLIST_NODE_PREV,
    };
    pystate_layout_t lay;
    static dbg_block_t zero;
    dbg_block_t d = zero;
    check_t c = {1, -1};
    if (!out)
        return SCRY_E_INVAL;
    int rc = gather_needed(buf, len, assume_minor, need, sizeof need / sizeof need[0], &lay, &d);
    if (rc != 0)
        return rc;
    uint64_t gs = V(&d, DBGF_GEN_OBJECT_SIZE), ss = V(&d, DBGF_SET_OBJECT_SIZE);
    need_in(&c, &d, DBGF_GEN_OBJECT_GI_FRAME_STATE, 1, gs);
    need_ptr(&c, &d, DBGF_GEN_OBJECT_GI_IFRAME, gs);
    /* the embedded frame's fixed part lies inside the generator */
    if (V(&d, DBGF_GEN_OBJECT_GI_IFRAME) + (uint64_t)lay.iframe_localsplus > gs)
        fail(&c, DBGF_GEN_OBJECT_GI_IFRAME);
    need_ptr(&c, &d, DBGF_INTERPRETER_FRAME_STACKPOINTER, (uint64_t)lay.iframe_localsplus);
    need_int(&c, &d, DBGF_SET_OBJECT_USED, 8, ss);
    need_int(&c, &d, DBGF_SET_OBJECT_MASK, 8, ss);
    need_ptr(&c, &d, DBGF_SET_OBJECT_TABLE, ss);
    need_ptr(&c, &d, DBGF_LLIST_NODE_NEXT, 2 * DBG_PTR);
    need_ptr(&c, &d, DBGF_LLIST_NODE_PREV, 2 * DBG_PTR);
    if (!c.ok || gs > DBG_MAX_STRUCT || ss > DBG_MAX_STRUCT)
        return SCRY_E_CORRUPT;
    out->gen_size = i64(gs);
    out->gen_iframe = i64(V(&d, DBGF_GEN_OBJECT_GI_IFRAME));
    out->gen_frame_state = i64(V(&d, DBGF_GEN_OBJECT_GI_FRAME_STATE));
    out->iframe_stackpointer = i64(V(&d, DBGF_INTERPRETER_FRAME_STACKPOINTER));
    out->set_size = i64(ss);
    out->set_used = i64(V(&d, DBGF_SET_OBJECT_USED));
    out->set_table = i64(V(&d, DBGF_SET_OBJECT_TABLE));
    out->set_mask = i64(V(&d, DBGF_SET_OBJECT_MASK));
    out->llist_next = i64(V(&d, DBGF_LLIST_NODE_NEXT));
    out->llist_prev = i64(V(&d, DBGF_LLIST_NODE_PREV));
    return 0;
}

int pystate_debug_offsets_read_async(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                     pystate_dbg_async_t *out)
{
    unsigned char buf[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    size_t len = 0;
    if (!m || !out)
        return SCRY_E_INVAL;
    int rc = read_block(m, runtime_addr, assume_minor, buf, &len);
    if (rc != 0)
        return rc;
    return pystate_debug_offsets_parse_async(buf, len, assume_minor, out);
}

int pystate_debug_offsets_read(rmem_t *m, raddr_t runtime_addr, pystate_layout_t *out,
                               uint32_t *version_hex)
{
    return pystate_debug_offsets_read_as(m, runtime_addr, 0, out, version_hex, NULL, 0);
}

int pystate_debug_offsets_read_remote(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                      pystate_dbg_remote_t *out)
{
    static const int need[] = {
        DBGF_RUNTIME_STATE_INTERPRETERS_HEAD,
        DBGF_INTERPRETER_STATE_THREADS_MAIN,
        DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER,
        DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGER_SUPPORT,
        DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGING_ENABLED,
        DBGF_DEBUGGER_SUPPORT_DEBUGGER_PENDING_CALL,
        DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH,
        DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE,
    };
    unsigned char buf[PYSTATE_DEBUG_OFFSETS_MAX_SIZE];
    size_t len = 0;
    pystate_layout_t lay;
    static dbg_block_t zero;
    dbg_block_t d = zero;
    check_t c = {1, -1};
    if (!m || !out)
        return SCRY_E_INVAL;
    int rc = read_block(m, runtime_addr, assume_minor, buf, &len);
    if (rc == 0)
        rc = gather_needed(buf, len, assume_minor, need, sizeof need / sizeof need[0], &lay, &d);
    if (rc != 0)
        return rc;
    uint64_t ts = (uint64_t)lay.tstate_size, is = (uint64_t)lay.interp_size;
    uint64_t sup = V(&d, DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGER_SUPPORT);
    uint64_t pend = V(&d, DBGF_DEBUGGER_SUPPORT_DEBUGGER_PENDING_CALL);
    uint64_t path = V(&d, DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH);
    uint64_t psz = V(&d, DBGF_DEBUGGER_SUPPORT_DEBUGGER_SCRIPT_PATH_SIZE);
    need_ptr(&c, &d, DBGF_INTERPRETER_STATE_THREADS_MAIN, is);
    need_int(&c, &d, DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGING_ENABLED, 4, is);
    need_ptr(&c, &d, DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER, ts);
    /* _PyRemoteDebuggerSupport lives in _PyThreadStateImpl, past PyThreadState: bound it
     * by the largest struct this reader accepts */
    if (psz == 0 || psz > 4096 || sup > DBG_MAX_STRUCT || pend > 4096 || path > 4096 ||
        sup + pend + 4 > DBG_MAX_STRUCT || sup + path + psz > DBG_MAX_STRUCT ||
        (pend >= path && pend < path + psz) || (pend & 3))
        c.ok = 0;
    if (!c.ok)
        return SCRY_E_CORRUPT;
    out->runtime_interpreters_head = i64(V(&d, DBGF_RUNTIME_STATE_INTERPRETERS_HEAD));
    out->interp_threads_main = i64(V(&d, DBGF_INTERPRETER_STATE_THREADS_MAIN));
    out->interp_remote_enabled = i64(V(&d, DBGF_DEBUGGER_SUPPORT_REMOTE_DEBUGGING_ENABLED));
    out->tstate_eval_breaker = i64(V(&d, DBGF_DEBUGGER_SUPPORT_EVAL_BREAKER));
    out->tstate_support = i64(sup);
    out->support_pending_call = i64(pend);
    out->support_script_path = i64(path);
    out->script_path_size = i64(psz);
    return 0;
}
