/* codecache.c - code objects read once, cached by address, validated on each use. */
#include "internal.h"
#include "linetable.h"
#include "scry_err.h"

#include <stdlib.h>
#include <string.h>

int pystate__codecache_init(pystate_codecache_t *c)
{
    c->slots = calloc(PYSTATE_CODE_CACHE, sizeof *c->slots);
    c->memo = calloc(PYSTATE_CODE_MEMO, sizeof *c->memo);
    memset(c->filled, 0, sizeof c->filled);
    c->bytes = 0;
    c->flushes = 0;
    return c->slots ? 0 : SCRY_E_NOMEM;
}

static void code_clear(pystate_codecache_t *c, pystate_code_t *code)
{
    size_t held = (size_t)code->linetable_len + code->bytecode_len;
    c->bytes = held < c->bytes ? c->bytes - held : 0;
    free(code->linetable);
    free(code->bytecode);
    memset(code, 0, sizeof *code);
}

/* Empties every slot ever loaded. */
static void codecache_flush(pystate_codecache_t *c)
{
    for (size_t w = 0; w < PYSTATE_CODE_CACHE / 64; w++)
        for (uint64_t bits = c->filled[w]; bits; bits &= bits - 1)
            code_clear(c, &c->slots[w * 64 + (size_t)__builtin_ctzll(bits)]);
    memset(c->filled, 0, sizeof c->filled);
    c->bytes = 0;
}

void pystate__codecache_fini(pystate_codecache_t *c)
{
    if (!c->slots)
        return;
    codecache_flush(c);
    free(c->slots);
    c->slots = NULL;
    free(c->memo);
    c->memo = NULL;
}

static size_t code_slot(raddr_t addr)
{
    uint64_t h = addr * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 40) & (PYSTATE_CODE_CACHE - 1);
}

/* A field that must be present: SCRY_E_CORRUPT when it lies outside the copy. */
static int field(const uint8_t *buf, size_t size, int64_t off, uint64_t *out)
{
    if (off < 0 || (uint64_t)off + 8 > size)
        return SCRY_E_CORRUPT;
    *out = pystate__u64_at(buf, size, off);
    return 0;
}

/* Checks once that an object's type is named "code"; caches the type's address. */
static int code_type_ok(pystate_target_t *t, raddr_t type)
{
    if (type && t->code_type == type)
        return 1;
    uint64_t name_ptr = 0;
    char name[8];
    if (rmem_read_u64(t->mem, type + (uint64_t)t->layout.type_name, &name_ptr) != 0)
        return 0;
    if (rmem_read_cstr(t->mem, name_ptr, name, sizeof name) < 0 || strcmp(name, "code") != 0)
        return 0;
    t->code_type = type;
    return 1;
}

static int code_load(pystate_target_t *t, raddr_t addr, pystate_code_t *code)
{
    const pystate_layout_t *L = &t->layout;
    uint8_t hdr[512];
    size_t size = (size_t)L->code_size;
    if (size == 0 || size > sizeof hdr)
        size = sizeof hdr;
    int err = rmem_read(t->mem, addr, hdr, size);
    if (err)
        return err;
    uint64_t type = 0, filename = 0, name = 0, table = 0, bytecode = 0;
    if (field(hdr, size, L->object_type, &type) || !code_type_ok(t, type))
        return SCRY_E_CORRUPT;
    if (field(hdr, size, L->code_filename, &filename) ||
        field(hdr, size, L->code_qualname >= 0 ? L->code_qualname : L->code_name, &name) ||
        field(hdr, size, L->code_linetable, &table))
        return SCRY_E_CORRUPT;
    char buf[PYSTATE_STR_MAX];
    int n = pystate__read_str(t, filename, buf, sizeof buf);
    code->file = n >= 0 ? strtab_intern_n(t->strings, buf, (size_t)n) : t->s_unknown;
    n = pystate__read_str(t, name, buf, sizeof buf);
    code->function = n >= 0 ? strtab_intern_n(t->strings, buf, (size_t)n) : t->s_unknown;
    if (!code->file || !code->function)
        return SCRY_E_NOMEM;
    code->firstlineno = (int32_t)pystate__u32_at(hdr, size, L->code_firstlineno);
    if (pystate__read_bytes(t, table, PYSTATE_TABLE_MAX, &code->linetable, &code->linetable_len) !=
        0) {
        code->linetable = NULL;
        code->linetable_len = 0;
    }
    if (L->code_code >= 0 && field(hdr, size, L->code_code, &bytecode) == 0) {
        if (pystate__read_bytes(t, bytecode, PYSTATE_TABLE_MAX, &code->bytecode,
                                &code->bytecode_len) != 0) {
            code->bytecode = NULL;
            code->bytecode_len = 0;
        }
    }
    if (L->code_size_field >= 0) {
        uint64_t units = 0;
        if (field(hdr, size, L->code_size_field, &units) == 0 && units < (1u << 24))
            code->ncodeunits = (uint32_t)units;
    }
    if (t->code_key_len > 0 && t->code_key_start >= 0 &&
        (uint64_t)(t->code_key_start + t->code_key_len) <= size)
        memcpy(code->key, hdr + t->code_key_start, (size_t)t->code_key_len);
    code->addr = addr;
    code->gen = ++t->codes.gen ? t->codes.gen : ++t->codes.gen; /* never 0 */
    return 0;
}

const pystate_code_t *pystate__code_get(pystate_target_t *t, raddr_t addr, const uint8_t *key)
{
    if (!addr || (addr & 7))
        return NULL;
    size_t i = code_slot(addr);
    pystate_code_t *slot = &t->codes.slots[i];
    if (slot->addr == addr && (!key || memcmp(slot->key, key, (size_t)t->code_key_len) == 0)) {
        t->stats.code_hits++;
        if (key)
            slot->checked_sample = t->stats.samples;
        return slot;
    }
    t->stats.code_misses++;
    code_clear(&t->codes, slot);
    if (t->codes.bytes > PYSTATE_CODE_CACHE_BYTES) {
        codecache_flush(&t->codes);
        t->codes.flushes++;
    }
    t->codes.filled[i / 64] |= 1ULL << (i % 64);
    if (code_load(t, addr, slot) != 0) {
        code_clear(&t->codes, slot);
        return NULL;
    }
    t->codes.bytes += (size_t)slot->linetable_len + slot->bytecode_len;
    if (key && memcmp(slot->key, key, (size_t)t->code_key_len) != 0) {
        /* The code object changed between the two reads: not trustworthy this time. */
        t->stats.torn++;
        code_clear(&t->codes, slot);
        return NULL;
    }
    if (key)
        slot->checked_sample = t->stats.samples;
    return slot;
}

const pystate_code_t *pystate__code_checked(pystate_target_t *t, raddr_t addr)
{
    if (!addr || (addr & 7) || !t->stats.samples)
        return NULL;
    pystate_code_t *slot = &t->codes.slots[code_slot(addr)];
    if (slot->addr != addr || slot->checked_sample != t->stats.samples)
        return NULL;
    t->stats.code_hits++;
    return slot;
}

/* The memo entry of (CODE, OFFSET), made theirs when it held another's. */
static pystate_code_memo_t *memo_entry(const pystate_codecache_t *c, const pystate_code_t *code,
                                       uint32_t offset)
{
    if (!c->memo)
        return NULL;
    uint64_t h = (code->addr ^ ((uint64_t)offset << 32)) * 0x9E3779B97F4A7C15ULL;
    pystate_code_memo_t *m = &c->memo[(h >> 40) & (PYSTATE_CODE_MEMO - 1)];
    if (m->code != code->addr || m->gen != code->gen || m->offset != offset)
        *m = (pystate_code_memo_t){code->addr, code->gen, offset, INT32_MIN, -1, 1};
    return m;
}

int pystate__code_line(const pystate_target_t *t, pystate_code_t *code, uint32_t offset)
{
    pystate_code_memo_t *m = memo_entry(&t->codes, code, offset);
    if (m && m->line != INT32_MIN)
        return m->line;
    int line = 0;
    if (!code->linetable ||
        pystate_line_for_offset(t->layout.linetable_style, code->linetable, code->linetable_len,
                                code->firstlineno, offset, &line) != 0 ||
        line == INT32_MIN)
        line = 0;
    if (m)
        m->line = line;
    return line;
}

int pystate__code_opclass(const pystate_target_t *t, const pystate_code_t *code, uint32_t offset,
                          int *pushes)
{
    const pystate_code_memo_t *m = memo_entry(&t->codes, code, offset);
    if (!m || m->opclass < 0)
        return -1;
    *pushes = m->pushes;
    return m->opclass;
}

void pystate__code_remember_opclass(const pystate_target_t *t, const pystate_code_t *code,
                                    uint32_t offset, int opclass, int pushes)
{
    pystate_code_memo_t *m = memo_entry(&t->codes, code, offset);
    if (m && opclass >= 0 && opclass <= INT16_MAX) {
        m->opclass = (int16_t)opclass;
        m->pushes = (int8_t)(pushes != 0);
    }
}
