/* linetable.c - decoding of co_lnotab (<= 3.9), the PEP 626 co_linetable (3.10) and the
 * PEP 657 location table (3.11+). One range iterator per format; the lookup walks it. */
#include "linetable.h"

#include <limits.h>

#include "scry_err.h"

/* Location entry kinds of the 3.11+ table (bits 3-6 of an entry's first byte). */
enum {
    LOC_SHORT_MAX = 9,  /* 0-9: short form, same line, one column byte */
    LOC_ONE_LINE0 = 10, /* 10-12: one-line form, line delta 0-2, two column bytes */
    LOC_ONE_LINE2 = 12,
    LOC_NO_COLUMNS = 13, /* svarint line delta only */
    LOC_LONG = 14,       /* svarint line delta, varint end-line delta, column+1, end column+1 */
    LOC_NONE = 15,       /* no location */
    LOC_MAX_VARINT = 6,  /* 6 chunks of 6 bits hold any 32-bit value */
};

typedef struct lt_iter {
    int style;
    const uint8_t *p;
    size_t len, pos;
    int64_t line;  /* the running line number */
    uint64_t addr; /* the running byte offset */
    int done;
} lt_iter_t;

static void lt_init(lt_iter_t *it, int style, const uint8_t *table, size_t len, int firstlineno)
{
    it->style = style;
    it->p = table;
    it->len = len;
    it->pos = 0;
    it->line = firstlineno;
    it->addr = 0;
    it->done = 0;
}

static int line_ok(int64_t line)
{
    return line >= INT_MIN && line <= INT_MAX;
}

static void range_set(pystate_line_range_t *r, uint64_t start, uint64_t end, int64_t line)
{
    r->start = (uint32_t)start;
    r->end = (uint32_t)end;
    r->line = line < 0 ? -1 : (int)line;
    r->end_line = -1;
    r->col = -1;
    r->end_col = -1;
}

/* co_lnotab: a run ends where a pair's byte increment is non-zero; the last run is open. */
static int lnotab_next(lt_iter_t *it, pystate_line_range_t *r)
{
    if (it->len % 2 != 0) {
        return SCRY_E_CORRUPT;
    }
    while (it->pos < it->len) {
        unsigned incr = it->p[it->pos];
        int delta = (int8_t)it->p[it->pos + 1];
        uint64_t start = it->addr;
        int64_t line = it->line;
        it->pos += 2;
        it->addr += incr;
        it->line += delta;
        if (it->addr >= PYSTATE_LINE_OPEN_END || !line_ok(it->line)) {
            return SCRY_E_CORRUPT;
        }
        if (incr > 0) {
            range_set(r, start, it->addr, line);
            return 1;
        }
    }
    it->done = 1;
    range_set(r, it->addr, PYSTATE_LINE_OPEN_END, it->line);
    return 1;
}

/* 3.10 co_linetable: every pair is one range, as in CPython's advance(); empty ranges still
 * move the running line. */
static int linetable310_next(lt_iter_t *it, pystate_line_range_t *r)
{
    if (it->len % 2 != 0) {
        return SCRY_E_CORRUPT;
    }
    while (it->pos < it->len) {
        unsigned sdelta = it->p[it->pos];
        int ldelta = (int8_t)it->p[it->pos + 1];
        uint64_t start = it->addr;
        int64_t line = -1;
        it->pos += 2;
        it->addr += sdelta;
        if (ldelta != -128) {
            it->line += ldelta;
            line = it->line;
        }
        if (it->addr >= PYSTATE_LINE_OPEN_END || !line_ok(it->line)) {
            return SCRY_E_CORRUPT;
        }
        if (sdelta > 0) {
            range_set(r, start, it->addr, line);
            return 1;
        }
    }
    return 0;
}

/* Reads an unsigned varint (6-bit chunks, bit 6 = more) at *POS, bounded by LEN. A byte with
 * bit 7 set starts the next entry and cannot be part of a varint. */
static int read_varint(const uint8_t *p, size_t len, size_t *pos, uint32_t *out)
{
    uint64_t val = 0;
    for (unsigned i = 0; i < LOC_MAX_VARINT; i++) {
        if (*pos >= len || (p[*pos] & 0x80)) {
            return SCRY_E_CORRUPT;
        }
        uint8_t b = p[(*pos)++];
        val |= (uint64_t)(b & 63) << (6 * i);
        if (!(b & 64)) {
            if (val > UINT32_MAX) {
                return SCRY_E_CORRUPT;
            }
            *out = (uint32_t)val;
            return 0;
        }
    }
    return SCRY_E_CORRUPT;
}

static int read_svarint(const uint8_t *p, size_t len, size_t *pos, int64_t *out)
{
    uint32_t u;
    int rc = read_varint(p, len, pos, &u);
    if (rc < 0) {
        return rc;
    }
    *out = (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
    return 0;
}

static int read_payload_byte(const uint8_t *p, size_t len, size_t *pos, int *out)
{
    if (*pos >= len || (p[*pos] & 0x80)) {
        return SCRY_E_CORRUPT;
    }
    *out = p[(*pos)++];
    return 0;
}

/* Decodes the payload of one location entry of KIND after its first byte: the line delta and
 * the columns. */
static int loc_payload(lt_iter_t *it, int kind, pystate_line_range_t *r, int64_t *delta)
{
    const uint8_t *p = it->p;
    size_t len = it->len;
    int a, b;
    int rc = 0;
    *delta = 0;
    if (kind <= LOC_SHORT_MAX) {
        rc = read_payload_byte(p, len, &it->pos, &a);
        if (rc == 0) {
            r->col = kind * 8 + ((a >> 4) & 7);
            r->end_col = r->col + (a & 15);
        }
    } else if (kind <= LOC_ONE_LINE2) {
        *delta = kind - LOC_ONE_LINE0;
        rc = read_payload_byte(p, len, &it->pos, &a);
        if (rc == 0) {
            rc = read_payload_byte(p, len, &it->pos, &b);
        }
        if (rc == 0) {
            r->col = a;
            r->end_col = b;
        }
    } else if (kind == LOC_NO_COLUMNS) {
        rc = read_svarint(p, len, &it->pos, delta);
    } else if (kind == LOC_LONG) {
        uint32_t end_delta = 0, col = 0, end_col = 0;
        rc = read_svarint(p, len, &it->pos, delta);
        if (rc == 0) {
            rc = read_varint(p, len, &it->pos, &end_delta);
        }
        if (rc == 0) {
            rc = read_varint(p, len, &it->pos, &col);
        }
        if (rc == 0) {
            rc = read_varint(p, len, &it->pos, &end_col);
        }
        if (rc == 0) {
            r->end_line = (int)end_delta; /* relative for now; made absolute by the caller */
            r->col = col > 0 && col <= INT_MAX ? (int)col - 1 : -1;
            r->end_col = end_col > 0 && end_col <= INT_MAX ? (int)end_col - 1 : -1;
        }
    }
    return rc;
}

/* 3.11+ location table: one entry is one range of ((b & 7) + 1) code units. */
static int locations_next(lt_iter_t *it, pystate_line_range_t *r)
{
    while (it->pos < it->len) {
        uint8_t first = it->p[it->pos];
        if (!(first & 0x80)) {
            return SCRY_E_CORRUPT;
        }
        it->pos++;
        int kind = (first >> 3) & 15;
        uint64_t start = it->addr;
        int64_t delta = 0;
        pystate_line_range_t tmp;
        range_set(&tmp, 0, 0, -1);
        int rc = loc_payload(it, kind, &tmp, &delta);
        if (rc < 0) {
            return rc;
        }
        /* Trailing bytes CPython would skip: only bytes without bit 7 may follow. */
        while (it->pos < it->len && !(it->p[it->pos] & 0x80)) {
            it->pos++;
        }
        it->line += delta;
        it->addr += ((uint64_t)(first & 7) + 1) * 2;
        if (it->addr >= PYSTATE_LINE_OPEN_END || !line_ok(it->line)) {
            return SCRY_E_CORRUPT;
        }
        if (kind == LOC_NONE) {
            range_set(r, start, it->addr, -1);
        } else {
            int64_t end_line = it->line;
            if (kind == LOC_LONG) {
                end_line += tmp.end_line;
            }
            range_set(r, start, it->addr, it->line);
            r->end_line = (r->line >= 0 && line_ok(end_line)) ? (int)end_line : -1;
            r->col = tmp.col;
            r->end_col = tmp.end_col;
        }
        return 1;
    }
    return 0;
}

/* Returns 1 with the next non-empty range in *R, 0 at the end, or a negative code. */
static int lt_next(lt_iter_t *it, pystate_line_range_t *r)
{
    if (it->done) {
        return 0;
    }
    int rc;
    switch (it->style) {
    case PYSTATE_LNOTAB:
        rc = lnotab_next(it, r);
        break;
    case PYSTATE_LINETABLE_310:
        rc = linetable310_next(it, r);
        break;
    case PYSTATE_LOCATIONS_311:
        rc = locations_next(it, r);
        break;
    default:
        rc = SCRY_E_INVAL;
        break;
    }
    if (rc <= 0) {
        it->done = 1;
    }
    return rc;
}

static int check_args(int style, const uint8_t *table, size_t len)
{
    if (style != PYSTATE_LNOTAB && style != PYSTATE_LINETABLE_310 &&
        style != PYSTATE_LOCATIONS_311) {
        return SCRY_E_INVAL;
    }
    if (table == NULL && len > 0) {
        return SCRY_E_INVAL;
    }
    return 0;
}

int pystate_linetable_foreach(int style, const uint8_t *table, size_t len, int firstlineno,
                              pystate_line_range_fn fn, void *ctx)
{
    int rc = check_args(style, table, len);
    if (rc < 0 || fn == NULL) {
        return rc < 0 ? rc : SCRY_E_INVAL;
    }
    lt_iter_t it;
    pystate_line_range_t r;
    lt_init(&it, style, table, len, firstlineno);
    while ((rc = lt_next(&it, &r)) > 0) {
        int stop = fn(&r, ctx);
        if (stop != 0) {
            return stop;
        }
    }
    return rc;
}

/* pystate_line_for_offset's search: the line of the first range that holds OFFSET. */
typedef struct lt_find {
    uint32_t offset;
    int line;
} lt_find_t;

static int lt_find_offset(const pystate_line_range_t *r, void *ctx)
{
    lt_find_t *f = ctx;
    if (f->offset < r->start || (f->offset >= r->end && r->end != PYSTATE_LINE_OPEN_END))
        return 0;
    f->line = r->line;
    return 1;
}

int pystate_line_for_offset(int style, const uint8_t *table, size_t len, int firstlineno,
                            uint32_t byte_offset, int *line_out)
{
    if (line_out == NULL) {
        int rc = check_args(style, table, len);
        return rc < 0 ? rc : SCRY_E_INVAL;
    }
    lt_find_t f = {byte_offset, -1};
    int rc = pystate_linetable_foreach(style, table, len, firstlineno, lt_find_offset, &f);
    if (rc < 0)
        return rc;
    if (rc == 0 || f.line < 0)
        return SCRY_E_NOTFOUND;
    *line_out = f.line;
    return 0;
}
