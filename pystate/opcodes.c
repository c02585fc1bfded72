/* opcodes.c - lookups in the generated opcode tables (pystate/opcodes_gen.c). */
#include "opcodes.h"

#include "scry_err.h"

#include <string.h>

static const pystate__opcode_table_t *table_for(int major, int minor)
{
    for (size_t i = 0; i < pystate__opcode_ntables; i++) {
        if (pystate__opcode_tables[i].major == major && pystate__opcode_tables[i].minor == minor) {
            return &pystate__opcode_tables[i];
        }
    }
    return NULL;
}

int pystate_opcode_info(int major, int minor, uint8_t opcode, pystate_opcode_info_t *out)
{
    if (out == NULL) {
        return SCRY_E_INVAL;
    }
    const pystate__opcode_table_t *t = table_for(major, minor);
    if (t == NULL) {
        return SCRY_E_UNSUPPORTED;
    }
    const pystate__opcode_entry_t *e = &t->ops[opcode];
    if (e->name == NULL) {
        return SCRY_E_NOTFOUND;
    }
    out->name = e->name;
    out->klass = e->klass;
    out->caches = e->caches;
    out->base = e->base;
    return 0;
}

int pystate_opcode_class(int major, int minor, uint8_t opcode)
{
    pystate_opcode_info_t info;
    if (pystate_opcode_info(major, minor, opcode, &info) < 0) {
        return PYSTATE_OP_UNKNOWN;
    }
    return info.klass;
}

int pystate_opcode_pushes_frame(int major, int minor, uint8_t opcode)
{
    static const char *const inline_families[] = {"FOR_ITER", "SEND", "LOAD_ATTR", "BINARY_SUBSCR"};
    pystate_opcode_info_t info, base;
    if (pystate_opcode_info(major, minor, opcode, &info) != 0 || info.base < 0 ||
        pystate_opcode_info(major, minor, (uint8_t)info.base, &base) != 0) {
        return 1;
    }
    if (base.klass != PYSTATE_OP_MAYCALL) {
        return base.klass != PYSTATE_OP_OTHER;
    }
    for (size_t i = 0; i < sizeof inline_families / sizeof inline_families[0]; i++) {
        if (strcmp(base.name, inline_families[i]) == 0) {
            return 1;
        }
    }
    return (major > 3 || minor >= 14) && strcmp(base.name, "BINARY_OP") == 0;
}

int pystate_opcode_extended_arg(int major, int minor)
{
    const pystate__opcode_table_t *t = table_for(major, minor);
    if (t == NULL) {
        return SCRY_E_UNSUPPORTED;
    }
    return t->extended_arg >= 0 ? t->extended_arg : SCRY_E_NOTFOUND;
}

int pystate_opcode_cache(int major, int minor)
{
    const pystate__opcode_table_t *t = table_for(major, minor);
    if (t == NULL) {
        return SCRY_E_UNSUPPORTED;
    }
    return t->cache >= 0 ? t->cache : SCRY_E_NOTFOUND;
}

int pystate_opcode_find_instruction(int major, int minor, const uint8_t *code, size_t len,
                                    uint32_t byte_offset, uint32_t *instr_offset_out,
                                    uint8_t *opcode_out)
{
    if (code == NULL || instr_offset_out == NULL || opcode_out == NULL) {
        return SCRY_E_INVAL;
    }
    const pystate__opcode_table_t *t = table_for(major, minor);
    if (t == NULL) {
        return SCRY_E_UNSUPPORTED;
    }
    if ((uint64_t)byte_offset >= len) {
        return SCRY_E_NOTFOUND;
    }
    /* Each step advances by at least one 2-byte code unit: at most LEN / 2 steps. */
    uint64_t pos = 0;
    while (pos + 1 < len) {
        const pystate__opcode_entry_t *e = &t->ops[code[pos]];
        if (e->name == NULL || e->caches < 0) {
            return SCRY_E_NOTFOUND;
        }
        uint64_t next = pos + 2 * (1 + (uint64_t)e->caches);
        if (byte_offset < next) {
            *instr_offset_out = (uint32_t)pos;
            *opcode_out = code[pos];
            return 0;
        }
        pos = next;
    }
    return SCRY_E_NOTFOUND;
}
