/* pyrepr.h - short reprs of objects in a target, and a frame's arguments and locals, read
 * from outside (scry dump --locals). Nothing runs in the target: values are decoded from
 * its memory by type name (int, bool, float, str, bytes, None, list, tuple, dict, set,
 * frozenset) and written as Python's repr() would write them ("{'a': False, 'b': (1, 2)}",
 * "frozenset({1})", "set()"); anything else is "<TypeName object>". Target memory is
 * untrusted: every length, digit count, item count and nesting depth is bounded, and what
 * a bound cuts is marked: "..." after the last item or character shown, "<dict len=N>"
 * for a container nested deeper than PYSTATE_REPR_DEPTH (or whose table does not read).
 */
#ifndef SCRY_PYSTATE_PYREPR_H
#define SCRY_PYSTATE_PYREPR_H

#include "pystate.h"

#include <stddef.h>
#include <stdint.h>

#define PYSTATE_REPR_MAX        256 /* bytes of a repr, NUL included */
#define PYSTATE_REPR_DEPTH      2   /* container nesting shown; deeper ones are "<list len=N>" */
#define PYSTATE_REPR_ITEMS      8   /* items shown of a list, tuple, dict or set, then "..." */
#define PYSTATE_REPR_STR        48  /* code points shown of a str, bytes of a bytes */
#define PYSTATE_REPR_INT_DIGITS 40  /* decimal digits shown of an int, then "...(N digits)" */
#define PYSTATE_LOCALS_MAX      256 /* locals read per frame */
#define PYSTATE_LOCAL_NAME_MAX  64

typedef struct pystate_value {
    char type[32];               /* the type's tp_name, cut; "" when unreadable */
    int64_t len;                 /* str/bytes/list/tuple/dict/set length, else -1 */
    char repr[PYSTATE_REPR_MAX]; /* e.g. "42", "'h\u00e9'" as UTF-8, "[1, [2, <list len=1>],
                                    ...]", "{'a': 1}", "<Foo object>", "<unreadable>"; a
                                    repr cut at PYSTATE_REPR_MAX ends in "..." */
} pystate_value_t;

/* Describes the object at OBJ of target T into *OUT. Never runs code in the target; a
 * torn or hostile object gives "<unreadable>" (or a cut repr) rather than an error.
 * Returns 0, or SCRY_E_GONE / SCRY_E_PERM when the process cannot be read at all. */
int pystate_repr(pystate_target_t *t, raddr_t obj, pystate_value_t *out);

enum pystate_local_kind {
    PYSTATE_LOCAL_PLAIN = 0, /* a fast local (argument or variable) */
    PYSTATE_LOCAL_CELL = 1,  /* a cell variable (captured by an inner function) */
    PYSTATE_LOCAL_FREE = 2,  /* a free variable (from an enclosing function) */
};

typedef struct pystate_local {
    char name[PYSTATE_LOCAL_NAME_MAX];
    uint8_t is_arg;  /* a parameter (positional, keyword-only, *args or **kwargs) */
    uint8_t kind;    /* enum pystate_local_kind; cells show their contents */
    uint8_t unbound; /* no value yet (or deleted): value.repr is "<unbound>" */
    pystate_value_t value;
} pystate_local_t;

/* Reads the arguments and locals of the frame at FRAME (a PyFrameObject up to 3.10, a
 * _PyInterpreterFrame 3.11+, as pystate_thread_t.frame_addrs gives them) into OUT (room for
 * MAX), in slot order (arguments first). *N gets the count. Returns 0, SCRY_E_CORRUPT when
 * the frame or its code object does not read as one (torn: the thread ran on), or
 * SCRY_E_GONE / SCRY_E_PERM / SCRY_E_INVAL. */
int pystate_frame_locals(pystate_target_t *t, raddr_t frame, pystate_local_t *out, size_t max,
                         size_t *n);

#endif
