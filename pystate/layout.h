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
    PYSTATE_FRAMES_311 = 1,     /* 3.11: _PyInterpreterFrame via tstate->cframe->current_frame, is_entry */
    PYSTATE_FRAMES_312 = 2,     /* 3.12: via tstate->cframe->current_frame, owner field */
    PYSTATE_FRAMES_313 = 3,     /* 3.13+: tstate->current_frame, f_executable, instr_ptr */
};

/* How code objects map instruction offsets to lines. */
enum pystate_linetable_style {
    PYSTATE_LNOTAB = 0,     /* <= 3.9: co_lnotab (byte increments, signed line deltas 3.8+) */
    PYSTATE_LINETABLE_310 = 1, /* 3.10: co_linetable (PEP 626) */
    PYSTATE_LOCATIONS_311 = 2, /* 3.11+: co_linetable location table (PEP 657) */
};

typedef struct pystate_layout {
    int major, minor;
    uint8_t unicode_style;   /* enum pystate_unicode_style */
    uint8_t frame_style;     /* enum pystate_frame_style */
    uint8_t linetable_style; /* enum pystate_linetable_style */

    /* _PyRuntimeState (3.7+); all -1 on 3.6 (which uses interp_head/_PyThreadState_Current). */
    int64_t runtime_size;                /* sizeof(_PyRuntimeState), for validation */
    int64_t runtime_interpreters_head;   /* offsetof(_PyRuntimeState, interpreters.head) */
    int64_t runtime_interpreters_main;   /* offsetof(_PyRuntimeState, interpreters.main) */
    int64_t runtime_tstate_current;      /* gilstate.tstate_current (3.7-3.11), else -1 */
    int64_t runtime_gil;                 /* offsetof(_PyRuntimeState, ceval.gil) (3.7-3.11), else -1 */

    /* struct _gil_runtime_state (3.7+; -1 on 3.6) */
    int64_t gil_locked;      /* offsetof(struct _gil_runtime_state, locked) */
    int64_t gil_last_holder; /* offsetof(struct _gil_runtime_state, last_holder) */

    /* PyInterpreterState */
    int64_t interp_size;
    int64_t interp_next;
    int64_t interp_tstate_head; /* tstate_head (<=3.10) or threads.head (3.11+) */
    int64_t interp_id;          /* -1 on 3.6 */
    int64_t interp_gil_ptr;     /* 3.12+: offsetof(PyInterpreterState, ceval.gil) (a pointer), else -1 */
    int64_t interp_modules;     /* offsetof(PyInterpreterState, modules) (sys.modules dict), -1 if absent */

    /* PyThreadState */
    int64_t tstate_size;
    int64_t tstate_prev;
    int64_t tstate_next;
    int64_t tstate_interp;
    int64_t tstate_frame;            /* <=3.10 frame; 3.11/3.12 cframe (pointer); 3.13 current_frame */
    int64_t cframe_current_frame;    /* 3.11/3.12: offsetof(_PyCFrame, current_frame), else -1 */
    int64_t tstate_thread_id;        /* pthread_t */
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

    /* _PyInterpreterFrame (3.11+, else -1) */
    int64_t iframe_code;     /* f_code (3.11/3.12) or f_executable (3.13+) */
    int64_t iframe_previous;
    int64_t iframe_instr;    /* prev_instr (3.11/3.12) or instr_ptr (3.13+): a code unit pointer */
    int64_t iframe_owner;    /* char owner (3.11+) */
    int64_t iframe_is_entry; /* bool is_entry (3.11 only), else -1 */
    int64_t iframe_localsplus; /* offsetof(_PyInterpreterFrame, localsplus) = its fixed size */

    /* PyCodeObject */
    int64_t code_size;        /* sizeof(PyCodeObject) (without the trailing bytecode) */
    int64_t code_filename;
    int64_t code_name;
    int64_t code_qualname;    /* 3.11+, else -1 */
    int64_t code_firstlineno; /* int */
    int64_t code_linetable;   /* co_lnotab (<=3.9) or co_linetable (3.10+): a bytes object */
    int64_t code_code;        /* co_code bytes object (<=3.10), else -1 */
    int64_t code_adaptive;    /* 3.11+: offsetof(PyCodeObject, co_code_adaptive), else -1 */
    int64_t code_size_field;  /* 3.11+: Py_SIZE(code) counts code units (ob_size offset), else -1 */

    /* Objects */
    int64_t object_type;   /* offsetof(PyObject, ob_type) */
    int64_t var_size;      /* offsetof(PyVarObject, ob_size) */
    int64_t type_name;     /* offsetof(PyTypeObject, tp_name) (char *) */
    int64_t bytes_sval;    /* offsetof(PyBytesObject, ob_sval) */
    int64_t unicode_length;  /* offsetof(PyASCIIObject, length) */
    int64_t unicode_state;   /* offsetof(PyASCIIObject, state) (a 32-bit bitfield word) */
    int64_t unicode_ascii_size;   /* sizeof(PyASCIIObject): data of compact ASCII follows */
    int64_t unicode_compact_size; /* sizeof(PyCompactUnicodeObject): data of compact non-ASCII */
    int64_t unicode_data_any;     /* offsetof(PyUnicodeObject, data.any): non-compact strings */
} pystate_layout_t;

/* Returns the generated layout for MAJOR.MINOR (3.6 .. 3.12, and 3.13 as a fallback when
 * the target's _Py_DebugOffsets cannot be used), or NULL when none is known. */
const pystate_layout_t *pystate_layout_for(int major, int minor);

#endif
