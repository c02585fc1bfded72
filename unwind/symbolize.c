/* symbolize.c - instruction addresses to (function, library).
 *
 * Symbols come from elfsym (elfsym_obj_addr_lookup over .symtab/.dynsym and a separate
 * debug file, C++ demangled). Results are cached per IP in an open-addressed table, so a
 * steady-state sample does no lookup at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfobj.h"
#include "scry_err.h"
#include "unwind_internal.h"

int unwind__eval_kind(const char *symbol)
{
    if (!symbol)
        return UNWIND_EVAL_NO;
    /* GCC may split a hot/cold function: "_PyEval_EvalFrameDefault.cold" is the same frame. */
    static const char def[] = "_PyEval_EvalFrameDefault";
    static const char legacy[] = "PyEval_EvalFrameEx";
    size_t n = strlen(def);
    if (strncmp(symbol, def, n) == 0 && (symbol[n] == '\0' || symbol[n] == '.'))
        return UNWIND_EVAL_DEFAULT;
    n = strlen(legacy);
    if (strncmp(symbol, legacy, n) == 0 && (symbol[n] == '\0' || symbol[n] == '.'))
        return UNWIND_EVAL_LEGACY;
    return UNWIND_EVAL_NO;
}

static size_t sym_hash(uint64_t ip)
{
    return (size_t)((ip * 0x9E3779B97F4A7C15ULL) >> 40) & (UNWIND_SYM_SLOTS - 1);
}

static void lookup(struct unwind *u, uint64_t ip, int is_return, unwind_sym_t *out)
{
    memset(out, 0, sizeof *out);
    out->ip = ip;
    uint64_t at = is_return && ip > 0 ? ip - 1 : ip;
    unwind_obj_t *o = unwind__obj_find(u, at);
    if (!o) {
        /* Not a file: [vdso], anonymous (JIT) code... name the mapping if it has a name. */
        const elfsym_map_t *m = u->maps ? elfsym_maps_find(u->maps, at) : NULL;
        if (m && m->path[0])
            out->lib = strtab_intern(u->strings, m->path);
        out->offset = m ? ip - m->start : ip;
        return;
    }
    out->lib = o->lib;
    out->in_python = o->in_python;
    out->offset = ip - o->bias;
    if (!o->elf_tried && o->open_path) {
        int err = 0;
        o->elf_tried = 1;
        o->elf = elfsym_obj_open(o->open_path, &err);
    }
    if (!o->elf)
        return;
    elfsym_sym_t sym;
    uint64_t off = 0;
    if (elfsym_obj_addr_lookup(o->elf, at - o->bias, &sym, &off) != 0 || !sym.name)
        return;
    out->symbol = strtab_intern(u->strings, sym.name);
    out->offset = ip - o->bias - sym.value;
    out->is_eval = (uint8_t)unwind__eval_kind(sym.raw_name ? sym.raw_name : sym.name);
}

void unwind__symbolize(struct unwind *u, uint64_t ip, int is_return, unwind_sym_t *out)
{
    if (!u->syms)
        u->syms = calloc(UNWIND_SYM_SLOTS, sizeof *u->syms);
    /* Return addresses are keyed with bit 63 set (user-space addresses never have it). */
    uint64_t key = ip ^ ((uint64_t)(is_return != 0) << 63);
    if (u->syms && key != 0) {
        unwind_sym_t *s = &u->syms[sym_hash(key)];
        if (s->ip == key) {
            u->st.sym_hits++;
            *out = *s;
            out->ip = ip;
            return;
        }
        u->st.sym_misses++;
        lookup(u, ip, is_return, out);
        *s = *out;
        s->ip = key;
        return;
    }
    u->st.sym_misses++;
    lookup(u, ip, is_return, out);
}

void unwind__syms_fini(struct unwind *u)
{
    for (size_t i = 0; i < u->nobjs; i++) {
        elfsym_obj_free(u->objs[i].elf);
        u->objs[i].elf = NULL;
        u->objs[i].elf_tried = 0;
    }
    free(u->syms);
    u->syms = NULL;
}
