/* shim_got.c - attach mode: native code calls the shim's hooks because the relocation
 * slots through which it reaches malloc & co. and memcpy & co. are rewritten.
 *
 * When libscry-shim.so is preloaded, symbol interposition sends every object's calls of
 * malloc/memcpy to the shim. When it is injected into a live process (dlopen + attach),
 * the objects already loaded were bound to libc long ago: each keeps calling libc through
 * its own GOT. So, on attach, every loaded object except this library, libc, ld.so and the
 * vDSO is examined: its dynamic section gives the relocations (DT_JMPREL: JUMP_SLOT;
 * DT_RELA: GLOB_DAT and R_X86_64_64 with no addend) and their symbols; a slot whose symbol
 * is one of ours is redirected to the shim's hook with an 8-byte compare-and-swap.
 *
 * Only slots that are exactly equivalent are touched: the slot must hold the very
 * function the hook forwards to (libc's, as dlsym(RTLD_NEXT) from the shim finds it), or,
 * for a JUMP_SLOT not yet bound (lazy binding: it points back into the object's PLT), the
 * symbol (with its version: memcpy@GLIBC_2.2.5 is another function than memcpy@GLIBC_2.14)
 * must be one that lazy binding would bind to that same function. A slot bound elsewhere (a
 * preloaded allocator, an object's own malloc, a non-PIE executable's canonical PLT entry,
 * itself redirected) is left alone. Slots in read-only pages (RELRO) are made writable for
 * the write with mprotect(page, prot | PROT_WRITE) and given back the protection that
 * /proc/self/maps showed (without /proc, as in a chroot: the one the loader gave, from the
 * program headers and PT_GNU_RELRO); an object where that fails is skipped and counted.
 *
 * Objects loaded later: dlopen and dlmopen slots are redirected too. The hook calls the real
 * function as if from its caller (the return address dlopen sees is a 'ret' byte inside the
 * calling object, followed by our continuation: the caller's RPATH/RUNPATH, $ORIGIN and
 * namespace are kept), then walks the loaded objects again. Objects already examined are
 * remembered (bounded table of base address + program headers; cleared when an object was
 * unloaded), so a walk costs little.
 *
 * Concurrency: other threads run meanwhile. Everything is done inside dl_iterate_phdr's
 * callback, which holds the loader's list lock: an object cannot be unloaded under us.
 * Slots are aligned 8-byte words written with one CAS; pages are never made non-readable
 * or non-executable. Walks are serialised by a try-lock: a thread that finds a walk in
 * progress flags it to be redone and returns (never blocks). Nothing here calls malloc.
 *
 * GOTs stay redirected for the life of the process (the library is linked -z nodelete);
 * when scry goes away the hooks are cheap pass-throughs.
 */
#include "shim_so.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum {
    GOT_MALLOC,
    GOT_CALLOC,
    GOT_REALLOC,
    GOT_FREE,
    GOT_POSIX_MEMALIGN,
    GOT_ALIGNED_ALLOC,
    GOT_MEMALIGN,
    GOT_VALLOC,
    GOT_PVALLOC,
    GOT_MEMCPY,
    GOT_MEMMOVE,
    GOT_MEMCPY_CHK,
    GOT_MEMMOVE_CHK,
    GOT_DLOPEN,
    GOT_DLMOPEN,
    GOT_NFN
};

#define GOT_MAX_DONE      2048       /* objects remembered as examined */
#define GOT_MAX_PATCHED   8192       /* slots redirected, process-wide */
#define GOT_MAX_SLOTS     1024       /* candidate slots per object */
#define GOT_MAX_DYN       1024       /* dynamic entries read per object */
#define GOT_MAX_RELS      (1u << 22) /* relocations read per table */
#define GOT_MAX_VMAS      64         /* mappings of one object */
#define GOT_MAX_MAPS_LINE 200000     /* lines of /proc/self/maps read */
#define GOT_GADGET_SCAN   (1u << 20) /* bytes searched for a 'ret' in the caller */
#define GOT_WALK_ROUNDS   8
#define GOT_OLD_VERSION   "GLIBC_2.2.5"
#define PAGE              4096ul

typedef struct got_fn {
    const char *name;
    void *hook;
    void *real;     /* a bound slot is redirected only when it holds exactly this */
    void *lazy_def; /* what lazy binding gives an unversioned or default-version reference */
    void *lazy_old; /* ... and a name@GLIBC_2.2.5 reference (NULL: no such version) */
    void *canon;    /* the main executable's canonical PLT entry for it, if any */
} got_fn_t;

static got_fn_t fns[GOT_NFN];
static int fns_state; /* 0 unresolved, 1 resolved, -1 impossible */

static struct {
    uintptr_t base;
    const void *phdr;
} done[GOT_MAX_DONE];
/* Every slot redirected, to give it back at the end of the session (shim__got_detach). A
 * slot is only redirected when it can be recorded here. Under walk_busy. */
static struct {
    uintptr_t base; /* the object: dl_phdr_info's dlpi_addr and dlpi_phdr */
    const void *phdr;
    uint64_t *addr;
    int fn;
} patched[GOT_MAX_PATCHED];
static unsigned npatched;
static unsigned ndone;
static unsigned long long done_subs; /* dlpi_subs when the table was last valid */
static int walk_busy, walk_dirty;    /* atomic */

/* process-wide counters (published into the ring header) */
static uint32_t cnt_objects, cnt_slots, cnt_failed;

static uintptr_t self_addr, ldso_base, vdso_base;

/* ---- calling dlopen as its caller ---------------------------------------------------------- */

/* void *shim__got_call3(void *fn, const void *ret_gadget, a, b, c): calls fn(a, b, c) with
 * RET_GADGET (the address of a 'ret' byte) as the return address fn sees; that 'ret' pops
 * the continuation pushed just above it. The stack at fn's entry is aligned as after a
 * call. Registers: as for a normal call of fn. */
void *shim__got_call3(void *fn, const void *ret_gadget, uint64_t a, uint64_t b, uint64_t c);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl shim__got_call3\n"
        ".hidden shim__got_call3\n"
        ".type shim__got_call3, @function\n"
        "shim__got_call3:\n"
        ".cfi_startproc\n"
        "  pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "  movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "  subq $8, %rsp\n"
        "  movq %rdi, %r11\n"
        "  leaq 1f(%rip), %r10\n"
        "  pushq %r10\n" /* continuation, popped by the gadget's ret */
        "  pushq %rsi\n" /* the return address fn sees: the gadget */
        "  movq %rdx, %rdi\n"
        "  movq %rcx, %rsi\n"
        "  movq %r8, %rdx\n"
        "  jmp *%r11\n"
        "1:\n"
        "  leave\n"
        ".cfi_def_cfa %rsp, 8\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size shim__got_call3, .-shim__got_call3\n");

/* Nonzero when the CPU's shadow stack is on for this thread (a return to the gadget
 * would then fault): ARCH_SHSTK_STATUS, Linux 6.6+. */
static int shadow_stack_on(void)
{
    unsigned long long features = 0;
    return syscall(SYS_arch_prctl, 0x5005 /* ARCH_SHSTK_STATUS */, &features) == 0 &&
           (features & 1);
}

typedef struct gadget_q {
    uintptr_t caller;
    uintptr_t found;
} gadget_q_t;

static int gadget_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    gadget_q_t *q = arg;
    (void)size;
    int mine = 0;
    for (unsigned i = 0; i < info->dlpi_phnum && i < 64; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        if (p->p_type == PT_LOAD && q->caller - lo < p->p_memsz)
            mine = 1;
    }
    if (!mine)
        return 0;
    for (unsigned i = 0; i < info->dlpi_phnum && i < 64; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || (p->p_flags & (PF_X | PF_R)) != (PF_X | PF_R))
            continue;
        const unsigned char *b = (const unsigned char *)(info->dlpi_addr + p->p_vaddr);
        size_t n = p->p_filesz < GOT_GADGET_SCAN ? p->p_filesz : GOT_GADGET_SCAN;
        for (size_t k = 0; k < n; k++) {
            if (b[k] == 0xc3) {
                q->found = (uintptr_t)&b[k];
                return 1;
            }
        }
    }
    return 1;
}

/* A 'ret' byte in the object containing CALLER, or NULL. */
static const void *gadget_for(const void *caller)
{
    if (shadow_stack_on())
        return NULL;
    gadget_q_t q = {(uintptr_t)caller, 0};
    dl_iterate_phdr(gadget_cb, &q);
    return (const void *)q.found;
}

static void walk(void);

static void after_load(void)
{
    shim_tls_t *t = &shim__tls;
    int saved_errno = errno;
    uint8_t was_busy = t->busy;
    t->busy = 1;
    const shim_ring_view_t *v = shim__view_get();
    if (v) { /* no ring (the session ended): nothing to patch */
        walk();
        struct scry_ring_header *h = v->hdr;
        __atomic_store_n(&h->got_objects, __atomic_load_n(&cnt_objects, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&h->got_slots, __atomic_load_n(&cnt_slots, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&h->got_failed, __atomic_load_n(&cnt_failed, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    }
    shim__view_put(v);
    t->busy = was_busy;
    errno = saved_errno;
}

static __attribute__((noinline)) void *hook_dlopen(const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    void *(*real)(const char *, int) = (void *(*)(const char *, int))fns[GOT_DLOPEN].real;
    const void *g = gadget_for(caller);
    void *h = g ? shim__got_call3((void *)real, g, (uint64_t)(uintptr_t)file, (uint64_t)mode, 0)
                : real(file, mode);
    if (h)
        after_load();
    return h;
}

static __attribute__((noinline)) void *hook_dlmopen(Lmid_t ns, const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    void *(*real)(Lmid_t, const char *, int) =
        (void *(*)(Lmid_t, const char *, int))fns[GOT_DLMOPEN].real;
    const void *g = gadget_for(caller);
    void *h = g ? shim__got_call3((void *)real, g, (uint64_t)ns, (uint64_t)(uintptr_t)file,
                                  (uint64_t)mode)
                : real(ns, file, mode);
    if (h)
        after_load(); /* objects of another namespace are not visible: nothing to do there */
    return h;
}

/* ---- the table of functions -------------------------------------------------------------- */

static void *real_of(int f)
{
    switch (f) {
    case GOT_MALLOC:
        return (void *)shim__real.malloc;
    case GOT_CALLOC:
        return (void *)shim__real.calloc;
    case GOT_REALLOC:
        return (void *)shim__real.realloc;
    case GOT_FREE:
        return (void *)shim__real.free;
    case GOT_POSIX_MEMALIGN:
        return (void *)shim__real.posix_memalign;
    case GOT_ALIGNED_ALLOC:
        return (void *)shim__real.aligned_alloc;
    case GOT_MEMALIGN:
        return (void *)shim__real.memalign;
    case GOT_VALLOC:
        return (void *)shim__real.valloc;
    case GOT_PVALLOC:
        return (void *)shim__real.pvalloc;
    case GOT_MEMCPY:
        return (void *)shim__real.memcpy;
    case GOT_MEMMOVE:
        return (void *)shim__real.memmove;
    case GOT_MEMCPY_CHK:
        return (void *)shim__real.memcpy_chk;
    case GOT_MEMMOVE_CHK:
        return (void *)shim__real.memmove_chk;
    case GOT_DLOPEN:
        return dlsym(RTLD_NEXT, "dlopen");
    case GOT_DLMOPEN:
        return dlsym(RTLD_NEXT, "dlmopen");
    }
    return NULL;
}

/* Outside any loader lock (dlsym takes the loader's own lock). */
static int resolve_fns(void)
{
    if (fns_state)
        return fns_state > 0 ? 0 : -1;
    static const char *const names[GOT_NFN] = {
        "malloc",        "calloc",       "realloc",       "free",    "posix_memalign",
        "aligned_alloc", "memalign",     "valloc",        "pvalloc", "memcpy",
        "memmove",       "__memcpy_chk", "__memmove_chk", "dlopen",  "dlmopen"};
    void *hooks[GOT_NFN] = {(void *)shim__hook_malloc,
                            (void *)shim__hook_calloc,
                            (void *)shim__hook_realloc,
                            (void *)shim__hook_free,
                            (void *)shim__hook_posix_memalign,
                            (void *)shim__hook_aligned_alloc,
                            (void *)shim__hook_memalign,
                            (void *)shim__hook_valloc,
                            (void *)shim__hook_pvalloc,
                            (void *)shim__hook_memcpy,
                            (void *)shim__hook_memmove,
                            (void *)shim__hook_memcpy_chk,
                            (void *)shim__hook_memmove_chk,
                            (void *)hook_dlopen,
                            (void *)hook_dlmopen};
    if (shim__resolve() != 0)
        return -1;
    for (int f = 0; f < GOT_NFN; f++) {
        fns[f].name = names[f];
        fns[f].hook = hooks[f];
        fns[f].real = real_of(f);
        fns[f].lazy_def = dlsym(RTLD_DEFAULT, names[f]);
        fns[f].lazy_old = dlvsym(RTLD_DEFAULT, names[f], GOT_OLD_VERSION);
        fns[f].canon = NULL;
    }
    Dl_info me;
    if (!dladdr((void *)shim__got_attach, &me) || !me.dli_fbase) {
        fns_state = -1;
        return -1;
    }
    for (int f = 0; f < GOT_NFN; f++) { /* a trampoline of shim_hooks.c: not resolved */
        Dl_info di;
        if (fns[f].real && dladdr(fns[f].real, &di) && di.dli_fbase == me.dli_fbase)
            fns[f].real = NULL;
    }
    if (!fns[GOT_MALLOC].real || !fns[GOT_FREE].real) {
        fns_state = -1;
        return -1;
    }
    self_addr = (uintptr_t)shim__got_attach;
    ldso_base = getauxval(AT_BASE);
    vdso_base = getauxval(AT_SYSINFO_EHDR);
    fns_state = 1;
    return 0;
}

static int match_name(const char *s, size_t max)
{
    if (max < 4)
        return -1;
    switch (s[0]) {
    case 'm':
    case 'c':
    case 'r':
    case 'f':
    case 'p':
    case 'a':
    case 'v':
    case '_':
    case 'd':
        break;
    default:
        return -1;
    }
    for (int f = 0; f < GOT_NFN; f++) {
        size_t n = strlen(fns[f].name);
        if (n < max && memcmp(s, fns[f].name, n + 1) == 0)
            return f;
    }
    return -1;
}

/* ---- one object ------------------------------------------------------------------------------ */

typedef struct obj {
    uintptr_t base;
    const ElfW(Phdr) * ph;
    unsigned phnum;
    /* dynamic section */
    const ElfW(Rela) * rela, *jmprel;
    size_t nrela, njmprel;
    const ElfW(Sym) * symtab;
    const char *strtab;
    size_t strsz;
    const ElfW(Half) * versym;
    const ElfW(Verneed) * verneed;
    size_t nverneed;
    int is_exe;
} obj_t;

typedef struct slot {
    uint64_t *addr;
    void *old;
    int fn;
} slot_t;

typedef struct vma {
    uintptr_t lo, hi;
    int prot;
} vma_t;

/* Nonzero when [A, A+LEN) lies inside one PT_LOAD segment of O. */
static int inside(const obj_t *o, uintptr_t a, size_t len)
{
    for (unsigned i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->ph[i];
        if (p->p_type != PT_LOAD)
            continue;
        uintptr_t lo = o->base + p->p_vaddr;
        if (a >= lo && a - lo <= p->p_memsz && len <= p->p_memsz - (a - lo))
            return 1;
    }
    return 0;
}

/* The protection the loader left on A's page in O, from O's program headers: the flags of
 * its PT_LOAD segment, PROT_READ inside PT_GNU_RELRO (the whole pages ld.so makes read-only
 * after relocating: from the page of its start to the page of its end, exclusive). For a
 * process without /proc/self/maps (a chroot without /proc). -1 when A is in no segment. */
static int phdr_prot(const obj_t *o, uintptr_t a)
{
    int prot = -1;
    for (unsigned i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->ph[i];
        uintptr_t lo = o->base + p->p_vaddr;
        if (p->p_type == PT_LOAD && a >= lo && a - lo < p->p_memsz)
            prot = (p->p_flags & PF_R ? PROT_READ : 0) | (p->p_flags & PF_W ? PROT_WRITE : 0) |
                   (p->p_flags & PF_X ? PROT_EXEC : 0);
    }
    for (unsigned i = 0; i < o->phnum && prot >= 0; i++) {
        const ElfW(Phdr) *p = &o->ph[i];
        if (p->p_type != PT_GNU_RELRO)
            continue;
        uintptr_t lo = (o->base + p->p_vaddr) & ~(PAGE - 1);
        uintptr_t hi = (o->base + p->p_vaddr + p->p_memsz) & ~(PAGE - 1);
        if (a >= lo && a < hi)
            prot = PROT_READ;
    }
    return prot;
}

/* Nonzero when A lies in an executable segment of O (an unbound PLT entry). */
static int in_text(const obj_t *o, uintptr_t a)
{
    for (unsigned i = 0; i < o->phnum; i++) {
        const ElfW(Phdr) *p = &o->ph[i];
        if (p->p_type == PT_LOAD && (p->p_flags & PF_X) && a - (o->base + p->p_vaddr) < p->p_memsz)
            return 1;
    }
    return 0;
}

/* A dynamic-section address: ld.so has relocated most of them in place; the vDSO's are not. */
static uintptr_t dptr(const obj_t *o, uintptr_t v, size_t len)
{
    if (v && inside(o, v, len))
        return v;
    if (inside(o, o->base + v, len))
        return o->base + v;
    return 0;
}

static int read_dynamic(obj_t *o)
{
    const ElfW(Dyn) *dyn = NULL;
    size_t dynsz = 0;
    for (unsigned i = 0; i < o->phnum; i++) {
        if (o->ph[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *)(o->base + o->ph[i].p_vaddr);
            dynsz = o->ph[i].p_memsz / sizeof(ElfW(Dyn));
        }
    }
    if (!dyn || !inside(o, (uintptr_t)dyn, sizeof *dyn))
        return -1;
    uintptr_t rela = 0, jmprel = 0, symtab = 0, strtab = 0, versym = 0, verneed = 0;
    size_t relasz = 0, pltrelsz = 0, relaent = sizeof(ElfW(Rela)), syment = sizeof(ElfW(Sym));
    long pltrel = DT_RELA;
    o->strsz = 0;
    o->nverneed = 0;
    for (size_t i = 0; i < dynsz && i < GOT_MAX_DYN && dyn[i].d_tag != DT_NULL; i++) {
        ElfW(Xword) v = dyn[i].d_un.d_val;
        switch (dyn[i].d_tag) {
        case DT_RELA:
            rela = v;
            break;
        case DT_RELASZ:
            relasz = v;
            break;
        case DT_RELAENT:
            relaent = v;
            break;
        case DT_JMPREL:
            jmprel = v;
            break;
        case DT_PLTRELSZ:
            pltrelsz = v;
            break;
        case DT_PLTREL:
            pltrel = (long)v;
            break;
        case DT_SYMTAB:
            symtab = v;
            break;
        case DT_SYMENT:
            syment = v;
            break;
        case DT_STRTAB:
            strtab = v;
            break;
        case DT_STRSZ:
            o->strsz = v;
            break;
        case DT_VERSYM:
            versym = v;
            break;
        case DT_VERNEED:
            verneed = v;
            break;
        case DT_VERNEEDNUM:
            o->nverneed = v;
            break;
        default:
            break;
        }
    }
    if (relaent != sizeof(ElfW(Rela)) || syment != sizeof(ElfW(Sym)) || !o->strsz)
        return -1;
    o->symtab = (const ElfW(Sym) *)dptr(o, symtab, sizeof(ElfW(Sym)));
    o->strtab = (const char *)dptr(o, strtab, o->strsz);
    if (!o->symtab || !o->strtab)
        return -1;
    o->nrela = relasz / sizeof(ElfW(Rela));
    o->rela = (const ElfW(Rela) *)(relasz ? dptr(o, rela, relasz) : 0);
    o->njmprel = pltrel == DT_RELA ? pltrelsz / sizeof(ElfW(Rela)) : 0;
    o->jmprel = (const ElfW(Rela) *)(o->njmprel ? dptr(o, jmprel, pltrelsz) : 0);
    if (o->nrela > GOT_MAX_RELS || !o->rela)
        o->nrela = 0;
    if (o->njmprel > GOT_MAX_RELS || !o->jmprel)
        o->njmprel = 0;
    o->versym = (const ElfW(Half) *)(versym ? dptr(o, versym, sizeof(ElfW(Half))) : 0);
    o->verneed = (const ElfW(Verneed) *)(verneed ? dptr(o, verneed, sizeof(ElfW(Verneed))) : 0);
    if (!o->verneed)
        o->nverneed = 0;
    return 0;
}

/* Nonzero when symbol SYM of O is required as name@GLIBC_2.2.5. */
static int old_version(const obj_t *o, size_t sym)
{
    if (!o->versym || !inside(o, (uintptr_t)&o->versym[sym], sizeof(ElfW(Half))))
        return 0;
    unsigned idx = o->versym[sym] & 0x7fff;
    if (idx < 2)
        return 0;
    const ElfW(Verneed) *vn = o->verneed;
    for (size_t i = 0; i < o->nverneed && i < 64 && vn; i++) {
        if (!inside(o, (uintptr_t)vn, sizeof *vn))
            return 0;
        const ElfW(Vernaux) *va = (const ElfW(Vernaux) *)((uintptr_t)vn + vn->vn_aux);
        for (unsigned k = 0; k < vn->vn_cnt && k < 64; k++) {
            if (!inside(o, (uintptr_t)va, sizeof *va))
                return 0;
            if (va->vna_other == idx) {
                size_t n = sizeof GOT_OLD_VERSION;
                return va->vna_name < o->strsz && o->strsz - va->vna_name >= n &&
                       memcmp(o->strtab + va->vna_name, GOT_OLD_VERSION, n) == 0;
            }
            if (!va->vna_next)
                break;
            va = (const ElfW(Vernaux) *)((uintptr_t)va + va->vna_next);
        }
        if (!vn->vn_next)
            break;
        vn = (const ElfW(Verneed) *)((uintptr_t)vn + vn->vn_next);
    }
    return 0;
}

/* Adds the slots of relocation table R (N entries) that may be redirected to S. */
static void collect(const obj_t *o, const ElfW(Rela) * r, size_t n, slot_t *s, unsigned *ns)
{
    for (size_t i = 0; i < n && *ns < GOT_MAX_SLOTS; i++) {
        unsigned type = ELF64_R_TYPE(r[i].r_info);
        size_t sym = ELF64_R_SYM(r[i].r_info);
        if (sym == 0 || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
                         !(type == R_X86_64_64 && r[i].r_addend == 0)))
            continue;
        const ElfW(Sym) *es = &o->symtab[sym];
        if (!inside(o, (uintptr_t)es, sizeof *es) || es->st_name >= o->strsz)
            continue;
        int f = match_name(o->strtab + es->st_name, o->strsz - es->st_name);
        if (f < 0 || !fns[f].real)
            continue;
        if (o->is_exe && es->st_shndx == SHN_UNDEF && es->st_value)
            fns[f].canon = (void *)(o->base + es->st_value); /* canonical PLT entry */
        uintptr_t a = o->base + r[i].r_offset;
        if ((a & 7) || !inside(o, a, 8))
            continue;
        void *cur = __atomic_load_n((void **)a, __ATOMIC_ACQUIRE);
        if (cur == fns[f].hook || cur != fns[f].real) {
            if (cur == fns[f].hook || type != R_X86_64_JUMP_SLOT || !in_text(o, (uintptr_t)cur))
                continue;
            /* not bound yet: what would lazy binding give? (a JUMP_SLOT lookup skips a
             * non-PIE executable's canonical PLT entry: it ends in libc's function) */
            void *want = old_version(o, sym) ? fns[f].lazy_old : fns[f].lazy_def;
            if (want && want == fns[f].canon)
                want = fns[f].real;
            if (want != fns[f].real)
                continue;
        }
        s[*ns].addr = (uint64_t *)a;
        s[*ns].old = cur;
        s[*ns].fn = f;
        (*ns)++;
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Reads the protections of the mappings that overlap [LO, HI) from /proc/self/maps. Returns
 * their count (at most MAX) or -1. No allocation: a character-level parser. */
static int read_vmas(uintptr_t lo, uintptr_t hi, vma_t *out, int max)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    int n = 0, field = 0, lines = 0;
    uintptr_t a = 0, b = 0;
    int prot = 0, pi = 0;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (c == '\n') {
                if (field >= 2 && pi == 4 && a < hi && b > lo && n < max)
                    out[n++] = (vma_t){a, b, prot};
                field = 0, a = b = 0, prot = 0, pi = 0;
                if (++lines > GOT_MAX_MAPS_LINE)
                    goto done;
                continue;
            }
            if (field == 0) {
                int h = hexval(c);
                if (h >= 0)
                    a = a << 4 | (uintptr_t)h;
                else if (c == '-')
                    field = 1;
                else
                    field = 9; /* malformed: ignore the line */
            } else if (field == 1) {
                int h = hexval(c);
                if (h >= 0)
                    b = b << 4 | (uintptr_t)h;
                else if (c == ' ')
                    field = 2;
                else
                    field = 9;
            } else if (field == 2) {
                if (pi < 4) {
                    prot |= c == 'r' ? PROT_READ : c == 'w' ? PROT_WRITE : c == 'x' ? PROT_EXEC : 0;
                    pi++;
                } else {
                    field = 3;
                }
            }
        }
    }
done:
    close(fd);
    return n;
}

static const vma_t *find_vma(const vma_t *v, int n, uintptr_t a)
{
    for (int i = 0; i < n; i++)
        if (a >= v[i].lo && a < v[i].hi)
            return &v[i];
    return NULL;
}

/* Writes the collected slots: the hook (RESTORE 0; each one written is recorded in
 * patched[]) or, RESTORE 1, the real function back where the hook still is. Returns the
 * count written, or -1 when a page could not be made writable (the slots written before
 * stay as written: each is valid on its own). */
static int patch(const obj_t *o, const slot_t *s, unsigned ns, int restore)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (unsigned i = 0; i < ns; i++) {
        uintptr_t a = (uintptr_t)s[i].addr;
        lo = a < lo ? a : lo;
        hi = a + 8 > hi ? a + 8 : hi;
    }
    vma_t v[GOT_MAX_VMAS];
    /* without /proc (a chroot): the protections the loader gave, from the program headers */
    int nv = read_vmas(lo & ~(PAGE - 1), hi, v, GOT_MAX_VMAS);
    if (nv == 0)
        return -1;
    int written = 0, err = 0;
    uintptr_t open_page = 0;
    int open_prot = 0;
    for (unsigned i = 0; i < ns && !err; i++) {
        uintptr_t a = (uintptr_t)s[i].addr, page = a & ~(PAGE - 1);
        const vma_t *m = nv > 0 ? find_vma(v, nv, a) : NULL;
        int prot = nv > 0 ? (m ? m->prot : -1) : phdr_prot(o, a);
        if (prot < 0 || !(prot & PROT_READ)) {
            err = 1;
            break;
        }
        if (!(prot & PROT_WRITE) && page != open_page) {
            if (open_page)
                mprotect((void *)open_page, PAGE, open_prot);
            open_page = 0;
            if (mprotect((void *)page, PAGE, prot | PROT_WRITE) != 0) {
                err = 1;
                break;
            }
            open_page = page;
            open_prot = prot;
        }
        void *expect = s[i].old;
        void *want = restore ? fns[s[i].fn].real : fns[s[i].fn].hook;
        if (!restore && npatched >= GOT_MAX_PATCHED)
            break; /* could not be given back: leave it */
        if (__atomic_compare_exchange_n((void **)a, &expect, want, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            written++;
            if (!restore)
                patched[npatched++] = (__typeof__(patched[0])){o->base, o->ph, s[i].addr, s[i].fn};
        }
    }
    if (open_page)
        mprotect((void *)open_page, PAGE, open_prot);
    return err ? -1 : written;
}

static int skip_object(const struct dl_phdr_info *info, const obj_t *o)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "linux-vdso", 10) == 0 || strncmp(base, "linux-gate", 10) == 0 ||
        strncmp(base, "libc.so", 7) == 0 || strncmp(base, "ld-linux", 8) == 0 ||
        strncmp(base, "ld64.so", 7) == 0 || strncmp(base, "libc-2.", 7) == 0 ||
        strncmp(base, "libscry-shim", 12) == 0)
        return 1;
    if ((vdso_base && o->base == vdso_base) || (ldso_base && o->base == ldso_base))
        return 1;
    if (inside(o, self_addr, 1) || inside(o, (uintptr_t)fns[GOT_MALLOC].real, 1) ||
        inside(o, (uintptr_t)fns[GOT_MEMCPY].real, 1))
        return 1; /* this library; libc */
    return 0;
}

static int is_done(const struct dl_phdr_info *info)
{
    for (unsigned i = 0; i < ndone; i++)
        if (done[i].base == info->dlpi_addr && done[i].phdr == info->dlpi_phdr)
            return 1;
    return 0;
}

static void mark_done(const struct dl_phdr_info *info)
{
    if (ndone < GOT_MAX_DONE) { /* when full, objects are simply examined again */
        done[ndone].base = info->dlpi_addr;
        done[ndone].phdr = info->dlpi_phdr;
        ndone++;
    }
}

static int walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    int *first = arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        return 1;
    if (*first) { /* an object was unloaded since: another may now sit at its address */
        if (info->dlpi_subs != done_subs)
            ndone = 0;
        done_subs = info->dlpi_subs;
        *first = 0;
    }
    if (is_done(info))
        return 0;
    obj_t o = {0};
    o.base = info->dlpi_addr;
    o.ph = info->dlpi_phdr;
    o.phnum = info->dlpi_phnum < 256 ? info->dlpi_phnum : 256;
    o.is_exe = info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
    if (skip_object(info, &o) || read_dynamic(&o) != 0) {
        mark_done(info);
        return 0;
    }
    static slot_t slots[GOT_MAX_SLOTS]; /* walks are serialised (walk_busy) */
    unsigned ns = 0;
    collect(&o, o.jmprel, o.njmprel, slots, &ns);
    collect(&o, o.rela, o.nrela, slots, &ns);
    if (ns) {
        int w = patch(&o, slots, ns, 0);
        if (w < 0)
            __atomic_fetch_add(&cnt_failed, 1, __ATOMIC_RELAXED);
        if (w > 0) {
            __atomic_fetch_add(&cnt_objects, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&cnt_slots, (uint32_t)w, __ATOMIC_RELAXED);
        }
    }
    mark_done(info);
    return 0;
}

/* Walks the loaded objects, redoing the walk when another thread asked for one meanwhile. */
static void walk(void)
{
    for (int round = 0; round < GOT_WALK_ROUNDS; round++) {
        int expect = 0;
        if (!__atomic_compare_exchange_n(&walk_busy, &expect, 1, 0, __ATOMIC_ACQUIRE,
                                         __ATOMIC_RELAXED)) {
            __atomic_store_n(&walk_dirty, 1, __ATOMIC_RELEASE); /* the owner walks again */
            return;
        }
        __atomic_store_n(&walk_dirty, 0, __ATOMIC_RELAXED);
        int first = 1;
        dl_iterate_phdr(walk_cb, &first);
        __atomic_store_n(&walk_busy, 0, __ATOMIC_RELEASE);
        if (!__atomic_load_n(&walk_dirty, __ATOMIC_ACQUIRE))
            return;
    }
}

static int unpatch_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    static slot_t slots[GOT_MAX_SLOTS]; /* walks are serialised (walk_busy) */
    obj_t o = {0};
    o.base = info->dlpi_addr;
    o.ph = info->dlpi_phdr;
    o.phnum = info->dlpi_phnum < 256 ? info->dlpi_phnum : 256;
    unsigned ns = 0;
    for (unsigned i = 0; i < npatched; i++) {
        if (patched[i].base != o.base || patched[i].phdr != (const void *)o.ph)
            continue;
        uintptr_t a = (uintptr_t)patched[i].addr;
        int f = patched[i].fn;
        /* Only a slot of this object that still holds our hook (an object unloaded and
         * another loaded at its address has its own entries, or none). */
        if (!inside(&o, a, 8) || __atomic_load_n((void **)a, __ATOMIC_ACQUIRE) != fns[f].hook)
            continue;
        if (ns == GOT_MAX_SLOTS) { /* more than one batch: write this one and go on */
            patch(&o, slots, ns, 1);
            ns = 0;
        }
        slots[ns++] = (slot_t){patched[i].addr, fns[f].hook, f};
    }
    if (ns)
        patch(&o, slots, ns, 1);
    return 0;
}

int shim__got_detach(void)
{
    int expect = 0;
    if (!__atomic_compare_exchange_n(&walk_busy, &expect, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return -1;
    if (npatched)
        dl_iterate_phdr(unpatch_cb, NULL);
    npatched = 0;
    ndone = 0;
    __atomic_store_n(&cnt_objects, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cnt_slots, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cnt_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&walk_busy, 0, __ATOMIC_RELEASE);
    return 0;
}

int shim__got_attach(struct scry_ring_header *hdr)
{
    if (resolve_fns() != 0)
        return -1;
    walk();
    if (hdr) {
        uint32_t slots = __atomic_load_n(&cnt_slots, __ATOMIC_RELAXED);
        __atomic_store_n(&hdr->got_objects, __atomic_load_n(&cnt_objects, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&hdr->got_slots, slots, __ATOMIC_RELAXED);
        __atomic_store_n(&hdr->got_failed, __atomic_load_n(&cnt_failed, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
        if (slots)
            __atomic_fetch_or(&hdr->shim_state, SCRY_RING_SHIM_GOT_PATCHED, __ATOMIC_RELAXED);
    }
    return 0;
}
