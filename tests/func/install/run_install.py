#!/usr/bin/env python3
"""scry as installed: cmake --install into a prefix, the unit's capability set, the Debian
package in a fresh Debian root (issues 25 and 27).

usage: run_install.py --build BUILD_DIR --source SOURCE_DIR [-k PATTERN] [-v]

prefix          cmake --install BUILD --prefix P; with the build and source trees hidden
                (tmpfs over them in a private mount namespace), P/bin/scry records with
                --memory (attach and launch: the keeping line first, its source shown),
                records, dumps, runs top --once and serve --check-config; the unit's
                ExecStart, --config and Documentation= name installed files; a scry
                without its shim refuses --memory (exit != 0, nothing written).
unit_caps       the installed unit's CapabilityBoundingSet (= AmbientCapabilities, with
                NoNewPrivileges) read from the file, P/bin/scry serve run under exactly that
                bounding set (setpriv): its CapEff is that set, the per-CPU clock watches
                idle targets, the connector is used, and every ctl verb works on a target of
                another user (list, dump, record --memory with the source read as that user,
                record, set-rate, reload, flush, SIGTERM leaving the target untraced), the
                perf rings of its 201 threads under a 64 KiB memlock limit, record --memory
                of a Python chrooted into the cached Debian root (the shim staged there).
unit_caps_least each capability of that set is needed: without it the feature it is there for
                fails (a capability with no known use fails the test).
deb             cpack -G DEB in the build directory; in a throw-away overlay of the cached
                Debian root of the host's release (scripts/debian-root.sh) the package's
                Depends are installed with apt-get, the .deb with dpkg -i, then scry record
                --memory, scry dump against the root's python3 and scry serve --check-config
                run under chroot; dpkg -r leaves nothing but /etc/scry/scry.conf (a conffile),
                dpkg --purge nothing at all.

Needs root (mounts, chroot, setpriv); otherwise prints "SKIP install: ..." and passes.
Stdlib only. One line "PASS|FAIL|SKIP name: detail" per test, then "N passed, N failed, N
skipped"; exit 1 on a failure.
"""
import grp
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402

PY = "/usr/bin/python3.11"  # Debian's: the same on the host and in the bookworm root
WORKLOAD = os.path.join(HERE, "workload.py")
KEEP_MARK = "SCRYKEEPLINE"  # the source text of the only line that keeps memory
NOBODY = 65534
RINGS_PER_TARGET = 201  # the workload's threads with its argument 200: one perf ring each
CAPS = ["chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid",
        "setuid", "setpcap", "linux_immutable", "net_bind_service", "net_broadcast",
        "net_admin", "net_raw", "ipc_lock", "ipc_owner", "sys_module", "sys_rawio",
        "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
        "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write",
        "audit_control", "setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
        "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore"]
tests = st.Tests()
ARGS = None  # the parsed command line


# -- helpers -----------------------------------------------------------------------------

def run(argv, timeout=90, env=None, cwd=None):
    """Runs ARGV to its end: (rc, stdout, stderr); a FAIL after TIMEOUT."""
    e = st.clean_env(env)
    e.pop("SCRY_SHIM", None)
    try:
        p = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=e, cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Fail("%s: no exit after %d s" % (" ".join(map(str, argv)), timeout))
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def run_ok(argv, what, **kw):
    rc, out, err = run(argv, **kw)
    check(rc == 0, "%s: exit %d: %s" % (what, rc, st.short(err or out, 600)))
    return out, err


def hidden(argv):
    """ARGV run where the build and source trees are empty (tmpfs over them, in a private
    mount namespace): an installed scry finds nothing there by accident."""
    sh = ('mount -t tmpfs -o size=1m none "$1" && mount -t tmpfs -o size=1m none "$2" && '
          'shift 2 && exec "$@"')
    return (["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
             ARGS.build, ARGS.source] + [str(a) for a in argv])


def install_prefix(c):
    """cmake --install into a new prefix in the test's directory; returns it."""
    prefix = c.path("prefix")
    run_ok(["cmake", "--install", ARGS.build, "--prefix", prefix], "cmake --install")
    return prefix


def parse_unit(path):
    """A systemd unit file: {key: [value, ...]} over all sections (entries of repeated
    keys and space-separated lists kept in order)."""
    keys = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            keys.setdefault(k.strip(), []).extend(v.split())
    return keys


def unit_caps(unit):
    """The unit's capability set (names without CAP_, lower case), checked to be the same in
    CapabilityBoundingSet and AmbientCapabilities."""
    bounding = [x.lower().replace("cap_", "", 1) for x in unit.get("CapabilityBoundingSet", [])]
    ambient = [x.lower().replace("cap_", "", 1) for x in unit.get("AmbientCapabilities", [])]
    check(bounding, "the unit has no CapabilityBoundingSet")
    check(sorted(bounding) == sorted(ambient),
          "CapabilityBoundingSet %s != AmbientCapabilities %s" % (bounding, ambient))
    for cap in bounding:
        check(cap in CAPS, "unknown capability %s in the unit" % cap)
    return bounding


def cap_mask(names):
    return sum(1 << CAPS.index(n) for n in names)


def start_target(c, as_nobody=False, python=PY, threads=0):
    """The workload, started from a copy in the test's directory (owned by nobody and closed
    to others with AS_NOBODY, run as nobody); waits until it has used 0.2 s of CPU."""
    d = c.path("app")
    os.makedirs(d, exist_ok=True)
    script = os.path.join(d, "workload.py")
    shutil.copy(WORKLOAD, script)
    argv = [python, script, str(threads)]
    if as_nobody:
        for p in (d, script):
            os.chown(p, NOBODY, NOBODY)
        os.chmod(d, 0o700)
        argv = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"] + argv
    p = c.spawn(argv)
    wait_running(p.pid, lambda: p.poll() is not None, lambda: c.proc_log(p))
    return p, script


def wait_running(pid, exited, log, timeout=20):
    d = st.Deadline(timeout)
    while not d.expired():
        if exited():
            raise Fail("target exited early: %s" % st.short(log(), 500))
        try:
            with open("/proc/%d/stat" % pid) as f:
                if int(f.read().rsplit(")", 1)[1].split()[11]) > 20:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise Fail("target %d never ran" % pid)


ROW = re.compile(r"^\s*[\d.]+%\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)\s+(-?[\d.]+)\s+[\d.]+\s")


def check_memory_report(text, what):
    """A text report of --memory: it has the memory columns, and the keeping line (its
    source text shown) allocated the most."""
    check("alloc MiB" in text, "%s: no memory columns (memory not recorded): %s"
          % (what, st.short(text, 600)))
    rows = [(float(m.group(1)), line) for line in text.splitlines() for m in [ROW.match(line)] if m]
    check(rows, "%s: no line rows: %s" % (what, st.short(text, 600)))
    top = max(rows)
    check(KEEP_MARK in top[1], "%s: the top allocating line is not the keeping line: %s"
          % (what, top[1].strip()))
    return top[0]


def tracer_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"TracerPid:\s*(\d+)", f.read()).group(1))


# -- prefix -------------------------------------------------------------------------------

@tests("prefix")
def t_prefix(c):
    """cmake --install --prefix P: every mode of P/bin/scry works with the build tree hidden."""
    prefix = install_prefix(c)
    scry = os.path.join(prefix, "bin", "scry")
    for rel in ("bin/scry", "lib/scry/libscry-shim.so", "lib/systemd/system/scry.service",
                "etc/scry/scry.conf", "share/man/man1/scry.1", "share/doc/scry/daemon.md",
                "share/doc/scry/README.md"):
        check(os.path.isfile(os.path.join(prefix, rel)), "not installed: %s" % rel)
    unit = parse_unit(os.path.join(prefix, "lib/systemd/system/scry.service"))
    exe = unit["ExecStart"]
    check(exe[0] == scry and exe[1] == "serve", "ExecStart is not the installed scry: %s" % exe)
    conf = exe[exe.index("--config") + 1]
    check(conf == os.path.join(prefix, "etc/scry/scry.conf"), "--config %s" % conf)
    docs = unit.get("Documentation", [])
    check(docs, "no Documentation=")
    for d in docs:
        if d.startswith("file://"):
            check(os.path.isfile(d[len("file://"):]), "Documentation=%s is not installed" % d)
        else:
            check(d == "man:scry(1)", "Documentation=%s: neither a file nor scry(1)" % d)
    with open(os.path.join(prefix, "share/man/man1/scry.1")) as f:
        man = f.read()
    for cmd in ("record", "dump", "top", "diff", "serve", "ctl"):
        check('.SH "SCRY %s"' % cmd in man, "the man page has no section for %s" % cmd)
    check("--memory" in man and "--once" in man, "the man page lacks the options' help")

    hide_check = hidden(["sh", "-c", 'test ! -e "$0/shim/libscry-shim.so" && '
                         'test ! -e "$1/CMakeLists.txt"', ARGS.build, ARGS.source])
    run_ok(hide_check, "the build tree is not hidden")
    p, script = start_target(c)
    pid = str(p.pid)
    out = c.path("attach.txt")
    run_ok(hidden([scry, "record", "--memory", "-q", "-d", "2", "-f", "text", "-o", out,
                   "--pid", pid]), "record --memory --pid")
    with open(out) as f:
        mb_attach = check_memory_report(f.read(), "record --memory --pid")
    out = c.path("launch.txt")
    run_ok(hidden([scry, "record", "--memory", "-q", "-d", "2", "-f", "text", "-o", out,
                   "--", PY, script]), "record --memory -- python")
    with open(out) as f:
        mb_launch = check_memory_report(f.read(), "record --memory launch")
    out = c.path("cpu.json")
    run_ok(hidden([scry, "record", "-q", "-d", "1", "-f", "json", "-o", out, "--pid", pid]),
           "record -f json")
    with open(out) as f:
        check("burn" in f.read(), "record -f json: burn is missing")
    dump, _ = run_ok(hidden([scry, "dump", "--pid", pid]), "dump")
    check("workload.py" in dump and "main" in dump, "dump: %s" % st.short(dump, 400))
    top, _ = run_ok(hidden([scry, "top", "--once", "-d", "1", "--pid", pid]), "top --once")
    check("burn" in top, "top --once: %s" % st.short(top, 400))
    cfg, _ = run_ok(hidden([scry, "serve", "--check-config", "--config", conf]),
                    "serve --check-config")
    check("out-dir" in cfg, "serve --check-config printed no configuration: %s" % cfg[:300])

    # The same scry without its shim refuses --memory: no CPU-only profile where memory was
    # asked for.
    lonely = c.path("lonely")
    os.makedirs(lonely)
    shutil.copy(scry, lonely)
    out = c.path("refused.txt")
    rc, _, err = run(hidden([os.path.join(lonely, "scry"), "record", "--memory", "-d", "1",
                             "-f", "text", "-o", out, "--pid", pid]))
    check(rc != 0 and "libscry-shim.so" in err and "not found" in err,
          "--memory without the shim: exit %d, %s" % (rc, st.short(err, 300)))
    check(not os.path.exists(out), "--memory without the shim wrote %s" % out)
    return ("installed; keeping line first: %.1f MiB attach, %.1f MiB launch; no shim: exit %d"
            % (mb_attach, mb_launch, rc))


# -- the unit's capabilities ----------------------------------------------------------------

# The readers' group of the daemon's window files (out-group): giving files a group root is
# not in takes CAP_CHOWN.
OUT_GROUP = "nogroup"


def out_group_files(d, timeout):
    """After a flush, how many of the daemon's files carry OUT_GROUP (waits up to TIMEOUT s
    for index.json)."""
    d.ctl("flush", ok=False)
    idx = os.path.join(d.out, "index.json")
    dl = st.Deadline(timeout)
    while not os.path.exists(idx) and not dl.expired():
        time.sleep(0.2)
    gid = grp.getgrnam(OUT_GROUP).gr_gid
    n = 0
    for dirpath, _, files in os.walk(d.out):
        n += sum(1 for f in files if os.stat(os.path.join(dirpath, f)).st_gid == gid)
    return n


class Daemon(object):
    """P/bin/scry serve as the installed unit runs it, under bounding set CAPS (hidden build
    tree), with a test configuration: a private socket and out-dir, 2 s windows, only the
    test's own target (matched by the test's directory name)."""

    def __init__(self, c, prefix, caps):
        unit = parse_unit(os.path.join(prefix, "lib/systemd/system/scry.service"))
        check(unit.get("User", ["root"]) == ["root"], "the unit's User is not root")
        exe = list(unit["ExecStart"])
        exe[exe.index("--config") + 1] = c.path("scry.conf")
        self.scry = exe[0]
        self.c = c
        self.sock = c.path("scry.sock")
        self.out = c.path("out")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        shutil.rmtree(self.out, ignore_errors=True)
        with open(c.path("scry.conf"), "w") as f:
            f.write("out-dir = %s\nout-group = %s\nsocket = %s\ninterval = 2\nmatch = %s\n"
                    % (self.out, OUT_GROUP, self.sock, os.path.basename(c.tmp)))
        setpriv = ["setpriv", "--bounding-set", ",".join(["-all"] + ["+" + x for x in caps])]
        # A tight locked-memory limit (64 KiB, the kernel's default before 5.16): the perf
        # rings of the target's 200 threads then need CAP_IPC_LOCK.
        setpriv = ["prlimit", "--memlock=65536:65536"] + setpriv
        if unit.get("NoNewPrivileges", ["no"])[0] in ("yes", "true", "1", "on"):
            setpriv.append("--no-new-privs")
        self.p = c.spawn(hidden(setpriv + exe), log_name="daemon-%d.log" % len(c.procs))

    def log(self):
        return self.c.proc_log(self.p)

    def ctl(self, *args, ok=True, timeout=60):
        rc, out, err = run(hidden([self.scry, "ctl", "--socket", self.sock] + list(args)),
                           timeout=timeout)
        if ok:
            check(rc == 0, "ctl %s: exit %d: %s %s" % (" ".join(args), rc, out, err))
        return rc, out, err

    def listing(self):
        rc, out, _ = self.ctl("--json", "list", ok=False)
        return json.loads(out) if rc == 0 else None

    def wait_target(self, pid, timeout=15):
        """The daemon's list once it has target PID (None when it never has)."""
        d = st.Deadline(timeout)
        while not d.expired():
            if self.p.poll() is not None:
                raise Fail("the daemon exited: %s" % st.short(self.log(), 600))
            lst = self.listing()
            if lst and any(t["pid"] == pid for t in lst.get("targets", [])):
                return lst
            time.sleep(0.3)
        return None

    def wait_log(self, text, timeout=15, seen=0):
        """True once the daemon's log holds TEXT more than SEEN times."""
        d = st.Deadline(timeout)
        while not d.expired():
            if self.log().count(text) > seen:
                return True
            time.sleep(0.2)
        return False

    def record(self, pid, name, *args):
        """ctl record PID ARGS --format text --output NAME: the report's text."""
        out = self.c.path(name)
        argv = ["record", str(pid)] + list(args) + ["--format", "text", "--output", out]
        ended = "recording of target %d ended" % pid
        seen = self.log().count(ended)
        d = st.Deadline(5)
        while True:  # the daemon may still be closing the previous recording (issue 25.10)
            rc, o, err = self.ctl(*argv, ok=False)
            if rc == 0 or "already under way" not in err or d.expired():
                break
            time.sleep(0.3)
        check(rc == 0, "ctl %s: exit %d: %s %s" % (" ".join(argv), rc, o, err))
        check(self.wait_log(ended, seen=seen), "the recording never ended")
        with open(out) as f:
            return f.read()

    def record_memory(self, pid, name):
        return self.record(pid, name, "--memory", "--duration", "2")

    def user_sees(self, pid):
        """True when the target's own user (nobody) finds PID in its `scry ctl list`: the
        daemon checks a user's access in a child that takes the user's ids."""
        argv = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
                self.scry, "ctl", "--socket", self.sock, "--json", "list"]
        rc, out, _ = run(hidden(argv), timeout=30)
        try:
            return rc == 0 and any(t["pid"] == pid for t in json.loads(out).get("targets", []))
        except ValueError:
            return False

    def rings(self):
        """How many perf rings the daemon has mapped."""
        with open("/proc/%d/maps" % self.p.pid) as f:
            return sum(1 for line in f if "perf_event" in line)

    def wait_rings(self, n, timeout=10):
        """True once the daemon has N perf rings mapped."""
        d = st.Deadline(timeout)
        while self.rings() < n and not d.expired():
            time.sleep(0.3)
        return self.rings() >= n

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(20)
        except subprocess.TimeoutExpired:
            raise Fail("the daemon did not stop within 20 s of SIGTERM")


def status_caps(pid):
    with open("/proc/%d/status" % pid) as f:
        text = f.read()
    return {k: int(v, 16) for k, v in re.findall(r"^(Cap\w+):\s*([0-9a-f]+)$", text, re.M)}


@tests("unit_caps")
def t_unit_caps(c):
    """The daemon under exactly the unit's capability set: every documented feature works."""
    prefix = install_prefix(c)
    caps = unit_caps(parse_unit(os.path.join(prefix, "lib/systemd/system/scry.service")))
    tp, script = start_target(c, as_nobody=True, threads=200)
    d = Daemon(c, prefix, caps)
    lst = d.wait_target(tp.pid)
    check(lst, "target %d never listed: %s" % (tp.pid, st.short(d.log(), 600)))
    have = status_caps(d.p.pid)
    check(have.get("CapBnd") == cap_mask(caps) and have.get("CapEff") == cap_mask(caps),
          "the daemon's capabilities %s are not the unit's %x" % (have, cap_mask(caps)))
    check(lst["daemon"]["idle_watch"] == "perf" and "per-CPU clock says which ran" in d.log(),
          "the per-CPU clock is not used: %s" % st.short(d.log(), 400))
    check("no process-events connector" not in d.log(), "no connector: %s" % d.log()[:400])
    rings = RINGS_PER_TARGET + os.cpu_count()
    check(d.wait_rings(rings), "%d perf rings for the target's 201 threads and %d CPUs, not %d"
          % (d.rings(), os.cpu_count(), rings))
    check(d.user_sees(tp.pid), "the target's user does not see it in scry ctl list")
    _, dump, _ = d.ctl("dump", str(tp.pid))
    check("workload.py" in dump and "main" in dump, "ctl dump: %s" % st.short(dump, 300))
    mem = d.record_memory(tp.pid, "memory.txt")
    mb = check_memory_report(mem, "ctl record --memory")
    chrooted = chroot_memory(c, d)
    check("burn" in d.record(tp.pid, "cpu.txt", "--duration", "1"), "ctl record: burn is missing")
    d.ctl("set-rate", str(tp.pid), "49")
    rate = [t["rate"] for t in d.listing()["targets"] if t["pid"] == tp.pid]
    check(rate == [49.0], "after set-rate 49: %s" % rate)
    d.ctl("reload")
    check(d.wait_log("configuration reloaded"), "reload: %s" % d.log()[-300:])
    grouped = out_group_files(d, 10)
    check(os.path.exists(os.path.join(d.out, "index.json")), "flush wrote no index.json")
    check(grouped > 0, "no window file has out-group %s" % OUT_GROUP)
    rc = d.stop()
    check(rc == 0, "the daemon exited %d after SIGTERM" % rc)
    check(tp.poll() is None and tracer_of(tp.pid) == 0, "the target is dead or still traced")
    return ("%s: per-CPU clock, %d perf rings, list (as root and as the target's user), dump, "
            "record --memory (%.1f MiB on the "
            "keeping line; %s), record, set-rate, reload, flush (out-group)"
            % (",".join(caps), rings, mb, chrooted))


def chroot_memory(c, d):
    """ctl record --memory of a Python chrooted into the cached Debian root (another root,
    as a container's: the shim is staged into it): the keeping line first."""
    rc, root, _ = run([os.path.join(ARGS.source, "scripts", "debian-root.sh"), "--path"])
    root = root.strip()
    if not os.path.exists(os.path.join(root, ".scry-debian-root")):
        return "no Debian root for a chrooted target (scripts/debian-root.sh)"
    inside = os.path.join("/tmp", os.path.basename(c.tmp))  # holds the daemon's match key
    os.makedirs(root + inside)
    try:
        shutil.copy(WORKLOAD, root + inside)
        p = c.spawn(["chroot", root, "/usr/bin/python3", inside + "/workload.py"])
        wait_running(p.pid, lambda: p.poll() is not None, lambda: c.proc_log(p))
        check(d.wait_target(p.pid), "the chrooted target was never listed")
        mb = check_memory_report(d.record_memory(p.pid, "chroot.txt"), "chrooted --memory")
        c.kill(p)
        check(not [x for x in os.listdir(root + "/tmp") if x.startswith(".scry-shim")],
              "the staged shim was left in the root's /tmp")
    finally:
        shutil.rmtree(root + inside, ignore_errors=True)
    return "chrooted %s: %.1f MiB" % (os.path.basename(root), mb)


def lacks_ptrace(c, d, tp):
    return d.wait_target(tp.pid, timeout=6) is None, "target not read"


def lacks_perfmon(c, d, tp):
    lst = d.wait_target(tp.pid)
    return lst is not None and lst["daemon"]["idle_watch"] == "proc", "idle targets by /proc"


def lacks_net_admin(c, d, tp):
    """The connector's subscription needs CAP_NET_ADMIN before Linux 6.6 (Debian 12's 6.1);
    later kernels take unprivileged listeners, so there the unit's set merely keeps it."""
    d.wait_target(tp.pid)
    if "no process-events connector" in d.log():
        return True, "no process-events connector"
    release = os.uname().release
    if tuple(int(x) for x in re.findall(r"\d+", release)[:2]) >= (6, 6):
        return True, "connector open to unprivileged listeners on %s (needed before 6.6)" % release
    return False, "no process-events connector"


def lacks_dac_override(c, d, tp):
    d.wait_target(tp.pid)
    return "alloc MiB" not in d.record_memory(tp.pid, "m.txt"), "no memory recording"


def lacks_ipc_lock(c, d, tp):
    """Beyond root's allowance (kernel.perf_event_mlock_kb per CPU, shared by all of root's
    processes) and the 64 KiB limit, the rings (12 KiB each at 19 Hz) need CAP_IPC_LOCK. A
    machine with many CPUs may hold them all in the allowance: then it is only said."""
    d.wait_target(tp.pid)
    rings = RINGS_PER_TARGET + os.cpu_count()
    if not d.wait_rings(rings, timeout=4):
        return True, "%d of %d perf rings" % (d.rings(), rings)
    with open("/proc/sys/kernel/perf_event_mlock_kb") as f:
        allowance_kb = int(f.read()) * os.cpu_count()
    return allowance_kb >= rings * 12, ("all %d perf rings within root's allowance of %d KiB"
                                        % (rings, allowance_kb))


def lacks_setid(c, d, tp):
    d.wait_target(tp.pid)
    return not d.user_sees(tp.pid), "scry ctl refuses users other than root"


def lacks_chown(c, d, tp):
    d.wait_target(tp.pid)
    return out_group_files(d, 6) == 0, "no window files for out-group %s" % OUT_GROUP


NEEDED_FOR = {"chown": lacks_chown, "sys_ptrace": lacks_ptrace, "perfmon": lacks_perfmon,
              "net_admin": lacks_net_admin, "dac_override": lacks_dac_override,
              "setuid": lacks_setid, "setgid": lacks_setid, "ipc_lock": lacks_ipc_lock}


@tests("unit_caps_least")
def t_unit_caps_least(c):
    """Each capability of the unit is needed: the daemon without it loses its feature."""
    prefix = install_prefix(c)
    caps = unit_caps(parse_unit(os.path.join(prefix, "lib/systemd/system/scry.service")))
    tp, _ = start_target(c, as_nobody=True, threads=200)
    lost = []
    for cap in caps:
        check(cap in NEEDED_FOR, "CAP_%s: no known use (add its check or drop it)" % cap.upper())
        d = Daemon(c, prefix, [x for x in caps if x != cap])
        try:
            gone, what = NEEDED_FOR[cap](c, d, tp)
        finally:
            d.stop()
        check(gone, "without CAP_%s the daemon still works (%s expected): %s"
              % (cap.upper(), what, st.short(d.log(), 300)))
        lost.append("%s: %s" % (cap, what))
    check(tp.poll() is None and tracer_of(tp.pid) == 0, "the target is dead or still traced")
    return "; ".join(lost)


# -- the Debian package -------------------------------------------------------------------

def depends_of(deb):
    out, _ = run_ok(["dpkg-deb", "-f", deb, "Depends"], "dpkg-deb -f")
    return [alt.split("|")[0].split("(")[0].strip() for alt in out.strip().split(",")
            if alt.strip()]


SNAPSHOT_SKIP = ("proc", "dev", "tmp", "var/cache", "var/lib/apt", "var/lib/dpkg", "var/log",
                 "run")


def snapshot(root):
    """Every path under ROOT (relative, with a leading /) but the ones dpkg and apt keep
    their own state in."""
    paths = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != "." and rel.startswith(SNAPSHOT_SKIP):
            dirs[:] = []
            continue
        for n in dirs + files:
            r = os.path.normpath(os.path.join(rel, n))
            if not r.startswith(SNAPSHOT_SKIP):
                paths.add("/" + r)
    return paths


def deb_inner(a):
    """Inside a private mount namespace (run_install.py --deb-inner JSON): the overlay of the
    cached root, the steps under chroot; prints {step: [rc, out, err], ...} as JSON."""
    base, root = a["base"], a["root"]
    m = os.path.join(base, "merged")
    for d in ("upper", "work", "merged"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    res = {}

    def step(name, argv, timeout=300, env=None):
        rc, out, err = run(argv, timeout=timeout, env=env)
        res[name] = [rc, out[-6000:], err[-3000:]]
        return rc == 0

    mounts = [["mount", "-t", "overlay", "overlay", "-o", "lowerdir=%s,upperdir=%s,workdir=%s"
               % (root, os.path.join(base, "upper"), os.path.join(base, "work")), m],
              ["mount", "-t", "proc", "proc", m + "/proc"],
              ["mount", "--rbind", "/dev", m + "/dev"],
              ["mount", "--bind", a["debs"], m + "/var/cache/apt/archives"]]
    for i, argv in enumerate(mounts):
        if not step("mount%d" % i, argv):
            print(json.dumps(res))
            return 0
    ch = ["chroot", m]
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    if not step("deps", ch + ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
                + a["deps"], env=env):
        print(json.dumps(res))
        return 0
    before = snapshot(m)
    shutil.copy(a["deb"], m + "/tmp/scry.deb")
    shutil.copy(WORKLOAD, m + "/tmp/workload.py")
    if step("dpkg -i", ch + ["dpkg", "-i", "/tmp/scry.deb"], env=env):
        target = subprocess.Popen(ch + ["/usr/bin/python3", "/tmp/workload.py"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_running(target.pid, lambda: target.poll() is not None, lambda: "")
            step("record --memory", ch + ["scry", "record", "--memory", "-q", "-d", "2", "-f",
                                          "text", "-o", "/tmp/mem.txt", "--pid", str(target.pid)],
                 env=env)
            if os.path.exists(m + "/tmp/mem.txt"):
                with open(m + "/tmp/mem.txt") as f:
                    res["mem.txt"] = f.read()
            step("dump", ch + ["scry", "dump", "--pid", str(target.pid)], env=env)
            step("check-config", ch + ["scry", "serve", "--check-config"], env=env)
            step("man", ch + ["test", "-s", "/usr/share/man/man1/scry.1"], env=env)
        finally:
            target.kill()
            target.wait()
        step("dpkg -r", ch + ["dpkg", "-r", "scry"], env=env)
        step("dpkg -s", ch + ["dpkg-query", "-W", "-f", "${Status}", "scry"], env=env)
    after = snapshot(m)
    res["left"] = sorted(after - before)
    res["removed"] = sorted(before - after)
    if "dpkg -r" in res:
        step("dpkg --purge", ch + ["dpkg", "--purge", "scry"], env=env)
        res["purged_left"] = sorted(snapshot(m) - before)
    print(json.dumps(res))
    return 0


@tests("deb")
def t_deb(c):
    """cpack -G DEB; dpkg -i into a fresh Debian root; record --memory, dump, check-config
    there; dpkg -r leaves only the configuration."""
    out, _ = run_ok(["cpack", "-G", "DEB", "--config",
                     os.path.join(ARGS.build, "CPackConfig.cmake"), "-B", c.path("cpack")],
                    "cpack -G DEB", cwd=ARGS.build)
    debs = [x for x in os.listdir(c.path("cpack")) if x.endswith(".deb")]
    check(len(debs) == 1, "cpack made %s" % debs)
    deb = c.path(os.path.join("cpack", debs[0]))
    deps = depends_of(deb)
    check(deps, "the package has no Depends")
    rc, root, err = run([os.path.join(ARGS.source, "scripts", "debian-root.sh")], timeout=900)
    root = root.strip()
    if "SKIP" in err or not root or not os.path.isdir(root):
        raise Skip("no Debian root: %s" % err.strip())
    inner = {"base": c.path("root"), "root": root, "debs": root + ".debs", "deb": deb,
             "deps": deps}
    rc, out, err = run(["unshare", "--mount", "--propagation", "private", sys.executable,
                        os.path.abspath(__file__), "--deb-inner", json.dumps(inner)],
                       timeout=600)
    check(rc == 0 and out.strip(), "the chroot steps: exit %d: %s" % (rc, st.short(err, 600)))
    res = json.loads(out)
    for name, r in res.items():
        if isinstance(r, list) and len(r) == 3 and name not in ("left", "removed", "purged_left"):
            if name == "deps" and r[0] != 0 and re.search(r"Failed to fetch|resolve", r[2]):
                raise Skip("the package's Depends cannot be fetched: %s" % st.short(r[2], 300))
            check(r[0] == 0, "%s: exit %d: %s %s" % (name, r[0], st.short(r[1], 300),
                                                   st.short(r[2], 600)))
    for name in ("dpkg -i", "record --memory", "dump", "check-config", "dpkg -r"):
        check(name in res, "step %s did not run" % name)
    mb = check_memory_report(res.get("mem.txt", ""), "record --memory in the root")
    check("workload.py" in res["dump"][1] and "main" in res["dump"][1],
          "dump: %s" % st.short(res["dump"][1], 300))
    check("out-dir" in res["check-config"][1], "check-config: %s" % res["check-config"][1][:300])
    check(res["left"] == ["/etc/scry", "/etc/scry/scry.conf"],
          "dpkg -r left %s" % res["left"][:20])
    check(not res["removed"], "installing and removing scry removed %s" % res["removed"][:20])
    check(res["dpkg -s"][1] == "deinstall ok config-files", "after dpkg -r: %s" % res["dpkg -s"][1])
    check(not res["purged_left"], "dpkg --purge left %s" % res["purged_left"][:20])
    return ("%s, Depends %s; %.1f MiB on the keeping line; dpkg -r left only the configuration, "
            "--purge nothing"
            % (debs[0], ", ".join(deps), mb))


def main():
    global ARGS
    if len(sys.argv) == 3 and sys.argv[1] == "--deb-inner":
        return deb_inner(json.loads(sys.argv[2]))
    ap = st.runner.parser(__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("-k", action="append", default=[])
    ap.add_argument("-v", action="store_true")
    ARGS = ap.parse_args()
    ARGS.build, ARGS.source = os.path.abspath(ARGS.build), os.path.abspath(ARGS.source)
    sel = tests.select(ARGS.k)
    if os.geteuid() != 0:
        return st.skip_all("install", "needs root (mounts, chroot, setpriv)", len(sel))
    for tool in ("cmake", "cpack", "unshare", "setpriv", "dpkg-deb"):
        if not shutil.which(tool):
            return st.skip_all("install", "no %s" % tool, len(sel))
    if not os.path.exists(PY):
        return st.skip_all("install", "no %s" % PY, len(sel))
    return st.run(sel, lambda t: st.Ctx(t.name, verbose=ARGS.v, prefix="scry-install"),
                  "install", verbose=ARGS.v)


if __name__ == "__main__":
    sys.exit(main())
