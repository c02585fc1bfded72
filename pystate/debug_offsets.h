/* debug_offsets.h - layouts of CPython 3.13+ from the target's own _Py_DebugOffsets.
 *
 * Since 3.13, _PyRuntime begins with a _Py_DebugOffsets block: the cookie "xdebugpy",
 * PY_VERSION_HEX, a free-threading flag, then sizeof()/offsetof() values of the structs a
 * debugger walks. This reader knows the exact block layout of 3.13 and of 3.14; it
 * validates every value before trusting it (cookie, version, sizes in (0, 1 MiB], every
 * offset inside its struct, pointer fields 8-aligned) and converts it into a
 * pystate_layout_t.
 *
 * Fields the block does not give are derived or taken from the generated 3.13 table:
 *   runtime_interpreters_main = interpreters_head + 8 (main follows head in
 *                               struct pyinterpreters in 3.13 and 3.14)
 *   runtime_tstate_current, runtime_gil, cframe_current_frame, frame_*, iframe_is_entry,
 *   code_code = -1 (no such fields in 3.13+)
 *   gil_locked/gil_last_holder = interpreter_state.gil_runtime_state_{locked,holder}
 *                               - interpreter_state.gil_runtime_state
 *   chunk_*                   = generated 3.13 values (_PyStackChunk is unchanged in 3.14)
 *   var_size, code_size_field = tuple_object.ob_size (the PyVarObject ob_size offset)
 *   unicode_compact_size      = asciiobject_size + 16 (utf8_length, utf8)
 *   unicode_data_any          = unicode_object.size - 8 (the data union is last)
 *   styles                    = UNICODE_312, FRAMES_313, LOCATIONS_311
 * Thread-name fields (pystate/threadnames.c): dict_keys/dict_values (dict_object),
 * long_tag/long_digits (long_object), type_flags and type_size (type_object) come from the
 * block; heaptype_cached_keys = generated value - generated sizeof(PyTypeObject) +
 * type_object.size; every other dict/long/type/managed-dict field is the generated 3.13
 * value (long_size, object_managed_values_before, object_dict_values_tag are -1).
 */
#ifndef SCRY_PYSTATE_DEBUG_OFFSETS_H
#define SCRY_PYSTATE_DEBUG_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "rmem.h"

/* Bytes of the leading header: cookie[8], version, free_threaded. */
#define PYSTATE_DEBUG_OFFSETS_HEADER_SIZE 24
/* Bytes of the largest block layout this reader knows (3.14). */
#define PYSTATE_DEBUG_OFFSETS_MAX_SIZE 760

/* Returns the byte size of the _Py_DebugOffsets block for PY_VERSION_HEX-style VERSION_HEX
 * (584 for 3.13, 760 for 3.14), or 0 for a version whose block layout is unknown. */
size_t pystate_debug_offsets_size(uint32_t version_hex);

/* Parses and validates a _Py_DebugOffsets block of LEN bytes at BUF (a local copy of the
 * start of the target's _PyRuntime). On success fills *OUT (every field, as layout.h
 * documents) and *VERSION_HEX (may be NULL) and returns 0. On failure returns, leaving
 * *OUT and *VERSION_HEX untouched:
 *   SCRY_E_INVAL        NULL BUF/OUT, or LEN shorter than the version's block
 *   SCRY_E_CORRUPT      bad cookie, nonsense version, a size of 0 or over 1 MiB, an offset
 *                       outside its struct, a misaligned pointer field
 *   SCRY_E_UNSUPPORTED  a well-formed version this reader does not know (not 3.13/3.14,
 *                       or an alpha/beta pre-release whose block layout differed), or a
 *                       free-threaded build
 * Borrows BUF. */
int pystate_debug_offsets_parse(const void *buf, size_t len, pystate_layout_t *out,
                                uint32_t *version_hex);

/* Reads the _Py_DebugOffsets block at RUNTIME_ADDR (the address of the target's
 * _PyRuntime) through M, then parses it as pystate_debug_offsets_parse does. Two reads:
 * the header, then the block of the size its version needs. Returns 0, a read error
 * (SCRY_E_FAULT, SCRY_E_GONE, SCRY_E_PERM), or a parse error; *OUT and *VERSION_HEX are
 * untouched on failure. */
int pystate_debug_offsets_read(rmem_t *m, raddr_t runtime_addr, pystate_layout_t *out,
                               uint32_t *version_hex);

#endif
