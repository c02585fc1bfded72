#!/usr/bin/env python3
"""A hostile target cannot make scry read a file it could not read itself (issue 15).

usage: run_security.py --scry PATH [-k PATTERN] [-v]

Each test starts a real interpreter whose code objects claim to come from a file the target
must not see (/etc/shadow as nobody, a FIFO, a file only scry's root has, a symlink out of a
chroot), records it in the formats that carry source (text, html; json as a check), and
asserts that no byte of that file reaches the report and that the report says why the source
is missing. Other tests check that a normal program's own source still appears (attach,
relative names, a launched target that has exited). Needs root (chroot, mounts, other users).
Stdlib only. One line "PASS|FAIL|SKIP name: detail" per test, then "N passed, N failed, N
skipped"; exit 1 on a failure; every process a test starts is killed at its end.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

PY = "/usr/bin/python3.11"  # Debian's: static, so it runs in a chroot holding only /usr
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"  # main script named relatively
SID_ROOT = "/var/cache/scry-tests/sid-root"
SCRY_TIMEOUT = 60
MARK = "SCRYSECRETMARK"  # every line of the files the target must not see holds it


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


class Ctx:
    def __init__(self, scry, verbose):
        self.scry = scry
        self.verbose = verbose
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="scry-sec-")
        os.chmod(self.tmp, 0o755)

    def start(self, argv, **kw):
        """Starts a target in its own session; it is killed at the end of the test."""
        p = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.procs.append(p)
        return p

    def wait_python(self, p, timeout=20):
        """Waits until P (which execs its way to a Python) is a Python that has started."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            if p.poll() is not None:
                raise Fail("target exited early: %r" % (p.communicate()[1][-500:],))
            try:
                exe = os.readlink("/proc/%d/exe" % p.pid)
                with open("/proc/%d/stat" % p.pid) as f:
                    utime = int(f.read().rsplit(")", 1)[1].split()[11])
            except OSError:
                exe, utime = "", 0
            if "python" in os.path.basename(exe) and utime > 20:  # 0.2 s of its own CPU
                return
            time.sleep(0.1)
        raise Fail("target %d never became a running Python" % p.pid)

    def scry_cmd(self, args, timeout=SCRY_TIMEOUT):
        t0 = time.time()
        try:
            r = subprocess.run([self.scry] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail("scry %s did not finish in %d s" % (" ".join(args), timeout))
        if self.verbose:
            print("  scry %s -> %d in %.1f s\n%s" % (" ".join(args), r.returncode,
                                                     time.time() - t0, r.stderr.decode()[-800:]))
        check(r.returncode == 0, "scry %s exited %d: %s" % (" ".join(args), r.returncode,
                                                             r.stderr.decode()[-500:]))
        return r

    def record(self, pid, fmt, seconds=1.0):
        out = os.path.join(self.tmp, "report.%s" % fmt)
        self.scry_cmd(["record", "-q", "-f", fmt, "-d", str(seconds), "-o", out,
                       "--pid", str(pid)])
        with open(out, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def cleanup(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        subprocess.call(["umount", "-R", "-l", os.path.join(self.tmp, "root")],
                        stderr=subprocess.DEVNULL)
        shutil.rmtree(self.tmp, ignore_errors=True)


def hostile(names):
    """Python code whose hot functions claim to come from NAMES (one per function)."""
    code = []
    for i, n in enumerate(names):
        code.append("exec(compile('def f%d(k):\\n for i in range(k): pass\\n', %r, 'exec'))"
                    % (i, n))
    code.append("while 1:\n" + "".join(" f%d(20000)\n" % i for i in range(len(names))))
    return "\n".join(code)


def as_nobody(argv):
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + argv


def secret_file(c, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for i in range(40):
            f.write("%s line %d\n" % (MARK, i + 1))


def assert_clean(reports, secret_lines, why):
    for fmt, text in reports.items():
        for line in secret_lines:
            check(line not in text, "%s report holds %r" % (fmt, line))
    for fmt in ("text", "html"):
        if fmt in reports:
            check("source not available" in reports[fmt] and why in reports[fmt],
                  "%s report does not say the source is missing (%s)" % (fmt, why))


def all_reports(c, pid, formats=("text", "html", "json")):
    return {fmt: c.record(pid, fmt) for fmt in formats}


def t_shadow(c):
    """The issue's attack: nobody claims /etc/shadow; none of it reaches the report."""
    with open("/etc/shadow") as f:
        lines = [l.rstrip("\n") for l in f if len(l.strip()) >= 4]
    check(lines, "/etc/shadow is empty")
    p = c.start(as_nobody([PY, "-c", hostile(["/etc/shadow"])]))
    c.wait_python(p)
    reports = all_reports(c, p.pid)
    # every field of the first line too (a partial leak of a line is a leak)
    fields = [x for x in lines[0].split(":") if len(x) >= 4 and x not in ("root",)]
    assert_clean(reports, lines + fields, "permission denied")
    return "%d lines of /etc/shadow, none in text/html/json" % len(lines)


def t_fifo(c):
    """A FIFO as file name (a root target, so permissions do not stop it): no hang."""
    fifo = os.path.join(c.tmp, "pipe.py")
    os.mkfifo(fifo, 0o666)
    p = c.start([PY, "-c", hostile([fifo])])
    c.wait_python(p)
    t0 = time.time()
    reports = all_reports(c, p.pid, ("text", "html"))
    took = time.time() - t0
    assert_clean(reports, [], "not a regular file")
    check(took < 20, "two 1 s records took %.1f s" % took)
    return "text+html in %.1f s" % took


def t_mount_namespace(c):
    """A file scry's root has but the target's mount namespace hides (tmpfs over its dir)."""
    hidden = os.path.join(c.tmp, "hidden")
    secret = os.path.join(hidden, "secret.py")
    secret_file(c, secret)
    sh = "mount -t tmpfs none %s && exec %s -c \"$1\"" % (hidden, PY)
    p = c.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                 hostile([secret])])
    c.wait_python(p)
    assert_clean(all_reports(c, p.pid), [MARK], "not found")
    return "hidden file not read"


def make_chroot(c):
    """A chroot holding only /usr (bind-mounted) and a /tmp; returns its path."""
    root = os.path.join(c.tmp, "root")
    for d in ("usr", "tmp", "dev"):
        os.makedirs(os.path.join(root, d))
    for l in ("lib", "lib64", "bin"):
        os.symlink("usr/" + l, os.path.join(root, l))
    return root


def t_chroot_escape(c):
    """A chroot target: a host file by its host name, and an absolute symlink inside the
    chroot pointing at it. Neither is read (the symlink resolves inside the target's root)."""
    secret = os.path.join(c.tmp, "host", "secret.py")
    secret_file(c, secret)
    root = make_chroot(c)
    os.symlink(secret, os.path.join(root, "tmp", "evil.py"))
    sh = ("mount --bind /usr %s/usr && exec chroot %s %s -c \"$1\"" % (root, root, PY))
    p = c.start(["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                 hostile([secret, "/tmp/evil.py"])])
    c.wait_python(p)
    reports = all_reports(c, p.pid)
    assert_clean(reports, [MARK], "not found")
    check("/tmp/evil.py" in reports["text"], "text report lacks /tmp/evil.py")
    return "host name and escaping symlink not read"


def t_sid_root(c):
    """The same through the Debian sid root (python3.14) when it exists and scry reads 3.14."""
    py = os.path.join(SID_ROOT, "usr/bin/python3.14")
    if not os.path.exists(py):
        raise Skip("no %s" % py)
    secret = os.path.join(c.tmp, "host2", "secret.py")
    secret_file(c, secret)
    p = c.start(["chroot", SID_ROOT, "python3.14", "-c", hostile([secret])])
    c.wait_python(p)
    out = os.path.join(c.tmp, "probe.txt")
    r = subprocess.run([c.scry, "record", "-q", "-f", "text", "-d", "1", "-o", out, "--pid",
                        str(p.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=SCRY_TIMEOUT)
    if r.returncode != 0:
        raise Skip("scry does not record python3.14: %s" % r.stderr.decode()[-200:])
    assert_clean(all_reports(c, p.pid), [MARK], "not found")
    return "host file not read through the sid root"


WORK = """import time
def hot():
    t = 0
    for i in range(200000):
        t += i * i  # SCRYHOTLINE
    return t
end = time.time() + {seconds}
while time.time() < end:
    hot()
"""


def own_script(c, seconds=60):
    d = os.path.join(c.tmp, "app")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "work.py")
    with open(path, "w") as f:
        f.write(WORK.format(seconds=seconds))
    os.chmod(path, 0o644)
    return d, path


def t_own_source(c):
    """A normal program run by nobody: its own source is in the text and html reports."""
    d, path = own_script(c)
    p = c.start(as_nobody([PY, path]))
    c.wait_python(p)
    for fmt in ("text", "html"):
        text = c.record(p.pid, fmt)
        check("SCRYHOTLINE" in text, "%s report lacks the hot line's source" % fmt)
        check("source not available" not in text, "%s report misses a source" % fmt)
    return "source shown"


def t_relative_name(c):
    """Python 3.8 names the main script as given (relative): read beneath the target's cwd."""
    if not os.path.exists(PY38):
        raise Skip("no %s" % PY38)
    d, path = own_script(c)
    p = c.start([PY38, "work.py"], cwd=d)  # /root (pyenv) is closed to nobody
    c.wait_python(p)
    text = c.record(p.pid, "text")
    check("work.py:" in text and "SCRYHOTLINE" in text, "relative source missing: %s" % text[-800:])
    return "source shown"


def t_launched_exited(c):
    """A launched target that exits before the report: the source, read through the root
    pinned while it lived, is still there."""
    d, path = own_script(c, seconds=1.5)
    out = os.path.join(c.tmp, "launched.txt")
    c.scry_cmd(["record", "-q", "-f", "text", "-o", out, "--", PY, path])
    with open(out) as f:
        text = f.read()
    check("SCRYHOTLINE" in text, "source missing after the target exited: %s" % text[-800:])
    return "source shown"


TESTS = [t_shadow, t_fifo, t_mount_namespace, t_chroot_escape, t_sid_root, t_own_source,
         t_relative_name, t_launched_exited]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scry", required=True)
    ap.add_argument("-k", action="append", default=[])
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP security: needs root")
        return 0
    if not os.path.exists(PY):
        print("SKIP security: no %s" % PY)
        return 0
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for t in TESTS:
        name = t.__name__[2:]
        if a.k and not any(k in name for k in a.k):
            continue
        c = Ctx(os.path.abspath(a.scry), a.v)
        t0 = time.time()
        try:
            status, detail = "PASS", t(c)
        except Skip as e:
            status, detail = "SKIP", str(e)
        except Fail as e:
            status, detail = "FAIL", str(e)
        except Exception:
            status, detail = "FAIL", traceback.format_exc()
        finally:
            c.cleanup()
        counts[status] += 1
        print("%s %s: %s [%.1f s]" % (status, name, detail, time.time() - t0), flush=True)
    print("%d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
