#!/usr/bin/env python3
"""Functional test of `scry top` in a real terminal (tmux), against a real interpreter.

usage: test_top.py --scry PATH [--python PATH|LABEL] [-v]

A workload (seventy_thirty.py) burns one CPU about 70/30 in hot() and cold(). In a tmux
pane running a plain shell, the test starts `scry top --pid PID` and checks the screen:
the header, hot() first with a plausible share, the lines view ('l') showing hot()'s line
and charging lib()'s calls into colorsys to lib()'s line (with --all-lines, in the second
run: to colorsys.py's lines),
a sort key ('2'), a resize to 80x20, 'q' giving back a sane shell prompt (normal screen,
echo and canonical mode restored), and, in a second run, the target being killed while top
runs ('process exited' with the data kept until 'q', and after 'r'). Also checks the
plain-text mode (stdout not a terminal, --once) and its GIL share of samples; on the host
python3, a thread that sleeps half the time (100% of its samples hold the GIL) and
`top -s` (a row per process). Stdlib only. The runner is tests/lib/scrytest's: one
PASS/FAIL/SKIP line per test (plain, screen, exit; the checks of each listed under it),
then "N passed, N failed, N skipped"; "SKIP top: ..." when tmux is missing.
"""
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
from scrytest import Fail  # noqa: E402

WORKLOAD = os.path.join(HERE, "seventy_thirty.py")
PROMPT = "PROMPT$"
ROW = re.compile(
    r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S.*?)\s*$"
)
ROW_NARROW = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+(\S+)\s+(\S+)\s+(\S.*?)\s*$")

VERBOSE = False


def check(cond, msg, screen=None):
    if not cond:
        if screen is not None:
            msg += "\n--- screen ---\n" + screen + "\n--------------"
        raise Fail(msg)


def log(msg):
    print(msg, flush=True)


class Tmux(object):
    """A private tmux server (own socket) with one session running a plain shell."""

    def __init__(self, width, height):
        self.sock = "scry-top-test-%d" % os.getpid()
        self.target = "top"
        self.run("kill-server", check_rc=False)
        env = "env -i PATH=%s HOME=%s TERM=xterm-256color LANG=%s PS1='%s ' bash --norc --noprofile" % (
            os.environ.get("PATH", "/usr/bin:/bin"),
            os.environ.get("HOME", "/root"),
            os.environ.get("SCRY_TEST_LANG", "C.UTF-8"),
            PROMPT,
        )
        self.run("new-session", "-d", "-s", self.target, "-x", str(width), "-y", str(height), env)
        self.wait_for(lambda s: PROMPT in s, 10, "the shell prompt")

    def run(self, *args, check_rc=True):
        p = subprocess.run(
            ["tmux", "-L", self.sock] + list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=20,
        )
        if check_rc and p.returncode != 0:
            raise Fail("tmux %s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
        return p.stdout.decode("utf-8", errors="replace")

    def keys(self, *keys):
        self.run("send-keys", "-t", self.target, *keys)

    def type_line(self, text):
        self.run("send-keys", "-t", self.target, "-l", text)
        self.run("send-keys", "-t", self.target, "Enter")

    def screen(self):
        return self.run("capture-pane", "-p", "-t", self.target)

    def info(self, fmt):
        return self.run("display-message", "-p", "-t", self.target, fmt).strip()

    def resize(self, width, height):
        self.run("resize-window", "-t", self.target, "-x", str(width), "-y", str(height))

    def wait_for(self, pred, timeout, what):
        d = st.Deadline(timeout)
        s = ""
        while not d.expired():
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.2)
        raise Fail("timed out waiting for %s" % what + "\n--- screen ---\n" + s)

    def close(self):
        self.run("kill-server", check_rc=False)


def rows(screen, narrow=False):
    out = []
    for line in screen.splitlines():
        m = (ROW_NARROW if narrow else ROW).match(line)
        if m:
            g = m.groups()
            out.append({"own": float(g[0]), "total": float(g[1]), "name": g[-1], "text": line})
    return out


def lib_rows(rs, work):
    """The row of the workload's LIB_LINE (None when absent) and the rows in colorsys.py."""
    want = "seventy_thirty.py:%d)" % work["lib_line"]
    lib = [x for x in rs if x["name"].endswith(want)]
    return (lib[0] if lib else None), [x for x in rs if "colorsys.py:" in x["name"]]


def check_shell_back(tm, what):
    """scry has exited and the pane is a sane shell again."""
    tm.wait_for(lambda s: s.rstrip().splitlines()[-1:] == [PROMPT], 10, "the prompt after " + what)
    cmd = tm.info("#{pane_current_command}")
    check(cmd == "bash", "after %s the pane runs %r, not the shell" % (what, cmd))
    alt = tm.info("#{alternate_on}")
    check(alt == "0", "after %s the terminal is still on the alternate screen" % what)
    tm.run("clear-history", "-t", tm.target)
    tm.type_line("clear; stty -a | tr ';' '\\n' | grep -Ew -- '-?(icanon|echo)'")
    s = tm.wait_for(lambda s: "icanon" in s and s.rstrip().endswith(PROMPT), 10, "stty output")
    check(
        re.search(r"(^|\s)icanon\b", s) and re.search(r"(^|\s)echo\b", s),
        "after %s the terminal modes are not restored" % what,
        s,
    )
    tm.type_line("clear")
    log("    ok   %s: scry exited, shell prompt back, normal screen, echo and icanon on" % what)


def test_plain(scry, pid):
    p = subprocess.run(  # (scry top --once: no terminal, a bounded run)
        [scry, "top", "--pid", str(pid), "--once", "--duration", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=60,
    )
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 0, "scry top --once failed (%d): %s" % (p.returncode, p.stderr.decode()))
    check("scry top: pid %d" % pid in out, "plain header missing", out)
    r = rows(out)
    check(r and r[0]["name"].startswith("hot "), "plain: hot() is not the first row", out)
    if VERBOSE:
        log(out)
    # GIL: the share of the samples that held it. The workload's one thread never lets it
    # go, whatever share of a CPU it gets on a busy machine (the share of sampling rounds
    # followed that CPU share: 25-50%).
    m = re.search(r"GIL ([\d.]+)% of samples", out)
    check(m and float(m.group(1)) >= 90, "GIL share of samples: %s" % (m and m.group(0)), out)
    return "plain text (--once, not a tty): hot() first at %.1f%%, %s" % (r[0]["own"], m.group(0))


def test_gil_half_asleep(scry, c):
    """A thread that burns 10 ms and sleeps 10 ms holds the GIL in every sample taken of
    it (sleeping, it is not sampled without --idle): 100% of samples, not the 50% of
    sampling rounds."""
    script = c.path("half.py")
    with open(script, "w") as f:
        f.write("import time\nwhile True:\n    e = time.process_time() + 0.01\n"
                "    while time.process_time() < e: pass\n    time.sleep(0.01)\n")
    p = c.spawn(c.interp.argv(c.tpath(script)))
    time.sleep(0.5)
    out = subprocess.run([scry, "top", "--once", "--pid", str(p.pid), "-d", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    c.kill(p)
    text = out.stdout.decode(errors="replace")
    m = re.search(r"GIL ([\d.]+)% of samples", text)
    check(out.returncode == 0 and m and float(m.group(1)) >= 90,
          "GIL of a half-asleep thread: %s" % (m and m.group(0)), text + out.stderr.decode())
    return m.group(0)


def test_subprocess_rows(scry, c):
    """top -s: a row per process ('process PID (command)') with that process's total."""
    script = c.path("forks.py")
    with open(script, "w") as f:
        f.write("import os, time\n"
                "def burn(s):\n    e = time.time() + s\n"
                "    while time.time() < e: sum(range(1000))\n"
                "kids = []\nfor i in range(2):\n    pid = os.fork()\n"
                "    if pid == 0:\n        burn(4); os._exit(0)\n    kids.append(pid)\n"
                "burn(4)\nfor k in kids: os.waitpid(k, 0)\n")
    out = subprocess.run([scry, "top", "--once", "-s", "-d", "2", "--"] +
                         c.interp.argv(c.tpath(script)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    text = out.stdout.decode(errors="replace")
    procs = [x for x in rows(text) if x["name"].startswith("process ")]
    check(out.returncode == 0 and len(procs) == 3,
          "%d process rows, want 3 (the parent and 2 children)" % len(procs), text)
    check(all(x["total"] > 0 for x in procs), "a process row without time", text)
    return "%d process rows: %s" % (len(procs), ", ".join(
        "%s %.1f%%" % (x["name"].split(" (")[0], x["total"]) for x in procs))


def test_screen(scry, work, proc, tm):
    pid = work["pid"]
    tm.type_line("%s top --pid %d" % (scry, pid))
    t0 = st.now()
    s = tm.wait_for(lambda s: len(rows(s)) >= 2, 15, "the first table")
    time.sleep(max(0.0, 3.0 - st.since(t0)))
    # The header, and hot() first: a 1 s window is noisy on a loaded machine, so a few
    # refreshes are allowed.
    for attempt in range(6):
        s = tm.screen()
        r = rows(s)
        if r and r[0]["name"].startswith("hot "):
            break
        time.sleep(1.0)
    for word in ["scry top - pid %d" % pid, "Python", "Rate 100 Hz", "Samples", "Errors",
                 "GIL", "Threads", "active", "Elapsed", "CPU", "%Own", "%Total", "OwnTime",
                 "TotalTime", "%Py", "%Nat", "%Sys", "functions by %Own"]:
        check(word in s, "header: %r missing" % word, s)
    r = rows(s)
    check(r and r[0]["name"].startswith("hot ("), "hot() is not the first row", s)
    check(0.5 <= r[0]["own"] <= 200, "hot() at an implausible %.1f%%" % r[0]["own"], s)
    log("    ok   header and hot() first at %.1f%% (last 1 s)" % r[0]["own"])
    if VERBOSE:
        log(s)
    first_screen = s

    # since start ('w'): the 70/30 split
    tm.keys("w")
    s = tm.wait_for(lambda s: "[since start]" in s and rows(s), 5, "the since-start window")
    by = {x["name"].split(" ")[0]: x for x in rows(s)}
    check("hot" in by and "cold" in by, "hot() or cold() missing since start", s)
    share = by["hot"]["own"] / max(1e-9, by["hot"]["own"] + by["cold"]["own"])
    check(0.5 <= share <= 0.9, "hot/(hot+cold) = %.2f, expected about 0.7" % share, s)
    log("    ok   since start: hot %.1f%%, cold %.1f%% of one CPU, hot share %.2f (truth 0.70)"
        % (by["hot"]["own"], by["cold"]["own"], share))
    tm.keys("w")

    # lines view
    tm.keys("l")
    want = "seventy_thirty.py:%d)" % work["hot_line"]
    s = tm.wait_for(lambda s: "lines by %Own" in s and want in s, 6, "the lines view")
    r = rows(s)
    check(r and r[0]["name"].startswith("hot ("), "lines: the first row is not in hot()", s)
    log("    ok   lines view: hot line %d shown, first row %s" % (work["hot_line"], r[0]["name"]))

    # the lines view charges the user's line that called the library (since start)
    tm.keys("w")
    s = tm.wait_for(lambda s: "[since start]" in s and "lines by %Own" in s and
                    lib_rows(rows(s), work)[0], 5, "the since-start lines view")
    lib, libs = lib_rows(rows(s), work)
    check(lib and lib["own"] >= 0.5, "lines: the line calling colorsys has no own time", s)
    check(not any(x["own"] > 0 for x in libs), "lines: colorsys.py's lines have own time", s)
    log("    ok   lines view: line %d (calls colorsys) at %.1f%% own, colorsys.py at 0"
        % (work["lib_line"], lib["own"]))
    tm.keys("w")

    # sort by %Total ('2'): <module>/main carry every sample
    tm.keys("2")
    s = tm.wait_for(lambda s: "lines by %Total" in s and rows(s), 5, "the %Total sort")
    r = rows(s)
    check(r[0]["total"] == max(x["total"] for x in r), "not sorted by %Total", s)
    check(r[0]["name"].startswith(("<module> (", "main (")), "%Total: first row is not the root", s)
    log("    ok   sort by %%Total: first row %s at %.1f%%" % (r[0]["name"], r[0]["total"]))

    # resize
    tm.resize(80, 20)
    s = tm.wait_for(lambda s: len(s.splitlines()) <= 20 and rows(s, narrow=True) and
                    "scry top" in s, 6, "the resized screen")
    time.sleep(1.2)
    s = tm.screen()
    check(all(len(line) <= 80 for line in s.splitlines()), "a line is wider than 80 columns", s)
    check("scry top - pid" in s and "%Own" in s and "q quit" in s, "resized screen incomplete", s)
    check(rows(s, narrow=True), "no rows after the resize", s)
    log("    ok   resize to 80x20")
    if VERBOSE:
        log(s)
    resized = s

    tm.keys("q")
    check_shell_back(tm, "q")
    return "header, 70/30 since start, lines view, %Total sort, resize to 80x20, q"


def test_exit(scry, work, proc, tm):
    pid = work["pid"]
    tm.type_line("%s top --pid %d --all-lines" % (scry, pid))
    tm.wait_for(lambda s: len(rows(s, narrow=True)) >= 2, 15, "the table")
    time.sleep(1.0)
    # --all-lines: the lines view charges colorsys.py's own lines, as py-spy top does
    tm.keys("l", "w")
    s = tm.wait_for(lambda s: "[since start]" in s and "lines by %Own" in s and
                    any("colorsys.py:" in x["name"] for x in rows(s, narrow=True)), 6,
                    "the since-start lines view with --all-lines")
    lib, libs = lib_rows(rows(s, narrow=True), work)
    own = sum(x["own"] for x in libs)
    check(own >= 0.5, "--all-lines: colorsys.py's lines have %.1f%% own time" % own, s)
    log("    ok   --all-lines: colorsys.py's lines at %.1f%% own" % own)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    s = tm.wait_for(lambda s: "process exited" in s, 8, "'process exited'")
    check(rows(s, narrow=True), "the data is gone after the target exited", s)
    time.sleep(1.5)
    s = tm.screen()
    check("process exited" in s and rows(s, narrow=True), "the final screen did not stay", s)
    check(tm.info("#{pane_current_command}") != "bash", "scry quit by itself after the exit", s)
    # 'r' after the exit would reset to nothing: the final data stays, and it says so
    before = rows(s, narrow=True)
    tm.keys("r")
    s = tm.wait_for(lambda s: "final data is kept" in s, 5, "the note that 'r' keeps the data")
    check(rows(s, narrow=True) == before, "'r' after the exit changed the rows", s)
    log("    ok   target killed: 'process exited' shown, data kept until q (and after 'r')")
    if VERBOSE:
        log(s)
    tm.keys("q")
    check_shell_back(tm, "q after the exit")
    return "target killed: 'process exited' shown, data kept until q, shell back"


class Shared(st.Ctx):
    """The workload and the tmux server the three tests share, in one test directory;
    cleaned up once after the last test (the runner's per-test cleanup is a no-op)."""

    def __init__(self, interp, scry):
        st.Ctx.__init__(self, "top", interp, scry, prefix="scry-top")
        ready = self.path("ready.json")
        self.proc, self.work = self.start_target(
            [self.stage(WORKLOAD), self.tpath(ready), "150"], ready, "seventy_thirty")
        self.tm = None

    def cleanup(self):
        pass

    def close(self):
        if self.tm:
            self.tm.close()
        st.Ctx.cleanup(self)


def main():
    global VERBOSE
    ap = st.runner.parser(__doc__)
    ap.add_argument("--scry", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE = args.v
    if not shutil.which("tmux"):
        return st.skip_all("top", "tmux is not installed (apt-get install tmux)", 3)
    scry = os.path.abspath(args.scry)
    try:
        # a path or a label of the interpreter registry (e.g. 3.14: the sid root's, chroot)
        interp = st.find(args.python) if args.python in st.LABELS else st.from_path(args.python)
    except st.Skip as e:
        return st.skip_all("top", e, 3)
    try:
        c = Shared(interp, scry)
    except Fail as e:
        return st.setup_failed("the workload: %s" % e)

    def t_screen(c):
        c.tm = Tmux(160, 40)
        return test_screen(scry, c.work, c.proc, c.tm)

    def t_exit(c):
        check(c.tm is not None, "no tmux session (the screen test failed to start it)")
        c.tm.resize(100, 30)
        c.release(c.proc)  # this test kills the target itself
        return test_exit(scry, c.work, c.proc, c.tm)

    tests = st.Tests()
    tests.add("plain", lambda c: test_plain(scry, c.work["pid"]))
    if args.python == sys.executable:  # not per interpreter: once, on the host python3
        tests.add("gil", lambda c: test_gil_half_asleep(scry, c))
        tests.add("subprocess_rows", lambda c: test_subprocess_rows(scry, c))
    tests.add("screen", t_screen)
    tests.add("exit", t_exit)
    try:
        return st.run(tests.select(), lambda t: c, "top", verbose=args.v)
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main())
