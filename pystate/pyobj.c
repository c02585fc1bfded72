/* pyobj.c - reading str, bytes and dict objects from the target, bounded and validated. */
#include "internal.h"
#include "pystr.h"
#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

#define PYOBJ_HDR_MAX 128

int pystate__read_str(pystate_target_t *t, raddr_t addr, char *buf, size_t max)
{
    const pystate_layout_t *L = &t->layout;
    uint8_t hdr[PYOBJ_HDR_MAX];
    size_t hlen = (size_t)L->unicode_compact_size;
    if (!addr || max == 0 || hlen == 0 || hlen > sizeof hdr || L->unicode_state < 0 ||
        L->unicode_length < 0)
        return SCRY_E_CORRUPT;
    if (L->unicode_data_any >= 0 && (size_t)L->unicode_data_any + 8 > hlen)
        hlen =
            (size_t)L->unicode_data_any + 8 <= sizeof hdr ? (size_t)L->unicode_data_any + 8 : hlen;
    int err = rmem_read(t->mem, addr, hdr, hlen);
    if (err)
        return err;
    uint32_t state_word = 0;
    int64_t length = 0;
    memcpy(&state_word, hdr + L->unicode_state, 4);
    memcpy(&length, hdr + L->unicode_length, 8);
    pystate_str_state_t st;
    if (pystate_str_decode_state(L->unicode_style, state_word, &st) != 0)
        return SCRY_E_CORRUPT;
    if (length < 0 || length > (1 << 24))
        return SCRY_E_CORRUPT;
    int64_t off = 0;
    int indirect = 0;
    if (pystate_str_data_location(L, &st, &off, &indirect) != 0)
        return SCRY_E_CORRUPT;
    raddr_t data = addr + (uint64_t)off;
    if (indirect) {
        if (off < 0 || (size_t)off + 8 > hlen)
            return SCRY_E_CORRUPT;
        memcpy(&data, hdr + off, 8);
    }
    /* Read no more code points than could fill BUF. */
    uint64_t want = (uint64_t)length;
    if (want > max)
        want = max;
    size_t nbytes = (size_t)want * (size_t)st.kind;
    uint8_t local[PYSTATE_STR_MAX * 4];
    uint8_t *tmp = nbytes <= sizeof local ? local : malloc(nbytes ? nbytes : 1);
    if (!tmp)
        return SCRY_E_NOMEM;
    err = nbytes ? rmem_read(t->mem, data, tmp, nbytes) : 0;
    size_t written = 0;
    if (!err) {
        int cerr = pystate_str_to_utf8(tmp, nbytes, st.kind, st.ascii, want, buf, max, &written);
        if (cerr && cerr != SCRY_E_TRUNC)
            err = cerr;
    }
    if (tmp != local)
        free(tmp);
    return err ? err : (int)written;
}

int pystate__read_bytes(pystate_target_t *t, raddr_t addr, size_t max, uint8_t **out, uint32_t *len)
{
    const pystate_layout_t *L = &t->layout;
    *out = NULL;
    *len = 0;
    if (!addr || L->var_size < 0 || L->bytes_sval < 0)
        return SCRY_E_CORRUPT;
    int64_t size = 0;
    int err = rmem_read(t->mem, addr + (uint64_t)L->var_size, &size, sizeof size);
    if (err)
        return err;
    if (size < 0 || (uint64_t)size > max)
        return SCRY_E_CORRUPT;
    uint8_t *buf = malloc(size ? (size_t)size : 1);
    if (!buf)
        return SCRY_E_NOMEM;
    if (size && (err = rmem_read(t->mem, addr + (uint64_t)L->bytes_sval, buf, (size_t)size))) {
        free(buf);
        return err;
    }
    *out = buf;
    *len = (uint32_t)size;
    return 0;
}

int pystate__dict_keys_open(pystate_target_t *t, raddr_t keys, raddr_t values, pystate_dict_t *d)
{
    const pystate_layout_t *L = &t->layout;
    uint8_t h[PYSTATE_DICT_HDR_MAX];
    size_t hl = (size_t)L->dictkeys_indices;
    if (L->dictkeys_indices <= 0 || L->dictkeys_indices > PYSTATE_DICT_HDR_MAX ||
        L->dictkeys_nentries < 0 || L->dictentry_size <= 0 || L->dictentry_size > 64)
        return SCRY_E_UNSUPPORTED;
    if (!pystate__ptr_ok(keys))
        return SCRY_E_CORRUPT;
    int err = rmem_read(t->mem, keys, h, hl);
    if (err)
        return err;
    uint64_t size;
    if (L->dictkeys_size >= 0) {
        size = pystate__u64_at(h, hl, L->dictkeys_size);
    } else {
        uint8_t lg = pystate__u8_at(h, hl, L->dictkeys_log2_size);
        if (lg > 40)
            return SCRY_E_CORRUPT;
        size = 1ull << lg;
    }
    if (size == 0 || size > PYSTATE_DICT_INDEX_MAX || (size & (size - 1)) != 0)
        return SCRY_E_CORRUPT;
    uint64_t index_bytes;
    if (L->dictkeys_log2_index_bytes >= 0) {
        uint8_t lg = pystate__u8_at(h, hl, L->dictkeys_log2_index_bytes);
        if (lg > 40)
            return SCRY_E_CORRUPT;
        index_bytes = 1ull << lg;
        if (index_bytes < size || index_bytes > 8 * size)
            return SCRY_E_CORRUPT;
    } else {
        unsigned w = size <= 0xff ? 1 : size <= 0xffff ? 2 : size <= 0xffffffffull ? 4 : 8;
        index_bytes = size * w;
    }
    int64_t n = (int64_t)pystate__u64_at(h, hl, L->dictkeys_nentries);
    if (n < 0 || (uint64_t)n > size || n > PYSTATE_NAMES_DICT_MAX)
        return SCRY_E_CORRUPT;
    int general = 1;
    if (L->dictkeys_kind >= 0)
        general = pystate__u8_at(h, hl, L->dictkeys_kind) == (uint8_t)L->dictkeys_kind_general;
    int64_t esize = general ? L->dictentry_size : L->dictuentry_size;
    int64_t ekey = general ? L->dictentry_key : L->dictuentry_key;
    int64_t evalue = general ? L->dictentry_value : L->dictuentry_value;
    if (esize <= 0 || esize > 64 || ekey < 0 || ekey + 8 > esize || evalue < 0 ||
        evalue + 8 > esize)
        return SCRY_E_UNSUPPORTED;
    d->entries = keys + (uint64_t)L->dictkeys_indices + index_bytes;
    d->values = values;
    d->n = (uint32_t)n;
    d->esize = (uint32_t)esize;
    d->ekey = (uint32_t)ekey;
    d->evalue = (uint32_t)evalue;
    return 0;
}
