#!/usr/bin/env python3
"""Hardening round 2 (issue 24 items 1, 4, 8): what a target can make root's scry do.

usage: run_round2.py --scry PATH [-k PATTERN] [-v]

staging.*: a process in the target's root races `--memory` staging: it renames each fresh
  .scry-shim-* directory and puts a symbolic link to a host 0700 directory in its place,
  whose root-owned libscry-shim.so and load.py must survive every try (ptrace injection on
  Debian's 3.11 in a chroot; remote execution, load.py, on sid's 3.14 in its root); and a
  /tmp bind-mounted from a host directory the target cannot write gets nothing from root.
source_cap: 256 code objects named after hard links of one 16 MiB file: scry's peak RSS
  (VmHWM) stays bounded, the reports say how much source was left out.
fd_limit: `record --subprocesses` under a hard RLIMIT_NOFILE of 256 with 300 live children:
  it records its whole duration, never calls the running parent exited, says it stopped
  following new children.
root_links: a target's executable path made an absolute link to a host file: scry never
  opens the host file (its ELF files are opened inside the target's root); a link inside
  the root is followed there.
Needs root (chroot, mounts). Stdlib only. One line "PASS|FAIL|SKIP name: detail" per test.
"""
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402

PY = "/usr/bin/python3.11"  # Debian's: static, so it runs in a chroot holding only /usr
tests = st.Tests()

# --- item 1: staging in a hostile root ---------------------------------------------------

# Runs inside the target's root: swaps every new .scry-shim-* directory for a link to
# HOSTDIR (a path of scry's root) as fast as it can see it.
ATTACKER = r"""
import os, sys
seen = set()
while True:
    try:
        names = os.listdir('/tmp')
    except OSError:
        continue
    for nm in names:
        if nm.startswith('.scry-shim-') and nm not in seen:
            seen.add(nm)
            try:
                os.rename('/tmp/' + nm, '/tmp/moved' + nm)
                os.symlink(sys.argv[1], '/tmp/' + nm)
                print('swapped', nm, flush=True)
            except OSError as e:
                print('missed', nm, e, flush=True)
"""

TARGET = "import time\nwhile 1:\n    x = [bytearray(100) for i in range(100)]\n"
BAIT = b"root's own file: scry must never remove it\n"


def host_bait(c):
    """A root-owned 0700 host directory holding the names scry stages."""
    d = c.path("host-private")
    os.makedirs(d)
    os.chmod(d, 0o700)
    for name in ("libscry-shim.so", "load.py"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(BAIT)
    return d


def bait_intact(d):
    for name in ("libscry-shim.so", "load.py"):
        try:
            with open(os.path.join(d, name), "rb") as f:
                if f.read() != BAIT:
                    return False
        except OSError:
            return False
    return True


def staging_race(c, setup, root, py, tries):
    """TRIES fresh targets in ROOT (prepared by shell SETUP in a private mount namespace),
    each attached with --memory while an attacker in the same root swaps the staging
    directories. Fails when the attacker never swapped one or a host file was lost."""
    bait = host_bait(c)
    swaps, lost, last = 0, 0, ""
    for i in range(tries):
        sh = ("%s && (chroot %s %s -c \"$1\" %s &) && exec chroot %s %s -c \"$2\""
              % (setup, root, py, bait, root, py))
        p = c.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                     ATTACKER, TARGET], log_name="try-%d.log" % i)
        c.wait_python(p, "target %d" % i)
        r = c.scry(["record", "-q", "--memory", "-d", "0.5", "-f", "json", "-o",
                    c.path("mem-%d.json" % i), "--pid", p.pid], timeout=60)
        last = st.short(r.err, 300)
        c.kill(p)
        log = c.proc_log(p)
        swaps += log.count("swapped")
        if not bait_intact(bait):
            lost += 1
            for name in ("libscry-shim.so", "load.py"):  # put the bait back
                with open(os.path.join(bait, name), "wb") as f:
                    f.write(BAIT)
    # the attacker loses a race now and then on a loaded machine; one won is an attack
    check(swaps >= 1, "the attacker swapped no directory in %d tries (%s)" % (tries, last))
    check(lost == 0, "a host file was removed in %d of %d tries" % (lost, tries))
    return "%d swaps in %d tries, host files intact" % (swaps, tries)


def make_chroot(c):
    """A chroot for Debian's static 3.11: /usr (bind-mounted by the caller), /tmp (1777)."""
    root = c.path("root")
    for d in ("usr", "tmp", "dev"):
        os.makedirs(os.path.join(root, d))
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    for l in ("lib", "lib64", "bin"):
        os.symlink("usr/" + l, os.path.join(root, l))
    return root


@tests("staging.chroot")
def t_staging_chroot(c):
    """Debian's 3.11 in a chroot (ptrace injection stages libscry-shim.so)."""
    root = make_chroot(c)
    return staging_race(c, "mount --bind /usr %s/usr" % root, root, PY, 5)


@tests("staging.remote_exec")
def t_staging_remote_exec(c):
    """sid's 3.14 in its root with a private /tmp (remote execution stages the shim and
    load.py)."""
    root = st.sid_root()
    py = "python3.14"
    if not root or not os.path.exists(os.path.join(root, "usr/bin", py)):
        raise Skip("no sid root with %s" % py)
    return staging_race(c, "mount -t tmpfs -o mode=1777 none %s/tmp" % root, root, py, 2)


@tests("staging.bound_tmp")
def t_staging_bound_tmp(c):
    """A target run as nobody in a chroot whose /tmp is a root-owned 0755 host directory it
    bind-mounted there: scry (root) creates nothing in that directory and says why."""
    root = make_chroot(c)
    host = c.path("host-readonly")
    os.makedirs(host)
    os.chmod(host, 0o755)
    sh = ("mount --bind /usr %s/usr && mount --bind %s %s/tmp && exec chroot --userspec=65534:65534"
          " %s %s -c \"$1\"" % (root, host, root, root, PY))
    p = c.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh", TARGET])
    c.wait_python(p, "target")
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(os.listdir(host))
    w = threading.Thread(target=watch, daemon=True)
    w.start()
    try:
        r = c.scry(["record", "-q", "--memory", "-d", "0.5", "-f", "json", "-o",
                    c.path("mem.json"), "--pid", p.pid], timeout=60)
    finally:
        stop.set()
        w.join(5)
    check(not seen, "root created %s in a host directory the target cannot write"
          % sorted(set(seen)))
    check("writable by the process" in r.err, "scry does not say why: %s" % st.short(r.err))
    return "nothing created; scry says: %s" % st.short(r.err, 160)

# --- a target's ELF files are opened inside its root --------------------------------------

IN_OPEN, IN_ACCESS = 0x20, 0x01


class OpenWatch:
    """inotify on a directory: every open or read of a file in it (O_PATH opens and stat do
    not count: they read nothing)."""

    def __init__(self, path):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        check(self.fd >= 0, "inotify_init1: errno %d" % ctypes.get_errno())
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), IN_OPEN | IN_ACCESS)
        check(wd >= 0, "inotify_add_watch %s: errno %d" % (path, ctypes.get_errno()))

    def events(self):
        """The names opened or read since the last call."""
        import struct
        names = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return names
            off = 0
            while off + 16 <= len(buf):
                _, mask, _, ln = struct.unpack_from("iIII", buf, off)
                names.append(buf[off + 16:off + 16 + ln].rstrip(b"\0").decode())
                off += 16 + ln

    def close(self):
        os.close(self.fd)


@tests("root_links")
def t_root_links(c):
    """Debian's 3.11 run from a copy in a chroot, the copy then deleted, and the name its
    mapping shows (the host's name of the copy, as the host reads the maps) planted inside the
    root as an absolute symbolic link to an ELF file in a root-only 0700 host directory. scry
    dump --native without CAP_SYS_ADMIN and CAP_CHECKPOINT_RESTORE (as the installed unit
    runs: no /proc/PID/map_files)
    never opens the host file; with the link pointing at an identical copy inside the root
    ("/opt/py/copy", absolute) the dump works (the copy checked by build-id)."""
    root = make_chroot(c)
    opt = os.path.join(root, "opt", "py")
    os.makedirs(opt)
    exe = os.path.join(opt, "python3.11")
    shutil.copy2(PY, exe)
    shutil.copy2(PY, os.path.join(opt, "copy"))
    secret = c.path("host-secret")
    os.makedirs(secret)
    os.chmod(secret, 0o700)
    shutil.copy2(PY, os.path.join(secret, "python3.11"))
    sh = ("mount --bind /usr %s/usr && exec env PYTHONHOME=/usr chroot %s /opt/py/python3.11"
          " -c \"$1\"" % (root, root))
    p = c.spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                 "import time\ndef spin_here():\n"
                 "    while time.process_time() < 0.6: sum(range(20000))\n"
                 "    while 1: time.sleep(0.01)\nspin_here()\n"])
    c.wait_python(p, "target")
    os.unlink(exe)
    planted = root + os.path.realpath(opt) + "/python3.11"  # the mapping's name, in the root
    os.makedirs(os.path.dirname(planted))
    os.symlink(os.path.join(secret, "python3.11"), planted)
    watch = OpenWatch(secret)
    nocap = ["setpriv", "--bounding-set", "-sys_admin,-checkpoint_restore", c.scry_path]
    try:
        hostile = c.spawn(nocap + ["dump", "--native", "--pid", p.pid], log_name="hostile.log")
        c.wait(hostile, 60, "scry dump (link to a host file)")
        opened = watch.events()
        check(not opened, "scry opened the host file %s through the target's link: %s"
              % (opened, st.short(c.proc_log(hostile), 300)))
        os.unlink(planted)
        os.symlink("/opt/py/copy", planted)
        good = c.spawn(nocap + ["dump", "--native", "--pid", p.pid], log_name="good.log")
        rc = c.wait(good, 60, "scry dump (link inside the root)")
        out = c.proc_log(good)
        check(rc == 0 and "spin_here" in out,
              "dump through a link inside the root: exit %s: %s" % (rc, st.short(out, 400)))
        check(not watch.events(), "the host file was opened")
    finally:
        watch.close()
    return "host file never opened; the link inside the root is followed there"


# --- item 4: source bytes per report -----------------------------------------------------

SRC_LINKS = 256
SRC_MIB = 16


def hostile_source(c):
    """One 16 MiB file (short lines) and SRC_LINKS hard links of it, all readable."""
    d = c.path("src")
    os.makedirs(d)
    big = os.path.join(d, "big.py")
    line = b"x = 1  # padding padding padding padding padding padding padding padding\n"
    with open(big, "wb") as f:
        f.write(line * (SRC_MIB * 1024 * 1024 // len(line)))
    names = []
    for i in range(SRC_LINKS):
        n = os.path.join(d, "f%03d.py" % i)
        os.link(big, n)
        names.append(n)
    return names


def src_target(names):
    """Python code with one hot function per name in NAMES (its code object names it)."""
    code = ["fs = []"]
    for i, n in enumerate(names):
        code.append("exec(compile('def f(k):\\n for i in range(k): pass\\n', %r, 'exec')); "
                    "fs.append(f)" % n)
    code.append("while 1:\n for f in fs: f(2000)")
    return "\n".join(code)


@tests("source_cap")
def t_source_cap(c):
    """256 code objects named after hard links of one 16 MiB file: the peak RSS of record -f
    text and -f html stays under 128 MiB (32 MiB budget, one 16 MiB file over it), and the reports say what was left out."""
    if not os.path.exists("/usr/bin/time"):
        raise Skip("no /usr/bin/time")
    names = hostile_source(c)
    p = c.spawn([PY, "-c", src_target(names)])
    c.wait_python(p, "target")
    c.targets.append(("hostile source", p))
    got = []
    for fmt in ("text", "html"):
        out, rss = c.path("report." + fmt), c.path("rss-" + fmt)
        t0 = st.now()
        r = c.spawn(["/usr/bin/time", "-f", "%M", "-o", rss, c.scry_path, "record", "-q",
                     "-r", "1000", "-d", "2", "-f", fmt, "-o", out, "--pid", p.pid],
                    log_name="scry-%s.log" % fmt)
        rc = c.wait(r, 120, "scry record -f " + fmt)
        took = st.since(t0)
        check(rc == 0, "scry record -f %s: exit %s: %s" % (fmt, rc, st.short(c.proc_log(r))))
        with open(rss) as f:
            peak = int(f.read().split()[-1]) // 1024
        with open(out, encoding="utf-8", errors="replace") as f:
            text = f.read()
        got.append("%s %d MiB in %.1f s" % (fmt, peak, took))
        c.expect(peak < 128, "%s: peak RSS %d MiB < 128 MiB" % (fmt, peak))
        c.expect("source budget" in text, "%s report says the source budget was spent" % fmt)
    return ", ".join(got)


# --- item 8: --subprocesses at the descriptor limit --------------------------------------

FD_CHILDREN = 300
FAMILY = r"""
import os, sys, time
for i in range(int(sys.argv[1])):
    if os.fork() == 0:
        while True:
            time.sleep(0.05)
open(sys.argv[2] + '.tmp', 'w').write('ready')
os.rename(sys.argv[2] + '.tmp', sys.argv[2])
while True:
    sum(range(10000))
"""


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])


@tests("fd_limit")
def t_fd_limit(c):
    """A parent with 300 live children; scry's hard RLIMIT_NOFILE 256: the recording lasts
    its 4 s, the parent is sampled throughout and not called exited, and scry says it stopped
    following children. With a soft limit of 128 under a hard 4096 every child is followed
    (the soft limit is raised)."""
    if not os.path.exists("/usr/bin/prlimit"):
        raise Skip("no prlimit")
    ready = c.path("ready")
    p = c.spawn([PY, "-c", FAMILY, str(FD_CHILDREN), ready])
    d = st.Deadline(30)
    while not os.path.exists(ready) and not d.expired():
        check(p.poll() is None, "family exited: %s" % st.short(c.proc_log(p)))
        time.sleep(0.05)
    check(os.path.exists(ready), "the family never forked its %d children" % FD_CHILDREN)
    c.targets.append(("parent of %d" % FD_CHILDREN, p))
    got = []
    for nofile, name in (("256:256", "short"), ("128:4096", "raised")):
        t0 = st.now()
        res, rep, cpu = record_family_limited(c, p.pid, nofile, name)
        took = st.since(t0)
        root = [q for q in rep["processes"] if q["pid"] == p.pid]
        check(root, "%s: the parent is not in the report" % name)
        root = root[0]
        followed = len(rep["processes"]) - 1
        c.expect(took >= 3.8 and rep["duration_s"] >= 3.8,
                 "%s: recorded %.1f s (report %.1f s) of 4" % (name, took, rep["duration_s"]))
        c.expect(not root["exited"], "%s: the running parent is not called exited" % name)
        c.expect(root["samples"] >= 0.3 * cpu * 20,
                 "%s: parent sampled throughout: %d samples for %.1f s of CPU at 20 Hz"
                 % (name, root["samples"], cpu))
        said = "no longer followed" in res.err
        if name == "short":
            c.expect(said, "short: scry says it stopped following children")
            c.expect(0 < followed < FD_CHILDREN, "short: %d children followed" % followed)
        else:
            c.expect(not said, "raised: no shortage message")
            c.expect(followed == FD_CHILDREN, "raised: all %d children followed (%d)"
                     % (FD_CHILDREN, followed))
        got.append("%s: %d children followed, %d parent samples in %.1f s"
                   % (name, followed, root["samples"], took))
    return "; ".join(got)


def record_family_limited(c, pid, nofile, name):
    """record --subprocesses -d 4 of PID run under prlimit --nofile=NOFILE: (Result, JSON
    report, the parent's CPU seconds during the run)."""
    out = c.path(name + ".json")
    before = cpu_ticks(pid)
    r = c.spawn(["prlimit", "--nofile=" + nofile, c.scry_path, "record", "--subprocesses",
                 "-r", "20", "-d", "4", "-f", "json", "-o", out, "--pid", pid],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        so, se = r.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        c.kill(r)
        raise Fail("%s: scry did not end within 60 s" % name)
    cpu = (cpu_ticks(pid) - before) / float(os.sysconf("SC_CLK_TCK"))
    err = se.decode("utf-8", "replace")
    check(r.returncode == 0, "%s: scry exit %s: %s" % (name, r.returncode, st.short(err)))
    res = st.Result(r.args, r.returncode, so.decode(), err, 0)
    return res, st.load_json(out, "report"), cpu


def main():
    ap = st.add_common_args(st.runner.parser(__doc__))
    return st.run_as_root(ap.parse_args(), tests, "security.round2", "scry-r2", PY)


if __name__ == "__main__":
    sys.exit(main())
