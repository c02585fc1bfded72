/* target.c - finding the interpreter in a process and choosing its layout. */
#include "debug_offsets.h"
#include "disasm.h"
#include "elfobj.h"
#include "internal.h"
#include "interp.h"
#include "pyversion.h"
#include "scry_err.h"

#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int sym_addr(const elfsym_obj_t *obj, uint64_t bias, const char *name, raddr_t *out)
{
    elfsym_sym_t s;
    if (elfsym_obj_lookup(obj, name, &s) != 0 || !s.value)
        return SCRY_E_NOTFOUND;
    *out = bias + s.value;
    return 0;
}

/* Checks that RUNTIME looks like a _PyRuntime: its interpreter list leads to an
 * interpreter whose first thread points back to it (or the list is still empty). */
static int runtime_plausible(pystate_target_t *t, raddr_t runtime)
{
    const pystate_layout_t *L = &t->layout;
    raddr_t interp = 0, ts = 0, back = 0;
    if (t->info.major == 3 && t->info.minor >= 13) {
        /* 3.13+: _PyRuntime starts with _Py_DebugOffsets, whose cookie identifies it
         * without assuming any struct layout (validated in full later). */
        char cookie[8];
        return rmem_read(t->mem, runtime, cookie, sizeof cookie) == 0 &&
               memcmp(cookie, "xdebugpy", 8) == 0;
    }
    if (rmem_read_u64(t->mem, runtime + (uint64_t)L->runtime_interpreters_head, &interp) != 0)
        return 0;
    if (interp == 0)
        return 1; /* not initialised yet: cannot tell, accept */
    if (interp & 7)
        return 0;
    if (rmem_read_u64(t->mem, interp + (uint64_t)L->interp_tstate_head, &ts) != 0)
        return 0;
    if (ts == 0)
        return 1;
    if (rmem_read_u64(t->mem, ts + (uint64_t)L->tstate_interp, &back) != 0)
        return 0;
    return back == interp;
}

/* Whether T's discovery option (pystate_open_opts_t) skips WAY ("symbol", "section"). */
static int discovery_skip(const pystate_target_t *t, const char *way)
{
    if (t->discovery == PYSTATE_DISCOVERY_ALL)
        return 0;
    if (!strcmp(way, "symbol"))
        return 1;
    if (!strcmp(way, "section"))
        return t->discovery == PYSTATE_DISCOVERY_DISASM;
    return 0;
}

static int find_runtime(pystate_target_t *t, const elfsym_obj_t *obj, uint64_t bias)
{
    raddr_t addr = 0;
    if (!discovery_skip(t, "symbol") && sym_addr(obj, bias, "_PyRuntime", &addr) == 0 &&
        runtime_plausible(t, addr)) {
        t->runtime = addr;
        snprintf(t->info.how_found, sizeof t->info.how_found, "symbol _PyRuntime");
        return 0;
    }
    elfsym_section_t sec;
    if (!discovery_skip(t, "section") && elfsym_obj_section(obj, ".PyRuntime", &sec) == 0 &&
        sec.addr && runtime_plausible(t, bias + sec.addr)) {
        t->runtime = bias + sec.addr;
        snprintf(t->info.how_found, sizeof t->info.how_found, ".PyRuntime section");
        return 0;
    }
    /* PyInterpreterState_Head() returns _PyRuntime.interpreters.head: its first load
     * names that field's address. */
    elfsym_ref_t refs[4];
    int n = elfsym_obj_func_refs(obj, "PyInterpreterState_Head", ELFSYM_REF_ALL, refs, 4);
    for (int i = 0; i < n; i++) {
        if (refs[i].is_lea)
            continue;
        raddr_t cand = bias + refs[i].target - (uint64_t)t->layout.runtime_interpreters_head;
        uint64_t slot_target = 0;
        /* In a shared library the load may go through a GOT slot holding &_PyRuntime. */
        if (elfsym_obj_resolve_slot(obj, refs[i].target, &slot_target) == 0 && slot_target)
            cand = bias + slot_target;
        if (runtime_plausible(t, cand)) {
            t->runtime = cand;
            snprintf(t->info.how_found, sizeof t->info.how_found,
                     "disassembly of PyInterpreterState_Head");
            return 0;
        }
    }
    return SCRY_E_NOTFOUND;
}

static int find_roots_36(pystate_target_t *t, const elfsym_obj_t *obj, uint64_t bias)
{
    if (!discovery_skip(t, "symbol") &&
        sym_addr(obj, bias, "interp_head", &t->interp_head_addr) == 0) {
        snprintf(t->info.how_found, sizeof t->info.how_found, "symbol interp_head");
    } else {
        elfsym_ref_t refs[4];
        int n = elfsym_obj_func_refs(obj, "PyInterpreterState_Head", ELFSYM_REF_ALL, refs, 4);
        if (n <= 0)
            return SCRY_E_NOTFOUND;
        t->interp_head_addr = bias + refs[0].target;
        snprintf(t->info.how_found, sizeof t->info.how_found,
                 "disassembly of PyInterpreterState_Head");
    }
    if (sym_addr(obj, bias, "_PyThreadState_Current", &t->tstate_current_addr) != 0)
        t->tstate_current_addr = 0;
    t->info.runtime_addr = t->interp_head_addr;
    return 0;
}

void pystate__choose_code_key(pystate_target_t *t)
{
    const pystate_layout_t *L = &t->layout;
    int64_t f[4] = {L->code_filename, L->code_name, L->code_linetable, L->code_qualname};
    int64_t lo = INT64_MAX, hi = -1;
    for (int i = 0; i < 4; i++) {
        if (f[i] < 0)
            continue;
        lo = f[i] < lo ? f[i] : lo;
        hi = f[i] + 8 > hi ? f[i] + 8 : hi;
    }
    if (hi - lo > PYSTATE_CODE_KEY_MAX)
        hi = lo + PYSTATE_CODE_KEY_MAX;
    t->code_key_start = lo;
    t->code_key_len = hi - lo;
}

static int classify_open_error(pid_t pid, int err, char *errbuf, size_t errlen)
{
    if (err == SCRY_E_NOPROC || err == SCRY_E_GONE) {
        scry_errmsg(errbuf, errlen, "no such process: %d", (int)pid);
        return SCRY_E_NOPROC;
    }
    if (err == SCRY_E_PERM) {
        scry_errmsg(errbuf, errlen, "cannot read the memory maps of process %d", (int)pid);
        return SCRY_E_PERM;
    }
    return err;
}

/* Takes every offset from the target's own _Py_DebugOffsets, validated. KNOWN is the
 * generated table to fall back to (3.13 only): with one, an unusable block falls back
 * to it. ASSUME_MINOR as pystate_target_open_as. Returns 0 or an error with a sentence in
 * ERRBUF: which version, what is missing, and whether --assume-version would help. */
static int use_debug_offsets(pystate_target_t *t, const pystate_layout_t *known, int assume_minor,
                             char *errbuf, size_t errlen)
{
    pystate_layout_t dbg;
    uint32_t dhex = 0;
    char why[160] = "", why2[160] = "";
    int newest = pystate_debug_offsets_newest_minor();
    int minor = t->info.minor;

    if (assume_minor > 0 && assume_minor != newest) {
        scry_errmsg(errbuf, errlen,
                    "--assume-version takes 3.%d (the newest block layout scry knows)", newest);
        return SCRY_E_INVAL;
    }
    int derr = pystate_debug_offsets_read_as(t->mem, t->runtime, minor > newest ? assume_minor : 0,
                                             &dbg, &dhex, why, sizeof why);
    if (derr == 0) {
        t->layout = dbg;
        t->info.layout_from_debug_offsets = 1;
        size_t used = strlen(t->info.how_found);
        if (minor > newest) {
            t->info.assumed_minor = assume_minor;
            snprintf(t->info.how_found + used, sizeof t->info.how_found - used,
                     ", offsets from _Py_DebugOffsets read as 3.%d", assume_minor);
            used = strlen(t->info.version);
            snprintf(t->info.version + used, sizeof t->info.version - used, " (as 3.%d)",
                     assume_minor);
        } else {
            snprintf(t->info.how_found + used, sizeof t->info.how_found - used,
                     ", offsets from _Py_DebugOffsets");
        }
        return 0;
    }
    if (known && minor <= newest)
        return 0; /* the generated table of the version */
    if (derr == SCRY_E_UNSUPPORTED && minor > newest && assume_minor == 0) {
        /* Would the newest known layout fit? Only then offer it. */
        int v = pystate_debug_offsets_read_as(t->mem, t->runtime, newest, &dbg, &dhex, why2,
                                              sizeof why2);
        if (v == 0)
            scry_errmsg(
                errbuf, errlen,
                "process %d runs Python %s: scry knows the _Py_DebugOffsets layouts of 3.%d to "
                "3.%d only (the 3.%d member order is missing: regenerate pystate/gen with its "
                "headers); its block validates against the 3.%d layout, so "
                "--assume-version 3.%d may read it (unverified)",
                (int)t->info.pid, t->info.version, pystate_debug_offsets_oldest_minor(), newest,
                minor, newest, newest);
        else
            scry_errmsg(
                errbuf, errlen,
                "process %d runs Python %s: scry knows the _Py_DebugOffsets layouts of 3.%d to "
                "3.%d only (the 3.%d member order is missing: regenerate pystate/gen with its "
                "headers); read as 3.%d its block does not validate (%s)",
                (int)t->info.pid, t->info.version, pystate_debug_offsets_oldest_minor(), newest,
                minor, newest, why2);
        return SCRY_E_UNSUPPORTED;
    }
    if (minor > newest)
        scry_errmsg(
            errbuf, errlen,
            "process %d runs Python %s; read with --assume-version 3.%d its _Py_DebugOffsets "
            "block does not validate (%s)",
            (int)t->info.pid, t->info.version, assume_minor, why[0] ? why : scry_strerror(derr));
    else
        scry_errmsg(errbuf, errlen,
                    "process %d runs Python %s, whose _Py_DebugOffsets scry cannot use (%s)",
                    (int)t->info.pid, t->info.version, why[0] ? why : scry_strerror(derr));
    return derr == SCRY_E_CORRUPT ? SCRY_E_CORRUPT
           : derr == SCRY_E_INVAL ? SCRY_E_INVAL
                                  : SCRY_E_UNSUPPORTED;
}

int pystate_target_open(pid_t pid, strtab_t *strings, pystate_target_t **out, char *errbuf,
                        size_t errlen)
{
    return pystate_target_open_as(pid, strings, 0, out, errbuf, errlen);
}

int pystate_target_open_as(pid_t pid, strtab_t *strings, int assume_minor, pystate_target_t **out,
                           char *errbuf, size_t errlen)
{
    pystate_open_opts_t opts = {.assume_minor = assume_minor};
    return pystate_target_open_opts(pid, strings, &opts, out, errbuf, errlen);
}

int pystate_target_open_opts(pid_t pid, strtab_t *strings, const pystate_open_opts_t *opts,
                             pystate_target_t **out, char *errbuf, size_t errlen)
{
    *out = NULL;
    rmem_t *src = rmem_open_pid(pid);
    proc_tidmap_t *tidmap = src ? proc_tidmap_new(pid) : NULL;
    if (!src || !tidmap) {
        rmem_free(src);
        return SCRY_E_NOMEM;
    }
    return pystate_target_open_src(src, tidmap, strings, opts, out, errbuf, errlen);
}

/* The target's executable as it names it into T->info.exe_path: /proc/PID/exe of a live
 * process, the source's own word otherwise. Returns 0 or SCRY_E_NOPROC (no such process). */
static int read_exe_path(pystate_target_t *t)
{
    char *exe = t->info.exe_path;
    size_t size = sizeof t->info.exe_path;
    if (!rmem_is_live(t->mem)) {
        if (rmem_exe_path(t->mem, exe, size) != 0)
            exe[0] = 0;
        return 0;
    }
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)t->pid);
    ssize_t n = readlink(link, exe, size - 1);
    if (n > 0) {
        exe[n] = 0;
        /* A replaced executable shows as "path (deleted)": compare without it. */
        char *del = strstr(exe, " (deleted)");
        if (del)
            *del = 0;
    } else if (errno == ENOENT) {
        return SCRY_E_NOPROC;
    }
    return 0;
}

/* The Python version of the interpreter MOD (its ELF object OBJ, loaded at BIAS) into
 * T->info: Py_Version (3.11+), the library's name, or the version string. Returns 0,
 * SCRY_E_NOTPY or a fatal read error, with why in ERRBUF. */
static int read_version(pystate_target_t *t, elfsym_obj_t *obj, uint64_t bias,
                        const elfsym_module_t *mod, char *errbuf, size_t errlen)
{
    pid_t pid = t->info.pid;
    int err;
    int major = 0, minor = 0, micro = -1;
    raddr_t pyver_addr;
    uint32_t hex = 0;
    if (sym_addr(obj, bias, "Py_Version", &pyver_addr) == 0) {
        err = rmem_read(t->mem, pyver_addr, &hex, sizeof hex);
        if (err == SCRY_E_PERM || err == SCRY_E_GONE) {
            scry_errmsg(errbuf, errlen, "cannot read the memory of process %d", (int)pid);
            return err;
        }
        if (err == 0 && (hex >> 24) == 3) {
            major = 3;
            minor = (int)((hex >> 16) & 0xff);
            micro = (int)((hex >> 8) & 0xff);
        }
    }
    if (!major && mod->major) {
        major = mod->major;
        minor = mod->minor;
    }
    elfsym_pyversion_t fv;
    if (elfsym_obj_pyversion(obj, &fv) == 0) {
        if (!major) {
            major = fv.major;
            minor = fv.minor;
        }
        if (micro < 0 && fv.major == major && fv.minor == minor)
            micro = fv.micro;
    }
    if (!major) {
        scry_errmsg(errbuf, errlen,
                    "process %d looks like Python (%s) but its version cannot be found", (int)pid,
                    mod->path);
        return SCRY_E_NOTPY;
    }
    t->info.major = major;
    t->info.minor = minor;
    t->info.micro = micro;
    t->info.version_hex = hex;
    if (micro >= 0)
        snprintf(t->info.version, sizeof t->info.version, "%d.%d.%d", major, minor, micro);
    else
        snprintf(t->info.version, sizeof t->info.version, "%d.%d", major, minor);
    return 0;
}

/* The layout T is read with for Python 3.MINOR (T->info): the generated table, or for 3.13+
 * the target's _Py_DebugOffsets (ASSUME_MINOR: pystate_open_opts_t's), found from the
 * interpreter list (3.6) or _PyRuntime in OBJ at BIAS (PATH names it). Returns 0,
 * SCRY_E_UNSUPPORTED, SCRY_E_NOTPY or a read error, with why in ERRBUF. */
static int choose_layout(pystate_target_t *t, elfsym_obj_t *obj, uint64_t bias, const char *path,
                         int assume_minor, char *errbuf, size_t errlen)
{
    pid_t pid = t->info.pid;
    int major = t->info.major, minor = t->info.minor, err;
    const pystate_layout_t *known = pystate_layout_for(major, minor);
    if (major != 3 || minor < 6 || (!known && minor < 13)) {
        scry_errmsg(errbuf, errlen,
                    "process %d runs Python %s, which scry does not support (it reads CPython "
                    "3.6 and newer)",
                    (int)pid, t->info.version);
        return SCRY_E_UNSUPPORTED;
    }
    if (minor == 6) {
        t->layout = *known;
        if ((err = find_roots_36(t, obj, bias)) != 0) {
            scry_errmsg(errbuf, errlen, "cannot find the interpreter list in %s (Python %s)", path,
                        t->info.version);
            return SCRY_E_NOTPY;
        }
    } else {
        if (minor >= 13) {
            /* Find the runtime first with the generated table of the version (the newest
             * one for a version newer than scry knows; disassembly needs
             * interpreters.head's offset), then take every offset from the target's own
             * _Py_DebugOffsets. */
            const pystate_layout_t *fallback = pystate_layout_for(3, minor);
            for (int m = pystate_debug_offsets_newest_minor(); !fallback && m >= 13; m--)
                fallback = pystate_layout_for(3, m);
            if (fallback)
                t->layout = *fallback;
            else
                t->layout.runtime_interpreters_head = 0;
        } else {
            t->layout = *known;
        }
        if ((err = find_runtime(t, obj, bias)) != 0) {
            scry_errmsg(errbuf, errlen, "cannot find _PyRuntime in %s (Python %s)", path,
                        t->info.version);
            return SCRY_E_NOTPY;
        }
        if (minor >= 13) {
            /* 3.14+ always has a usable block; its release-build tables would misread a
             * debug build, so only 3.13 falls back to its table. */
            err = use_debug_offsets(t, minor == 13 ? known : NULL, assume_minor, errbuf, errlen);
            if (err != 0)
                return err;
        }
        t->info.runtime_addr = t->runtime;
    }
    return 0;
}

int pystate_target_open_src(rmem_t *src, proc_tidmap_t *tidmap, strtab_t *strings,
                            const pystate_open_opts_t *opts, pystate_target_t **out, char *errbuf,
                            size_t errlen)
{
    static const pystate_open_opts_t defaults = {0};
    if (!opts)
        opts = &defaults;
    *out = NULL;
    if (opts->discovery < PYSTATE_DISCOVERY_ALL || opts->discovery > PYSTATE_DISCOVERY_DISASM ||
        !src || !tidmap) {
        rmem_free(src);
        proc_tidmap_free(tidmap);
        return SCRY_E_INVAL;
    }
    int err = 0;
    elfsym_obj_t *obj = NULL;
    pystate_target_t *t = calloc(1, sizeof *t);
    if (!t) {
        rmem_free(src);
        proc_tidmap_free(tidmap);
        return SCRY_E_NOMEM;
    }
    /* PID: the live process scry reads, 0 for a core; info.pid names the process either way */
    pid_t pid = proc_tidmap_ns_pid(tidmap);
    t->pid = rmem_pid(src);
    t->discovery = opts->discovery;
    t->function_lines = opts->function_lines != 0;
    t->strings = strings;
    t->pthread_tid_offset = -1;
    t->info.pid = rmem_is_live(src) ? t->pid : pid;
    t->info.post_mortem = !rmem_is_live(src);
    t->mem = src;
    t->s_unknown = strtab_intern(strings, "<unknown>");
    t->s_empty = strtab_intern(strings, "");
    t->prefetch = pystate__pf_new();
    t->tidmap = tidmap;
    t->info.ns_pid = pid;
    if (!t->prefetch || !t->s_unknown || !t->s_empty || pystate__codecache_init(&t->codes) != 0) {
        err = SCRY_E_NOMEM;
        goto fail;
    }
    pid = t->info.pid;
    if ((err = read_exe_path(t)) != 0) {
        err = classify_open_error(pid, err, errbuf, errlen);
        goto fail;
    }
    elfsym_module_t mod;
    err = elfsym_find_interpreter_src(t->mem, NULL, &mod);
    if (err) {
        if (err == SCRY_E_NOTPY || err == SCRY_E_NOTFOUND) {
            scry_errmsg(errbuf, errlen, "process %d is not a Python process (its executable is %s)",
                        (int)pid, t->info.exe_path[0] ? t->info.exe_path : "unknown");
            err = SCRY_E_NOTPY;
        } else {
            err = classify_open_error(pid, err, errbuf, errlen);
        }
        goto fail;
    }
    obj = mod.obj;
    uint64_t bias = mod.bias;
    snprintf(t->info.interp_path, sizeof t->info.interp_path, "%s", mod.path);

    if ((err = read_version(t, obj, bias, &mod, errbuf, errlen)) != 0 ||
        (err = choose_layout(t, obj, bias, mod.path, opts->assume_minor, errbuf, errlen)) != 0)
        goto fail;
    int minor = t->info.minor;
    pystate__choose_code_key(t);
    if (t->layout.runtime_finalizing >= 0 && t->runtime)
        t->finalizing_addr = t->runtime + (uint64_t)t->layout.runtime_finalizing;
    else if (minor == 6 && sym_addr(obj, bias, "_Py_Finalizing", &t->finalizing_addr) != 0)
        t->finalizing_addr = 0;
    /* A last check that memory is readable at all (permissions). */
    uint64_t probe;
    err = rmem_read_u64(t->mem, t->info.runtime_addr, &probe);
    if (err == SCRY_E_PERM || err == SCRY_E_GONE) {
        scry_errmsg(errbuf, errlen, "cannot read the memory of process %d", (int)pid);
        goto fail;
    }
    err = 0;
    elfsym_obj_free(obj);
    *out = t;
    return 0;
fail:
    elfsym_obj_free(obj);
    pystate_target_free(t);
    return err;
}

void pystate_target_free(pystate_target_t *t)
{
    if (!t)
        return;
    pystate__codecache_fini(&t->codes);
    pystate__pf_free(t->prefetch);
    proc_tidmap_free(t->tidmap);
    rmem_free(t->mem);
    free(t);
}

const pystate_info_t *pystate_target_info(const pystate_target_t *t)
{
    return &t->info;
}

rmem_t *pystate_target_mem(pystate_target_t *t)
{
    return t->mem;
}

strtab_t *pystate_target_strings(pystate_target_t *t)
{
    return t->strings;
}

const pystate_layout_t *pystate_target_layout(const pystate_target_t *t)
{
    return &t->layout;
}

pystate_stats_t pystate_target_stats(const pystate_target_t *t)
{
    return t->stats;
}

int pystate_resolve_code(pystate_target_t *t, raddr_t code, uint32_t offset, scry_frame_t *out)
{
    pystate_code_t *c = (pystate_code_t *)pystate__code_get(t, code, NULL);
    if (!c)
        return SCRY_E_FAULT;
    out->function = c->function;
    out->file = c->file;
    out->line = t->function_lines ? c->firstlineno : pystate__code_line(t, c, offset);
    out->kind = SCRY_FRAME_PYTHON;
    return 0;
}
