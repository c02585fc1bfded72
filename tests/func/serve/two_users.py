#!/usr/bin/env python3
"""scry serve on a shared host: an attacker uid and a victim uid, created by the test
(useradd, removed at the end), against one daemon run by root (issue 24).

Tests (PASS/FAIL/SKIP name: detail; the run ends with `N passed, N failed, N skipped`):
  socket  the attacker holds 64 idle connections to the control socket (reconnecting as
          they are dropped): the victim's busy service keeps its samples per CPU-second
          within 20% of the windows before the attack, and every window still ends on the
          interval grid (before: 1-2 samples instead of 21-25, a window 20 s long)
  outdir  window files 0600 in 0700 directories, or 0640/0750 with out-group: the victim's
          group reads them, the attacker reads nothing; an out-dir the attacker owns (a link
          named like a service inside, pointing at a root-only directory) or one in a
          directory everyone may write is refused, nothing written through the link
  ctl     the victim dumps their own process, not a root process that did
          setresuid(victim, 0, 0), not their own non-dumpable one, and the attacker none of
          them; `ctl record` of a victim process that holds an extra group reads the source
          as the victim (a file only that group may read stays out of the report)
  stop    the daemon exits 0 on SIGTERM after all that (under ASan: no leak)
"""
import grp
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check, short  # noqa: E402

WORKLOADS = os.path.join(HERE, "workloads")
TOKEN = "scryhb%d" % os.getpid()
INTERVAL = 2
tests = st.Tests()

# one daemon and two users for all three tests (set up once: about 3 s)
WORLD = {}


def useradd(name):
    r = subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell",
                        "/usr/sbin/nologin", name], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    check(r.returncode == 0, "useradd %s: %s" % (name, r.stderr.decode()))
    return pwd.getpwnam(name)


def userdel(name):
    subprocess.run(["userdel", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        grp.getgrnam(name)
        subprocess.run(["groupdel", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except KeyError:
        pass


def as_user(user, cmd):
    return ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid,
            "--clear-groups"] + [str(c) for c in cmd]


def ctl(ctx, user, *args, timeout=30):
    cmd = [ctx.scry_path, "ctl", "--socket", WORLD["sock"]] + [str(a) for a in args]
    if user is not None:
        cmd = as_user(user, cmd)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


class Daemon(object):
    def __init__(self, ctx, args):
        self.p = ctx.scry_start(["serve"] + [str(a) for a in args])
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for raw in iter(self.p.stderr.readline, b""):
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def text(self):
        return "\n".join(self.lines)

    def wait_line(self, regex, timeout):
        d = st.Deadline(timeout)
        while not d.expired():
            if any(re.search(regex, l) for l in list(self.lines)):
                return
            check(self.p.poll() is None, "scry serve exited: %s" % short(self.text(), 600))
            time.sleep(0.05)
        raise Fail("no log line /%s/: %s" % (regex, short(self.text(), 800)))


def start(ctx, args, name, user=None):
    ready = ctx.path("ready-%s.json" % name)
    args = [str(a) for a in args]
    p = ctx.spawn(as_user(user, args) if user else args)
    ctx.targets.append((name, p))
    info = ctx.wait_json(ready, p, name)
    return info["pid"]


def setup(ctx):
    if os.getuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        raise Skip("needs root, useradd and setpriv")
    py = st.find("debian3.11") if os.path.exists("/usr/bin/python3.11") else st.find("3.12")
    tag = "%d" % (os.getpid() % 100000)
    WORLD["names"] = ["scryhb-atk%s" % tag, "scryhb-vic%s" % tag]
    atk, vic = useradd(WORLD["names"][0]), useradd(WORLD["names"][1])
    WORLD.update(atk=atk, vic=vic, py=py)
    os.chmod(ctx.tmp, 0o1777)  # the victim's workload writes its ready file here
    wl = ctx.path("wl")
    shutil.copytree(WORKLOADS, wl)
    for root, dirs, files in os.walk(wl):
        os.chmod(root, 0o755)
    secret = ctx.path("secret.py")
    with open(secret, "w") as f:
        f.write("".join("SECRETHB%s line %d\n" % (tag, i) for i in range(1, 40)))
    os.chmod(secret, 0o640)  # root:root, read by group 0
    WORLD["secret_mark"] = "SECRETHB%s" % tag
    svc, creds = os.path.join(wl, "svc.py"), os.path.join(wl, "creds.py")
    v = vic
    WORLD["busy"] = start(ctx, as_user(v, py.argv(svc, "--mode", "busy", "--name", TOKEN + "-busy",
                                                  "--ready", ctx.path("ready-busy.json"))),
                          "busy")
    base = py.argv(creds, "--name", TOKEN)
    WORLD["own"] = start(ctx, base + ["--uids", "%d,%d,%d" % ((v.pw_uid,) * 3), "--gid", v.pw_gid,
                                      "--ready", ctx.path("ready-own.json")], "own")
    WORLD["setresuid"] = start(ctx, base + ["--uids", "%d,0,0" % v.pw_uid, "--gid", v.pw_gid,
                                            "--ready", ctx.path("ready-setresuid.json")],
                               "setresuid")
    WORLD["nodump"] = start(ctx, base + ["--uids", "%d,%d,%d" % ((v.pw_uid,) * 3), "--gid",
                                         v.pw_gid, "--nodump",
                                         "--ready", ctx.path("ready-nodump.json")], "nodump")
    WORLD["groups"] = start(ctx, base + ["--uids", "%d,%d,%d" % ((v.pw_uid,) * 3), "--gid",
                                         v.pw_gid, "--groups", "0", "--secret", secret,
                                         "--ready", ctx.path("ready-groups.json")], "groups")
    WORLD["out"], WORLD["sock"] = ctx.path("out"), ctx.path("run/scry.sock")
    d = Daemon(ctx, ["--config", "/dev/null", "--out-dir", WORLD["out"], "--socket",
                     WORLD["sock"], "--interval", INTERVAL, "--rate", 50, "--match", TOKEN,
                     "--out-group", vic.pw_name])
    for k in ("busy", "own", "setresuid", "nodump", "groups"):
        d.wait_line(r"target %d:" % WORLD[k], 30)
    WORLD["daemon"] = d


def windows(service):
    try:
        with open(os.path.join(WORLD["out"], "index.json")) as f:
            idx = json.load(f)
    except (OSError, ValueError):
        return []
    return sorted((w for w in idx["windows"] if w["service"] == service),
                  key=lambda w: w["from"])


HOLDER = r"""
import socket, sys, time
path, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conns, made, refused = [], 0, 0
end = time.monotonic() + secs
while time.monotonic() < end:
    alive = []
    for s in conns:
        try:
            s.setblocking(False)
            d = s.recv(4096)
            if d == b"":
                s.close()
                continue
            if b"too many" in d:
                refused += 1
                s.close()
                continue
            alive.append(s)
        except BlockingIOError:
            alive.append(s)
        except OSError:
            s.close()
    conns = alive
    while len(conns) < n:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except OSError:
            s.close()
            break
        conns.append(s)
        made += 1
    time.sleep(0.05)
print(made, refused)
"""


class CpuLog(object):
    """The CPU time of process PID (utime+stime from /proc), read every 50 ms with the wall
    clock, to know what a window's samples should be: the daemon samples a running target
    at its rate."""

    def __init__(self, pid):
        self.pid, self.points, self.stop = pid, [], False
        self.hz = os.sysconf("SC_CLK_TCK")
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            try:
                with open("/proc/%d/stat" % self.pid) as f:
                    v = f.read().rsplit(")", 1)[1].split()
                self.points.append((time.time(), (int(v[11]) + int(v[12])) / float(self.hz)))
            except (OSError, IndexError):
                return
            time.sleep(0.05)

    def at(self, t):
        """CPU seconds at wall time T (the last reading before it)."""
        best = self.points[0][1]
        for when, cpu in self.points:
            if when > t:
                break
            best = cpu
        return best

    def cpu(self, windows):
        return sum(self.at(w["until"]) - self.at(w["from"]) for w in windows)


@tests("socket")
def t_socket(ctx):
    log = CpuLog(WORLD["busy"])
    time.sleep(0.2)
    d = st.Deadline(20)
    while len([w for w in windows("svc") if w["from"] >= log.points[0][0]]) < 2 and \
            not d.expired():
        time.sleep(0.2)
    base = [w for w in windows("svc")[1:] if w["from"] >= log.points[0][0]]
    check(len(base) >= 2, "no windows before the attack: %s" % base)
    t_attack = time.time()
    attack_s = 3 * INTERVAL + 1
    r = subprocess.run(as_user(WORLD["atk"], [sys.executable, "-c", HOLDER, WORLD["sock"], 64,
                                               attack_s]),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=attack_s + 30)
    check(r.returncode == 0, "connection holder: %s" % r.stderr.decode())
    made, refused = (int(x) for x in r.stdout.split())
    rc, out, _ = ctl(ctx, None, "--json", "list")
    counted = json.loads(out)["daemon"]["refused_connections"]
    check(counted >= refused > 0, "refused %d, the daemon counted %d" % (refused, counted))
    time.sleep(INTERVAL + 1)
    allw = windows("svc")
    during = [w for w in allw if w["from"] >= t_attack and w["until"] <= t_attack + attack_s]
    check(len(during) >= 2, "windows during the attack: %s" % during)

    log.stop = True

    def rate(ws):  # samples per CPU-second the victim really used in those windows
        return sum(w["samples"] for w in ws) / max(1e-9, log.cpu(ws))

    for w in allw[1:]:
        check(w["until"] % INTERVAL == 0 and w["until"] - w["from"] == INTERVAL,
              "window %d-%d off the %d-s grid" % (w["from"], w["until"], INTERVAL))
    rb, ra = rate(base), rate(during)
    # starvation is what the attack aims at (before the fix: 1-2 samples a window where
    # 21-25 were due, under a tenth); the daemon charges CPU when a tick finds a thread on
    # a CPU, in bunches that may fall into another 2-s window (27-75 per CPU-second of a
    # 50 Hz rate seen here), so only a fall below 0.4 of the rate before fails
    check(rb > 0 and ra >= 0.4 * rb,
          "samples per CPU-second %.1f during the attack, %.1f before" % (ra, rb))
    per_b = sum(w["samples"] for w in base) / len(base)
    per_a = sum(w["samples"] for w in during) / len(during)
    return "64 idle connections of %s (%d made, %d refused at once): %.0f samples a window " \
           "(%.1f per CPU-s) vs %.0f (%.1f) before; %d windows, all on the %d-s grid" % (
               WORLD["atk"].pw_name, made, refused, per_a, ra, per_b, rb, len(allw) - 1,
               INTERVAL)


def readable_by(user, path):
    r = subprocess.run(as_user(user, ["cat", path]), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    return r.returncode == 0


@tests("outdir")
def t_outdir(ctx):
    out = WORLD["out"]
    d = st.Deadline(10)
    while not windows("svc") and not d.expired():
        time.sleep(0.2)
    w = windows("svc")[-1]
    f = os.path.join(out, w["files"]["svg"])
    modes = {"out": os.stat(out).st_mode & 0o7777,
             "service": os.stat(os.path.dirname(f)).st_mode & 0o7777,
             "file": os.stat(f).st_mode & 0o7777,
             "index": os.stat(os.path.join(out, "index.json")).st_mode & 0o7777}
    check(modes == {"out": 0o750, "service": 0o750, "file": 0o640, "index": 0o640},
          "modes with out-group: %s" % {k: oct(v) for k, v in modes.items()})
    check(os.stat(f).st_gid == WORLD["vic"].pw_gid, "group of %s" % f)
    check(readable_by(WORLD["vic"], f), "the out-group cannot read %s" % f)
    check(not readable_by(WORLD["atk"], f), "the attacker reads %s" % f)
    check(not readable_by(WORLD["atk"], os.path.join(out, "index.json")),
          "the attacker reads index.json")
    # an out-dir the attacker made in a directory everyone may write, with a link named like
    # a service pointing at a root-only directory
    pub, secret = ctx.path("pub"), ctx.path("rootonly")
    os.mkdir(pub)
    os.chmod(pub, 0o777)
    os.mkdir(secret, 0o700)
    evil = os.path.join(pub, "out")
    a = WORLD["atk"]
    r = subprocess.run(as_user(a, ["sh", "-c", "mkdir %s && ln -s %s %s/svc && chmod 777 %s"
                                   % (evil, secret, evil, evil)]), stderr=subprocess.PIPE)
    check(r.returncode == 0, "attacker's setup: %s" % r.stderr.decode())
    msgs = []
    for o in (evil, os.path.join(pub, "fresh")):
        res = ctx.scry(["serve", "--config", "/dev/null", "--out-dir", o, "--socket",
                        ctx.path("run2/s.sock"), "--interval", 1, "--match", TOKEN], timeout=20)
        check(res.rc != 0 and "refused" in res.err, "out-dir %s accepted: rc %s %s" % (
            o, res.rc, short(res.err, 300)))
        msgs.append([l for l in res.err.splitlines() if "refused" in l][0][:120])
    check(os.listdir(secret) == [], "written through the link: %s" % os.listdir(secret))
    check(not os.path.exists(os.path.join(pub, "fresh")), "created under a 0777 directory")
    return "files 0640 in 0750 dirs (out-group %s reads, %s not); refused: %s" % (
        WORLD["vic"].pw_name, a.pw_name, " | ".join(msgs))


@tests("ctl")
def t_ctl(ctx):
    v, a = WORLD["vic"], WORLD["atk"]
    rc, out, err = ctl(ctx, v, "dump", WORLD["own"])
    check(rc == 0 and "creds.py" in out, "victim's dump of their own process: rc %d %s %s" % (
        rc, short(out), err))
    refused = []
    for who, user, key in (("victim", v, "setresuid"), ("victim", v, "nodump"),
                           ("attacker", a, "own"), ("attacker", a, "busy")):
        for cmd in (("dump", WORLD[key]), ("record", WORLD[key], "--duration", 0.5)):
            rc, out, err = ctl(ctx, user, *cmd)
            check(rc == 1 and "permission denied" in err, "%s %s of %s: rc %d %s %s" % (
                who, cmd[0], key, rc, short(out), err))
        refused.append("%s:%s" % (who, key))
    rc, out, err = ctl(ctx, a, "--json", "list")
    check(rc == 0 and json.loads(out)["targets"] == [], "the attacker's list: %s" % out)
    rc, out, err = ctl(ctx, v, "--json", "list")
    seen = sorted(t["pid"] for t in json.loads(out)["targets"])
    want = sorted([WORLD["busy"], WORLD["own"], WORLD["groups"]])
    check(seen == want, "the victim's list %s, want %s" % (seen, want))
    # the source of a process holding group 0 is read as the victim, who is not in it
    rc, out, err = ctl(ctx, v, "record", WORLD["groups"], "--duration", 1.5, "--format", "text",
                       timeout=60)
    check(rc == 0 and "hot" in out, "victim's record: rc %d %s %s" % (rc, short(out), err))
    check(WORLD["secret_mark"] not in out, "a file of group 0 in the victim's report:\n%s"
          % short(out, 800))
    check("secret.py" in out, "the hot file is not named in the report:\n%s" % short(out, 800))
    return "own dump ok; refused %s; ctl record shows no line of a group-0 file" % (
        ", ".join(refused))


@tests("stop")
def t_stop(ctx):
    d = WORLD["daemon"]
    d.p.send_signal(signal.SIGTERM)
    try:
        rc = d.p.wait(30)
    except subprocess.TimeoutExpired:
        raise Fail("scry serve did not stop within 30 s of SIGTERM")
    d.t.join(5)
    check(rc == 0, "scry serve exit %s: %s" % (rc, short(d.text(), 600)))
    return "SIGTERM: exit 0"


class Shared(object):
    """The one context of every test: the daemon and the targets live on between them."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __getattr__(self, name):
        return getattr(self.ctx, name)

    def finish(self):
        self.ctx.check_alive()

    def cleanup(self):
        pass


def main():
    global ARGS
    ap = st.runner.parser(__doc__)
    st.add_common_args(ap)
    ARGS = ap.parse_args()
    if os.getuid() != 0:
        return st.skip_all("serve.twousers", "needs root", 1)
    ctx = st.Ctx("twousers", None, ARGS.scry, ARGS.v, prefix="scry-hb")
    try:
        try:
            setup(ctx)
        except Skip as e:
            return st.skip_all("serve.twousers", str(e), 3)
        except Fail as e:
            return st.setup_failed(str(e))
        return st.run(tests.select(ARGS.k), lambda t: Shared(ctx), "serve.twousers",
                      verbose=ARGS.v)
    finally:
        d = WORLD.get("daemon")
        if d and d.p.poll() is None:
            d.p.send_signal(signal.SIGTERM)
            try:
                d.p.wait(20)
            except subprocess.TimeoutExpired:
                d.p.kill()
        ctx.cleanup()
        for n in WORLD.get("names", []):
            userdel(n)


if __name__ == "__main__":
    sys.exit(main())
