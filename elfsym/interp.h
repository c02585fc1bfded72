/* interp.h - locating a mapped ELF file in a process: where to open it, its load bias,
 * and which file holds the Python interpreter.
 *
 * Load bias: runtime address = link-time address + bias. It is computed from the first
 * PT_LOAD segment (p_vaddr, p_offset) and the mapping of the same file whose file offset
 * is that segment's page-aligned offset: bias = map.start - (p_vaddr - (p_offset -
 * map.offset)). This gives 0 for a non-PIE executable linked at 0x400000 and the mapping
 * base for PIE executables and shared libraries.
 */
#ifndef ELFSYM_INTERP_H
#define ELFSYM_INTERP_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "elfobj.h"
#include "maps.h"
#include "rmem.h"

typedef struct elfsym_module {
    char path[PATH_MAX];      /* as the target sees it ("/usr/lib/libpython3.11.so.1.0") */
    char open_path[PATH_MAX]; /* where scry opens it (/proc/PID/root/..., map_files) */
    raddr_t bias;             /* runtime = link-time + bias */
    raddr_t start;            /* lowest start of its mappings */
    raddr_t end;              /* highest end of its mappings */
    uint64_t inode;
    int deleted;       /* the file was deleted or replaced on disk */
    int is_libpython;  /* found as libpythonX.Y*.so* (else: the main executable) */
    int major, minor;  /* Python version from the file name; 0 when unknown */
    elfsym_obj_t *obj; /* the loaded object; one reference owned by the caller */
} elfsym_module_t;

#define ELFSYM_PATH_UNVERIFIED 1 /* elfsym_map_open_path: the file's inode is not the mapping's */

/* Fills BUF with the path scry should open for mapping E of process PID. Every path of the
 * form /proc/PID/root/... is opened inside the target's root (common/inroot.h,
 * inroot_open_path: elfsym_obj_open and every reopen do), so a link the target planted never
 * leads to a file of scry's root. In order: /proc/PID/root + path when that file, resolved
 * inside the root, is the mapped one (device and inode as maps shows them; its separate
 * debug files are then found in the same root), else /proc/PID/map_files/START-END (the
 * mapped file itself; needs CAP_SYS_ADMIN; works for deleted files), else /proc/PID/root +
 * path (returning ELFSYM_PATH_UNVERIFIED: overlayfs and btrfs report another device or
 * inode than the mapping's, but so does a file replaced since it was mapped: check it with
 * elfsym_map_open_checked), else the path itself in scry's root when it has the mapping's
 * device and inode. Returns 0, ELFSYM_PATH_UNVERIFIED, SCRY_E_INVAL (not a file mapping),
 * SCRY_E_NOTFOUND (none of these can be opened: scry would otherwise read another file of
 * the same name, e.g. the host's libc for a container's) or SCRY_E_TRUNC (BUF too small). */
int elfsym_map_open_path(pid_t pid, const elfsym_map_t *e, char *buf, size_t size);

/* elfsym_map_open_path, and when the path is unverified, the file's GNU build-id compared
 * with the one mapped at BASE (the address of the file's offset 0) in the target's memory
 * (MEM, or a reader of PID made for the check when NULL): a file that differs or has no
 * build-id is refused (SCRY_E_NOTFOUND: no symbols rather than wrong ones). Before
 * map_files it tries, checked the same way, the file in the target's root that has the
 * mapping's inode on another device (overlayfs), so that its debug files are found in that
 * root. Returns 0 or a negative code as elfsym_map_open_path. */
int elfsym_map_open_checked(pid_t pid, rmem_t *mem, const elfsym_map_t *e, uint64_t base, char *buf,
                            size_t size);

/* Where to open file mapping E of the target SRC reads (common/rmem.h): for a live
 * process elfsym_map_open_checked (BASE as there), for another source (a core) the file
 * the source names and has checked (rmem_file_path). Returns 0, SCRY_E_INVAL,
 * SCRY_E_NOTFOUND (not available, or not the mapped file) or SCRY_E_TRUNC. */
int elfsym_map_open_src(rmem_t *src, const elfsym_map_t *e, uint64_t base, char *buf, size_t size);

/* The one load-bias rule. SEGS are an object's N PT_LOAD segments (file order); a mapping
 * of it starts at START and maps file offset OFFSET (EXEC: the mapping is executable). The
 * segment that holds OFFSET decides (when two share the page, the one whose execute
 * permission matches the mapping's): bias = START - (p_vaddr + (OFFSET - p_offset)), which
 * must be page-aligned. Returns 0 with *BIAS, SCRY_E_NOTFOUND (no segment holds OFFSET, or
 * the bias would not be aligned) or SCRY_E_INVAL. */
int elfsym_segments_bias(const elfsym_segment_t *segs, size_t n, uint64_t start, uint64_t offset,
                         int exec, raddr_t *bias);

/* Computes the load bias of OBJ mapped in MAPS, using the mappings of the same file
 * (same inode and path) around index MAP_INDEX: the first executable one that
 * elfsym_segments_bias accepts, else the first other one. Returns 0 with *BIAS, or SCRY_E_NOTFOUND
 * when no mapping matches a PT_LOAD segment. */
int elfsym_module_bias(const elfsym_obj_t *obj, const elfsym_maps_t *maps, size_t map_index,
                       raddr_t *bias);

/* Describes the file mapped at entry MAP_INDEX of MAPS (read from process PID): paths,
 * extent, bias, and the loaded object (through the cache). Returns 0, SCRY_E_INVAL (not
 * a file mapping), or the error of elfsym_obj_open / elfsym_module_bias. On success the
 * caller owns one reference to OUT->obj (elfsym_obj_free). */
int elfsym_module_locate(pid_t pid, const elfsym_maps_t *maps, size_t map_index,
                         elfsym_module_t *out);

/* elfsym_module_locate for the target SRC reads (a live process or a core): the file is
 * opened where elfsym_map_open_src says. */
int elfsym_module_locate_src(rmem_t *src, const elfsym_maps_t *maps, size_t map_index,
                             elfsym_module_t *out);

/* Finds the interpreter of process PID: the mapped libpythonX.Y[abiflags].so* when there
 * is one, else the main executable (/proc/PID/exe). MAPS may be NULL (then read here).
 * The chosen file must define a CPython symbol (Py_GetVersion, Py_Initialize, _PyRuntime
 * or PyInterpreterState_Head). Returns 0 with OUT filled (the caller owns OUT->obj),
 * SCRY_E_NOTPY, SCRY_E_NOPROC, SCRY_E_PERM, or another error. */
int elfsym_find_interpreter(pid_t pid, const elfsym_maps_t *maps, elfsym_module_t *out);

/* elfsym_find_interpreter for the target SRC reads; MAPS NULL: elfsym_maps_of(SRC). */
int elfsym_find_interpreter_src(rmem_t *src, const elfsym_maps_t *maps, elfsym_module_t *out);

/* Index in MAPS of the first mapping of the main executable of PID, or a negative code
 * (SCRY_E_NOTFOUND, SCRY_E_NOPROC, SCRY_E_PERM). */
long elfsym_find_exe_mapping(pid_t pid, const elfsym_maps_t *maps);

/* elfsym_find_exe_mapping for the target SRC reads: a source other than a live process
 * names its executable (rmem_exe_path). */
long elfsym_find_exe_mapping_src(rmem_t *src, const elfsym_maps_t *maps);

#endif
