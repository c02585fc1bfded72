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
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Skip, check  # noqa: E402

PY = "/usr/bin/python3.11"  # Debian's: static, so it runs in a chroot holding only /usr
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"  # names the main script relatively
MARK = "SCRYSECRETMARK"  # every line of the files the target must not see holds it
tests = st.Tests()


def start(c, argv, cwd=None):
    """Starts a target that execs its way to a Python and waits until that Python runs."""
    p = c.spawn(argv, cwd=cwd)
    c.wait_python(p, "target %d" % p.pid)
    return p


def record(c, pid, fmt, seconds=1.0):
    return c.record(["-q", "-d", str(seconds), "--pid", str(pid)], fmt)[1]


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


def secret_file(path):
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
    return {fmt: record(c, pid, fmt) for fmt in formats}


@tests("shadow")
def t_shadow(c):
    """The issue's attack: nobody claims /etc/shadow; none of it reaches the report."""
    with open("/etc/shadow") as f:
        lines = [l.rstrip("\n") for l in f if len(l.strip()) >= 4]
    check(lines, "/etc/shadow is empty")
    p = start(c, as_nobody([PY, "-c", hostile(["/etc/shadow"])]))
    reports = all_reports(c, p.pid)
    # every field of the first line too (a partial leak of a line is a leak)
    fields = [x for x in lines[0].split(":") if len(x) >= 4 and x not in ("root",)]
    assert_clean(reports, lines + fields, "permission denied")
    return "%d lines of /etc/shadow, none in text/html/json" % len(lines)


@tests("fifo")
def t_fifo(c):
    """A FIFO as file name (a root target, so permissions do not stop it): no hang."""
    fifo = os.path.join(c.tmp, "pipe.py")
    os.mkfifo(fifo, 0o666)
    p = start(c, [PY, "-c", hostile([fifo])])
    t0 = st.now()
    reports = all_reports(c, p.pid, ("text", "html"))
    took = st.since(t0)
    assert_clean(reports, [], "not a regular file")
    check(took < 20, "two 1 s records took %.1f s" % took)
    return "text+html in %.1f s" % took


@tests("mount_namespace")
def t_mount_namespace(c):
    """A file scry's root has but the target's mount namespace hides (tmpfs over its dir)."""
    hidden = os.path.join(c.tmp, "hidden")
    secret = os.path.join(hidden, "secret.py")
    secret_file(secret)
    sh = "mount -t tmpfs none %s && exec %s -c \"$1\"" % (hidden, PY)
    p = start(c, ["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                 hostile([secret])])
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


@tests("chroot_escape")
def t_chroot_escape(c):
    """A chroot target: a host file by its host name, and an absolute symlink inside the
    chroot pointing at it. Neither is read (the symlink resolves inside the target's root)."""
    secret = os.path.join(c.tmp, "host", "secret.py")
    secret_file(secret)
    root = make_chroot(c)
    os.symlink(secret, os.path.join(root, "tmp", "evil.py"))
    sh = ("mount --bind /usr %s/usr && exec chroot %s %s -c \"$1\"" % (root, root, PY))
    p = start(c, ["unshare", "--mount", "--propagation", "private", "sh", "-c", sh, "sh",
                 hostile([secret, "/tmp/evil.py"])])
    reports = all_reports(c, p.pid)
    assert_clean(reports, [MARK], "not found")
    check("/tmp/evil.py" in reports["text"], "text report lacks /tmp/evil.py")
    return "host name and escaping symlink not read"


@tests("sid_root")
def t_sid_root(c):
    """The same through the Debian sid root (python3.14) when it exists and scry reads 3.14."""
    root = st.sid_root()
    py = os.path.join(root, "usr/bin/python3.14")
    if not os.path.exists(py):
        raise Skip("no %s" % py)
    secret = os.path.join(c.tmp, "host2", "secret.py")
    secret_file(secret)
    p = start(c, ["chroot", root, "python3.14", "-c", hostile([secret])])
    out = os.path.join(c.tmp, "probe.txt")
    r = c.scry(["record", "-q", "-f", "text", "-d", "1", "-o", out, "--pid", p.pid])
    if r.rc != 0:
        raise Skip("scry does not record python3.14: %s" % st.short(r.err, 200))
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


@tests("own_source")
def t_own_source(c):
    """A normal program run by nobody: its own source is in the text and html reports."""
    d, path = own_script(c)
    p = start(c, as_nobody([PY, path]))
    for fmt in ("text", "html"):
        text = record(c, p.pid, fmt)
        check("SCRYHOTLINE" in text, "%s report lacks the hot line's source" % fmt)
        check("source not available" not in text, "%s report misses a source" % fmt)
    return "source shown"


@tests("relative_name")
def t_relative_name(c):
    """Python 3.8 names the main script as given (relative): read beneath the target's cwd."""
    if not os.path.exists(PY38):
        raise Skip("no %s" % PY38)
    d, path = own_script(c)
    p = start(c, [PY38, "work.py"], cwd=d)  # /root (pyenv) is closed to nobody
    text = record(c, p.pid, "text")
    check("work.py:" in text and "SCRYHOTLINE" in text, "relative source missing: %s" % text[-800:])
    return "source shown"


@tests("launched_exited")
def t_launched_exited(c):
    """A launched target that exits before the report: the source, read through the root
    pinned while it lived, is still there."""
    d, path = own_script(c, seconds=1.5)
    out = os.path.join(c.tmp, "launched.txt")
    c.scry_ok(["record", "-q", "-f", "text", "-o", out, "--", PY, path])
    with open(out) as f:
        text = f.read()
    check("SCRYHOTLINE" in text, "source missing after the target exited: %s" % text[-800:])
    return "source shown"


def main():
    ap = st.add_common_args(st.runner.parser(__doc__))
    return st.run_as_root(ap.parse_args(), tests, "security", "scry-sec", PY)


if __name__ == "__main__":
    sys.exit(main())
