/* pystr.h - decoding CPython str objects (PEP 393) read from a target.
 *
 * Pure functions: the caller reads the object's state word and its character data, these
 * helpers say where the data is and turn it into UTF-8. Every input is untrusted.
 *
 * A str object is one of (layout.h names the sizes and offsets):
 *   compact ASCII     characters follow the PyASCIIObject header       (unicode_ascii_size)
 *   compact non-ASCII characters follow the PyCompactUnicodeObject one  (unicode_compact_size)
 *   non-compact       (str subclasses, legacy API) data.any points to them (unicode_data_any)
 * The state word (at unicode_state) is a bitfield: interned:2 kind:3 compact:1 ascii:1 then
 * ready:1 (3.3-3.11) or statically_allocated:1 (3.12+). Only its low 8 bits are meaningful:
 * the remaining 24 bits are padding and hold garbage in real processes.
 * Free-threaded builds (3.13t+) use a whole byte for 'interned' and are not covered.
 */
#ifndef SCRY_PYSTATE_PYSTR_H
#define SCRY_PYSTATE_PYSTR_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

/* The decoded state bitfield. */
typedef struct pystate_str_state {
    int interned;             /* 0 not interned; 1 mortal, 2 immortal, 3 immortal static (3.12+) */
    int kind;                 /* bytes per code point: 1 (latin-1), 2 (UCS2), 4 (UCS4); 0 legacy */
    int compact;              /* characters stored inside the object */
    int ascii;                /* only U+0000-U+007F (then kind is 1) */
    int ready;                /* PEP 393 'ready' bit (<= 3.11); always 1 on 3.12+ */
    int statically_allocated; /* 3.12+ only, else 0 */
} pystate_str_state_t;

/* Decodes STATE_WORD (the 32-bit word at layout->unicode_state) of unicode style STYLE (enum
 * pystate_unicode_style) into *OUT.
 * Returns 0; SCRY_E_UNSUPPORTED for a legacy string that is not "ready" (<= 3.11: its
 * characters are only in wstr), *OUT still filled; SCRY_E_CORRUPT for an impossible
 * combination (kind not 1/2/4, ascii with kind != 1, compact but not ready), *OUT filled;
 * SCRY_E_INVAL for a bad STYLE or NULL OUT. */
int pystate_str_decode_state(int style, uint32_t state_word, pystate_str_state_t *out);

/* Says where the characters of a str with state ST are, relative to the object's address:
 * *INDIRECT_OUT = 0: they start at object + *OFFSET_OUT (compact strings);
 * *INDIRECT_OUT = 1: object + *OFFSET_OUT holds a pointer to them (non-compact strings).
 * Returns 0, SCRY_E_UNSUPPORTED when LAYOUT lacks the needed offset (-1), SCRY_E_INVAL for
 * NULL arguments. */
int pystate_str_data_location(const pystate_layout_t *layout, const pystate_str_state_t *st,
                              int64_t *offset_out, int *indirect_out);

/* Converts LENGTH code points of KIND (1, 2 or 4 bytes each, host byte order) from DATA (of
 * which DATA_LEN bytes are available) to UTF-8 in OUT, which receives at most OUT_SIZE - 1
 * bytes plus a terminating NUL; a multi-byte sequence is never cut. ASCII set means every
 * byte must be < 0x80. Surrogates, code points above U+10FFFF, U+0000 (so that OUT stays a C
 * string) and non-ASCII bytes of an ASCII string become U+FFFD. *WRITTEN_OUT (may be NULL)
 * gets the number of bytes written before the NUL.
 * Returns 0 when all LENGTH code points were converted; SCRY_E_TRUNC when OUT_SIZE or
 * DATA_LEN was too small (OUT then holds the converted prefix); SCRY_E_INVAL for a bad KIND,
 * a NULL OUT, OUT_SIZE 0, or a NULL DATA with LENGTH > 0. */
int pystate_str_to_utf8(const void *data, size_t data_len, int kind, int ascii, uint64_t length,
                        char *out, size_t out_size, size_t *written_out);

#endif
