/* disasm.c - finding the addresses a function refers to, with capstone.
 *
 * libcapstone is loaded on first use (dlopen of the soname its headers belong to), not
 * linked: relocating its tables costs every scry command about 0.8 ms and 375 page faults
 * at start (measured: an empty program linked with it and without), while most commands
 * never disassemble (3.11+ interpreters give their version in Py_Version; symbols or the
 * .PyRuntime section find the runtime). */
#include "disasm.h"

#include <capstone/capstone.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl_table.h"
#include "scry_err.h"

#define CS_STR2(x) #x
#define CS_STR(x)  CS_STR2(x)
#define CS_SONAME  "libcapstone.so." CS_STR(CS_API_MAJOR)

static struct {
    unsigned (*version)(int *major, int *minor);
    cs_err (*open)(cs_arch arch, cs_mode mode, csh *handle);
    cs_err (*option)(csh handle, cs_opt_type type, size_t value);
    cs_insn *(*malloc)(csh handle);
    bool (*disasm_iter)(csh handle, const uint8_t **code, size_t *size, uint64_t *address,
                        cs_insn *insn);
    void (*free)(cs_insn *insn, size_t count);
    cs_err (*close)(csh *handle);
} cs;
static pthread_once_t cs_once = PTHREAD_ONCE_INIT;
static int cs_loaded;

static void cs_load(void)
{
    static const char *const soname[] = {CS_SONAME};
    const scry_dl_fn_t fns[] = {
        {"cs_version", &cs.version},
        {"cs_open", &cs.open},
        {"cs_option", &cs.option},
        {"cs_malloc", &cs.malloc},
        {"cs_disasm_iter", &cs.disasm_iter},
        {"cs_free", &cs.free},
        {"cs_close", &cs.close},
    };
    if (scry_dl_load(soname, 1, fns, sizeof fns / sizeof fns[0], NULL, 0) != 0)
        return;
    int major = 0, minor = 0;
    cs.version(&major, &minor);
    cs_loaded = major == CS_API_MAJOR; /* the structs we read are this version's */
}

/* 1 when capstone could be loaded (once per process), else 0. */
static int cs_ready(void)
{
    pthread_once(&cs_once, cs_load);
    return cs_loaded;
}

/* Immediates below this are constants, not addresses. */
#define MIN_IMM_ADDR 0x10000u

static int insn_is_stop(unsigned id)
{
    return id == X86_INS_RET || id == X86_INS_JMP;
}

/* A jmp or conditional jump (capstone's jump group); calls are not. */
static int is_jump(const cs_insn *in)
{
    for (uint8_t g = 0; g < in->detail->groups_count; g++)
        if (in->detail->groups[g] == CS_GRP_JUMP)
            return 1;
    return 0;
}

/* Appends the references of one decoded instruction. Returns the new count. */
static size_t refs_of(const cs_insn *in, unsigned kinds, elfsym_ref_t *out, size_t n, size_t max)
{
    const cs_x86 *x = &in->detail->x86;
    int lea = in->id == X86_INS_LEA;
    for (uint8_t i = 0; i < x->op_count && n < max; i++) {
        const cs_x86_op *op = &x->operands[i];
        elfsym_ref_t r = {0};
        r.insn_addr = in->address;
        r.is_lea = (uint8_t)lea;
        if (op->type == X86_OP_MEM) {
            if (op->mem.base == X86_REG_RIP && op->mem.index == X86_REG_INVALID) {
                r.kind = ELFSYM_REF_RIP;
                r.target = in->address + in->size + (uint64_t)op->mem.disp;
            } else if (op->mem.base == X86_REG_INVALID && op->mem.index == X86_REG_INVALID &&
                       op->mem.segment == X86_REG_INVALID && op->mem.disp > 0) {
                r.kind = ELFSYM_REF_ABS;
                r.target = (uint64_t)op->mem.disp;
            } else {
                continue;
            }
            r.is_load = (uint8_t)(!lea && (op->access & CS_AC_READ) != 0);
            r.size = lea ? 0 : op->size;
        } else if (op->type == X86_OP_IMM && i == 0 && x->op_count == 1 && is_jump(in)) {
            r.kind = ELFSYM_REF_JUMP;
            r.target = (uint64_t)op->imm;
        } else if (op->type == X86_OP_IMM && i == 1 && x->op_count == 2 &&
                   x->operands[0].type == X86_OP_REG &&
                   (in->id == X86_INS_MOV || in->id == X86_INS_MOVABS)) {
            if (op->imm < (int64_t)MIN_IMM_ADDR)
                continue;
            r.kind = ELFSYM_REF_IMM;
            r.target = (uint64_t)op->imm;
        } else {
            continue;
        }
        if (r.kind & kinds)
            out[n++] = r;
    }
    return n;
}

int elfsym_disasm_refs(const uint8_t *code, size_t len, uint64_t addr, unsigned kinds,
                       int stop_at_ret, elfsym_ref_t *out, size_t max)
{
    csh h;
    size_t n = 0;
    if (!code || !out || max == 0)
        return 0;
    if (len > ELFSYM_DISASM_MAX_BYTES)
        len = ELFSYM_DISASM_MAX_BYTES;
    if (!cs_ready() || cs.open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return SCRY_E_NOSYS;
    cs.option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *in = cs.malloc(h);
    if (!in) {
        cs.close(&h);
        return SCRY_E_NOMEM;
    }
    const uint8_t *p = code;
    size_t left = len;
    uint64_t pc = addr;
    for (unsigned k = 0; k < ELFSYM_DISASM_MAX_INSNS && n < max; k++) {
        if (!cs.disasm_iter(h, &p, &left, &pc, in))
            break;
        n = refs_of(in, kinds, out, n, max);
        if (stop_at_ret && insn_is_stop(in->id))
            break;
    }
    cs.free(in, 1);
    cs.close(&h);
    return (int)n;
}

int elfsym_obj_func_refs(const elfsym_obj_t *obj, const char *func, unsigned kinds,
                         elfsym_ref_t *out, size_t max)
{
    elfsym_sym_t s;
    int rc = elfsym_obj_lookup(obj, func, &s);
    if (rc)
        return rc;
    size_t len = s.size ? (size_t)s.size : 256;
    if (len > ELFSYM_DISASM_MAX_BYTES)
        len = ELFSYM_DISASM_MAX_BYTES;
    uint8_t *code = malloc(len);
    if (!code)
        return SCRY_E_NOMEM;
    rc = elfsym_obj_read_vaddr(obj, s.value, code, len);
    /* A size-0 symbol near the end of its segment: read less. */
    while (rc == SCRY_E_FAULT && s.size == 0 && len > 16) {
        len /= 2;
        rc = elfsym_obj_read_vaddr(obj, s.value, code, len);
    }
    if (rc == 0)
        rc = elfsym_disasm_refs(code, len, s.value, kinds, s.size == 0, out, max);
    free(code);
    return rc;
}

int elfsym_insn_is_syscall(const uint8_t *bytes, size_t len)
{
    if (!bytes || len < 2)
        return 0;
    uint8_t a = bytes[len - 2], b = bytes[len - 1];
    return (a == 0x0f && (b == 0x05 || b == 0x34)) || (a == 0xcd && b == 0x80);
}

int elfsym_remote_is_syscall(rmem_t *m, raddr_t pc)
{
    uint8_t b[2];
    if (pc < 2)
        return 0;
    int rc = rmem_read(m, pc - 2, b, sizeof b);
    if (rc)
        return rc;
    return elfsym_insn_is_syscall(b, sizeof b);
}
