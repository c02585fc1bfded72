/* symbolize.c - instruction addresses to (function, library).
 *
 * Symbols come from elfsym (elfsym_obj_addr_lookup over .symtab/.dynsym and a separate
 * debug file, C++ demangled). Results are cached per IP in an open-addressed table, so a
 * steady-state sample does no lookup at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disasm.h"
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

/* An optimised build (GCC with PGO and LTO, e.g. Debian's python3.14/3.15) may split
 * _PyEval_EvalFrameDefault: the exported symbol covers a small entry part (844 bytes in
 * 3.15) and the loop lives in a part without any symbol (no .symtab), reached by direct
 * jumps from the entry part. Such a part is found once per object: every jmp/jcc target of
 * the exported function's code that lies outside it and outside every symbol is looked up
 * in the object's unwind table, and the FDE's procedure range containing it is an eval
 * part. Calls are not followed (a call goes to another function). */
static void find_eval_parts(struct unwind *u, unwind_obj_t *o)
{
    elfsym_sym_t fn;
    elfsym_ref_t refs[256];
    o->eval_tried = 1;
    if (!o->elf || o->state != 1 || elfsym_obj_lookup(o->elf, "_PyEval_EvalFrameDefault", &fn) ||
        fn.size == 0)
        return;
    int n = elfsym_obj_func_refs(o->elf, "_PyEval_EvalFrameDefault", ELFSYM_REF_JUMP, refs,
                                 sizeof refs / sizeof refs[0]);
    for (int i = 0; i < n && o->neval_parts < UNWIND_EVAL_PARTS; i++) {
        uint64_t t = refs[i].target;
        elfsym_sym_t s;
        uint64_t off;
        if (t >= fn.value && t < fn.value + fn.size)
            continue; /* inside the entry part */
        if (elfsym_obj_addr_lookup(o->elf, t, &s, &off) == 0)
            continue; /* named code: not a hidden part */
        uint64_t rt = t + o->bias;
        int known = 0;
        for (unsigned k = 0; k < o->neval_parts; k++)
            known |= rt >= o->eval_parts[k].start && rt < o->eval_parts[k].end;
        if (known || rt < o->start || rt >= o->end)
            continue;
        unw_proc_info_t pi;
        memset(&pi, 0, sizeof pi);
        if (_Ux86_64_dwarf_search_unwind_table(u->as, rt, &o->di, &pi, 0, u) != 0 ||
            pi.start_ip > rt || pi.end_ip <= rt)
            continue;
        if (elfsym_obj_addr_lookup(o->elf, pi.start_ip - o->bias, &s, &off) == 0)
            continue; /* the range starts inside a named function */
        o->eval_parts[o->neval_parts].start = pi.start_ip;
        o->eval_parts[o->neval_parts].end = pi.end_ip;
        o->neval_parts++;
        u->st.eval_parts++;
    }
}

/* 1 when runtime address AT lies in an unnamed part of the eval loop of O. */
static int in_eval_part(struct unwind *u, unwind_obj_t *o, uint64_t at)
{
    if (!o->in_python)
        return 0;
    if (!o->eval_tried)
        find_eval_parts(u, o);
    for (unsigned k = 0; k < o->neval_parts; k++)
        if (at >= o->eval_parts[k].start && at < o->eval_parts[k].end)
            return 1;
    return 0;
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
    for (size_t i = 0; i < UNWIND_SYM_RANGES; i++) {
        if (at >= u->ranges[i].lo && at < u->ranges[i].hi) {
            *out = u->ranges[i].sym;
            out->ip = ip;
            out->offset = ip - u->ranges[i].lo;
            return;
        }
    }
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
    if (elfsym_obj_addr_lookup(o->elf, at - o->bias, &sym, &off) != 0 || !sym.name) {
        if (in_eval_part(u, o, at)) {
            out->symbol = strtab_intern(u->strings, UNWIND_EVAL_PART_NAME);
            out->is_eval = UNWIND_EVAL_DEFAULT;
        }
        return;
    }
    out->symbol = strtab_intern(u->strings, sym.name);
    out->offset = ip - o->bias - sym.value;
    out->is_eval = (uint8_t)unwind__eval_kind(sym.raw_name ? sym.raw_name : sym.name);
    if (sym.size > 0 && sym.size < (1u << 24) && at - o->bias - sym.value < sym.size) {
        struct unwind_sym_range *r = &u->ranges[u->ranges_next++ % UNWIND_SYM_RANGES];
        r->lo = o->bias + sym.value;
        r->hi = r->lo + sym.size;
        r->sym = *out;
    }
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
    memset(u->ranges, 0, sizeof u->ranges);
}
