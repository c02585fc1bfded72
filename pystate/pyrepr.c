/* pyrepr.c - short reprs of target objects, read from outside (see pyrepr.h). */
#include "pyrepr.h"

#include "internal.h"
#include "scry_err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INT_DIGITS_MAX 80 /* 30-bit digits decoded (2400 bits); bigger ints give their size */
#define TYPE_NAME_READ 31
#define REPR_SCAN      64 /* dict entries or set slots looked at for the items shown */

/* An output buffer that never overflows: appends past the end are dropped and marked. */
typedef struct out {
    char *buf;
    size_t size, len;
    int full;
} out_t;

/* Appends N bytes of S. Content may fill SIZE - 4 bytes: the last 3 are kept for the
 * "..." that marks a cut (made at a UTF-8 character boundary); nothing is appended after
 * a cut. SIZE is at least 8. */
static void put(out_t *o, const char *s, size_t n)
{
    if (o->full)
        return;
    size_t room = o->size - 4 - o->len;
    if (n > room) {
        n = room;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        o->full = 1;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    if (o->full) {
        memcpy(o->buf + o->len, "...", 3);
        o->len += 3;
    }
    o->buf[o->len] = 0;
}

static void puts_(out_t *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Fatal read errors end the whole walk; any other failure only marks the value. */
static int fatal(int err)
{
    return err == SCRY_E_GONE || err == SCRY_E_PERM;
}

static int read_type_name(pystate_target_t *t, raddr_t obj, char *name, size_t size)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t type = 0, tp_name = 0;
    int err = rmem_read(t->mem, obj + (uint64_t)L->object_type, &type, 8);
    if (!err && !type)
        err = SCRY_E_CORRUPT;
    if (!err)
        err = rmem_read(t->mem, type + (uint64_t)L->type_name, &tp_name, 8);
    if (!err && !tp_name)
        err = SCRY_E_CORRUPT;
    char tmp[TYPE_NAME_READ + 1] = {0};
    /* The name may end closer than TYPE_NAME_READ bytes before unmapped memory: retry
     * shorter reads. */
    for (size_t want = TYPE_NAME_READ; !err && want; want /= 2) {
        if (rmem_read(t->mem, tp_name, tmp, want) == 0)
            break;
        if (want == 1)
            err = SCRY_E_FAULT;
    }
    if (err)
        return err;
    size_t n = 0;
    while (n < TYPE_NAME_READ && tmp[n] && n + 1 < size) {
        unsigned char c = (unsigned char)tmp[n];
        name[n] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        n++;
    }
    name[n] = 0;
    return n ? 0 : SCRY_E_CORRUPT;
}

/* Py_ssize_t ob_size of a variable-size object, bounded to [0, 2^40). */
static int read_size(pystate_target_t *t, raddr_t obj, int64_t off, int64_t *len)
{
    if (off < 0)
        return SCRY_E_UNSUPPORTED;
    int64_t v = 0;
    int err = rmem_read(t->mem, obj + (uint64_t)off, &v, 8);
    if (err)
        return err;
    if (v < 0 || v >= (1ll << 40))
        return SCRY_E_CORRUPT;
    *len = v;
    return 0;
}

/* Divides the little-endian base-2^SHIFT number D[0..n) by 10^9 in place; returns the
 * remainder. */
static uint32_t divmod_1e9(uint32_t *d, size_t n, unsigned shift)
{
    uint64_t rem = 0;
    for (size_t i = n; i-- > 0;) {
        uint64_t cur = (rem << shift) | d[i];
        d[i] = (uint32_t)(cur / 1000000000u);
        rem = cur % 1000000000u;
    }
    return (uint32_t)rem;
}

static int repr_int(pystate_target_t *t, raddr_t obj, int is_bool, out_t *o)
{
    const pystate_layout_t *L = &t->layout;
    int64_t ssize;
    uint64_t nd;
    int neg = 0;
    if (L->long_tag >= 0) {
        uint64_t tag = 0;
        int err = rmem_read(t->mem, obj + (uint64_t)L->long_tag, &tag, 8);
        if (err)
            return err;
        unsigned sign = (unsigned)(tag & 3);
        if (sign == 3 || L->long_tag_shift <= 0 || L->long_tag_shift > 8)
            return SCRY_E_CORRUPT;
        nd = tag >> L->long_tag_shift;
        neg = sign == 2;
        if (sign == 1)
            nd = 0;
    } else {
        int err = rmem_read(t->mem, obj + (uint64_t)L->long_size, &ssize, 8);
        if (err)
            return err;
        neg = ssize < 0;
        nd = neg ? (uint64_t)0 - (uint64_t)ssize : (uint64_t)ssize;
    }
    unsigned shift = (unsigned)L->long_shift;
    size_t dsz = (size_t)L->long_digit_size;
    if ((dsz != 2 && dsz != 4) || shift == 0 || shift > 8 * dsz - 1 || L->long_digits < 0)
        return SCRY_E_CORRUPT;
    if (is_bool) {
        puts_(o, nd ? "True" : "False");
        return 0;
    }
    if (nd == 0) {
        puts_(o, "0");
        return 0;
    }
    if (nd > INT_DIGITS_MAX) {
        char b[64];
        snprintf(b, sizeof b, "<%sint of %llu bits>", neg ? "negative " : "",
                 (unsigned long long)(nd * shift));
        puts_(o, b);
        return 0;
    }
    uint8_t raw[INT_DIGITS_MAX * 4];
    uint32_t d[INT_DIGITS_MAX];
    int err = rmem_read(t->mem, obj + (uint64_t)L->long_digits, raw, (size_t)nd * dsz);
    if (err)
        return err;
    uint32_t mask = (uint32_t)((1ull << shift) - 1);
    for (size_t i = 0; i < nd; i++) {
        uint32_t v = 0;
        if (dsz == 4) {
            memcpy(&v, raw + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            v = h;
        }
        if (v > mask)
            return SCRY_E_CORRUPT;
        d[i] = v;
    }
    /* Groups of 9 decimal digits, least significant first. */
    char dec[INT_DIGITS_MAX * 10 + 16];
    size_t dl = 0;
    size_t n = (size_t)nd;
    while (n) {
        uint32_t r = divmod_1e9(d, n, shift);
        while (n && d[n - 1] == 0)
            n--;
        for (int k = 0; k < 9 && (n || r); k++) {
            dec[dl++] = (char)('0' + r % 10);
            r /= 10;
        }
    }
    if (dl == 0)
        dec[dl++] = '0';
    if (neg)
        puts_(o, "-");
    size_t shown = dl > PYSTATE_REPR_INT_DIGITS ? PYSTATE_REPR_INT_DIGITS : dl;
    char fwd[INT_DIGITS_MAX * 10 + 16];
    for (size_t i = 0; i < shown; i++)
        fwd[i] = dec[dl - 1 - i];
    put(o, fwd, shown);
    if (shown < dl) {
        char b[48];
        snprintf(b, sizeof b, "...(%zu digits)", dl);
        puts_(o, b);
    }
    return 0;
}

static int repr_float(pystate_target_t *t, raddr_t obj, out_t *o)
{
    double v;
    if (t->layout.float_fval < 0)
        return SCRY_E_UNSUPPORTED;
    int err = rmem_read(t->mem, obj + (uint64_t)t->layout.float_fval, &v, sizeof v);
    if (err)
        return err;
    char b[40];
    if (isnan(v)) {
        snprintf(b, sizeof b, "nan");
    } else if (isinf(v)) {
        snprintf(b, sizeof b, v < 0 ? "-inf" : "inf");
    } else {
        /* Python's repr: the shortest form that reads back as the same double. */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(b, sizeof b, "%.*g", prec, v);
            if (strtod(b, NULL) == v)
                break;
        }
        if (!strpbrk(b, ".einn"))
            strncat(b, ".0", sizeof b - strlen(b) - 1);
    }
    puts_(o, b);
    return 0;
}

/* Appends S (UTF-8, N bytes) quoted and escaped as Python would: \\, \', \n, \r, \t, other
 * control characters as \xNN; other characters as they are. */
static void put_quoted(out_t *o, const char *prefix, const unsigned char *s, size_t n, int bytes,
                       int cut)
{
    puts_(o, prefix);
    puts_(o, "'");
    for (size_t i = 0; i < n && !o->full; i++) {
        unsigned char c = s[i];
        char b[8];
        if (c == '\\' || c == '\'') {
            b[0] = '\\', b[1] = (char)c, b[2] = 0;
        } else if (c == '\n') {
            strcpy(b, "\\n");
        } else if (c == '\r') {
            strcpy(b, "\\r");
        } else if (c == '\t') {
            strcpy(b, "\\t");
        } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
            snprintf(b, sizeof b, "\\x%02x", c);
        } else {
            b[0] = (char)c, b[1] = 0;
        }
        puts_(o, b);
    }
    puts_(o, "'");
    if (cut)
        puts_(o, "...");
}

static int repr_str(pystate_target_t *t, raddr_t obj, pystate_value_t *v, out_t *o)
{
    int64_t len = 0;
    int err = read_size(t, obj, t->layout.unicode_length, &len);
    if (err)
        return err;
    char buf[PYSTATE_REPR_STR * 4 + 1];
    int n = pystate__read_str(t, obj, buf, sizeof buf);
    if (n < 0)
        return n;
    /* at most PYSTATE_REPR_STR code points: cut at a character boundary */
    size_t bytes = 0, cps = 0;
    while (bytes < (size_t)n && cps < PYSTATE_REPR_STR) {
        bytes++;
        while (bytes < (size_t)n && ((unsigned char)buf[bytes] & 0xC0) == 0x80)
            bytes++;
        cps++;
    }
    if (v)
        v->len = len;
    put_quoted(o, "", (const unsigned char *)buf, bytes, 0, (int64_t)cps < len);
    return 0;
}

static int repr_bytes(pystate_target_t *t, raddr_t obj, pystate_value_t *v, out_t *o)
{
    int64_t len = 0;
    int err = read_size(t, obj, t->layout.var_size, &len);
    if (err)
        return err;
    unsigned char buf[PYSTATE_REPR_STR];
    size_t want = len < PYSTATE_REPR_STR ? (size_t)len : PYSTATE_REPR_STR;
    if (want && (err = rmem_read(t->mem, obj + (uint64_t)t->layout.bytes_sval, buf, want)))
        return err;
    if (v)
        v->len = len;
    put_quoted(o, "b", buf, want, 1, (int64_t)want < len);
    return 0;
}

static int repr_any(pystate_target_t *t, raddr_t obj, int depth, pystate_value_t *v, out_t *o);

/* read_size of a container into *LEN, and into V->len (V may be NULL) once read. */
static int read_len(pystate_target_t *t, raddr_t obj, int64_t off, pystate_value_t *v, int64_t *len)
{
    int err = read_size(t, obj, off, len);
    if (!err && v)
        v->len = *len;
    return err;
}

/* A container past the depth bound, or whose table does not read: "<TYPE len=N>". */
static void put_sized(out_t *o, const char *type, int64_t len)
{
    char b[96];
    snprintf(b, sizeof b, "<%s len=%lld>", type, (long long)len);
    puts_(o, b);
}

/* list and tuple: the first items, each at DEPTH + 1. */
static int repr_seq(pystate_target_t *t, raddr_t obj, int is_list, int depth, pystate_value_t *v,
                    out_t *o)
{
    const pystate_layout_t *L = &t->layout;
    int64_t len = 0;
    int err = read_len(t, obj, L->var_size, v, &len);
    if (err)
        return err;
    const char *open = is_list ? "[" : "(", *close = is_list ? "]" : ")";
    if (depth >= PYSTATE_REPR_DEPTH) {
        put_sized(o, is_list ? "list" : "tuple", len);
        return 0;
    }
    raddr_t items = obj + (uint64_t)(is_list ? L->list_items : L->tuple_items);
    if ((is_list ? L->list_items : L->tuple_items) < 0)
        return SCRY_E_UNSUPPORTED;
    if (is_list && len && (err = rmem_read(t->mem, items, &items, 8)))
        return err;
    size_t shown = len < PYSTATE_REPR_ITEMS ? (size_t)len : PYSTATE_REPR_ITEMS;
    raddr_t ptrs[PYSTATE_REPR_ITEMS];
    if (shown && (err = rmem_read(t->mem, items, ptrs, shown * 8)))
        return err;
    puts_(o, open);
    for (size_t i = 0; i < shown && !o->full; i++) {
        if (i)
            puts_(o, ", ");
        if (!ptrs[i]) {
            puts_(o, "<NULL>");
            continue;
        }
        err = repr_any(t, ptrs[i], depth + 1, NULL, o);
        if (fatal(err))
            return err;
    }
    if ((int64_t)shown < len)
        puts_(o, shown ? ", ..." : "...");
    else if (!is_list && len == 1)
        puts_(o, ",");
    puts_(o, close);
    return 0;
}

/* The key and value pointers of the first REPR_SCAN entries of dict OBJ (deleted ones are
 * 0) into KEYS and VALS; *N gets how many. Returns 0 or a read or layout error. */
static int dict_entries(pystate_target_t *t, raddr_t obj, raddr_t *keys, raddr_t *vals, size_t *n)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t kp = 0, vp = 0;
    int err = L->dict_keys < 0 || L->dict_values < 0 ? SCRY_E_UNSUPPORTED : 0;
    if (!err)
        err = rmem_read(t->mem, obj + (uint64_t)L->dict_keys, &kp, 8);
    if (!err)
        err = rmem_read(t->mem, obj + (uint64_t)L->dict_values, &vp, 8);
    if (!err && vp && L->dictvalues_valid >= 0) {
        uint8_t valid = 0; /* 3.13+: 0 when the values moved into the owning object */
        err = rmem_read(t->mem, vp + (uint64_t)L->dictvalues_valid, &valid, 1);
        if (!err && !valid)
            err = SCRY_E_UNSUPPORTED;
    }
    pystate_dict_t d;
    if (!err)
        err = pystate__dict_keys_open(t, kp, vp ? vp + (uint64_t)L->dictvalues_values : 0, &d);
    if (err)
        return err;
    *n = d.n < REPR_SCAN ? d.n : REPR_SCAN;
    uint8_t ent[REPR_SCAN * 64];
    if (*n && (err = rmem_read(t->mem, d.entries, ent, *n * d.esize)) != 0)
        return err;
    if (*n && d.values && (err = rmem_read(t->mem, d.values, vals, *n * 8)) != 0)
        return err;
    for (size_t i = 0; i < *n; i++) {
        keys[i] = pystate__u64_at(ent + i * d.esize, d.esize, d.ekey);
        if (!d.values)
            vals[i] = pystate__u64_at(ent + i * d.esize, d.esize, d.evalue);
    }
    return 0;
}

/* dict: "{key: value, ...}" in insertion order, the first PYSTATE_REPR_ITEMS live entries of
 * the first REPR_SCAN, keys and values at DEPTH + 1. */
static int repr_dict(pystate_target_t *t, raddr_t obj, int depth, pystate_value_t *v, out_t *o)
{
    int64_t len = 0;
    int err = read_len(t, obj, t->layout.dict_used, v, &len);
    if (err)
        return err;
    raddr_t keys[REPR_SCAN], vals[REPR_SCAN];
    size_t n = 0;
    if (depth >= PYSTATE_REPR_DEPTH || (err = dict_entries(t, obj, keys, vals, &n)) != 0) {
        put_sized(o, "dict", len);
        return fatal(err) ? err : 0;
    }
    puts_(o, "{");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < PYSTATE_REPR_ITEMS && !o->full; i++) {
        if (!keys[i] || !vals[i])
            continue; /* deleted */
        if (shown++)
            puts_(o, ", ");
        if (fatal(err = repr_any(t, keys[i], depth + 1, NULL, o)))
            return err;
        puts_(o, ": ");
        if (fatal(err = repr_any(t, vals[i], depth + 1, NULL, o)))
            return err;
    }
    if ((int64_t)shown < len)
        puts_(o, shown ? ", ..." : "...");
    puts_(o, "}");
    return 0;
}

/* The key pointers of the first REPR_SCAN slots of set OBJ's table (empty ones are 0) into
 * KEYS; *N gets how many. PySetObject is {fill, used, mask, table} from used on, in every
 * version. Returns 0 or a read or corruption error. */
static int set_slots(pystate_target_t *t, raddr_t obj, raddr_t *keys, size_t *n)
{
    int64_t used = t->layout.set_used;
    uint64_t hdr[2]; /* mask, table */
    int err = rmem_read(t->mem, obj + (uint64_t)used + 8, hdr, sizeof hdr);
    if (err)
        return err;
    uint64_t slots = hdr[0] + 1;
    if (slots < 8 || slots > PYSTATE_DICT_INDEX_MAX || (slots & (slots - 1)) != 0 ||
        !pystate__ptr_ok(hdr[1]))
        return SCRY_E_CORRUPT;
    *n = slots < REPR_SCAN ? (size_t)slots : REPR_SCAN;
    uint64_t ent[REPR_SCAN * 2]; /* setentry: {key, hash} */
    if ((err = rmem_read(t->mem, hdr[1], ent, *n * 16)) != 0)
        return err;
    for (size_t i = 0; i < *n; i++)
        keys[i] = ent[2 * i];
    return 0;
}

/* set, frozenset: "{item, ...}", "frozenset({item, ...})", "set()" in table order (the
 * order Python shows), the first PYSTATE_REPR_ITEMS items of the first REPR_SCAN slots,
 * each at DEPTH + 1. A deleted item's slot holds the dummy key, skipped by its type. */
static int repr_set(pystate_target_t *t, raddr_t obj, const char *type, int depth,
                    pystate_value_t *v, out_t *o)
{
    int64_t len = 0;
    int err = read_len(t, obj, t->layout.set_used, v, &len);
    if (err)
        return err;
    int frozen = type[0] == 'f';
    raddr_t keys[REPR_SCAN];
    size_t n = 0;
    if (depth >= PYSTATE_REPR_DEPTH || (err = set_slots(t, obj, keys, &n)) != 0) {
        put_sized(o, type, len);
        return fatal(err) ? err : 0;
    }
    if (len == 0) {
        puts_(o, frozen ? "frozenset()" : "set()");
        return 0;
    }
    puts_(o, frozen ? "frozenset({" : "{");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < PYSTATE_REPR_ITEMS && !o->full; i++) {
        char kt[TYPE_NAME_READ + 1];
        if (!keys[i] || (err = read_type_name(t, keys[i], kt, sizeof kt)) != 0 ||
            strcmp(kt, "<dummy key> type") == 0) {
            if (fatal(err))
                return err;
            continue;
        }
        if (shown++)
            puts_(o, ", ");
        if (fatal(err = repr_any(t, keys[i], depth + 1, NULL, o)))
            return err;
    }
    if ((int64_t)shown < len)
        puts_(o, shown ? ", ..." : "...");
    puts_(o, frozen ? "})" : "}");
    return 0;
}

/* The repr of OBJ appended to O; V (the top level only) gets the type and length.
 * Returns 0, a fatal read error, or another code when OBJ could not be shown (O then
 * holds what was appended before it). */
static int repr_any(pystate_target_t *t, raddr_t obj, int depth, pystate_value_t *v, out_t *o)
{
    char type[TYPE_NAME_READ + 1];
    int err = read_type_name(t, obj, type, sizeof type);
    if (err)
        goto unreadable;
    if (v)
        snprintf(v->type, sizeof v->type, "%s", type);
    size_t mark = o->len;
    int full_mark = o->full;
    if (strcmp(type, "int") == 0 || strcmp(type, "bool") == 0)
        err = repr_int(t, obj, type[0] == 'b', o);
    else if (strcmp(type, "float") == 0)
        err = repr_float(t, obj, o);
    else if (strcmp(type, "str") == 0)
        err = repr_str(t, obj, v, o);
    else if (strcmp(type, "bytes") == 0)
        err = repr_bytes(t, obj, v, o);
    else if (strcmp(type, "NoneType") == 0)
        puts_(o, "None");
    else if (strcmp(type, "list") == 0 || strcmp(type, "tuple") == 0)
        err = repr_seq(t, obj, type[0] == 'l', depth, v, o);
    else if (strcmp(type, "dict") == 0)
        err = repr_dict(t, obj, depth, v, o);
    else if (strcmp(type, "set") == 0 || strcmp(type, "frozenset") == 0)
        err = repr_set(t, obj, type, depth, v, o);
    else {
        puts_(o, "<");
        puts_(o, type);
        puts_(o, " object>");
    }
    if (err && !fatal(err)) {
        o->len = mark;
        o->buf[mark] = 0;
        o->full = full_mark;
        goto unreadable;
    }
    return err;
unreadable:
    if (fatal(err))
        return err;
    puts_(o, "<unreadable>");
    return err;
}

int pystate_repr(pystate_target_t *t, raddr_t obj, pystate_value_t *out)
{
    if (!t || !out)
        return SCRY_E_INVAL;
    memset(out, 0, sizeof *out);
    out->len = -1;
    out_t o = {out->repr, sizeof out->repr, 0, 0};
    if (!obj) {
        puts_(&o, "<NULL>");
        return 0;
    }
    int err = repr_any(t, obj, 0, out, &o);
    return fatal(err) ? err : 0;
}

/* 3.11+ co_localspluskinds bits (Include/internal/pycore_code.h) */
#define CO_FAST_HIDDEN 0x10 /* 3.12+: an inlined comprehension's variable */
#define CO_FAST_CELL   0x40
#define CO_FAST_FREE   0x80
#define CO_VARARGS     0x04
#define CO_VARKEYWORDS 0x08

/* Reads the names of tuple TUP into NAMES[FIRST..FIRST+len) (at most MAX in all); *LEN gets
 * the tuple's length. Returns 0 or a read error; SCRY_E_CORRUPT when it is no tuple. */
static int read_names(pystate_target_t *t, raddr_t tup, char (*names)[PYSTATE_LOCAL_NAME_MAX],
                      size_t first, size_t max, size_t *len)
{
    const pystate_layout_t *L = &t->layout;
    char type[TYPE_NAME_READ + 1];
    int64_t n = 0;
    *len = 0;
    int err = read_type_name(t, tup, type, sizeof type);
    if (!err && strcmp(type, "tuple") != 0)
        err = SCRY_E_CORRUPT;
    if (!err)
        err = read_size(t, tup, L->var_size, &n);
    if (err)
        return err;
    if (first + (uint64_t)n > max)
        return SCRY_E_CORRUPT; /* more slots than a frame may show: not a real code object */
    raddr_t ptrs[PYSTATE_LOCALS_MAX];
    if (n && (err = rmem_read(t->mem, tup + (uint64_t)L->tuple_items, ptrs, (size_t)n * 8)))
        return err;
    for (size_t i = 0; i < (size_t)n; i++) {
        char *name = names[first + i];
        if (pystate__read_str(t, ptrs[i], name, PYSTATE_LOCAL_NAME_MAX) < 0)
            snprintf(name, PYSTATE_LOCAL_NAME_MAX, "?");
    }
    *len = (size_t)n;
    return 0;
}

static int set_unbound(pystate_local_t *l, const char *why)
{
    l->unbound = 1;
    memset(&l->value, 0, sizeof l->value);
    l->value.len = -1;
    snprintf(l->value.repr, sizeof l->value.repr, "%s", why);
    return 0;
}

/* The value in slot V: a cell shows its contents; 3.14+ slots are _PyStackRefs (tag bits
 * cleared; a tagged int is its value). */
static int slot_value(pystate_target_t *t, uint64_t v, pystate_local_t *l)
{
    const pystate_layout_t *L = &t->layout;
    if (L->minor >= 14) {
        if ((v & 3) == 3) {
            snprintf(l->value.type, sizeof l->value.type, "int");
            l->value.len = -1;
            snprintf(l->value.repr, sizeof l->value.repr, "%lld", (long long)((int64_t)v >> 2));
            return 0;
        }
        v &= ~(uint64_t)3;
    }
    if (!v) {
        return set_unbound(l, "<unbound>");
    }
    char type[TYPE_NAME_READ + 1];
    if (L->cell_ref >= 0 && read_type_name(t, v, type, sizeof type) == 0 &&
        strcmp(type, "cell") == 0) {
        uint64_t ref = 0;
        int err = rmem_read(t->mem, v + (uint64_t)L->cell_ref, &ref, 8);
        if (fatal(err))
            return err;
        if (err)
            ref = 0;
        if (!ref) {
            return set_unbound(l, "<empty cell>");
        }
        v = ref;
    }
    return pystate_repr(t, v, &l->value);
}

int pystate_frame_locals(pystate_target_t *t, raddr_t frame, pystate_local_t *out, size_t max,
                         size_t *n)
{
    if (!t || !out || !n)
        return SCRY_E_INVAL;
    *n = 0;
    const pystate_layout_t *L = &t->layout;
    int modern = L->frame_style != PYSTATE_FRAMES_OBJECTS;
    int64_t code_off = modern ? L->iframe_code : L->frame_code;
    int64_t slots_off = modern ? L->iframe_localsplus : L->frame_localsplus;
    if (!frame || code_off < 0 || slots_off < 0 || L->code_argcount < 0 ||
        L->code_kwonlyargcount < 0 || L->code_flags < 0 || L->tuple_items < 0)
        return SCRY_E_UNSUPPORTED;
    if (max > PYSTATE_LOCALS_MAX)
        max = PYSTATE_LOCALS_MAX;
    char type[TYPE_NAME_READ + 1];
    uint64_t code = 0;
    int err = rmem_read(t->mem, frame + (uint64_t)code_off, &code, 8);
    if (!err && modern)
        code &= ~(uint64_t)7; /* 3.14+: a _PyStackRef */
    if (!err)
        err = read_type_name(t, code, type, sizeof type);
    if (!err && strcmp(type, "code") != 0)
        err = SCRY_E_CORRUPT;
    int32_t argc = 0, kwonly = 0, flags = 0;
    if (!err)
        err = rmem_read(t->mem, code + (uint64_t)L->code_argcount, &argc, 4);
    if (!err)
        err = rmem_read(t->mem, code + (uint64_t)L->code_kwonlyargcount, &kwonly, 4);
    if (!err)
        err = rmem_read(t->mem, code + (uint64_t)L->code_flags, &flags, 4);
    if (err)
        return fatal(err) ? err : SCRY_E_CORRUPT;
    if (argc < 0 || kwonly < 0 || argc > PYSTATE_LOCALS_MAX || kwonly > PYSTATE_LOCALS_MAX)
        return SCRY_E_CORRUPT;
    size_t nargs =
        (size_t)argc + (size_t)kwonly + !!(flags & CO_VARARGS) + !!(flags & CO_VARKEYWORDS);

    /* Names and kinds of the slots, in slot order. */
    char names[PYSTATE_LOCALS_MAX][PYSTATE_LOCAL_NAME_MAX]; /* 16 KiB */
    size_t nslots = 0;
    uint8_t kinds[PYSTATE_LOCALS_MAX] = {0};
    memset(out, 0, max * sizeof *out);
    if (modern) {
        raddr_t tup = 0, kb = 0;
        err = rmem_read(t->mem, code + (uint64_t)L->code_localsplusnames, &tup, 8);
        if (!err)
            err = rmem_read(t->mem, code + (uint64_t)L->code_localspluskinds, &kb, 8);
        if (!err)
            err = read_names(t, tup, names, 0, PYSTATE_LOCALS_MAX, &nslots);
        if (!err && nslots &&
            (err = rmem_read(t->mem, kb + (uint64_t)L->bytes_sval, kinds, nslots)))
            err = SCRY_E_CORRUPT;
    } else {
        /* <= 3.10: varnames, then cellvars, then freevars */
        const int64_t offs[3] = {L->code_varnames, L->code_cellvars, L->code_freevars};
        const uint8_t kind_of[3] = {0, CO_FAST_CELL, CO_FAST_FREE};
        for (int g = 0; g < 3 && !err; g++) {
            raddr_t tup = 0;
            size_t k = 0;
            err = offs[g] < 0 ? SCRY_E_UNSUPPORTED
                              : rmem_read(t->mem, code + (uint64_t)offs[g], &tup, 8);
            if (!err)
                err = read_names(t, tup, names, nslots, PYSTATE_LOCALS_MAX, &k);
            for (size_t i = 0; i < k && !err; i++)
                kinds[nslots + i] = kind_of[g];
            nslots += k;
        }
    }
    if (err)
        return fatal(err) ? err : SCRY_E_CORRUPT;
    uint64_t vals[PYSTATE_LOCALS_MAX];
    if (nslots && (err = rmem_read(t->mem, frame + (uint64_t)slots_off, vals, nslots * 8)))
        return fatal(err) ? err : SCRY_E_CORRUPT;
    size_t w = 0;
    for (size_t i = 0; i < nslots && w < max; i++) {
        if (kinds[i] & CO_FAST_HIDDEN)
            continue;
        pystate_local_t *l = &out[w];
        memcpy(l->name, names[i], sizeof l->name);
        l->is_arg = i < nargs;
        l->kind = (kinds[i] & CO_FAST_FREE)   ? PYSTATE_LOCAL_FREE
                  : (kinds[i] & CO_FAST_CELL) ? PYSTATE_LOCAL_CELL
                                              : PYSTATE_LOCAL_PLAIN;
        l->unbound = 0;
        err = slot_value(t, vals[i], l);
        if (err)
            return err;
        w++;
    }
    *n = w;
    return 0;
}
