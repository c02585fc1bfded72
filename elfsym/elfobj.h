/* elfobj.h - one ELF file: symbols, sections, segments, build-id, debug file.
 *
 * Objects are loaded once and shared: elfsym_obj_open looks in a process-wide cache
 * keyed by the GNU build-id when the file has one, else by device+inode (plus size and
 * mtime), never by PID. Two processes mapping the same libc share one object. An object
 * is immutable after loading, so lookups need no lock; the cache itself is thread-safe.
 *
 * Addresses are link-time (st_value, sh_addr, p_vaddr): add the load bias of the
 * mapping (interp.h) to get a runtime address in a process.
 */
#ifndef ELFSYM_ELFOBJ_H
#define ELFSYM_ELFOBJ_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on untrusted files. */
#define ELFSYM_MAX_SYMS     (1u << 24) /* symbols kept per object */
#define ELFSYM_MAX_SECTIONS 65536u
#define ELFSYM_MAX_SEGMENTS 256u

typedef struct elfsym_obj elfsym_obj_t;

typedef struct elfsym_sym {
    uint64_t value;       /* st_value: link-time address */
    uint64_t size;        /* st_size (0 when unknown) */
    const char *name;     /* display name: demangled for C++ when possible; owned by obj */
    const char *raw_name; /* name as in the symbol table (mangled); owned by obj */
    uint8_t type;         /* STT_FUNC, STT_OBJECT, STT_NOTYPE, STT_GNU_IFUNC */
    uint8_t bind;         /* STB_GLOBAL, STB_WEAK, STB_LOCAL */
} elfsym_sym_t;

typedef struct elfsym_section {
    const char *name; /* owned by obj */
    uint64_t addr;    /* sh_addr */
    uint64_t size;    /* sh_size */
    uint64_t offset;  /* sh_offset in the file */
    uint32_t type;    /* sh_type (SHT_NOBITS has no file bytes) */
    uint64_t flags;   /* sh_flags */
} elfsym_section_t;

typedef struct elfsym_segment {
    uint64_t vaddr;  /* p_vaddr */
    uint64_t memsz;  /* p_memsz */
    uint64_t offset; /* p_offset */
    uint64_t filesz; /* p_filesz */
    uint64_t align;  /* p_align */
    uint32_t flags;  /* PF_R|PF_W|PF_X */
} elfsym_segment_t;

/* Opens the ELF file at PATH (a path scry can open, e.g. /proc/PID/root/usr/lib/x.so),
 * through the cache: a file already loaded (same build-id, or same device+inode+size+
 * mtime) is returned again with one more reference. Opening reads .dynsym only; the
 * first address lookup, symbol listing, debug-path query or name not in .dynsym reads
 * .symtab and .dynsym again from PATH (when it is still the same file) and merges the
 * separate debug file's symbols when one is found (debug.c); names are demangled (C++)
 * and sorted by address. Returns NULL on failure with *ERR (may be NULL) set to
 * SCRY_E_NOTFOUND (no such file), SCRY_E_PERM, SCRY_E_ELF (not a valid ELF object, or
 * truncated), SCRY_E_NOMEM or SCRY_E_IO. Release with elfsym_obj_free. */
elfsym_obj_t *elfsym_obj_open(const char *path, int *err);

/* The kernel's vDSO as an object: the image mapped into scry itself, which is the one
 * every process on this kernel maps as "[vdso]" (one shared object, loaded once). Its
 * symbols (__vdso_clock_gettime, ...) work for lookups; reading bytes from it does not
 * (no file: SCRY_E_IO). Returns NULL with *ERR = SCRY_E_NOTFOUND when there is no vDSO,
 * or SCRY_E_ELF / SCRY_E_NOMEM. Release with elfsym_obj_free. */
elfsym_obj_t *elfsym_obj_open_vdso(int *err);

/* Takes one more reference on OBJ and returns it. */
elfsym_obj_t *elfsym_obj_ref(elfsym_obj_t *obj);

/* Drops one reference. The object stays in the cache (for the next open) until
 * elfsym_cache_clear. NULL is a no-op. */
void elfsym_obj_free(elfsym_obj_t *obj);

/* Frees every cached object that nobody references any more. Returns how many. */
size_t elfsym_cache_clear(void);

/* Number of objects currently in the cache, and how many loads (misses) happened. */
size_t elfsym_cache_count(void);
uint64_t elfsym_cache_loads(void);

/* The path the object was first opened from (owned by obj). */
const char *elfsym_obj_path(const elfsym_obj_t *obj);

/* ET_EXEC or ET_DYN (or another e_type value). */
int elfsym_obj_type(const elfsym_obj_t *obj);

/* The build-id bytes (NULL with *LEN = 0 when absent) and its lowercase hex form ("" when
 * absent). Owned by obj. */
const uint8_t *elfsym_obj_build_id(const elfsym_obj_t *obj, size_t *len);
const char *elfsym_obj_build_id_hex(const elfsym_obj_t *obj);

/* The .gnu_debuglink file name, or NULL. Owned by obj. */
const char *elfsym_obj_debuglink(const elfsym_obj_t *obj);

/* The separate debug file whose symbols were merged, or NULL when none was found. */
const char *elfsym_obj_debug_path(const elfsym_obj_t *obj);

/* Symbols: merged, deduplicated (same address and name), sorted by address. */
size_t elfsym_obj_nsyms(const elfsym_obj_t *obj);
const elfsym_sym_t *elfsym_obj_sym(const elfsym_obj_t *obj, size_t i);

/* Looks a symbol up by its exact raw (mangled) name, O(1) average. When several share
 * the name (local statics), a global one wins, else the first by address. Returns 0 and
 * fills OUT (may be NULL), or SCRY_E_NOTFOUND. */
int elfsym_obj_lookup(const elfsym_obj_t *obj, const char *name, elfsym_sym_t *out);

/* Finds the symbol covering link-time address ADDR (binary search, O(log n)). Sized
 * symbols cover [value, value+size); a size-0 function covers up to the next symbol
 * (64 KiB at most). The innermost, then global, then function symbol wins. Returns 0
 * with OUT and *OFFSET = ADDR - value, or SCRY_E_NOTFOUND. */
int elfsym_obj_addr_lookup(const elfsym_obj_t *obj, uint64_t addr, elfsym_sym_t *out,
                           uint64_t *offset);

/* Section headers of the main file (not the debug file). */
size_t elfsym_obj_nsections(const elfsym_obj_t *obj);
const elfsym_section_t *elfsym_obj_section_at(const elfsym_obj_t *obj, size_t i);

/* Looks a section up by name (".PyRuntime", ".rodata"). Returns 0 and fills OUT, or
 * SCRY_E_NOTFOUND. */
int elfsym_obj_section(const elfsym_obj_t *obj, const char *name, elfsym_section_t *out);

/* PT_LOAD segments, in file order. */
size_t elfsym_obj_nsegments(const elfsym_obj_t *obj);
const elfsym_segment_t *elfsym_obj_segment(const elfsym_obj_t *obj, size_t i);

/* Reads up to MAX bytes of section NAME from the file into BUF (caller's), from its
 * start. Returns the number of bytes read (>= 0), SCRY_E_NOTFOUND, SCRY_E_INVAL (a
 * SHT_NOBITS section has no bytes) or SCRY_E_IO (file gone or truncated). */
long elfsym_obj_read_section(const elfsym_obj_t *obj, const char *name, void *buf, size_t max);

/* Reads LEN bytes at link-time address VADDR from the file, through the PT_LOAD
 * segments (bytes past p_filesz read as zeros, as in memory). Returns 0, SCRY_E_FAULT
 * when part of the range is in no segment, or SCRY_E_IO. */
int elfsym_obj_read_vaddr(const elfsym_obj_t *obj, uint64_t vaddr, void *buf, size_t len);

/* Resolves a GOT slot at link-time address SLOT (as found by disassembling position-
 * independent code: `mov rax, [rip+slot]`) through the dynamic relocations: a
 * R_X86_64_GLOB_DAT/64/JUMP_SLOT to a defined symbol gives its value, a RELATIVE
 * relocation its addend. Returns 0 with *TARGET, or SCRY_E_NOTFOUND. */
int elfsym_obj_resolve_slot(const elfsym_obj_t *obj, uint64_t slot, uint64_t *target);

#endif
