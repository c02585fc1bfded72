#!/usr/bin/env python3
"""scry dump --core: the Python stacks of a process from its core file (issue 28).

usage: run_postmortem.py --scry PATH --python LABEL [-k PATTERN] [-v]

Known answers:
  gcore      pm_threads.py (threads at known depths, named pm-I: 100 on 3.12 and in the sid
             root, where the kernel writes the core; 20 elsewhere) is dumped live
             ('dump --pid --json'), then gdb writes its core; 'dump --core --json' must show
             the same threads (tids, names) with the same frames (function, file, line),
             each idle (its registers say it waits in a system call), "source": "core"
             and no fatal signal; the text form names every thread. For a
             rooted interpreter (sid 3.14) the kernel writes the core (SIGQUIT, its core size
             limit raised in its own shell, when core_pattern is a plain file name: read,
             never changed), read with --sysroot ROOT; without it the missing files are
             refused by name.
  crash      pm_crash.py under gdb: a worker thread named crasher reads address 16 through
             ctypes while the main thread waits; gdb stops at the SIGSEGV and writes the core.
             The dump names SIGSEGV, address 0x10 and the faulting function (in libc, the
             crasher's native leaf), lists the crasher first, marked, with
             crash_here() under ctypes' string_at; --locals shows crash_here's known
             locals; --native shows native frames leafward of its Python frames, the main
             thread idle in the kernel, and faulthandler's watchdog (a thread with no Python
             state) with its native stack. (A rooted interpreter: the kernel's core, as above.)
  gil        (3.12) four threads contend for the GIL: one holder in the core, and with
             --native the others waiting in its futex, marked as live dumps mark them.
  exe        (Debian's static 3.11) the crash core without its NT_FILE note: refused with a
             hint, read with --exe /usr/bin/python3.11, --exe of another build refused.
  async      (3.14+) tests/func/async/tasks.py's asyncio tasks (two loops, gather, TaskGroup,
             a queue, a running task) read from its core with --async equal dump --pid --async.
  compressed the crash core compressed with zstd (and xz, lz4 when their tools exist) gives
             the same dump.
  refused    options that need a live process are refused with a message; a core whose
             libpython under --sysroot is another build is refused naming the file and
             both build-ids; an absolute symlink in the --sysroot to the right file on the
             host is not followed out of the root; a damaged core (truncated, garbage) exits
             1 with a message.
gil, compressed and refused run on 3.12 only (they do not depend on the version).
Stdlib only; prints "PASS|FAIL|SKIP name: detail" lines and "N passed, N failed, N skipped".
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402

LABELS = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "debian3.11", "3.14",
          "3.15", "3.14d", "3.15d"]
HERE = os.path.dirname(os.path.abspath(__file__))
tests = st.Tests()
ARGS = None
GDB = shutil.which("gdb")
GDB_INIT = ["-nx", "-batch", "-iex", "set debuginfod enabled off"]


def gcore(c, pid, path):
    """gdb attaches to PID, writes its core to PATH and detaches."""
    if not GDB:
        raise Skip("gdb is not installed")
    r = subprocess.run([GDB] + GDB_INIT + ["-p", str(pid), "-ex", "generate-core-file " + path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(os.path.isfile(path), "gdb wrote no core: %s" % st.short(r.stdout.decode(), 400))
    c.remove_files.append(path)


def dump(c, args, ok=True):
    r = (c.scry_ok if ok else c.scry)(["dump"] + args)
    return r


def dump_json(c, args):
    r = dump(c, args + ["--json"])
    try:
        return json.loads(r.out)
    except ValueError as e:
        raise Fail("dump %s --json is not JSON (%s): %s" % (" ".join(args), e, st.short(r.out)))


def stacks(doc):
    """{tid: (name, [(function, file, line)...])} of a dump document's Python frames."""
    return {t["tid"]: (t["name"], [(f["function"], f["file"], f["line"]) for f in t["frames"]
                                   if f["kind"] == "python"])
            for t in doc["threads"]}


def plain_core_pattern():
    """The kernel's core file name when it is a plain name in the dumping process's
    directory (read, never changed: it is machine-global), else Skip."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if not pattern or pattern.startswith("|") or "/" in pattern or "%" in pattern:
        raise Skip("core_pattern is %r, not a file in the crashing process's directory" % pattern)
    return pattern


def rooted_cmd(c, script, *args):
    """The command that runs SCRIPT (target path) with ARGS in the root, in SCRIPT's
    directory with the core size limit raised in its own shell (nothing global changes)."""
    tdir = os.path.dirname(script)
    return ["chroot", c.interp.root, "/bin/sh", "-c",
            'ulimit -c unlimited && cd "$0" && exec "$@"', tdir, c.interp.path,
            script] + list(args)


def threads_core(c, p, script):
    """The core of pm_threads.py (P): gdb's on the host; for a rooted interpreter the
    kernel's after SIGQUIT (gdb writes zeros for the tops of a chrooted target's thread
    stacks, where 3.14 keeps each thread's entry frame), named as the root sees its files."""
    if not c.interp.root:
        core = c.path("threads.core")
        gcore(c, p.pid, core)
        return core
    pattern = plain_core_pattern()
    c.release(p)
    os.kill(p.pid, signal.SIGQUIT)
    c.wait(p, 60, "pm_threads.py after SIGQUIT")
    core = c.interp.host_path(os.path.join(os.path.dirname(script), pattern))
    check(os.path.isfile(core), "no kernel core at %s" % core)
    c.remove_files.append(core)
    return core


def sysroot_args(c, core):
    """The --sysroot options that read CORE of the test's interpreter ([] outside a root);
    in a root, checks first that the core is refused without them (the interpreter's
    path named)."""
    if not c.interp.root:
        return []
    r = dump(c, ["--core", core], ok=False)
    check(r.rc == 1 and c.interp.path in r.err and "not found" in r.err,
          "without --sysroot: exit %d, want 1 naming %s: %s" % (r.rc, c.interp.path, r.err))
    return ["--sysroot", c.interp.root]


def t_gcore(c):
    # 100 threads (the 101 with the main one) where the kernel writes the core (its
    # untouched pages are holes) and on 3.12; gdb writes every byte of every 8 MiB stack
    # (1.8 GB for 100 threads), so the other versions' cores hold 20
    nthreads = 100 if c.interp.root or c.interp.label == "3.12" else 20
    script = c.stage(os.path.join(HERE, "pm_threads.py"))
    ready = c.path("ready.json")
    if c.interp.root:
        plain_core_pattern()
        p = c.spawn(rooted_cmd(c, script, c.tpath(ready), str(nthreads)))
        truth = c.wait_json(ready, p, "pm_threads ready")
    else:
        p, truth = c.start_target([script, c.tpath(ready), str(nthreads)], ready, "pm_threads")
    live = stacks(dump_json(c, ["--pid", str(p.pid)]))
    core = threads_core(c, p, script)
    root = c.interp.root
    sysroot = sysroot_args(c, core)
    doc = dump_json(c, ["--core", core] + sysroot)
    check(doc.get("source") == "core" and doc["core"]["signo"] == (signal.SIGQUIT if root else 0),
          "source %s, core %s" % (doc.get("source"), doc.get("core")))
    got = stacks(doc)
    check(sorted(got) == sorted(live), "threads %s, live %s" % (sorted(got), sorted(live)))
    for tid in live:
        check(got[tid] == live[tid], "thread %d: core %s, live %s" % (tid, got[tid], live[tid]))
    busy = [t["tid"] for t in doc["threads"] if t["state"] != "idle"]
    check(not busy, "threads %s not idle: every thread waits in a system call" % busy)
    depths = sorted(len(v[1]) for v in got.values())
    check(len(got) == nthreads + 1 and truth["nthreads"] == nthreads, "%d threads" % len(got))
    text = dump(c, ["--core", core] + sysroot).out
    for i in range(nthreads):
        check('"pm-%d"' % i in text, "pm-%d missing from the text:\n%s" % (i, st.short(text)))
    check(("killed by SIGQUIT" if root else "no fatal signal") in text,
          "text: %s" % st.short(text, 300))
    return "%d threads equal to dump --pid (depths %d..%d)%s" % (
        len(got), depths[0], depths[-1], "; the kernel's core with --sysroot" if root else "")


def kernel_crash_core(c):
    """A rooted interpreter: pm_crash.py runs in the root and the kernel writes its core,
    whose files are named as the root sees them, into its directory."""
    pattern = plain_core_pattern()
    script = c.stage(os.path.join(HERE, "pm_crash.py"))
    p = c.spawn(rooted_cmd(c, script), reap=True)
    c.wait(p, 60, "pm_crash.py")
    core = c.interp.host_path(os.path.join(os.path.dirname(script), pattern))
    check(os.path.isfile(core), "no kernel core at %s (exit %s): %s" % (
        core, p.returncode, st.short(c.proc_log(p), 300)))
    c.remove_files.append(core)
    return core


def crash_core(c):
    """Runs pm_crash.py under gdb, which writes the core at the SIGSEGV: its path."""
    if c.interp.root:
        return kernel_crash_core(c)
    if not GDB:
        raise Skip("gdb is not installed")
    core = c.path("crash.core")
    cmd = [GDB] + GDB_INIT + ["-ex", "run", "-ex", "generate-core-file " + core, "--args"] + \
        c.interp.argv(os.path.join(HERE, "pm_crash.py"))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check(os.path.isfile(core), "gdb wrote no core: %s" % st.short(r.stdout.decode(), 600))
    c.remove_files.append(core)
    return core


def check_crash(doc, what):
    check(doc["core"]["signal"] == "SIGSEGV" and doc["core"]["address"] == "0x10",
          "%s: core %s" % (what, doc["core"]))
    first = doc["threads"][0]
    check(first["name"] == "crasher" and first["crashed"] and first["tid"] == doc["core"]["tid"],
          "%s: first thread %s" % (what, {k: first[k] for k in ("tid", "name", "crashed")}))
    check(not any(t["crashed"] for t in doc["threads"][1:]), "%s: two crashed threads" % what)
    py = [f["function"] for f in first["frames"] if f["kind"] == "python"]
    check(py[:3] == ["string_at", "crash_here", "worker"],
          "%s: crasher's Python frames %s" % (what, py))
    main = [t for t in doc["threads"] if t["name"] == "MainThread"]
    check(main and main[0]["frames"][0]["function"] in ("main_wait", "sleep", "time.sleep")
          or any(f["function"] == "main_wait" for f in main[0]["frames"]),
          "%s: main thread %s" % (what, main))
    return first


def t_crash(c):
    core = crash_core(c)
    root = c.interp.root
    sysroot = sysroot_args(c, core)
    doc = dump_json(c, ["--core", core] + sysroot)
    check_crash(doc, "dump")
    text = dump(c, ["--core", core] + sysroot).out
    check("killed by SIGSEGV (address not mapped) at address 0x10" in text and
          '"crasher" [crashed: SIGSEGV]' in text, "text: %s" % st.short(text, 500))
    loc = dump_json(c, ["--core", core, "--locals"] + sysroot)
    frame = [f for f in loc["threads"][0]["frames"] if f["function"] == "crash_here"][0]
    vals = {v["name"]: v["repr"] for v in frame.get("locals", [])}
    want = {"depth": "3", "label": "'pm'", "answer": "42", "word": "'boom'"}
    check(vals == want, "crash_here's locals %s, want %s" % (vals, want))
    nat = dump_json(c, ["--core", core, "--native"] + sysroot)
    first = check_crash(nat, "--native")
    kinds = [f["kind"] for f in first["frames"]]
    check(kinds[0] == "native" and "python" in kinds, "--native: crasher's frames %s" % kinds)
    leaf = [f["function"] for f in first["frames"][:kinds.index("python")]]
    check(any("string_at" in f or "ffi" in f for f in leaf),
          "--native: no ctypes/libffi frame above the Python frames: %s" % leaf)
    want = "%s (%s)" % (first["frames"][0]["function"], first["frames"][0]["file"])
    check(doc["core"].get("function") == want and "libc" in want,
          "the faulting function %s, want the crasher's native leaf %s" % (
              doc["core"].get("function"), want))
    cthreads = [t for t in nat["threads"] if not any(f["kind"] == "python" for f in t["frames"])]
    check(len(cthreads) == 1 and len(doc["threads"]) == len(nat["threads"]) - 1,
          "--native: threads without Python frames %s (faulthandler's watchdog)" % cthreads)
    if c.interp.label == "3.12":  # pyenv's libpython names its static functions
        check(any(f["function"] == "faulthandler_thread" for f in cthreads[0]["frames"]),
              "the watchdog's native stack: %s" % cthreads[0]["frames"])
    main = [t for t in nat["threads"] if t["name"] == "MainThread"][0]
    check(main["state"] == "idle", "main thread %s, want idle (in a system call)" % main["state"])
    return "SIGSEGV at 0x10, crasher first with crash_here's 4 locals; %d native frames%s" % (
        kinds.index("python"), "; a kernel core read with --sysroot" if root else "")


def t_gil(c):
    """Four threads contending for the GIL: in the core, one holds it and, with --native,
    the others wait in the GIL's futex (the live dump's state and marker frame)."""
    script = c.stage(os.path.join(HERE, "pm_gil.py"))
    ready = c.path("ready.json")
    p, _ = c.start_target([script, c.tpath(ready)], ready, "pm_gil")
    core = c.path("gil.core")
    gcore(c, p.pid, core)
    doc = dump_json(c, ["--core", core, "--native"])
    spins = [t for t in doc["threads"] if t["name"].startswith("spin-")]
    holders = [t["name"] for t in doc["threads"] if t["gil"]]
    waiting = [t["name"] for t in spins if t["gil_wait"]]
    check(len(spins) == 4 and len(holders) <= 1, "spinners %d, GIL holders %s" % (
        len(spins), holders))
    check(len(waiting) >= 2 and all(t["frames"][0]["function"] == "<waiting for the GIL>"
                                    for t in spins if t["gil_wait"]),
          "waiting for the GIL: %s" % [(t["name"], t["state"], t["frames"][:2]) for t in spins])
    text = dump(c, ["--core", core, "--native"]).out
    check("(waiting for the GIL)" in text, "text: %s" % st.short(text, 300))
    return "holder %s, %d waiting for the GIL" % (holders, len(waiting))


def without_file_note(core, out):
    """A copy of CORE whose NT_FILE note has another type: a core that names no file."""
    with open(core, "rb") as f:
        d = bytearray(f.read())
    phoff, = struct.unpack_from("<Q", d, 0x20)
    phnum, = struct.unpack_from("<H", d, 0x38)
    hit = 0
    for i in range(phnum):
        ptype, _, off, _, _, size, _, _ = struct.unpack_from("<IIQQQQQQ", d, phoff + i * 56)
        o = off
        while ptype == 4 and o + 12 <= off + size:
            nn, nd, nt = struct.unpack_from("<III", d, o)
            if nt == 0x46494c45:
                struct.pack_into("<I", d, o + 8, 0x7fff0001)
                hit += 1
            o += 12 + ((nn + 3) & ~3) + ((nd + 3) & ~3)
    check(hit == 1, "%d NT_FILE notes in the core" % hit)
    with open(out, "wb") as f:
        f.write(d)


def t_exe(c):
    """A core of a static interpreter without NT_FILE: refused with a hint, read with
    --exe, and --exe naming another build refused by build-id."""
    core = crash_core(c)
    bare = c.path("nofile.core")
    without_file_note(core, bare)
    c.remove_files.append(bare)
    r = dump(c, ["--core", bare], ok=False)
    check(r.rc == 1 and "--exe PATH" in r.err, "no NT_FILE: exit %d: %s" % (r.rc, r.err))
    doc = dump_json(c, ["--core", bare, "--exe", c.interp.path])
    check_crash(doc, "--exe")
    other = st.interp.find("3.11").path
    r = dump(c, ["--core", bare, "--exe", other], ok=False)
    check(r.rc == 1 and other in r.err and "build-id" in r.err,
          "--exe %s: exit %d: %s" % (other, r.rc, r.err))
    return "no NT_FILE: hint, --exe %s read, another build refused" % c.interp.path


def tasks_of(doc):
    """{task name: (loop thread, state, awaited-by names, coroutine chain)} of a dump --async
    document; the running task's chain is left out (it runs on between two reads)."""
    names = {t["address"]: t["name"] for lp in doc["loops"] for t in lp["tasks"]}
    return {t["name"]: (lp["thread"], t["state"], sorted(names.get(a, a) for a in t["awaited_by"]),
                        [] if t["state"] == "running" else
                        [(f["function"], f["line"]) for f in t["stack"]])
            for lp in doc["loops"] for t in lp["tasks"]}


def t_async(c):
    """dump --core --async: the asyncio tasks in a kernel core of tests/func/async/tasks.py
    (two loops, gather, a TaskGroup, a queue, a running task) equal dump --pid --async's."""
    if c.interp.version < (3, 14):
        raise Skip("asyncio tasks are read from 3.14 on")
    script = c.stage(os.path.join(HERE, "..", "async", "tasks.py"))
    truth_host = c.path("truth.json")
    if c.interp.root:
        plain_core_pattern()
        p = c.spawn(rooted_cmd(c, script, c.tpath(truth_host)))
        c.wait_json(truth_host, p, "tasks ready")
    else:
        p, _ = c.start_target([script, c.tpath(truth_host)], truth_host, "tasks")
    live = tasks_of(dump_json(c, ["--async", "--pid", str(p.pid)]))
    core = threads_core(c, p, script)
    sysroot = ["--sysroot", c.interp.root] if c.interp.root else []
    got = tasks_of(dump_json(c, ["--core", core, "--async"] + sysroot))
    check(got == live, "core %s\nlive %s" % (got, live))
    text = dump(c, ["--core", core, "--async"] + sysroot).out
    check("(T) bg-child [pending" in text, "text: %s" % st.short(text, 400))
    return "%d tasks in 2 loops equal to dump --pid --async" % len(got)


def t_compressed(c):
    core = crash_core(c)
    base = stacks(dump_json(c, ["--core", core]))
    done = []
    for tool, ext, args in (("zstd", ".zst", ["-q", "-1", "-f"]), ("xz", ".xz", ["-0", "-k", "-f"]),
                            ("lz4", ".lz4", ["-q", "-1", "-f"])):
        if not shutil.which(tool):
            continue
        out = core + ext
        cmd = [tool] + args + ([core, out] if tool != "xz" else [core])
        subprocess.run(cmd, check=True, timeout=120)
        c.remove_files.append(out)
        doc = dump_json(c, ["--core", out])
        check_crash(doc, ext)
        check(stacks(doc) == base, "%s: the stacks differ from the plain core's" % ext)
        done.append(ext)
    check("zst" in "".join(done), "zstd is not installed")
    return "same dump from %s" % ", ".join(done)


def t_refused(c):
    for args, what in ((["--core", "x", "--pid", "1"], "--pid"),
                       (["--core", "x", "--blocking"], "--blocking"),
                       (["--core", "x", "--subprocesses"], "--subprocesses"),
                       (["--pid", "1", "--sysroot", "/"], "--sysroot")):
        r = dump(c, args, ok=False)
        check(r.rc != 0 and what in r.err and "Traceback" not in r.err,
              "dump %s: exit %d: %s" % (" ".join(args), r.rc, r.err))
    junk = c.path("junk.core")
    with open(junk, "wb") as f:
        f.write(b"\x7fELF" + os.urandom(4000))
    r = dump(c, ["--core", junk], ok=False)
    check(r.rc == 1 and "core" in r.err, "garbage: exit %d: %s" % (r.rc, r.err))
    core = crash_core(c)
    cut = c.path("cut.core")
    with open(core, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(os.path.getsize(core) // 3))
    r = dump(c, ["--core", cut], ok=False)
    check(r.rc in (0, 1) and "Traceback" not in r.err and r.err.count("scry:") <= 4,
          "truncated: exit %d: %s" % (r.rc, r.err))
    # another build at the path of the core's interpreter: refused by name
    doc = dump_json(c, ["--core", core])
    lib = [ln for ln in dump(c, ["--core", core]).out.splitlines() if ln.startswith("Python v")]
    interp = lib[0].split("(", 1)[1].split(";", 1)[0]
    other = st.interp.find("3.11" if c.interp.label != "3.11" else "3.10")
    other_lib = [os.path.join(dp, fn) for dp, _, fns in os.walk(os.path.dirname(
        os.path.dirname(other.path))) for fn in fns if fn.startswith("libpython3")]
    check(other_lib, "no other libpython to plant")
    root = c.path("root")
    os.makedirs(os.path.join(root, os.path.dirname(interp).lstrip("/")))
    try:
        os.link(os.path.realpath(other_lib[0]), os.path.join(root, interp.lstrip("/")))
    except OSError:
        shutil.copy(os.path.realpath(other_lib[0]), os.path.join(root, interp.lstrip("/")))
    r = dump(c, ["--core", core, "--sysroot", root], ok=False)
    check(r.rc == 1 and interp in r.err and "build-id" in r.err,
          "another libpython: exit %d: %s" % (r.rc, r.err))
    # an absolute symlink in the root resolves inside it, as in the core's process: the
    # host's file it names is not read
    root2 = c.path("root2")
    os.makedirs(os.path.join(root2, os.path.dirname(interp).lstrip("/")))
    os.symlink(interp, os.path.join(root2, interp.lstrip("/")))
    r = dump(c, ["--core", core, "--sysroot", root2], ok=False)
    check(r.rc == 1 and interp + ": not found under the --sysroot" in r.err,
          "a symlink out of the root: exit %d: %s" % (r.rc, r.err))
    check(doc["threads"], "no threads")
    return "options, garbage, a truncated core, another build of %s" % os.path.basename(interp)


for name, fn in (("gcore", t_gcore), ("crash", t_crash), ("gil", t_gil), ("exe", t_exe),
                 ("async", t_async),
                 ("compressed", t_compressed), ("refused", t_refused)):
    tests.add(name, fn)


def main():
    global ARGS
    ap = st.add_common_args(st.runner.parser(__doc__), LABELS)
    ARGS = ap.parse_args()
    ARGS.scry = os.path.abspath(ARGS.scry)
    label = ARGS.python
    try:
        interp = st.interp.find(label)
    except Skip as e:
        return st.skip_all(label, str(e), len(tests.all))
    sel = tests.select(ARGS.k)
    if label != "3.12":
        # GIL waits, compressed cores and refusals do not depend on the version: 3.12 runs them
        sel = [t for t in sel if t.name in ("gcore", "crash", "exe", "async")]
    if interp.version < (3, 14):
        sel = [t for t in sel if t.name != "async"]
    if label != "debian3.11":
        # a core without NT_FILE: the static executable names everything scry reads
        sel = [t for t in sel if t.name != "exe"]

    def make(t):
        return st.Ctx("%s.%s" % (t.name, label), interp=interp, scry=ARGS.scry,
                      verbose=ARGS.v, prefix="scry-postmortem")
    return st.run(sel, make, label, verbose=ARGS.v)


if __name__ == "__main__":
    sys.exit(main())
