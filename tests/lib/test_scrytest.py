#!/usr/bin/env python3
"""Tests of tests/lib/scrytest itself (ctest lib.scrytest): the runner's lines and exit
code, the interpreter registry (host and Debian sid root), processes started in their own
session and reaped with their group, strays found by the test directory, scry's time-out,
the known-answer helpers, and a 3.14 target started with chroot in the sid root and
reaped, its private directory inside the root removed.

usage: test_scrytest.py [-k PATTERN] [-v]
"""
import contextlib
import io
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402

WORKLOADS = os.path.join(HERE, "..", "func", "workloads")
TESTS = st.Tests()


def alive(pid):
    """PID exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


@TESTS("runner_lines")
def t_runner_lines(c):
    """Each status prints its line; XFAIL counts as skipped; exit 1 on a failure."""
    t = st.Tests()

    def fail(_):
        raise Fail("wrong")

    def skip(_):
        raise Skip("no tool")

    def xfail(_):
        raise st.XFail("not implemented")

    def crash(_):
        return {}["x"]

    t.add("a", lambda _: "measured 1")
    t.add("b", fail)
    t.add("c", skip)
    t.add("d", xfail)
    t.add("e", crash)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = st.run(t.select(), lambda _: st.Ctx("inner", prefix="scry-selftest"), "inner")
    lines = out.getvalue().splitlines()
    check(rc == 1, "exit code %d with a failure" % rc)
    starts = [l.split(" [")[0] for l in lines[:5]]
    want = ["PASS a: measured 1", "FAIL b: wrong", "SKIP c: no tool",
            "XFAIL d: not implemented", "FAIL e: KeyError: 'x'"]
    check(starts == want, "lines %r, expected %r" % (starts, want))
    check(lines[-1] == "1 passed, 2 failed, 2 skipped", "closing line %r" % lines[-1])
    check("expected failures (counted as skipped): d" in lines, "no XFAIL list: %r" % lines)
    check("failed: b, e" in lines, "no failure list: %r" % lines)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = st.run(t.select(["a"]), lambda _: st.Ctx("inner", prefix="scry-selftest"), "x")
    check(rc == 0 and out.getvalue().splitlines()[-1] == "1 passed, 0 failed, 0 skipped",
          "-k a: rc %d, %r" % (rc, out.getvalue()))
    return "5 statuses, closing line, exit codes 1 and 0"


@TESTS("registry_host")
def t_registry_host(c):
    found, skipped = [], []
    for label in st.HOST_LABELS:
        try:
            it = st.find(label)
        except Skip as e:
            skipped.append("%s (%s)" % (label, e))
            continue
        want = (3, 11) if label == "debian3.11" else tuple(int(x) for x in label.split("."))
        check(it.version[:2] == want, "%s runs Python %s" % (label, it.version))
        check(it.root is None and it.argv("-c", "x") == [it.path, "-c", "x"], "argv %r"
              % it.argv("-c", "x"))
        check(it.target_path("/a/b") == "/a/b" and it.host_path("/a/b") == "/a/b",
              "host paths must be the same inside and outside")
        found.append(label)
    try:
        st.find("4.0")
        raise Fail("an unknown label did not raise")
    except ValueError:
        pass
    check(found, "no host interpreter at all: %s" % skipped)
    return "found %s%s" % (" ".join(found), "; skipped " + ", ".join(skipped) if skipped else "")


@TESTS("registry_sid")
def t_registry_sid(c):
    root = st.sid_root()  # Skip when not built
    got = []
    for label in st.SID_LABELS:
        it = st.find(label)
        want = tuple(int(x) for x in label.rstrip("d").split("."))
        check(it.version[:2] == want, "%s runs Python %s" % (label, it.version))
        check(it.root == root and it.argv("x")[:3] == ["chroot", root, it.path],
              "argv %r" % it.argv("x"))
        check(it.host_path("/usr/bin") == os.path.join(root, "usr/bin")
              and it.target_path(os.path.join(root, "tmp", "x")) == "/tmp/x",
              "path mapping")
        try:
            it.target_path("/etc/passwd")
            raise Fail("a host path outside the root mapped into it")
        except ValueError:
            pass
        got.append("%s=%s" % (label, ".".join(map(str, it.version))))
    debug = st.find("3.14d").eval("import sys; print(hasattr(sys, 'gettotalrefcount'))")
    check(debug == "True", "3.14d is not a debug build (gettotalrefcount: %s)" % debug)
    return "%s in %s; 3.14d is a debug build" % (" ".join(got), root)


@TESTS("session_and_group")
def t_session(c):
    """A process runs in its own session; cleanup kills its whole group."""
    p = c.spawn(["sh", "-c", "sleep 300 & echo $! > %s; wait" % c.path("child")])
    d = st.Deadline(10)
    while not os.path.exists(c.path("child")) or not open(c.path("child")).read().strip():
        check(not d.expired(), "the shell did not start its child")
        time.sleep(0.02)
    child = int(open(c.path("child")).read())
    check(os.getsid(p.pid) == p.pid and os.getpgid(child) == p.pid,
          "session %d / group %d, expected %d" % (os.getsid(p.pid), os.getpgid(child), p.pid))
    c.cleanup()
    check(not alive(p.pid) and not alive(child), "cleanup left %s alive"
          % [x for x in (p.pid, child) if alive(x)])
    check(not os.path.exists(c.tmp), "cleanup left %s" % c.tmp)
    return "own session; shell %d and its child %d gone after cleanup" % (p.pid, child)


@TESTS("strays")
def t_strays(c):
    """A process outside the test's group whose command line names the test's directory
    (as a target scry launched) is found and killed."""
    child = c.path("child")
    out = subprocess.run(["setsid", "-f", "sh", "-c", 'sleep 300 & echo $! > "$0"; wait', child],
                         timeout=20)
    check(out.returncode == 0, "setsid failed")
    d = st.Deadline(10)
    while not c.strays() or not os.path.exists(child) or not open(child).read().strip():
        check(not d.expired(), "the stray never showed up")
        time.sleep(0.02)
    pids = c.strays() + [int(open(child).read())]
    c.cleanup()
    check(not any(alive(x) for x in pids), "strays %s survived cleanup" % pids)
    return "stray and its group %s killed" % pids


@TESTS("scry_timeout")
def t_scry_timeout(c):
    c.scry_path = "/bin/sleep"
    t0 = st.now()
    try:
        c.scry(["30"], timeout=1)
        raise Fail("a 30-s command was not stopped")
    except Fail as e:
        check("no exit after 1 s (killed)" in str(e), "message: %s" % e)
    p = c.procs[-1]
    check(p.poll() == -signal.SIGKILL and st.since(t0) < 10, "rc %s after %.1f s"
          % (p.poll(), st.since(t0)))
    res = c.scry(["0"])
    check(res.rc == 0 and res.wall < 10, str(res))
    return "killed after 1 s; a quick run gives %s" % res


@TESTS("known_answers")
def t_known(c):
    got = st.shares({"a": 50, "b": 30, "c": 20, "x": 1000}, ("a", "b", "c"))
    check(got == {"a": 50.0, "b": 30.0, "c": 20.0}, "shares %r" % got)
    d = st.compare_shares({"a": 52, "b": 29}, {"a": 50, "b": 30}, 100, "t", 3.0)
    check("52.0/29.0 vs truth 50.0/30.0" in d, d)
    try:
        st.compare_shares({"a": 54}, {"a": 50}, 100, "t", 3.0)
        raise Fail("4 points passed a 3-point tolerance")
    except Fail as e:
        check("off by 4.0 points" in str(e), str(e))
    over = []
    st.compare_shares({"a": 54}, {"a": 50}, 100, "t", 3.0, on_cpu=0.5, overloaded=over)
    check(len(over) == 1, "overloaded miss not recorded: %r" % over)
    check(abs(st.rel_err(115, 100) - 0.15) < 1e-9, "rel_err")
    st.within(114, 100, 0.15, "x")
    try:
        st.within(116, 100, 0.15, "x")
        raise Fail("16% passed a 15% tolerance")
    except Fail:
        pass
    check(st.parse_collapsed("a;b 3\n\nc 1\n") == [(["a", "b"], 3), (["c"], 1)], "collapsed")
    try:
        st.parse_collapsed("garbage\n")
        raise Fail("a malformed collapsed line passed")
    except Fail:
        pass
    with open(c.path("bad.json"), "w") as f:
        f.write("{")
    try:
        st.load_json(c.path("bad.json"), "report")
        raise Fail("malformed JSON loaded")
    except Fail as e:
        check("report" in str(e) and "not JSON" in str(e), str(e))
    return "shares, tolerance in points and relative, overloaded, collapsed, JSON"


@TESTS("sid_target_314")
def t_sid_target(c):
    """A 3.14 target in the sid root: started with chroot from a private directory inside
    the root, its truth read through the host path, reaped, the directory removed."""
    it = st.find("3.14")
    t = st.Ctx("sid", it, prefix="scry-selftest")
    try:
        check(t.tmp.startswith(os.path.join(it.root, "tmp") + "/"), "directory %s" % t.tmp)
        wl = t.stage(WORKLOADS)
        check(wl.startswith("/tmp/") and os.path.isfile(it.host_path(wl + "/hot_line.py")),
              "staged workloads at %s" % wl)
        ready = t.path("ready.json")
        p, truth = t.start_target([wl + "/hot_line.py", "--ready", t.tpath(ready),
                                   "--max-seconds", 60], ready, "hot_line")
        check(truth["pid"] == p.pid, "truth pid %s, started %d" % (truth["pid"], p.pid))
        check(truth["version"][:2] == [3, 14], "version %s" % truth["version"])
        check(truth["file"] == wl + "/hot_line.py", "co_filename %s" % truth["file"])
        check(os.readlink("/proc/%d/root" % p.pid) == it.root, "root of the target %s"
              % os.readlink("/proc/%d/root" % p.pid))
        t.finish()
        t.stop(p)
        check(not alive(p.pid), "target %d not reaped" % p.pid)
    finally:
        t.cleanup()
    check(not os.path.exists(t.tmp), "directory %s left in the root" % t.tmp)
    return "pid %d ran %s as %s in %s, reaped, directory removed" % (
        p.pid, ".".join(map(str, it.version)), truth["file"], it.root)


def main():
    ap = st.runner.parser(__doc__)
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    return st.run(TESTS.select(a.k), lambda t: st.Ctx(t.name, prefix="scry-selftest"),
                  "scrytest", verbose=a.v)


if __name__ == "__main__":
    sys.exit(main())
