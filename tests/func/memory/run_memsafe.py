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
import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
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


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def find_interpreter(label):
    if label == "debian3.11":
        path = "/usr/bin/python3.11"
        if not os.access(path, os.X_OK):
            raise Skip("%s not found" % path)
        return path
    vdir = os.path.join(os.environ.get("PYENV_ROOT") or "/root/.pyenv", "versions")
    names = sorted(os.listdir(vdir)) if os.path.isdir(vdir) else []
    for name in names:
        if re.match(r"^%s\.\d+$" % re.escape(label), name):
            path = os.path.join(vdir, name, "bin", "python" + label)
            if os.access(path, os.X_OK):
                return path
    raise Skip("no CPython %s.x under %s" % (label, vdir))


def clean_env():
    env = dict(os.environ)
    for k in ("PYTHONHOME", "PYTHONPATH", "PYENV_VERSION", "PYTHONSTARTUP", "LD_PRELOAD",
              "SCRY_RING", "PYTHONMALLOC"):
        env.pop(k, None)
    env.update({"LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    return env


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
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if "scry-" in line or "scry_ring" in line:
                found.append("map " + line.split(None, 5)[-1].strip())
    fddir = "/proc/%d/fd" % pid
    for fd in os.listdir(fddir):
        try:
            target = os.readlink(os.path.join(fddir, fd))
        except OSError:
            continue
        if "scry-" in target or "scry_ring" in target:
            found.append("fd %s -> %s" % (fd, target))
    return found


def shm_rings():
    try:
        return set(n for n in os.listdir("/dev/shm") if n.startswith("scry-"))
    except OSError:
        return set()


class Ctx(object):
    def __init__(self, runner, name):
        self.r = runner
        self.python = runner.python
        self.tmp = tempfile.mkdtemp(prefix="scry-memsafe-%s-" % name)
        os.chmod(self.tmp, 0o755)
        self.procs = []

    def spawn_target(self, mode, name):
        ctl = os.path.join(self.tmp, name)
        os.mkdir(ctl)
        log = open(os.path.join(ctl, "log"), "wb")
        p = subprocess.Popen([self.python, WORKLOAD, mode, ctl], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=subprocess.STDOUT, env=clean_env(),
                             start_new_session=True)
        log.close()
        p.ctl = ctl
        self.procs.append(p)
        self.wait_json(p, "ready")
        return p

    def wait_json(self, p, name, timeout=READY_TIMEOUT):
        path = os.path.join(p.ctl, name)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    return json.load(f)
            if p.poll() is not None:
                with open(os.path.join(p.ctl, "log"), "rb") as f:
                    raise Fail("target exited (%s) before %s: %s" % (
                        p.returncode, name, f.read().decode("utf-8", "replace")[-500:]))
            time.sleep(0.01)
        raise Fail("target: no %s after %d s" % (name, timeout))

    def scry_cmd(self, pid, seconds):
        out = os.path.join(self.tmp, "out.json")
        return [self.r.scry, "record", "--memory", "-q", "-f", "json", "-o", out, "-d",
                str(seconds), "--pid", str(pid)]

    def scry(self, pid, seconds):
        p = subprocess.Popen(self.scry_cmd(pid, seconds), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
                             start_new_session=True)
        self.procs.append(p)
        try:
            _, err = p.communicate(timeout=SCRY_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            raise Fail("scry did not exit within %d s" % SCRY_TIMEOUT)
        self.procs.remove(p)
        return p.returncode, err.decode("utf-8", "replace")

    def healthy(self, p):
        """Fails unless target P is alive, not stopped and not traced."""
        check(p.poll() is None, "the target died (%s)" % p.returncode)
        st = {}
        for _ in range(50):  # the kernel detaches a dead tracer's tracees at once
            st = proc_status(p.pid)
            if st.get("TracerPid") == "0" and not st.get("State", "").startswith(("T", "t")):
                break
            time.sleep(0.02)
        check(st.get("TracerPid") == "0", "the target is traced by %s" % st.get("TracerPid"))
        check(not st.get("State", "").startswith(("T", "t")), "the target is stopped: %s" %
              st.get("State"))
        for tid in os.listdir("/proc/%d/task" % p.pid):
            with open("/proc/%d/task/%s/stat" % (p.pid, tid)) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            check(state not in ("T", "t"), "thread %s is stopped" % tid)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------


def measure(c, targets, n):
    """One measurement window on each target, all at once: CPU seconds per iteration."""
    for p in targets:
        open(os.path.join(p.ctl, "measure-%d" % n), "w").close()
    return [c.wait_json(p, "result-%d" % n, 120)["cpu_per_iter"] for p in targets]


def t_sessions(c):
    a = c.spawn_target("twin", "a")
    b = c.spawn_target("twin", "b")
    t0 = time.monotonic()
    for i in range(SESSIONS):
        rc, err = c.scry(a.pid, SESSION_S)
        check(rc == 0, "session %d of %d: scry exited %d: %s" % (i + 1, SESSIONS, rc,
                                                                err.strip()[-400:]))
        c.healthy(a)
    t_sessions = time.monotonic() - t0
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
        p = subprocess.Popen(c.scry_cmd(a.pid, 5), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=clean_env(), start_new_session=True)
        c.procs.append(p)
        time.sleep(rng.uniform(0, KILL_WINDOW))
        p.kill()
        p.wait()
        c.procs.remove(p)
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
    rc, err = c.scry(a.pid, SESSION_S)  # and the target still accepts a session
    check(rc == 0, "a session after the kills: scry exited %d: %s" % (rc, err.strip()[-400:]))
    return "%d kills in the first %.1f s: nothing in /dev/shm, target alive and untraced" % (
        KILLS, KILL_WINDOW)


def t_signals(c):
    a = c.spawn_target("signals", "a")
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
            rc, err = c.scry(a.pid, SESSION_S)
            check(rc == 0, "session %d: scry exited %d: %s" % (i + 1, rc, err.strip()[-400:]))
    finally:
        stop.set()
        th.join()
    time.sleep(0.3)
    c.healthy(a)
    open(os.path.join(a.ctl, "stop"), "w").close()
    got = c.wait_json(a, "count")["count"]
    check(got == sent[0], "%d SIGRTMIN sent during %d sessions, %d delivered (%d lost)" % (
        sent[0], SIG_SESSIONS, got, sent[0] - got))
    return "%d SIGRTMIN sent during %d sessions, all delivered" % (sent[0], SIG_SESSIONS)


TESTS = [("sessions", t_sessions), ("kill", t_kill), ("signals", t_signals)]


class Runner(object):
    def __init__(self, args):
        self.scry = os.path.abspath(args.scry)
        self.label = args.python
        self.python = find_interpreter(args.python)
        self.verbose = args.verbose


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scry", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("-k", default="")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    try:
        r = Runner(args)
    except Skip as e:
        print("SKIP %s: %s" % (args.python, e))
        print("0 passed, 0 failed, 1 skipped")
        return 0
    npass = nfail = nskip = 0
    for name, fn in TESTS:
        if args.k and args.k not in name:
            continue
        full = "%s.%s" % (args.python, name)
        c = Ctx(r, name)
        t0 = time.monotonic()
        try:
            detail = fn(c)
            print("PASS %s: %s (%.0f s)" % (full, detail, time.monotonic() - t0))
            npass += 1
        except Skip as e:
            print("SKIP %s: %s" % (full, e))
            nskip += 1
        except Fail as e:
            print("FAIL %s: %s (%.0f s)" % (full, e, time.monotonic() - t0))
            nfail += 1
        except Exception:
            print("FAIL %s: %s" % (full, traceback.format_exc()))
            nfail += 1
        finally:
            c.cleanup()
        sys.stdout.flush()
    print("%d passed, %d failed, %d skipped" % (npass, nfail, nskip))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
