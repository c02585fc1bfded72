#!/usr/bin/env python3
"""What an attached `scry record --memory` must never do to its target (issue 15, problems
2-4), against real CPython interpreters.

usage: run_memsafe.py --scry PATH --python VERSION [-k PATTERN] [-v]

VERSION: 3.6 ... 3.13 (pyenv builds) or debian3.11 (/usr/bin/python3.11). Stdlib only.
One line "PASS|FAIL|SKIP name: detail" per test, then "N passed, N failed, N skipped";
exit 1 on a failure. Every process a test starts is killed at its end (tests/lib/scrytest).

  sessions  50 attach sessions on one target, then: no ring mapped or open in it, resident
            memory within RSS_SLACK of an untouched twin, and CPU per iteration within
            SPEED_TOL of its own before the sessions, each window measured on the target
            and the twin at once and taken as their ratio (median of 5 windows).
  kill      scry SIGKILLed at random moments of its start and injection: nothing left in
            /dev/shm, the target alive, not stopped, not traced.
  launch_kill  a launched program keeps neither ring mapping nor ring descriptor once scry
            was SIGKILLed and the shim retired the ring.
  signals   SIGRTMIN at ~3000/s to the target during attach sessions: every signal sent
            (kill() returned 0) is delivered to it (counted by the target).
"""
import os
import random
import re
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, check  # noqa: E402

WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "safework.py")
SESSIONS = 50      # --memory attach sessions on one target
SESSION_S = 0.2    # each one records this long
SPEED_TOL = 0.06   # target's CPU/iteration after the sessions vs before, over its twin's drift
SPEED_ROUNDS = 5   # alternating measurement windows per target (median)
RSS_SLACK = 6 << 20  # resident bytes the target may hold beyond its twin (one ring: 7 MiB)
KILLS = 24         # SIGKILLs of scry per run
KILL_WINDOW = 0.6  # seconds after scry's start in which it is killed (covers injection)
SIG_RATE = 3000    # SIGRTMIN per second
SIG_SESSIONS = 6
tests = st.Tests()


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


def shm_rings(pid):
    """Ring files in /dev/shm made by the scry process PID (named scry-PID-...)."""
    try:
        return set(n for n in os.listdir("/dev/shm") if n.startswith("scry-%d-" % pid))
    except OSError:
        return set()


def target(c, mode, name):
    """Starts safework.py MODE with its control directory NAME; the Popen (p.ctl)."""
    ctl = c.path(name)
    os.mkdir(ctl)
    p, _ = c.start_target([c.stage(WORKLOAD), mode, c.tpath(ctl)], os.path.join(ctl, "ready"),
                          "%s %s" % (mode, name))
    p.ctl = ctl
    return p


def scry_args(c, pid, seconds):
    return ["record", "--memory", "-q", "-f", "json", "-o", c.path("out.json"), "-d",
            str(seconds), "--pid", str(pid)]


def session(c, pid, what):
    """One --memory attach session of SESSION_S seconds that must work."""
    res = c.scry(scry_args(c, pid, SESSION_S))
    check(res.rc == 0 and "CPU profiling only" not in res.err,
          "%s: the memory session failed: %s" % (what, res))


def healthy(c, p):
    """Fails unless target P is alive, not stopped and not traced."""
    check(p.poll() is None, "the target died (%s)" % p.returncode)
    st_ = {}
    for _ in range(50):  # the kernel detaches a dead tracer's tracees at once
        st_ = proc_status(p.pid)
        if st_.get("TracerPid") == "0" and not st_.get("State", "").startswith(("T", "t")):
            break
        time.sleep(0.02)
    check(st_.get("TracerPid") == "0", "the target is traced by %s" % st_.get("TracerPid"))
    states = st.task_states(p.pid)
    check(not any(s in ("T", "t") for s in states.values()),
          "stopped threads: %s" % states)


def measure(c, targets, n):
    """One measurement window on each target, all at once: CPU seconds per iteration."""
    for p in targets:
        open(os.path.join(p.ctl, "measure-%d" % n), "w").close()
    return [c.wait_json(os.path.join(p.ctl, "result-%d" % n), p, "measurement", 120)
            ["cpu_per_iter"] for p in targets]


def speed(c, a, b, first):
    """SPEED_ROUNDS windows measured on targets A and B at once (measurement numbers
    FIRST...): the median of A's CPU per iteration over B's in the same window (pairing
    cancels what the machine does to both at that moment), and the windows as text."""
    pairs = [measure(c, [a, b], n) for n in range(first, first + SPEED_ROUNDS)]
    return (statistics.median(x / y for x, y in pairs),
            " ".join("%.2f/%.2f" % (x * 1e3, y * 1e3) for x, y in pairs))


@tests("sessions")
def t_sessions(c):
    a = target(c, "twin", "a")
    b = target(c, "twin", "b")
    # Both on one CPU: they take turns on it, so whatever the machine does to that CPU
    # (frequency, a busy sibling thread) it does to both within each window.
    cpu = max(os.sched_getaffinity(0))
    for p in (a, b):
        os.sched_setaffinity(p.pid, {cpu})
    # Each target's speed before the sessions: two processes of one program differ by a few
    # percent on their own (address layout), so A after is compared with A before, and B
    # (untouched) says how much the machine itself drifted meanwhile.
    a0, w0 = speed(c, a, b, 0)
    t0 = st.now()
    for i in range(SESSIONS):
        session(c, a.pid, "session %d of %d" % (i + 1, SESSIONS))
        healthy(c, a)
    t_sessions = st.since(t0)
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
    a1, w1 = speed(c, a, b, SPEED_ROUNDS)
    ratio = a1 / a0
    check(ratio < 1 + SPEED_TOL, "CPU per iteration after %d sessions: x%.3f of before, "
          "relative to the untouched twin (tolerance x%.2f; ms target/twin per window: before "
          "%s; after %s)" % (SESSIONS, ratio, 1 + SPEED_TOL, w0, w1))
    return ("%d sessions in %.1f s, no ring left, RSS %+.1f MB vs twin, CPU/iter x%.3f of "
            "before relative to the twin (ms target/twin: before %s; after %s)" % (
                SESSIONS, t_sessions, (ra - rb) / 1e6, ratio, w0, w1))


@tests("kill")
def t_kill(c):
    a = target(c, "twin", "a")
    rng = random.Random(os.getpid())
    left = set()
    for i in range(KILLS):
        p = c.scry_start(scry_args(c, a.pid, 5))
        time.sleep(rng.uniform(0, KILL_WINDOW))
        c.kill(p)
        healthy(c, a)
        new = shm_rings(p.pid)
        if new:
            left |= new
            c.remove_files.extend(os.path.join("/dev/shm", n) for n in new)
    check(not left, "%d of %d SIGKILLs left a ring in /dev/shm" % (len(left), KILLS))
    session(c, a.pid, "a session after the kills")
    return "%d kills in the first %.1f s: nothing in /dev/shm, target alive and untraced" % (
        KILLS, KILL_WINDOW)


@tests("launch_kill")
def t_launch_kill(c):
    """scry --memory launches a program and is SIGKILLed while recording: once the shim
    retires the ring (heartbeat stale for 10 s), the program holds neither its mapping nor
    the inherited memfd descriptor (which kept 7 MiB alive for the program's life)."""
    ctl = c.path("launched")
    os.mkdir(ctl)
    s = c.scry_start(["record", "--memory", "-q", "-f", "json", "-o", c.path("launched.json"),
                      "--"] + c.interp.argv(c.stage(WORKLOAD), "twin", c.tpath(ctl)))
    pid = c.wait_json(os.path.join(ctl, "ready"), s, "the launched program")["pid"]
    try:
        d = st.Deadline(10)
        while not ring_leftovers(pid) and not d.expired():
            time.sleep(0.05)
        held = ring_leftovers(pid)
        check(held, "the launched program never mapped its ring")
        os.kill(s.pid, signal.SIGKILL)  # scry only: the program runs on
        s.wait(10)
        t0 = st.now()
        d = st.Deadline(20)
        while ring_leftovers(pid) and not d.expired():
            time.sleep(0.1)
        left = ring_leftovers(pid)
        check(not left, "20 s after scry's death the program still holds %s" % left)
        st_ = proc_status(pid)
        check(st_.get("TracerPid") == "0" and not st_.get("State", "").startswith(("T", "t")),
              "the program is traced or stopped: %s" % st_.get("State"))
        return "held %s while recorded; nothing %.1f s after scry's SIGKILL" % (
            ", ".join(x.split(" ", 1)[0] for x in held), st.since(t0))
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@tests("signals")
def t_signals(c):
    a = target(c, "signals", "a")
    sent = [0]
    stop = threading.Event()

    def flood():
        period = 1.0 / SIG_RATE
        nxt = time.monotonic()
        while not stop.is_set():
            try:
                os.kill(a.pid, signal.SIGRTMIN)
                sent[0] += 1
            except OSError:
                pass  # not queued (EAGAIN: pending limit): not sent, not counted
            nxt += period
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)

    th = threading.Thread(target=flood)
    th.start()
    try:
        for i in range(SIG_SESSIONS):
            session(c, a.pid, "session %d" % (i + 1))
    finally:
        stop.set()
        th.join()
    time.sleep(0.3)
    healthy(c, a)
    c.targets = [t for t in c.targets if t[1] is not a]  # it exits by itself once counted
    open(os.path.join(a.ctl, "stop"), "w").close()
    got = c.wait_json(os.path.join(a.ctl, "count"), a, "count")["count"]
    check(got == sent[0], "%d SIGRTMIN sent during %d sessions, %d delivered (%d lost)" % (
        sent[0], SIG_SESSIONS, got, sent[0] - got))
    return "%d SIGRTMIN sent during %d sessions, all delivered" % (sent[0], SIG_SESSIONS)


def main():
    ap = st.add_common_args(st.runner.parser(__doc__), st.LABELS)
    a = ap.parse_args()
    sel = tests.select(a.k)
    try:
        interp = st.find(a.python)
    except st.Skip as e:
        return st.skip_all(a.python, str(e), len(sel))
    return st.run(sel, lambda t: st.Ctx("%s.%s" % (a.python, t.name), interp=interp,
                                        scry=os.path.abspath(a.scry), verbose=a.v,
                                        prefix="scry-memsafe"),
                  "memsafe " + a.python, call=lambda t, c: t.fn(c), verbose=a.v)


if __name__ == "__main__":
    sys.exit(main())
