#!/usr/bin/env python3
"""What an attached `scry record --memory` must never do to its target (issue 15, problems
2-4), against real CPython interpreters.

usage: run_memsafe.py --scry PATH --python VERSION [-k PATTERN] [-v]

VERSION: 3.6 ... 3.13 (pyenv builds) or debian3.11 (/usr/bin/python3.11). Stdlib only.
One line "PASS|FAIL|SKIP name: detail" per test, then "N passed, N failed, N skipped";
exit 1 on a failure. Every process a test starts is killed at its end.

  sessions  50 attach sessions on one target, then: no ring mapped or open in it, resident
            memory within RSS_SLACK of an untouched twin, and CPU per iteration within
            SPEED_TOL of the twin's (medians of alternating windows).
  kill      scry SIGKILLed at random moments of its start and injection: nothing left in
            /dev/shm, the target alive, not stopped, not traced.
  signals   SIGRTMIN at ~3000/s to the target during attach sessions: every signal sent
            (kill() returned 0) is delivered to it (counted by the target).
"""
import os
import random
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Skip, check  # noqa: E402
from scrytest.clock import now  # noqa: E402

WORKLOAD = os.path.join(HERE, "workloads", "safework.py")
SCRY_TIMEOUT = 60
READY_TIMEOUT = 30

SESSIONS = 50      # --memory attach sessions on one target
SESSION_S = 0.2    # each one records this long
SPEED_TOL = 0.06   # CPU per iteration of the target after the sessions vs its twin
SPEED_ROUNDS = 5   # alternating measurement windows per target (median)
RSS_SLACK = 6 << 20  # resident bytes the target may hold beyond its twin (one ring: 7 MiB)
KILLS = 24         # SIGKILLs of scry per run
KILL_WINDOW = 0.6  # seconds after scry's start in which it is killed (covers injection)
SIG_RATE = 3000    # SIGRTMIN per second
SIG_SESSIONS = 6


def proc_status(pid):
    """Fields of /proc/PID/status as a dict of strings."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def ring_leftovers(pid):
    """Mappings and open files of PID that are scry rings."""
    found = []
    ring = re.compile(r"/dev/shm/scry-|memfd:scry-ring")
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if ring.search(line):
                found.append("map " + line.split(None, 5)[-1].strip())
    fddir = "/proc/%d/fd" % pid
    for fd in os.listdir(fddir):
        try:
            target = os.readlink(os.path.join(fddir, fd))
        except OSError:
            continue
        if ring.search(target):
            found.append("fd %s -> %s" % (fd, target))
    return found


def shm_rings():
    try:
        return set(n for n in os.listdir("/dev/shm") if n.startswith("scry-"))
    except OSError:
        return set()


class Ctx(st.Ctx):
    def __init__(self, interp, scry, name, verbose):
        st.Ctx.__init__(self, name, interp, scry, verbose, prefix="scry-memsafe",
                        scry_timeout=SCRY_TIMEOUT, ready_timeout=READY_TIMEOUT)
        self.workload = os.path.join(self.stage(os.path.dirname(WORKLOAD)),
                                     os.path.basename(WORKLOAD))

    def spawn_target(self, mode, name):
        """Starts workloads/safework.py MODE with its control directory NAME; waits until
        it is ready."""
        ctl = self.path(name)
        os.mkdir(ctl)
        p = self.spawn(self.interp.argv(self.workload, mode, self.tpath(ctl)),
                       log_name=name + ".log")
        p.ctl = ctl
        self.ctl_json(p, "ready")
        return p

    def ctl_json(self, p, name, timeout=None):
        """The JSON file NAME the target P writes into its control directory."""
        return self.wait_json(os.path.join(p.ctl, name), p, "target", timeout)

    def scry_args(self, pid, seconds):
        return ["record", "--memory", "-q", "-f", "json", "-o", self.path("out.json"), "-d",
                seconds, "--pid", pid]

    def session(self, pid, seconds):
        """One attached --memory session of SECONDS: (exit code, stderr)."""
        res = self.scry(self.scry_args(pid, seconds))
        return res.rc, res.err

    def healthy(self, p):
        """Fails unless target P is alive, not stopped and not traced."""
        check(p.poll() is None, "the target died (%s)" % p.returncode)
        status = {}
        for _ in range(50):  # the kernel detaches a dead tracer's tracees at once
            status = proc_status(p.pid)
            if status.get("TracerPid") == "0" and not status.get("State", "").startswith(
                    ("T", "t")):
                break
            time.sleep(0.02)
        check(status.get("TracerPid") == "0", "the target is traced by %s"
              % status.get("TracerPid"))
        check(not status.get("State", "").startswith(("T", "t")), "the target is stopped: %s" %
              status.get("State"))
        for tid in os.listdir("/proc/%d/task" % p.pid):
            with open("/proc/%d/task/%s/stat" % (p.pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            check(state not in ("T", "t"), "thread %s is stopped" % tid)


# ---------------------------------------------------------------------------------------


def measure(c, targets, n):
    """One measurement window on each target, all at once: CPU seconds per iteration."""
    for p in targets:
        open(os.path.join(p.ctl, "measure-%d" % n), "w").close()
    return [c.ctl_json(p, "result-%d" % n, 120)["cpu_per_iter"] for p in targets]


def t_sessions(c):
    a = c.spawn_target("twin", "a")
    b = c.spawn_target("twin", "b")
    t0 = now()
    for i in range(SESSIONS):
        rc, err = c.session(a.pid, SESSION_S)
        check(rc == 0, "session %d of %d: scry exited %d: %s" % (i + 1, SESSIONS, rc,
                                                                err.strip()[-400:]))
        c.healthy(a)
    t_sessions = now() - t0
    left = []
    for _ in range(100):  # the shim lets go of the last ring at its next slow path
        left = ring_leftovers(a.pid)
        if not left:
            break
        time.sleep(0.05)
    check(not left, "after %d sessions the target still holds: %s" % (SESSIONS, left[:4]))
    ra, rb = [int(proc_status(p.pid)["VmRSS"].split()[0]) << 10 for p in (a, b)]
    check(ra - rb < RSS_SLACK, "resident: %.1f MB after %d sessions vs %.1f MB untouched" % (
        ra / 1e6, SESSIONS, rb / 1e6))
    ca, cb = [], []
    for n in range(SPEED_ROUNDS):
        x, y = measure(c, [a, b], n)
        ca.append(x)
        cb.append(y)
    ratio = statistics.median(ca) / statistics.median(cb)
    check(ratio < 1 + SPEED_TOL, "CPU per iteration after %d sessions: x%.3f of the untouched "
          "twin (tolerance x%.2f; windows %s vs %s)" % (
              SESSIONS, ratio, 1 + SPEED_TOL, ["%.4f" % v for v in ca],
              ["%.4f" % v for v in cb]))
    return "%d sessions in %.1f s, no ring left, RSS %+.1f MB vs twin, CPU/iter x%.3f of twin" % (
        SESSIONS, t_sessions, (ra - rb) / 1e6, ratio)


def t_kill(c):
    a = c.spawn_target("twin", "a")
    before = shm_rings()
    rng = random.Random(os.getpid())
    left = set()
    for i in range(KILLS):
        p = c.scry_start(c.scry_args(a.pid, 5))
        time.sleep(rng.uniform(0, KILL_WINDOW))
        p.kill()  # SIGKILL to scry alone, at a random moment of its start
        p.communicate()
        c.healthy(a)
        new = shm_rings() - before
        if new:
            left |= new
            for n in new:
                try:
                    os.unlink(os.path.join("/dev/shm", n))
                except OSError:
                    pass
    check(not left, "%d of %d SIGKILLs left a ring in /dev/shm" % (len(left), KILLS))
    rc, err = c.session(a.pid, SESSION_S)  # and the target still accepts a session
    check(rc == 0, "a session after the kills: scry exited %d: %s" % (rc, err.strip()[-400:]))
    return "%d kills in the first %.1f s: nothing in /dev/shm, target alive and untraced" % (
        KILLS, KILL_WINDOW)


def t_signals(c):
    a = c.spawn_target("signals", "a")
    sent = [0]
    stop = threading.Event()

    def flood():
        period = 1.0 / SIG_RATE
        nxt = now()
        while not stop.is_set():
            try:
                os.kill(a.pid, signal.SIGRTMIN)
                sent[0] += 1
            except OSError:
                pass  # not queued (EAGAIN: pending limit): not sent, not counted
            nxt += period
            d = nxt - now()
            if d > 0:
                time.sleep(d)

    th = threading.Thread(target=flood)
    th.start()
    try:
        for i in range(SIG_SESSIONS):
            rc, err = c.session(a.pid, SESSION_S)
            check(rc == 0, "session %d: scry exited %d: %s" % (i + 1, rc, err.strip()[-400:]))
    finally:
        stop.set()
        th.join()
    time.sleep(0.3)
    c.healthy(a)
    open(os.path.join(a.ctl, "stop"), "w").close()
    got = c.ctl_json(a, "count")["count"]
    check(got == sent[0], "%d SIGRTMIN sent during %d sessions, %d delivered (%d lost)" % (
        sent[0], SIG_SESSIONS, got, sent[0] - got))
    return "%d SIGRTMIN sent during %d sessions, all delivered" % (sent[0], SIG_SESSIONS)


TESTS = st.Tests()
TESTS.add("sessions", t_sessions)
TESTS.add("kill", t_kill)
TESTS.add("signals", t_signals)


def main():
    ap = st.add_common_args(st.runner.parser(__doc__), st.PYENV_LABELS + ["debian3.11"])
    a = ap.parse_args()
    scry = os.path.abspath(a.scry)
    tests = TESTS.select(a.k)
    if not os.access(scry, os.X_OK):
        return st.setup_failed("scry executable %s not found" % scry)
    try:
        interp = st.find(a.python)
    except Skip as e:
        return st.skip_all(a.python, e, len(tests))
    print("scry memory-safety tests: %s, %s" % (scry, interp.describe()))
    sys.stdout.flush()
    return st.run(tests, lambda t: Ctx(interp, scry, t.name, a.v), "Python %s" % a.python,
                  verbose=a.v)


if __name__ == "__main__":
    sys.exit(main())
