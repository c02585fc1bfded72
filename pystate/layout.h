/* layout.h - where CPython keeps what scry reads, per version.
 *
 * A pystate_layout_t is pure data: byte offsets into the interpreter's structures for
 * one minor version. For 3.6-3.12 they come from tables generated from each version's
 * own headers (pystate/gen/, output in pystate/layouts_gen.c). For 3.13+ they are read
 * from the target's _Py_DebugOffsets and validated (pystate/debug_offsets.c).
 *
 * Convention: an offset of -1 means "this version has no such field".
 */
#ifndef SCRY_PYSTATE_LAYOUT_H
#define SCRY_PYSTATE_LAYOUT_H

#include <stdint.h>

/* How the string object's 'state' bitfield is arranged. */
enum pystate_unicode_style {
    PYSTATE_UNICODE_PEP393 = 0, /* 3.3-3.11: interned:2 kind:3 compact:1 ascii:1 ready:1 */
    PYSTATE_UNICODE_312 = 1,    /* 3.12+: interned:2 kind:3 compact:1 ascii:1 static:1 */
};

/* How frames are chained. */
enum pystate_frame_style {
    PYSTATE_FRAMES_OBJECTS = 0, /* <= 3.10: PyFrameObject chain, tstate->frame */
    PYSTATE_FRAMES_311 =
        1, /* 3.11: _PyInterpreterFrame via tstate->cframe->current_frame, is_entry */
    PYSTATE_FRAMES_312 = 2, /* 3.12: via tstate->cframe->current_frame, owner field */
    PYSTATE_FRAMES_313 = 3, /* 3.13+: tstate->current_frame, f_executable, instr_ptr */
};

/* How code objects map instruction offsets to lines. */
enum pystate_linetable_style {
    PYSTATE_LNOTAB = 0,        /* <= 3.9: co_lnotab (byte increments, signed line deltas 3.8+) */
    PYSTATE_LINETABLE_310 = 1, /* 3.10: co_linetable (PEP 626) */
    PYSTATE_LOCATIONS_311 = 2, /* 3.11+: co_linetable location table (PEP 657) */
};

typedef struct pystate_layout {
    int major, minor;
    uint8_t unicode_style;   /* enum pystate_unicode_style */
    uint8_t frame_style;     /* enum pystate_frame_style */
    uint8_t linetable_style; /* enum pystate_linetable_style */

    /* _PyRuntimeState (3.7+); all -1 on 3.6 (which uses interp_head/_PyThreadState_Current). */
    int64_t runtime_size;              /* sizeof(_PyRuntimeState), for validation */
    int64_t runtime_interpreters_head; /* offsetof(_PyRuntimeState, interpreters.head) */
    int64_t runtime_interpreters_main; /* offsetof(_PyRuntimeState, interpreters.main) */
    int64_t runtime_tstate_current;    /* gilstate.tstate_current (3.7-3.11), else -1 */
    int64_t runtime_gil; /* offsetof(_PyRuntimeState, ceval.gil) (3.7-3.11), else -1 */

    /* struct _gil_runtime_state (3.7+; -1 on 3.6) */
    int64_t gil_locked;      /* offsetof(struct _gil_runtime_state, locked) */
    int64_t gil_last_holder; /* offsetof(struct _gil_runtime_state, last_holder) */

    /* PyInterpreterState */
    int64_t interp_size;
    int64_t interp_next;
    int64_t interp_tstate_head; /* tstate_head (<=3.10) or threads.head (3.11+) */
    int64_t interp_id;          /* -1 on 3.6 */
    int64_t
        interp_gil_ptr; /* 3.12+: offsetof(PyInterpreterState, ceval.gil) (a pointer), else -1 */
    int64_t
        interp_modules; /* offsetof(PyInterpreterState, modules) (sys.modules dict), -1 if absent */

    /* PyThreadState */
    int64_t tstate_size;
    int64_t tstate_prev;
    int64_t tstate_next;
    int64_t tstate_interp;
    int64_t tstate_frame;         /* <=3.10 frame; 3.11/3.12 cframe (pointer); 3.13 current_frame */
    int64_t cframe_current_frame; /* 3.11/3.12: offsetof(_PyCFrame, current_frame), else -1 */
    int64_t tstate_thread_id;     /* pthread_t */
    int64_t tstate_native_thread_id; /* 3.11+ (the field is new in 3.11), else -1 */
    int64_t tstate_datastack_chunk;  /* 3.11+, else -1 */

    /* _PyStackChunk (3.11+, else -1) */
    int64_t chunk_previous;
    int64_t chunk_size;
    int64_t chunk_top;
    int64_t chunk_data;

    /* PyFrameObject (<= 3.10) */
    int64_t frame_back;
    int64_t frame_code;
    int64_t frame_lasti;  /* int; byte offset <= 3.9, instruction index (x2 for bytes) in 3.10 */
    int64_t frame_lineno; /* int */
    int64_t frame_localsplus; /* <= 3.10: offsetof(PyFrameObject, f_localsplus), else -1 */

    /* _PyInterpreterFrame (3.11+, else -1) */
    int64_t iframe_code; /* f_code (3.11/3.12) or f_executable (3.13+) */
    int64_t iframe_previous;
    int64_t iframe_instr;    /* prev_instr (3.11/3.12) or instr_ptr (3.13+): a code unit pointer */
    int64_t iframe_owner;    /* char owner (3.11+) */
    int64_t iframe_is_entry; /* bool is_entry (3.11 only), else -1 */
    int64_t iframe_localsplus; /* offsetof(_PyInterpreterFrame, localsplus) = its fixed size */

    /* PyCodeObject */
    int64_t code_size; /* sizeof(PyCodeObject) (without the trailing bytecode) */
    int64_t code_filename;
    int64_t code_name;
    int64_t code_qualname;    /* 3.11+, else -1 */
    int64_t code_firstlineno; /* int */
    int64_t code_linetable;   /* co_lnotab (<=3.9) or co_linetable (3.10+): a bytes object */
    int64_t code_code;        /* co_code bytes object (<=3.10), else -1 */
    int64_t code_adaptive;    /* 3.11+: offsetof(PyCodeObject, co_code_adaptive), else -1 */
    int64_t code_size_field;  /* 3.11+: Py_SIZE(code) counts code units (ob_size offset), else -1 */
    /* Locals (scry dump --locals): argument counts (int), flags (int), slot names */
    int64_t code_argcount;        /* co_argcount */
    int64_t code_posonlyargcount; /* co_posonlyargcount (3.8+), else -1 */
    int64_t code_kwonlyargcount;  /* co_kwonlyargcount */
    int64_t code_flags;           /* co_flags (CO_VARARGS 0x4, CO_VARKEYWORDS 0x8) */
    int64_t code_nlocals;         /* co_nlocals (<= 3.10: varnames only), else -1 */
    int64_t code_varnames;        /* co_varnames tuple (<= 3.10), else -1 */
    int64_t code_cellvars;        /* co_cellvars tuple (<= 3.10; slots after varnames), else -1 */
    int64_t code_freevars;        /* co_freevars tuple (<= 3.10; slots after cellvars), else -1 */
    int64_t code_localsplusnames; /* co_localsplusnames tuple (3.11+), else -1 */
    int64_t code_localspluskinds; /* co_localspluskinds bytes (3.11+; CO_FAST_* per slot) */

    /* Objects */
    int64_t object_type;          /* offsetof(PyObject, ob_type) */
    int64_t var_size;             /* offsetof(PyVarObject, ob_size) */
    int64_t type_name;            /* offsetof(PyTypeObject, tp_name) (char *) */
    int64_t bytes_sval;           /* offsetof(PyBytesObject, ob_sval) */
    int64_t unicode_length;       /* offsetof(PyASCIIObject, length) */
    int64_t unicode_state;        /* offsetof(PyASCIIObject, state) (a 32-bit bitfield word) */
    int64_t unicode_ascii_size;   /* sizeof(PyASCIIObject): data of compact ASCII follows */
    int64_t unicode_compact_size; /* sizeof(PyCompactUnicodeObject): data of compact non-ASCII */
    int64_t unicode_data_any;     /* offsetof(PyUnicodeObject, data.any): non-compact strings */

    /* Dicts, instance attributes and ints: what pystate/threadnames.c walks to read
     * sys.modules['threading']._active and each Thread's _name. */
    /* PyDictObject */
    int64_t dict_keys;   /* offsetof(PyDictObject, ma_keys) (PyDictKeysObject *) */
    int64_t dict_values; /* offsetof(PyDictObject, ma_values): NULL unless a split table */
    /* PyDictKeysObject (<= 3.10 from Objects/dict-common.h, 3.11+ pycore_dict.h). The index
     * table starts at dk_indices; the entries follow it. */
    int64_t dictkeys_size;             /* dk_size (Py_ssize_t, index slots) 3.6-3.10, else -1 */
    int64_t dictkeys_log2_size;        /* dk_log2_size (uint8_t) 3.11+, else -1 */
    int64_t dictkeys_log2_index_bytes; /* dk_log2_index_bytes (uint8_t) 3.11+, else -1
                                          (<= 3.10: index width from the size, 1/2/4/8) */
    int64_t dictkeys_kind;             /* dk_kind (uint8_t) 3.11+, else -1 */
    int64_t dictkeys_nentries;     /* dk_nentries (Py_ssize_t): entries used, deleted ones too */
    int64_t dictkeys_indices;      /* offsetof(PyDictKeysObject, dk_indices) */
    int64_t dictkeys_kind_general; /* 3.11+: DICT_KEYS_GENERAL, the kind with hashed entries;
                                      the other kinds (unicode, split) use short entries */
    int64_t dictentry_size;        /* sizeof(PyDictKeyEntry) {me_hash, me_key, me_value} */
    int64_t dictentry_key;         /* offsetof(PyDictKeyEntry, me_key) */
    int64_t dictentry_value;       /* offsetof(PyDictKeyEntry, me_value) */
    int64_t dictuentry_size;   /* 3.11+: sizeof(PyDictUnicodeEntry) {me_key, me_value}, else -1 */
    int64_t dictuentry_key;    /* 3.11+: offsetof(PyDictUnicodeEntry, me_key), else -1 */
    int64_t dictuentry_value;  /* 3.11+: offsetof(PyDictUnicodeEntry, me_value), else -1 */
    int64_t dictvalues_values; /* offset of values[0] in what ma_values points to: 0 up to 3.12
                                  (a PyObject ** array, or PyDictValues.values), 8 in 3.13 */
    int64_t dictvalues_valid;  /* 3.13+: offsetof(PyDictValues, valid) (uint8_t), else -1 */
    /* PyLongObject: 30-bit digits (PyLong_SHIFT) */
    int64_t long_size;       /* <= 3.11: ob_size (signed digit count), else -1 */
    int64_t long_tag;        /* 3.12+: lv_tag = ndigits << long_tag_shift | sign (0 positive,
                                1 zero, 2 negative), else -1 */
    int64_t long_tag_shift;  /* 3.12+: _PyLong_NON_SIZE_BITS, else -1 */
    int64_t long_digits;     /* offsetof(PyLongObject, ob_digit) (long_value.ob_digit 3.12+) */
    int64_t long_shift;      /* PyLong_SHIFT: bits per digit */
    int64_t long_digit_size; /* sizeof(digit) */
    /* PyTypeObject / PyHeapTypeObject */
    int64_t type_size;               /* sizeof(PyTypeObject): PyHeapTypeObject's extras follow */
    int64_t type_basicsize;          /* offsetof(PyTypeObject, tp_basicsize) (Py_ssize_t) */
    int64_t type_dictoffset;         /* offsetof(PyTypeObject, tp_dictoffset) (Py_ssize_t) */
    int64_t type_flags;              /* offsetof(PyTypeObject, tp_flags) (unsigned long) */
    int64_t heaptype_cached_keys;    /* offsetof(PyHeapTypeObject, ht_cached_keys): shared keys */
    int64_t type_flag_managed_dict;  /* 3.11+: Py_TPFLAGS_MANAGED_DICT, else -1 */
    int64_t type_flag_inline_values; /* 3.13+: Py_TPFLAGS_INLINE_VALUES (values at
                                        object + tp_basicsize), else -1 */
    /* Managed instance dicts (3.11+): pointers stored before the object (pre-header) */
    int64_t object_managed_dict_before;   /* 3.11+: dict (3.12: dict-or-values) pointer at
                                             object - this (-MANAGED_DICT_OFFSET), else -1 */
    int64_t object_managed_values_before; /* 3.11: PyDictValues pointer at object - this,
                                             else -1 */
    int64_t object_dict_values_tag;       /* 3.12: the slot holds (values - 1) | this bit
                                             when it holds values, else -1 */
    /* Containers and scalars shown by scry dump --locals */
    int64_t float_fval;  /* offsetof(PyFloatObject, ob_fval) (double) */
    int64_t tuple_items; /* offsetof(PyTupleObject, ob_item) */
    int64_t list_items;  /* offsetof(PyListObject, ob_item) (PyObject **) */
    int64_t dict_used;   /* offsetof(PyDictObject, ma_used) (Py_ssize_t) */
    int64_t set_used;    /* offsetof(PySetObject, used) (Py_ssize_t) */
    int64_t cell_ref;    /* offsetof(PyCellObject, ob_ref) */
    /* Interpreter teardown */
    int64_t runtime_finalizing; /* 3.7+: offsetof(_PyRuntimeState, finalizing / _finalizing),
                                   the thread state running Py_Finalize (NULL before);
                                   3.6: -1 (the global _Py_Finalizing instead) */
} pystate_layout_t;

/* Returns the generated layout for MAJOR.MINOR (3.6 .. 3.12, and 3.13 as a fallback when
 * the target's _Py_DebugOffsets cannot be used), or NULL when none is known. */
const pystate_layout_t *pystate_layout_for(int major, int minor);

#endif
