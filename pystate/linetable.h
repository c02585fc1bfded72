/* linetable.h - map bytecode offsets to source lines, for every CPython line-table format.
 *
 * Pure functions over a copy of the table bytes (co_lnotab or co_linetable) read from the
 * target: no process, no allocation. Every table is untrusted: nothing is read past LEN and
 * a malformed table gives SCRY_E_CORRUPT, never a crash.
 *
 * Offsets are always BYTE offsets from the start of the code object's bytecode:
 *   <= 3.9  f_lasti is already a byte offset;
 *   3.10    f_lasti counts 2-byte code units: the caller passes f_lasti * 2;
 *   3.11+   the caller passes (instruction pointer - first code unit) in bytes
 *           (prev_instr in 3.11/3.12, instr_ptr in 3.13+).
 * A negative f_lasti (frame not started) has no offset: CPython reports co_firstlineno then.
 *
 * Formats (enum pystate_linetable_style from layout.h):
 *   PYSTATE_LNOTAB         pairs (byte increment: unsigned, line increment: signed int8 since
 *                          3.6) from (0, co_firstlineno); every offset has a line.
 *   PYSTATE_LINETABLE_310  PEP 626 pairs (byte delta: unsigned, line delta: signed, -128 = no
 *                          line), each pair one range; offsets past the table have no line.
 *   PYSTATE_LOCATIONS_311  PEP 657 location entries (Objects/locations.md): each entry covers
 *                          1-8 code units and carries line, end line and columns.
 */
#ifndef SCRY_PYSTATE_LINETABLE_H
#define SCRY_PYSTATE_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

/* End offset of the last range of an lnotab table, which has no end of its own. */
#define PYSTATE_LINE_OPEN_END UINT32_MAX

/* One run of bytecode [start, end) sharing a location. Adjacent ranges may share a line. */
typedef struct pystate_line_range {
    uint32_t start;   /* first byte offset */
    uint32_t end;     /* one past the last byte; PYSTATE_LINE_OPEN_END for lnotab's last run */
    int line;         /* source line, or -1 when the range has no line */
    int end_line;     /* 3.11+ only (else -1): last source line of the expression */
    int col, end_col; /* 3.11+ only (else -1): 0-based UTF-8 byte columns, -1 when unknown */
} pystate_line_range_t;

/* Called once per non-empty range in offset order. Return 0 to go on; any other value stops
 * the walk and is returned by pystate_linetable_foreach. */
typedef int (*pystate_line_range_fn)(const pystate_line_range_t *range, void *ctx);

/* Finds the source line of the instruction at BYTE_OFFSET (see the offset conventions above)
 * in TABLE (LEN bytes, style STYLE, a pystate_linetable_style) of a code object whose
 * co_firstlineno is FIRSTLINENO, and stores it in *LINE_OUT.
 * Returns 0, SCRY_E_NOTFOUND when no line applies (a "no line" range, an offset past the end
 * of a 3.10+ table), SCRY_E_CORRUPT for a malformed table, SCRY_E_INVAL for a bad STYLE or a
 * NULL LINE_OUT (or a NULL TABLE with LEN > 0). *LINE_OUT is written only on success.
 * The same offsets give the same lines as the interpreter's own PyCode_Addr2Line. */
int pystate_line_for_offset(int style, const uint8_t *table, size_t len, int firstlineno,
                            uint32_t byte_offset, int *line_out);

/* Walks every range of TABLE (same arguments as pystate_line_for_offset), calling FN(range,
 * CTX) for each non-empty one. Returns 0 after the last range, FN's first non-zero return,
 * SCRY_E_CORRUPT when the table turns out malformed (ranges before the bad entry were
 * already delivered), or SCRY_E_INVAL for bad arguments. */
int pystate_linetable_foreach(int style, const uint8_t *table, size_t len, int firstlineno,
                              pystate_line_range_fn fn, void *ctx);

#endif
