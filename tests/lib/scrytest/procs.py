"""One test's processes and private temporary directory (the hygiene of docs/testing.md).

Ctx(name, interp, scry) makes the directory (inside the sid root for a rooted
interpreter), starts every process in its own session with a clean environment
(clean_env), waits for workloads with a time-out, runs scry with a time-out, and at
cleanup() kills what it started (SIGKILL to each process group), then every live process
whose command line names the directory (targets scry launched itself), then removes the
directory. Attach-mode targets registered with `target=True` must still run after every
test (finish() FAILs otherwise: the target is never harmed).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from . import clock
from .runner import Fail, XFail, check, short

SCRY_TIMEOUT = 90  # seconds: the default bound of one scry command
READY_TIMEOUT = 45  # seconds for a workload to reach its steady state on a loaded machine
# the workloads' shared helper (imported by the lines and attr workloads too)
WL_HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "func",
                         "workloads", "_wl.py")

# Removed from the caller's environment: they would change which interpreter or modules
# run, or attach scry's shim to every child.
DROP_ENV = ("PYTHONHOME", "PYTHONPATH", "PYENV_VERSION", "PYTHONSTARTUP", "PYTHONMALLOC",
            "LD_PRELOAD", "SCRY_RING")
SET_ENV = {
    "LC_ALL": "C.UTF-8",  # so 3.6 handles the non-ASCII file names
    "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ in the source tree
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",  # numpy: one thread, so samples land where the test looks
    "OMP_NUM_THREADS": "1",
}


def clean_env(extra=None):
    """The environment of every process a test starts: the caller's without DROP_ENV,
    with SET_ENV, then EXTRA."""
    env = dict(os.environ)
    for k in DROP_ENV:
        env.pop(k, None)
    env.update(SET_ENV)
    env.update(extra or {})
    return env


def task_tids(pid):
    """The thread ids of PID (/proc/PID/task) as a set."""
    return set(int(t) for t in os.listdir("/proc/%d/task" % pid))


def _task_files(pid, name):
    """(tid, bytes of /proc/PID/task/TID/NAME) of every thread of PID still there."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return
    for t in tids:
        try:
            with open("/proc/%d/task/%s/%s" % (pid, t, name), "rb") as f:
                yield int(t), f.read()
        except OSError:
            continue


def task_states(pid):
    """{tid: state letter} of every thread of PID ({} once it is gone)."""
    out = {}
    for tid, text in _task_files(pid, "stat"):
        try:
            out[tid] = text.rsplit(b")", 1)[1].split()[0].decode()
        except IndexError:
            continue
    return out


def task_tracers(pid):
    """{tid: (state letter, TracerPid)} of every thread of PID, from /proc/PID/task/*/status
    ({} once it is gone)."""
    out = {}
    for tid, raw in _task_files(pid, "status"):
        text = raw.decode("ascii", "replace")
        state = re.search(r"^State:\s+(\S)", text, re.M)
        tracer = re.search(r"^TracerPid:\s+(\d+)", text, re.M)
        if state and tracer:
            out[tid] = (state.group(1), int(tracer.group(1)))
    return out


def cpu_seconds(pid):
    """User + system CPU seconds PID has used so far (all its threads; /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid, "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_stray(pid):
    """SIGKILL to PID and to its process group unless that group is ours."""
    try:
        pgid = os.getpgid(pid)
        if pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Result(object):
    """One finished scry run: args, rc, out, err (text), wall seconds."""

    def __init__(self, args, rc, out, err, wall):
        self.args, self.rc, self.out, self.err, self.wall = args, rc, out, err, wall

    def __str__(self):
        return "scry %s -> exit %d in %.2f s; stderr: %s" % (
            " ".join(self.args), self.rc, self.wall, short(self.err) or "(empty)")


class Ctx(object):
    """A test's context. NAME names its directory; INTERP (interp.Interpreter or None)
    the interpreter under test; SCRY the scry executable (or None); PARENT an existing
    directory to make the test's directory in (then left for the parent's owner to
    remove); PREFIX the directory name's prefix."""

    def __init__(self, name, interp=None, scry=None, verbose=False, prefix="scry-test",
                 parent=None, env=None, scry_timeout=SCRY_TIMEOUT,
                 ready_timeout=READY_TIMEOUT):
        self.name = name
        self.interp = interp
        self.python = interp.path if interp else None
        self.version = interp.version if interp else None
        self.scry_path = scry
        self.verbose = verbose
        self.scry_timeout = scry_timeout
        self.ready_timeout = ready_timeout
        self.extra_env = dict(env or {})
        self.xfail_unimplemented = False  # scry_ok: "not implemented" -> XFail
        pre = "%s-%s-" % (prefix, name)
        if interp is not None:
            self.tmp = interp.scratch(pre, parent)
        else:
            self.tmp = tempfile.mkdtemp(prefix=pre, dir=parent)
            os.chmod(self.tmp, 0o755)
        self.keep_tmp = parent is not None
        self.key = os.path.basename(self.tmp).encode()  # in the command line of our processes
        self.procs = []
        self.targets = []  # (name, Popen) of attach-mode targets that must outlive scry
        self.remove_files = []
        self.expectations = []  # (ok, what) of expect()

    # -- paths --------------------------------------------------------------------------

    def path(self, name):
        """Host path of NAME in the test's directory."""
        return os.path.join(self.tmp, name)

    def tpath(self, host_path):
        """The target's view of a host path (the same path on the host)."""
        return self.interp.target_path(host_path) if self.interp else host_path

    def stage(self, src):
        """The target-side path of workload file or directory SRC (copied into the test's
        directory inside the root for a rooted interpreter)."""
        return self.interp.stage(src, self.tmp) if self.interp else src

    def stage_workloads(self, src):
        """stage(SRC), a suite's workload directory or script whose scripts import the
        shared helper tests/func/workloads/_wl.py through their ../../workloads (or
        ../workloads): in a root, where that directory is not, _wl.py is copied beside
        them."""
        staged = self.stage(src)
        if self.interp and self.interp.root:
            host = self.interp.host_path(staged)
            dst = os.path.join(host if os.path.isdir(host) else os.path.dirname(host), "_wl.py")
            if not os.path.exists(dst):
                shutil.copy2(WL_HELPER, dst)
        return staged

    def env(self, extra=None):
        e = dict(self.extra_env)
        e.update(extra or {})
        return clean_env(e)

    # -- processes ----------------------------------------------------------------------

    def spawn(self, cmd, env=None, reap=False, log_name=None, stdout=None, stderr=None,
              stdin=None, cwd=None):
        """Starts CMD in its own session (its group is SIGKILLed at cleanup). Output goes
        to a log in the test's directory (proc_log()) unless STDOUT/STDERR are given.
        With REAP, a thread waits for it as soon as it exits (so its pid disappears)."""
        cmd = [str(a) for a in cmd]
        log = open(self.path(log_name or "proc-%d.log" % len(self.procs)), "wb")
        try:
            p = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=log if stdout is None else stdout,
                stderr=(subprocess.STDOUT if stdout is None else log) if stderr is None
                else stderr,
                env=env or self.env(), start_new_session=True, cwd=cwd)
        finally:
            log.close()
        p.log_path = log.name
        p.t0 = clock.now()
        self.procs.append(p)
        if reap:
            threading.Thread(target=p.wait, daemon=True).start()
        return p

    def proc_log(self, p):
        """What P wrote to its log (text)."""
        try:
            with open(p.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, AttributeError):
            return ""

    def wait_json(self, path, p, what, timeout=None):
        """Waits until P writes the JSON file PATH (host path; written atomically by the
        workload) and returns its content. Fails when P exits first or after TIMEOUT
        (default ready_timeout)."""
        timeout = self.ready_timeout if timeout is None else timeout
        d = clock.Deadline(timeout)
        while not d.expired():
            if os.path.exists(path):
                with open(path) as f:
                    return json.load(f)
            if p.poll() is not None:
                raise Fail("%s exited (%s) before %s: %s" % (
                    what, p.returncode, os.path.basename(path), short(self.proc_log(p))))
            time.sleep(0.02)
        raise Fail("%s: no %s after %d s" % (what, os.path.basename(path), timeout))

    def wait_python(self, p, what, timeout=20):
        """Waits until P has exec'd its way to a Python that has run 0.2 s of its own CPU
        (a target started through wrappers: a chroot, a shell). Fails when P exits first
        or after TIMEOUT seconds."""
        d = clock.Deadline(timeout)
        while not d.expired():
            check(p.poll() is None, "%s exited early: %s" % (what, short(self.proc_log(p), 500)))
            try:
                exe = os.readlink("/proc/%d/exe" % p.pid)
                with open("/proc/%d/stat" % p.pid) as f:
                    utime = int(f.read().rsplit(")", 1)[1].split()[11])
            except OSError:
                exe, utime = "", 0
            if "python" in os.path.basename(exe) and utime > 20:
                return
            time.sleep(0.05)
        raise Fail("%s never became a running Python" % what)

    def start_target(self, args, ready, what, target=True, reap=False, env=None,
                     log_name=None):
        """Starts the interpreter under test with ARGS (target-side paths; a workload
        script first) and waits for its truth in the JSON file READY (host path).
        TARGET: an attach-mode target that must survive every scry run. (Popen, truth)."""
        p = self.spawn(self.interp.argv(*args), env=env, reap=reap, log_name=log_name)
        if target and not reap:
            self.targets.append((what, p))
        return p, self.wait_json(ready, p, "workload " + what + " ready")

    def wait(self, p, timeout, what):
        """P's exit status; SIGKILLs it and fails after TIMEOUT seconds."""
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
            raise Fail("%s (pid %d) did not exit within %d s" % (what, p.pid, timeout))

    def release(self, p):
        """P is no longer a target that must outlive the test (it is told to exit, or
        exits by design)."""
        self.targets = [t for t in self.targets if t[1] is not p]

    def stop(self, p, sig=signal.SIGTERM, timeout=20):
        """Checks that the targets are alive, sends SIG to P and waits for it (SIGKILL and
        a FAIL after TIMEOUT); P is no longer a target."""
        self.check_alive()
        self.release(p)
        if p.poll() is None:
            try:
                os.kill(p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
            raise Fail("pid %d did not exit %d s after signal %d" % (p.pid, timeout, sig))

    def check_alive(self):
        """The target is never harmed: every registered attach-mode target still runs."""
        for name, p in self.targets:
            check(p.poll() is None, "target %s (pid %d) died while profiled: exit %s; %s"
                  % (name, p.pid, p.returncode, short(self.proc_log(p), 300)))

    def kill(self, p):
        """SIGKILL to P's group and P, then reap it (10 s at most)."""
        if p.poll() is None:
            for fn in (os.killpg, os.kill):
                try:
                    fn(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def strays(self):
        """Pids of live processes (not zombies, not us) whose command line names this
        test's directory: what the test started, directly or through scry's launch mode."""
        found = []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/stat" % d, "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if self.key in cmd and state != b"Z":
                found.append(int(d))
        return found

    def expect(self, cond, what):
        """A soft check: prints `    ok   WHAT` or `    FAIL WHAT`; finish() fails the test
        if any failed. Returns COND."""
        print("    %s %s" % ("ok  " if cond else "FAIL", what))
        self.expectations.append((bool(cond), what))
        return cond

    def finish(self):
        """After the test function returned: the targets are alive, no soft check failed."""
        self.check_alive()
        bad = [w for ok, w in self.expectations if not ok]
        check(not bad, "%d check(s) failed: %s" % (len(bad), "; ".join(bad)))

    def cleanup(self):
        """Kills everything the test started, the strays, removes the files registered in
        remove_files and the directory (unless it lives in a parent's)."""
        for p in self.procs:
            self.kill(p)
        for _ in range(3):
            pids = self.strays()
            if not pids:
                break
            for pid in pids:
                kill_stray(pid)
            time.sleep(0.2)
        for path in self.remove_files:
            try:
                os.unlink(path)
            except OSError:
                pass
        if not self.keep_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- scry ---------------------------------------------------------------------------

    def scry_start(self, args, as_nobody=False, env=None, cwd=None):
        """Starts scry with ARGS in its own session (in directory CWD), stdout and stderr
        to pipes."""
        args = [str(a) for a in args]
        cmd = [self.scry_path] + args
        if as_nobody:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + cmd
        p = self.spawn(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
        p.scry_args = args
        return p

    def scry_finish(self, p, timeout=None):
        """Waits for scry P (SIGKILL and a FAIL after TIMEOUT, default scry_timeout):
        Result."""
        timeout = self.scry_timeout if timeout is None else timeout
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(p)
            raise Fail("scry %s: no exit after %d s (killed)" % (" ".join(p.scry_args), timeout))
        res = Result(p.scry_args, p.returncode, out.decode("utf-8", "replace"),
                     err.decode("utf-8", "replace"), clock.since(p.t0))
        if self.verbose:
            print("    $ %s" % res)
        return res

    def scry(self, args, timeout=None, as_nobody=False, env=None, cwd=None):
        """Runs scry with ARGS to its end (with a time-out): Result."""
        return self.scry_finish(self.scry_start(args, as_nobody, env, cwd), timeout)

    def scry_ok(self, args, **kw):
        """scry() that must exit 0 (else FAIL; XFail for "not implemented" when
        xfail_unimplemented is set)."""
        res = self.scry(args, **kw)
        if (res.rc != 0 and self.xfail_unimplemented
                and re.search(r"not (yet )?implemented", res.err, re.I)):
            raise XFail("%s (scry says: %s)" % (" ".join(res.args), short(res.err, 200)))
        check(res.rc == 0, str(res))
        return res

    def record(self, args, fmt, name=None, **kw):
        """scry record --format FMT -o FILE ARGS (must exit 0 and write FILE):
        (Result, file text)."""
        out = self.path(name or ("profile." + fmt))
        res = self.scry_ok(["record", "--format", fmt, "-o", out] + list(args), **kw)
        check(os.path.exists(out), "no output file %s: %s" % (out, res))
        with open(out, "rb") as f:
            return res, f.read().decode("utf-8", "replace")
