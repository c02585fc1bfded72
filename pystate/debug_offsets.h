/* debug_offsets.h - layouts of CPython 3.13+ from the target's own _Py_DebugOffsets.
 *
 * Since 3.13, _PyRuntime begins with a _Py_DebugOffsets block: the cookie "xdebugpy",
 * PY_VERSION_HEX, a free-threading flag, then sizeof()/offsetof() values of the structs a
 * debugger walks. The member order of each known minor version (3.13, 3.14, 3.15) is data
 * generated from that version's header (pystate/gen/gen_debug_offsets.py ->
 * debug_layouts_gen.c). This reader validates every value before trusting it (cookie,
 * version, sizes in (0, 1 MiB], every offset inside its struct, pointer fields 8-aligned)
 * and converts the block into a pystate_layout_t.
 *
 * Fields the block does not give are derived or taken from the generated table of the same
 * minor version (pystate_layout_for; 3.13's when the version has none):
 *   runtime_interpreters_main = interpreters_head + 8 (main follows head in
 *                               struct pyinterpreters, 3.13 to 3.15)
 *   runtime_tstate_current, runtime_gil, cframe_current_frame, frame_*, iframe_is_entry,
 *   code_code = -1 (no such fields in 3.13+)
 *   gil_locked/gil_last_holder = interpreter_state.gil_runtime_state_{locked,holder}
 *                               - interpreter_state.gil_runtime_state
 *   chunk_*                   = generated values (_PyStackChunk)
 *   var_size, code_size_field = tuple_object.ob_size (the PyVarObject ob_size offset)
 *   unicode_compact_size      = asciiobject_size + 16 (utf8_length, utf8; checked against
 *                               compactunicodeobject_size where the block has it, 3.15+)
 *   unicode_data_any          = unicode_object.size - 8 (the data union is last)
 *   styles                    = UNICODE_312, FRAMES_313, LOCATIONS_311
 * Thread-name fields (pystate/threadnames.c): dict_keys/dict_values (dict_object),
 * long_tag/long_digits (long_object), type_flags and type_size (type_object) come from the
 * block, and from 3.15 also type_basicsize, type_dictoffset and heaptype_cached_keys;
 * before 3.15 heaptype_cached_keys = generated value - generated sizeof(PyTypeObject) +
 * type_object.size; every other dict/long/type/managed-dict field is the generated value
 * (long_size, object_managed_values_before, object_dict_values_tag are -1).
 */
#ifndef SCRY_PYSTATE_DEBUG_OFFSETS_H
#define SCRY_PYSTATE_DEBUG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "pystate.h"
#include "rmem.h"

/* Bytes of the leading header: cookie[8], version, free_threaded. */
#define PYSTATE_DEBUG_OFFSETS_HEADER_SIZE 24
/* Bytes of the largest block layout this reader can hold (3.15 needs 888). */
#define PYSTATE_DEBUG_OFFSETS_MAX_SIZE 2048

/* Returns the byte size of the _Py_DebugOffsets block for PY_VERSION_HEX-style VERSION_HEX
 * (584 for 3.13, 760 for 3.14, 888 for 3.15), or 0 for a version whose block layout is
 * unknown. */
size_t pystate_debug_offsets_size(uint32_t version_hex);

/* The oldest and newest minor versions whose block layout is known (13 and 15). */
int pystate_debug_offsets_oldest_minor(void);
int pystate_debug_offsets_newest_minor(void);

/* Parses and validates a _Py_DebugOffsets block of LEN bytes at BUF (a local copy of the
 * start of the target's _PyRuntime). On success fills *OUT (every field, as layout.h
 * documents; minor is the block's own) and *VERSION_HEX (may be NULL) and returns 0.
 * ASSUME_MINOR 0 reads only known versions; the newest known minor (15) reads the block of
 * a NEWER version with that layout (the caller said --assume-version), still validated.
 * On failure returns, leaving *OUT and *VERSION_HEX untouched, and writes a reason for a
 * person into WHY (WHYLEN bytes; may be NULL):
 *   SCRY_E_INVAL        NULL BUF/OUT, or LEN shorter than the version's block
 *   SCRY_E_CORRUPT      bad cookie, nonsense version, a size of 0 or over 1 MiB, an offset
 *                       outside its struct, a misaligned pointer field
 *   SCRY_E_UNSUPPORTED  a well-formed version whose block layout is unknown (newer than
 *                       3.15 without ASSUME_MINOR, or an alpha/beta whose layout differed),
 *                       or a free-threaded build
 * Borrows BUF. */
int pystate_debug_offsets_parse_as(const void *buf, size_t len, int assume_minor,
                                   pystate_layout_t *out, uint32_t *version_hex, char *why,
                                   size_t whylen);

/* pystate_debug_offsets_parse_as without an assumed version or a reason. */
int pystate_debug_offsets_parse(const void *buf, size_t len, pystate_layout_t *out,
                                uint32_t *version_hex);

/* Reads the _Py_DebugOffsets block at RUNTIME_ADDR (the address of the target's
 * _PyRuntime) through M, then parses it as pystate_debug_offsets_parse_as does. Two reads:
 * the header, then the block of the size its version (or the assumed one) needs. Returns 0,
 * a read error (SCRY_E_FAULT, SCRY_E_GONE, SCRY_E_PERM), or a parse error; *OUT and
 * *VERSION_HEX are untouched on failure. */
int pystate_debug_offsets_read_as(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                  pystate_layout_t *out, uint32_t *version_hex, char *why,
                                  size_t whylen);

/* pystate_debug_offsets_read_as without an assumed version or a reason. */
int pystate_debug_offsets_read(rmem_t *m, raddr_t runtime_addr, pystate_layout_t *out,
                               uint32_t *version_hex);

/* The generator, set, frame and list members the asyncio reader (pystate/asyncio.c) needs
 * beyond pystate_layout_t, from the same block (3.14+). */
typedef struct pystate_dbg_async {
    int64_t gen_size;            /* sizeof(PyGenObject) */
    int64_t gen_iframe;          /* offsetof(PyGenObject, gi_iframe): the embedded frame */
    int64_t gen_frame_state;     /* offsetof(PyGenObject, gi_frame_state) (int8_t) */
    int64_t iframe_stackpointer; /* offsetof(_PyInterpreterFrame, stackpointer) */
    int64_t set_size;            /* sizeof(PySetObject) */
    int64_t set_used;            /* offsetof(PySetObject, used) (Py_ssize_t) */
    int64_t set_table;           /* offsetof(PySetObject, table) (setentry *) */
    int64_t set_mask;            /* offsetof(PySetObject, mask) (Py_ssize_t) */
    int64_t llist_next;          /* offsetof(struct llist_node, next) */
    int64_t llist_prev;          /* offsetof(struct llist_node, prev) */
} pystate_dbg_async_t;

/* Parses the block at BUF (LEN bytes) as pystate_debug_offsets_parse_as does (the whole
 * block validated) and fills *OUT with the asyncio members, each checked inside its struct
 * (pointers 8-aligned). Returns 0, the parse error, or SCRY_E_UNSUPPORTED when the
 * version's block lacks one of them (3.13). *OUT is untouched on failure. Borrows BUF. */
int pystate_debug_offsets_parse_async(const void *buf, size_t len, int assume_minor,
                                      pystate_dbg_async_t *out);

/* Reads the block at RUNTIME_ADDR through M (as pystate_debug_offsets_read_as) and parses it
 * with pystate_debug_offsets_parse_async. Returns 0, a read error or a parse error. */
int pystate_debug_offsets_read_async(rmem_t *m, raddr_t runtime_addr, int assume_minor,
                                     pystate_dbg_async_t *out);

/* pystate_debug_offsets_read_remote (PEP 768's members, for memprof/remoteexec.c): pystate.h. */

#endif
