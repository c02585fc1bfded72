/* threadnames.c - threading._active's names, read from outside (see threadnames.h).
 *
 * Phases, each one batched read over all threads: the ident ints (keys of _active), the
 * Thread objects with their pre-header, their types, where their attributes live (instance
 * dict pointer, dict header, 3.13 inline values' 'valid' byte), the index of '_name' in each
 * distinct keys object, the value slots, and finally the name strs themselves.
 */
#include "threadnames.h"

#include "internal.h"
#include "pystr.h"
#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

#define NM_IOV_BATCH             1024        /* regions per process_vm_readv */
#define NM_STR_PEEK              128         /* bytes read at a str: its header and a short text */
#define NM_TYPE_NAME_MAX         32          /* bytes of a tp_name compared */
#define NM_HDR_MAX               256         /* bytes of a dict or keys header */
#define NM_TYPE_READ_MAX         2048        /* bytes of a (heap) type object read */
#define NM_DIGITS_MAX            5           /* digits of a 64-bit ident (3 of 30 bits, 5 of 15) */
#define NM_TPFLAGS_HEAPTYPE      (1ull << 9) /* Py_TPFLAGS_HEAPTYPE: the same in every 3.x */
#define NM_MODULE_DICTOFFSET_MAX 256

typedef struct nm {
    pystate_target_t *t;
    const pystate_layout_t *L;
    pystate_names_t *c;
} nm_t;

/* A dict's entry table, located. */
/* One thread on its way from _active to a name. */
typedef struct nm_thread {
    uint64_t ident;
    raddr_t obj;
    raddr_t type;
    raddr_t dict;   /* instance dict, when the attributes live in one */
    raddr_t keys;   /* keys object of the attributes */
    raddr_t values; /* values[0] of split or inline values; 0 for a combined dict */
    raddr_t vbase;  /* 3.13 inline values: the PyDictValues (its 'valid' byte) */
    raddr_t slot;   /* where the pointer to the name str is */
    raddr_t name;   /* the str object */
    int alive;      /* still on its way */
} nm_thread_t;

typedef struct nm_type {
    raddr_t addr;
    uint64_t flags;
    int64_t basicsize, dictoffset;
    raddr_t cached_keys;
    int ok;
} nm_type_t;

typedef struct nm_keys {
    raddr_t keys;
    pystate_dict_t d;
    int64_t ix; /* entry index of '_name', -1 when absent */
} nm_keys_t;

/* A pointer that could be a heap or static object: nonzero, 8-aligned, user space. */
static int ptr_ok(raddr_t p)
{
    return pystate__ptr_ok(p);
}

/* Reads the nonempty regions of IOV[0..N) in batches; OK[i] says which were read (empty
 * ones count as not read). A faulting region is left out. Returns 0, SCRY_E_GONE,
 * SCRY_E_PERM or SCRY_E_NOMEM. */
static int nm_readv(nm_t *m, const rmem_iov_t *iov, size_t n, uint8_t *ok)
{
    memset(ok, 0, n);
    rmem_iov_t *v = malloc((n ? n : 1) * sizeof *v);
    size_t *at = malloc((n ? n : 1) * sizeof *at);
    size_t k = 0, i = 0;
    int err = 0;
    if (!v || !at) {
        err = SCRY_E_NOMEM;
        goto out;
    }
    for (size_t j = 0; j < n; j++)
        if (iov[j].len) {
            v[k] = iov[j];
            at[k++] = j;
        }
    while (i < k) {
        size_t batch = k - i < NM_IOV_BATCH ? k - i : NM_IOV_BATCH;
        int got = rmem_readv(m->t->mem, v + i, batch);
        if (got < 0 && got != SCRY_E_FAULT) {
            err = got;
            goto out;
        }
        if (got < 0)
            got = 0;
        for (int g = 0; g < got; g++)
            ok[at[i + (size_t)g]] = 1;
        i += (size_t)got;
        if ((size_t)got < batch)
            i++; /* that region faulted (or was cut): leave it out */
    }
out:
    free(v);
    free(at);
    return err;
}

/* Is TYPE the type named NAME? Checked by reading tp_name once, then by address. */
static int nm_type_is(nm_t *m, raddr_t type, const char *name, raddr_t *cached)
{
    if (*cached)
        return type == *cached;
    if (!ptr_ok(type))
        return 0;
    raddr_t np = 0;
    char buf[NM_TYPE_NAME_MAX];
    if (rmem_read_u64(m->t->mem, type + (uint64_t)m->L->type_name, &np) != 0 || !np ||
        rmem_read_cstr(m->t->mem, np, buf, sizeof buf) < 0 || strcmp(buf, name) != 0)
        return 0;
    *cached = type;
    return 1;
}

/* Decodes the header of a str read into BUF (LEN bytes); 0 or SCRY_E_CORRUPT. */
static int nm_str_head(nm_t *m, const uint8_t *buf, size_t len, pystate_str_state_t *st,
                       int64_t *length)
{
    const pystate_layout_t *L = m->L;
    if (!nm_type_is(m, pystate__u64_at(buf, len, L->object_type), "str", &m->c->type_str))
        return SCRY_E_CORRUPT;
    if (L->unicode_state < 0 || (uint64_t)L->unicode_state + 4 > len)
        return SCRY_E_CORRUPT;
    if (pystate_str_decode_state(L->unicode_style, pystate__u32_at(buf, len, L->unicode_state),
                                 st) != 0)
        return SCRY_E_CORRUPT;
    *length = (int64_t)pystate__u64_at(buf, len, L->unicode_length);
    if (*length < 0 || *length > (1 << 24))
        return SCRY_E_CORRUPT;
    return 0;
}

/* Is the str read into BUF exactly the ASCII text WANT? */
static int nm_str_equals(nm_t *m, const uint8_t *buf, size_t len, const char *want)
{
    pystate_str_state_t st;
    int64_t length = 0;
    size_t wlen = strlen(want);
    size_t at = (size_t)m->L->unicode_ascii_size;
    if (nm_str_head(m, buf, len, &st, &length) != 0 || !st.compact || !st.ascii ||
        (size_t)length != wlen || at + wlen > len)
        return 0;
    return memcmp(buf + at, want, wlen) == 0;
}

/* The buffers of one batched read: N requests of up to SLOT bytes each into BUFS, and
 * whether each succeeded. */
typedef struct nm_batch {
    rmem_iov_t *iov;
    uint8_t *bufs;
    uint8_t *ok;
} nm_batch_t;

/* Allocates B for N requests of SLOT bytes: 0 or SCRY_E_NOMEM; B is freed with
 * nm_batch_free() either way. */
static int nm_batch_new(nm_batch_t *b, size_t n, size_t slot)
{
    if (n == 0)
        n = 1;
    b->iov = calloc(n, sizeof *b->iov);
    b->bufs = malloc(n * slot);
    b->ok = malloc(n);
    return b->iov && b->bufs && b->ok ? 0 : SCRY_E_NOMEM;
}

static void nm_batch_free(nm_batch_t *b)
{
    free(b->iov);
    free(b->bufs);
    free(b->ok);
}

/* Index in KEYS[0..N) of the first str equal to WANT (ASCII), read in one batch; -1 when
 * none; a negative code below -1 for GONE/PERM/NOMEM. */
static int64_t nm_find_str(nm_t *m, const raddr_t *keys, size_t n, const char *want)
{
    size_t peek = (size_t)m->L->unicode_ascii_size + strlen(want);
    if (n == 0)
        return -1;
    if (peek > NM_STR_PEEK)
        return -1;
    rmem_iov_t *iov = calloc(n, sizeof *iov);
    size_t *which = malloc(n * sizeof *which);
    uint8_t *bufs = malloc(n * peek);
    uint8_t *ok = malloc(n);
    int64_t found = -1;
    size_t k = 0;
    if (!iov || !which || !bufs || !ok) {
        found = SCRY_E_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!ptr_ok(keys[i]))
            continue;
        iov[k] = (rmem_iov_t){keys[i], bufs + k * peek, peek};
        which[k++] = i;
    }
    int err = nm_readv(m, iov, k, ok);
    if (err) {
        found = err;
        goto out;
    }
    for (size_t j = 0; j < k; j++) {
        if (!ok[j]) {
            /* The peek ran past a mapping: the object is shorter than WANT's str would be
             * unless its header says otherwise. */
            pystate_str_state_t st;
            int64_t length = 0;
            size_t hl = (size_t)m->L->unicode_ascii_size;
            if (rmem_read(m->t->mem, iov[j].addr, bufs + j * peek, hl) != 0 ||
                nm_str_head(m, bufs + j * peek, hl, &st, &length) != 0 ||
                (size_t)length != strlen(want))
                continue;
            ok[j] = rmem_read(m->t->mem, iov[j].addr, bufs + j * peek, peek) == 0;
        }
        if (ok[j] && nm_str_equals(m, bufs + j * peek, peek, want)) {
            found = (int64_t)which[j];
            break;
        }
    }
out:
    free(iov);
    free(which);
    free(bufs);
    free(ok);
    return found;
}

/* The dict object at DICT (checked to be a dict); 0, SCRY_E_CORRUPT or a read error. */
static int nm_dict_open(nm_t *m, raddr_t dict, pystate_dict_t *d)
{
    const pystate_layout_t *L = m->L;
    uint8_t h[NM_HDR_MAX];
    size_t hl = (size_t)(L->dict_keys > L->dict_values ? L->dict_keys : L->dict_values) + 8;
    if (!ptr_ok(dict))
        return SCRY_E_CORRUPT;
    int err = rmem_read(m->t->mem, dict, h, hl);
    if (err)
        return err;
    if (!nm_type_is(m, pystate__u64_at(h, hl, L->object_type), "dict", &m->c->type_dict))
        return SCRY_E_CORRUPT;
    raddr_t values = pystate__u64_at(h, hl, L->dict_values);
    return pystate__dict_keys_open(m->t, pystate__u64_at(h, hl, L->dict_keys),
                                   values ? values + (uint64_t)L->dictvalues_values : 0, d);
}

/* Reads the key and value pointers of D's entries into new arrays (caller frees both). */
static int nm_dict_items(nm_t *m, const pystate_dict_t *d, raddr_t **keys_out, raddr_t **vals_out)
{
    size_t n = d->n;
    *keys_out = *vals_out = NULL;
    uint8_t *ent = malloc(n ? n * d->esize : 1);
    raddr_t *keys = calloc(n ? n : 1, sizeof *keys);
    raddr_t *vals = calloc(n ? n : 1, sizeof *vals);
    int err = 0;
    if (!ent || !keys || !vals) {
        err = SCRY_E_NOMEM;
        goto fail;
    }
    if (n && (err = rmem_read(m->t->mem, d->entries, ent, n * d->esize)) != 0)
        goto fail;
    if (n && d->values && (err = rmem_read(m->t->mem, d->values, vals, n * 8)) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        keys[i] = pystate__u64_at(ent + i * d->esize, d->esize, d->ekey);
        if (!d->values)
            vals[i] = pystate__u64_at(ent + i * d->esize, d->esize, d->evalue);
    }
    free(ent);
    *keys_out = keys;
    *vals_out = vals;
    return 0;
fail:
    free(ent);
    free(keys);
    free(vals);
    return err;
}

/* Where entry IX's value pointer is. */
static raddr_t nm_value_slot(const pystate_dict_t *d, uint64_t ix)
{
    return d->values ? d->values + ix * 8 : d->entries + ix * d->esize + d->evalue;
}

/* The value of key WANT in the dict at DICT: tries entry *HINT first, then every entry
 * (updating *HINT). 0, SCRY_E_NOTFOUND, or another negative code. */
static int nm_dict_get(nm_t *m, raddr_t dict, const char *want, uint32_t *hint, raddr_t *value)
{
    pystate_dict_t d;
    int err = nm_dict_open(m, dict, &d);
    if (err)
        return err;
    if (*hint < d.n) {
        uint8_t e[64];
        raddr_t key;
        if (d.esize <= sizeof e &&
            rmem_read(m->t->mem, d.entries + (uint64_t)*hint * d.esize, e, d.esize) == 0) {
            key = pystate__u64_at(e, d.esize, d.ekey);
            if (nm_find_str(m, &key, 1, want) == 0 &&
                rmem_read_u64(m->t->mem, nm_value_slot(&d, *hint), value) == 0 && *value)
                return 0;
        }
    }
    raddr_t *keys, *vals;
    if ((err = nm_dict_items(m, &d, &keys, &vals)) != 0)
        return err;
    int64_t ix = nm_find_str(m, keys, d.n, want);
    if (ix >= 0) {
        *hint = (uint32_t)ix;
        *value = vals[ix];
    }
    free(keys);
    free(vals);
    if (ix < -1)
        return (int)ix;
    return ix >= 0 && *value ? 0 : SCRY_E_NOTFOUND;
}

/* threading._active of the interpreter at INTERP. */
static int nm_find_active(nm_t *m, raddr_t interp, raddr_t *active)
{
    const pystate_layout_t *L = m->L;
    raddr_t modules = 0, mod = 0, type = 0, mdict = 0;
    int err = rmem_read_u64(m->t->mem, interp + (uint64_t)L->interp_modules, &modules);
    if (err)
        return err;
    if (!modules)
        return SCRY_E_NOTFOUND; /* before initialisation or after finalisation */
    if ((err = nm_dict_get(m, modules, "threading", &m->c->hint_modules, &mod)) != 0)
        return err;
    if ((err = rmem_read_u64(m->t->mem, mod + (uint64_t)L->object_type, &type)) != 0)
        return err;
    if (!nm_type_is(m, type, "module", &m->c->type_module))
        return SCRY_E_NOTFOUND; /* sys.modules['threading'] replaced by something else */
    if (!m->c->module_dictoffset) {
        int64_t off = 0;
        if ((err = rmem_read(m->t->mem, type + (uint64_t)L->type_dictoffset, &off, 8)) != 0)
            return err;
        if (off < L->var_size || off > NM_MODULE_DICTOFFSET_MAX || off % 8 != 0)
            return SCRY_E_CORRUPT;
        m->c->module_dictoffset = off;
    }
    if ((err = rmem_read_u64(m->t->mem, mod + (uint64_t)m->c->module_dictoffset, &mdict)) != 0)
        return err;
    return nm_dict_get(m, mdict, "_active", &m->c->hint_module_dict, active);
}

/* Decodes a non-negative int read into BUF (LEN bytes) into *OUT; 0 or SCRY_E_CORRUPT. */
static int nm_long(nm_t *m, const uint8_t *buf, size_t len, uint64_t *out)
{
    const pystate_layout_t *L = m->L;
    if (!nm_type_is(m, pystate__u64_at(buf, len, L->object_type), "int", &m->c->type_int))
        return SCRY_E_CORRUPT;
    uint64_t nd;
    if (L->long_tag >= 0) {
        uint64_t tag = pystate__u64_at(buf, len, L->long_tag);
        if ((tag & 3) == 2) /* negative */
            return SCRY_E_CORRUPT;
        nd = tag >> L->long_tag_shift;
        if ((tag & 3) == 1 && nd != 0)
            return SCRY_E_CORRUPT;
    } else {
        int64_t size = (int64_t)pystate__u64_at(buf, len, L->long_size);
        if (size < 0)
            return SCRY_E_CORRUPT;
        nd = (uint64_t)size;
    }
    unsigned shift = (unsigned)L->long_shift, ds = (unsigned)L->long_digit_size;
    if (nd > NM_DIGITS_MAX || (uint64_t)L->long_digits + nd * ds > len)
        return SCRY_E_CORRUPT;
    uint64_t v = 0;
    for (uint64_t i = 0; i < nd; i++) {
        uint64_t dg =
            ds == 4
                ? pystate__u32_at(buf, len, L->long_digits + (int64_t)(i * 4))
                : (uint64_t)(uint16_t)pystate__u32_at(buf, len, L->long_digits + (int64_t)(i * 2));
        unsigned at = (unsigned)(i * shift);
        if (dg >> shift || at >= 64 || ((dg << at) >> at) != dg)
            return SCRY_E_CORRUPT;
        v |= dg << at;
    }
    *out = v;
    return 0;
}

/* Reads the ident ints KEYS[0..N) into TH[i].ident (alive when sane). */
static int nm_read_idents(nm_t *m, const raddr_t *keys, const raddr_t *vals, size_t n,
                          nm_thread_t *th, size_t *count)
{
    const pystate_layout_t *L = m->L;
    size_t peek = (size_t)L->long_digits + NM_DIGITS_MAX * (size_t)L->long_digit_size;
    nm_batch_t bt;
    size_t k = 0;
    int err = nm_batch_new(&bt, n, peek);
    if (err)
        goto out;
    for (size_t i = 0; i < n && k < PYSTATE_NAMES_MAX; i++) {
        if (!ptr_ok(keys[i]) || !ptr_ok(vals[i]))
            continue; /* a deleted entry */
        memset(&th[k], 0, sizeof th[k]);
        th[k].obj = vals[i];
        bt.iov[k] = (rmem_iov_t){keys[i], bt.bufs + k * peek, peek};
        k++;
    }
    if ((err = nm_readv(m, bt.iov, k, bt.ok)) != 0)
        goto out;
    for (size_t j = 0; j < k; j++) {
        uint8_t *b = bt.bufs + j * peek;
        if (!bt.ok[j]) {
            /* Near the end of a mapping: the header, then just the digits it counts. */
            memset(b, 0, peek);
            uint64_t nd = NM_DIGITS_MAX + 1;
            if (rmem_read(m->t->mem, bt.iov[j].addr, b, (size_t)L->long_digits) == 0)
                nd = L->long_tag >= 0 ? pystate__u64_at(b, peek, L->long_tag) >> L->long_tag_shift
                                      : pystate__u64_at(b, peek, L->long_size);
            bt.ok[j] = nd <= NM_DIGITS_MAX &&
                       (nd == 0 || rmem_read(m->t->mem, bt.iov[j].addr + (uint64_t)L->long_digits,
                                             b + L->long_digits,
                                             (size_t)nd * (size_t)L->long_digit_size) == 0);
        }
        th[j].alive = bt.ok[j] && nm_long(m, b, peek, &th[j].ident) == 0;
    }
out:
    *count = k;
    nm_batch_free(&bt);
    return err;
}

/* The type record of TYPE among TYPES[0..*NT), read when new. */
static const nm_type_t *nm_type(nm_t *m, raddr_t type, nm_type_t *types, size_t *nt)
{
    const pystate_layout_t *L = m->L;
    for (size_t i = 0; i < *nt; i++)
        if (types[i].addr == type)
            return &types[i];
    if (*nt >= PYSTATE_NAMES_TYPES)
        return NULL;
    nm_type_t *ty = &types[(*nt)++];
    memset(ty, 0, sizeof *ty);
    ty->addr = type;
    uint8_t buf[NM_TYPE_READ_MAX];
    size_t len = (size_t)L->heaptype_cached_keys + 8;
    if (!ptr_ok(type) || len > sizeof buf || rmem_read(m->t->mem, type, buf, len) != 0)
        return ty;
    ty->flags = pystate__u64_at(buf, len, L->type_flags);
    ty->basicsize = (int64_t)pystate__u64_at(buf, len, L->type_basicsize);
    ty->dictoffset = (int64_t)pystate__u64_at(buf, len, L->type_dictoffset);
    /* Thread classes are classes written in Python: heap types with shared keys. */
    if (!(ty->flags & NM_TPFLAGS_HEAPTYPE) || ty->basicsize < L->var_size ||
        ty->basicsize > (1 << 16))
        return ty;
    ty->cached_keys = pystate__u64_at(buf, len, L->heaptype_cached_keys);
    ty->ok = 1;
    return ty;
}

/* Phase: the objects' types and pre-headers, then where their attributes are. */
static int nm_locate_attrs(nm_t *m, nm_thread_t *th, size_t n)
{
    const pystate_layout_t *L = m->L;
    int64_t pre = 0;
    if (L->object_managed_dict_before > pre)
        pre = L->object_managed_dict_before;
    if (L->object_managed_values_before > pre)
        pre = L->object_managed_values_before;
    size_t len = (size_t)pre + (size_t)L->object_type + 8;
    nm_type_t types[PYSTATE_NAMES_TYPES];
    size_t nt = 0;
    nm_batch_t bt;
    int err = nm_batch_new(&bt, n, len);
    if (err)
        goto out;
    for (size_t i = 0; i < n; i++)
        bt.iov[i] = (rmem_iov_t){th[i].alive ? th[i].obj - (uint64_t)pre : 0, bt.bufs + i * len,
                                 th[i].alive ? len : 0};
    if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        nm_thread_t *h = &th[i];
        const uint8_t *b = bt.bufs + i * len;
        if (!h->alive || !bt.ok[i]) {
            h->alive = 0;
            continue;
        }
        h->type = pystate__u64_at(b, len, pre + L->object_type);
        const nm_type_t *ty = nm_type(m, h->type, types, &nt);
        if (!ty || !ty->ok) {
            h->alive = 0;
            continue;
        }
        int managed = L->type_flag_managed_dict >= 0 &&
                      (ty->flags & (uint64_t)L->type_flag_managed_dict) != 0;
        if (managed && L->object_managed_values_before >= 0) { /* 3.11 */
            raddr_t v = pystate__u64_at(b, len, pre - L->object_managed_values_before);
            if (v) {
                h->values = v + (uint64_t)L->dictvalues_values;
                h->keys = ty->cached_keys;
            } else {
                h->dict = pystate__u64_at(b, len, pre - L->object_managed_dict_before);
            }
        } else if (managed && L->object_dict_values_tag >= 0) { /* 3.12 */
            raddr_t s = pystate__u64_at(b, len, pre - L->object_managed_dict_before);
            if (s & (uint64_t)L->object_dict_values_tag) {
                h->values =
                    s + (uint64_t)L->object_dict_values_tag + (uint64_t)L->dictvalues_values;
                h->keys = ty->cached_keys;
            } else {
                h->dict = s;
            }
        } else if (managed) { /* 3.13+: a materialised dict, else the inline values */
            h->dict = pystate__u64_at(b, len, pre - L->object_managed_dict_before);
            if (!h->dict && L->type_flag_inline_values >= 0 &&
                (ty->flags & (uint64_t)L->type_flag_inline_values)) {
                h->vbase = h->obj + (uint64_t)ty->basicsize;
                h->values = h->vbase + (uint64_t)L->dictvalues_values;
                h->keys = ty->cached_keys;
            }
        } else if (ty->dictoffset > 0 && ty->dictoffset < (1 << 16)) {
            h->slot = h->obj + (uint64_t)ty->dictoffset; /* the dict pointer, read below */
        }
        if (!h->dict && !h->keys && !h->slot)
            h->alive = 0;
    }
out:
    nm_batch_free(&bt);
    return err;
}

/* Phase: tp_dictoffset dict pointers, then dict headers (keys, split values), then 3.13's
 * inline values 'valid' byte. */
static int nm_read_dicts(nm_t *m, nm_thread_t *th, size_t n)
{
    const pystate_layout_t *L = m->L;
    size_t hl = (size_t)(L->dict_keys > L->dict_values ? L->dict_keys : L->dict_values) + 8;
    if (hl < (size_t)L->object_type + 8)
        hl = (size_t)L->object_type + 8;
    nm_batch_t bt;
    int err = nm_batch_new(&bt, n, hl);
    if (err)
        goto out;
    /* tp_dictoffset: the dict pointer */
    for (size_t i = 0; i < n; i++) {
        int want = th[i].alive && th[i].slot;
        bt.iov[i] = (rmem_iov_t){want ? th[i].slot : 0, bt.bufs + i * hl, want ? 8 : 0};
    }
    if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (th[i].alive && th[i].slot) {
            th[i].dict = bt.ok[i] ? pystate__u64_at(bt.bufs + i * hl, 8, 0) : 0;
            th[i].slot = 0;
            th[i].alive = th[i].dict != 0;
        }
    /* dict headers */
    for (size_t i = 0; i < n; i++) {
        int want = th[i].alive && th[i].dict;
        bt.iov[i] = (rmem_iov_t){want ? th[i].dict : 0, bt.bufs + i * hl, want ? hl : 0};
    }
    if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        nm_thread_t *h = &th[i];
        if (!h->alive || !h->dict)
            continue;
        const uint8_t *b = bt.bufs + i * hl;
        if (!bt.ok[i] ||
            !nm_type_is(m, pystate__u64_at(b, hl, L->object_type), "dict", &m->c->type_dict)) {
            h->alive = 0;
            continue;
        }
        raddr_t v = pystate__u64_at(b, hl, L->dict_values);
        h->keys = pystate__u64_at(b, hl, L->dict_keys);
        h->values = v ? v + (uint64_t)L->dictvalues_values : 0;
    }
    /* 3.13 inline values: still valid? */
    if (L->dictvalues_valid >= 0) {
        for (size_t i = 0; i < n; i++) {
            int want = th[i].alive && th[i].vbase;
            bt.iov[i] = (rmem_iov_t){want ? th[i].vbase + (uint64_t)L->dictvalues_valid : 0,
                                     bt.bufs + i * hl, want ? 1 : 0};
        }
        if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
            goto out;
        for (size_t i = 0; i < n; i++)
            if (th[i].alive && th[i].vbase && (!bt.ok[i] || bt.bufs[i * hl] == 0))
                th[i].alive = 0;
    }
out:
    nm_batch_free(&bt);
    return err;
}

/* Phase: the index of '_name' in each distinct keys object, then each value slot. */
static int nm_find_name_slots(nm_t *m, nm_thread_t *th, size_t n)
{
    nm_keys_t *ks = malloc((n ? n : 1) * sizeof *ks);
    size_t nk = 0;
    int err = 0;
    if (!ks)
        return SCRY_E_NOMEM;
    for (size_t i = 0; i < n && !err; i++) {
        nm_thread_t *h = &th[i];
        if (!h->alive)
            continue;
        nm_keys_t *k = NULL;
        for (size_t j = 0; j < nk && !k; j++)
            if (ks[j].keys == h->keys)
                k = &ks[j];
        if (!k) {
            k = &ks[nk++];
            k->keys = h->keys;
            k->ix = -1;
            if (pystate__dict_keys_open(m->t, h->keys, 0, &k->d) == 0) {
                raddr_t *keys, *vals;
                err = nm_dict_items(m, &k->d, &keys, &vals);
                if (err == SCRY_E_FAULT)
                    err = 0;
                else if (!err) {
                    int64_t ix = nm_find_str(m, keys, k->d.n, "_name");
                    free(keys);
                    free(vals);
                    if (ix < -1)
                        err = (int)ix;
                    k->ix = ix;
                }
            }
        }
        if (k->ix < 0) {
            h->alive = 0;
            continue;
        }
        pystate_dict_t d = k->d;
        d.values = h->values;
        h->slot = nm_value_slot(&d, (uint64_t)k->ix);
    }
    free(ks);
    return err == SCRY_E_GONE || err == SCRY_E_PERM || err == SCRY_E_NOMEM ? err : 0;
}

/* Converts the str at ADDR, peeked into BUF (LEN bytes read, OK says whether), to UTF-8. */
static int nm_name(nm_t *m, raddr_t addr, const uint8_t *buf, size_t len, int ok, char *out,
                   size_t max)
{
    const pystate_layout_t *L = m->L;
    pystate_str_state_t st;
    int64_t length = 0, off = 0;
    int indirect = 0;
    if (!ok) /* the peek ran past a mapping: read it exactly */
        return pystate__read_str(m->t, addr, out, max);
    if (nm_str_head(m, buf, len, &st, &length) != 0)
        return SCRY_E_CORRUPT;
    if (pystate_str_data_location(L, &st, &off, &indirect) != 0 || indirect || off < 0 ||
        (uint64_t)off + (uint64_t)length * (uint64_t)st.kind > len)
        return pystate__read_str(m->t, addr, out, max); /* long or non-compact */
    size_t written = 0;
    int err = pystate_str_to_utf8(buf + off, len - (size_t)off, st.kind, st.ascii, (uint64_t)length,
                                  out, max, &written);
    return err && err != SCRY_E_TRUNC ? err : (int)written;
}

/* Phase: the value slots (pointers to the names), then the names. */
static int nm_read_names(nm_t *m, nm_thread_t *th, size_t n, pystate_name_map_t *out)
{
    nm_batch_t bt;
    int err = nm_batch_new(&bt, n, NM_STR_PEEK);
    if (err)
        goto out;
    for (size_t i = 0; i < n; i++) {
        int want = th[i].alive && th[i].slot;
        bt.iov[i] = (rmem_iov_t){want ? th[i].slot : 0, &th[i].name, want ? 8 : 0};
        th[i].name = 0;
    }
    if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        int want = th[i].alive && bt.ok[i] && ptr_ok(th[i].name);
        th[i].alive = want;
        bt.iov[i] =
            (rmem_iov_t){want ? th[i].name : 0, bt.bufs + i * NM_STR_PEEK, want ? NM_STR_PEEK : 0};
    }
    if ((err = nm_readv(m, bt.iov, n, bt.ok)) != 0)
        goto out;
    for (size_t i = 0; i < n && out->count < PYSTATE_NAMES_MAX; i++) {
        if (!th[i].alive)
            continue;
        char name[PYSTATE_STR_MAX];
        int len = nm_name(m, th[i].name, bt.bufs + i * NM_STR_PEEK, NM_STR_PEEK, bt.ok[i], name,
                          sizeof name);
        if (len == SCRY_E_GONE || len == SCRY_E_PERM) {
            err = len;
            goto out;
        }
        if (len < 0)
            continue;
        const char *s = strtab_intern_n(m->t->strings, name, (size_t)len);
        if (!s) {
            err = SCRY_E_NOMEM;
            goto out;
        }
        out->items[out->count++] = (pystate_thread_name_t){th[i].ident, s};
    }
out:
    nm_batch_free(&bt);
    return err;
}

static int cmp_ident(const void *a, const void *b)
{
    uint64_t x = ((const pystate_thread_name_t *)a)->ident;
    uint64_t y = ((const pystate_thread_name_t *)b)->ident;
    return x < y ? -1 : x > y;
}

/* Every field the walk uses is present and small enough for the fixed buffers. */
static int layout_ok(const pystate_layout_t *L)
{
    return L->interp_modules >= 0 && L->object_type >= 0 && L->type_name >= 0 &&
           L->dict_keys >= 0 && L->dict_values >= 0 && L->dict_keys + 8 <= NM_HDR_MAX &&
           L->dict_values + 8 <= NM_HDR_MAX && L->dictkeys_indices > 0 &&
           L->dictkeys_indices <= NM_HDR_MAX && L->dictkeys_nentries >= 0 &&
           (L->dictkeys_size >= 0 || L->dictkeys_log2_size >= 0) && L->dictentry_size > 0 &&
           L->dictentry_size <= 64 &&
           (L->dictkeys_kind < 0 || (L->dictuentry_size > 0 && L->dictuentry_size <= 64)) &&
           L->dictvalues_values >= 0 && (L->long_size >= 0 || L->long_tag >= 0) &&
           (L->long_tag < 0 || (L->long_tag_shift > 0 && L->long_tag_shift < 8)) &&
           L->long_digits >= 0 && (L->long_shift == 30 || L->long_shift == 15) &&
           (L->long_digit_size == 4 || L->long_digit_size == 2) && L->type_flags >= 0 &&
           L->type_basicsize >= 0 && L->type_dictoffset >= 0 && L->heaptype_cached_keys > 0 &&
           L->heaptype_cached_keys + 8 <= NM_TYPE_READ_MAX && L->var_size > 0 &&
           L->unicode_ascii_size > 0 && L->unicode_ascii_size < NM_STR_PEEK;
}

int pystate__thread_names(pystate_target_t *t, raddr_t interp, pystate_name_map_t *out)
{
    if (!t || !out || !interp)
        return SCRY_E_INVAL;
    nm_t m = {t, &t->layout, &t->names};
    if (!layout_ok(m.L))
        return SCRY_E_INVAL;
    raddr_t active = 0, *keys = NULL, *vals = NULL;
    nm_thread_t *th = NULL;
    size_t n = 0;
    pystate_dict_t d;
    int err = nm_find_active(&m, interp, &active);
    if (err == SCRY_E_FAULT)
        err = SCRY_E_CORRUPT;
    if (err)
        return err;
    if ((err = nm_dict_open(&m, active, &d)) != 0 || (err = nm_dict_items(&m, &d, &keys, &vals)))
        goto out;
    th = malloc((d.n ? d.n : 1) * sizeof *th);
    if (!th) {
        err = SCRY_E_NOMEM;
        goto out;
    }
    if ((err = nm_read_idents(&m, keys, vals, d.n, th, &n)) != 0 ||
        (err = nm_locate_attrs(&m, th, n)) != 0 || (err = nm_read_dicts(&m, th, n)) != 0 ||
        (err = nm_find_name_slots(&m, th, n)) != 0)
        goto out;
    err = nm_read_names(&m, th, n, out);
out:
    if (err == SCRY_E_FAULT)
        err = SCRY_E_CORRUPT;
    if (err == SCRY_E_CORRUPT) {
        /* Whatever was learnt and cached may be what went stale (a type checked once, a
         * hint): forget it, so the next refresh validates everything again. */
        m.c->type_dict = m.c->type_str = m.c->type_int = m.c->type_module = 0;
        m.c->module_dictoffset = 0;
        m.c->hint_modules = m.c->hint_module_dict = 0;
    }
    free(keys);
    free(vals);
    free(th);
    qsort(out->items, out->count, sizeof out->items[0], cmp_ident);
    return err;
}

const char *pystate__name_map_find(const pystate_name_map_t *map, uint64_t ident)
{
    size_t lo = 0, hi = map ? map->count : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map->items[mid].ident == ident)
            return map->items[mid].name;
        if (map->items[mid].ident < ident)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
