#!/usr/bin/env python3
"""scry on containerised targets (issues 8, 27): real engines.

usage: run_containers.py --scry PATH [--python 3.14|3.15] [-k PATTERN] [-v]

Each test runs Debian sid's python3.14 or python3.15 in a `docker run --network none`
container of the test bed's own dockerd (scripts/dockerd.sh, started here unless it runs
already; the cached sid root of scripts/sid-root.sh imported once as image scry-sid), the
test's directory mounted at the path the target sees. The target (ctr_work.py) is pid 1 of
its namespaces and stores its own thread ids; scry runs on the host with the host pid.
Checks: dump (host and container tids of every thread, thread names, idle flags, --native
frames named, --json, --locals, --container and a pid reused while it dumps), record with
known-answer CPU shares and exact lines (perf, ptrace and --blocking), --memory attach and
launch (known kept bytes on their line), source text read inside the container (text and
HTML reports), the container id in every output, scry serve selecting the container by id,
scry inside the container's PID namespace, rootless podman (engines.Podman: a test user
with subordinate ids), and scry's own image (scripts/docker-image.sh) as sidecar and host
agent with the options of dist/kubernetes/*.yaml. One case is emulated (unshare + chroot):
a cgroup v2 docker-<id>.scope, the systemd driver's layout this engine does not make. The
cases marked once=True (not version-dependent) run with 3.14 only. Needs root and a
dockerd that starts (else one SKIP line with the reason); podman for `rootless`, strace for
the pid-reuse case. About 100 s (3.14) and 40 s (3.15) on a quiet machine.
Stdlib only; one line "PASS|FAIL|SKIP name: detail" per test, then "N passed, N failed, N
skipped"; exit 1 on a failure.
"""
import gzip
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402
import engines  # noqa: E402
import miniyaml  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "ctr_work.py")
EXEC_WORK = os.path.join(HERE, "ctr_exec.py")
LABELS = ["3.14", "3.15"]
EXE = "python3.14"  # the interpreter's file name (--python)
SHARE_TOL = 8.0  # points (about 4 standard deviations at 250 Hz x 2 s): burn_a/burn_b are
#                 75/25 of the burner's own CPU time
tests = st.Tests()


class Cgroups(object):
    """The emulated case's cgroup: a v2 group docker-<id>.scope (the systemd driver's)."""

    def __init__(self):
        self.made = []
        self.v2 = None
        self.id2 = os.urandom(32).hex()
        mounts = []
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, mnt, fstype, opts = line.split()[:4]
                mounts.append((mnt, fstype, opts.split(",")))
        v2 = [m for m, t, _ in mounts if t == "cgroup2"]
        if v2:
            # a parent of its own: suites of other checkouts may run at the same time
            self.v2 = self.make(v2[0], "scry-test-%d.slice" % os.getpid(),
                                "docker-%s.scope" % self.id2)

    def make(self, mnt, parent, leaf):
        path = os.path.join(mnt, parent)
        try:
            if not os.path.isdir(path):
                os.mkdir(path)
                self.made.append(path)
            leafp = os.path.join(path, leaf)
            os.mkdir(leafp)
            self.made.append(leafp)
            return leafp
        except OSError as e:
            print("    (no cgroup under %s: %s)" % (mnt, e))
            return None

    def remove(self):
        """Removes what it made, deepest first (waits up to 5 s for the groups to empty)."""
        for path in reversed(self.made):
            d = st.Deadline(5)
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if d.expired():
                        print("    (could not remove %s)" % path)
                        break
                    time.sleep(0.1)


CG = None
ENGINE = None  # engines.Docker, started by main()
IMAGE_ROOT = None  # scry:local's root file system (scripts/docker-image.sh)
PODMAN = None  # engines.Podman, or None with the reason in PODMAN_SKIP
PODMAN_SKIP = "podman not set up"


def mount_of(path):
    """The cgroup mount point that holds PATH."""
    best = ""
    with open("/proc/self/mounts") as f:
        for line in f:
            mnt, fstype = line.split()[1:3]
            if fstype in ("cgroup", "cgroup2") and path.startswith(mnt + "/") \
                    and len(mnt) > len(best):
                best = mnt
    return best


def nspid_map(hpid):
    """{own tid: host tid} of process HPID, from the host's /proc (NSpid: host first)."""
    out = {}
    for t in os.listdir("/proc/%d/task" % hpid):
        with open("/proc/%d/task/%s/status" % (hpid, t)) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    ids = [int(x) for x in line.split()[1:]]
                    out[ids[-1]] = ids[0]
    return out


def start_container(c, work=None, extra=()):
    """Starts WORK (ctr_work.py) in a Docker container of the sid image (`docker run
    --network none`, the test's directory mounted at the path the target sees): pid 1 of
    its namespaces, in the engine's cgroup /docker/<id>. Sets c.cid (the container's id)
    and c.wrapper (the attached `docker run` client, which exits with the container).
    Returns (host pid, truth)."""
    script = c.stage_workloads(work or WORK)  # ctr_exec.py imports _wl
    ready, out = c.path("ready.json"), c.path("out.json")
    p = ENGINE.run(c, [EXE, script, c.tpath(ready), c.tpath(out)], extra)
    c.targets.append(("container", p))
    c.out_path = out
    truth = c.wait_json(ready, p, "container target")
    check(truth["pid"] == 1, "the target is not pid 1 of its namespace: %s" % truth["pid"])
    c.wrapper = p
    return ENGINE.host_pid(c), truth


def start_emulated(c, cgroup, work=None):
    """Starts WORK (ctr_work.py) as Docker's systemd cgroup driver would, which the engine
    here (cgroupfs driver) cannot: pid 1 of new PID/mount/UTS/IPC/network namespaces,
    chrooted into the sid root with its own /proc, in cgroup CGROUP (a directory). Returns
    (host pid, truth)."""
    root = c.interp.root
    script = c.stage_workloads(work or WORK)  # ctr_exec.py imports _wl
    ready, out = c.path("ready.json"), c.path("out.json")
    inner = ["unshare", "--pid", "--mount", "--uts", "--ipc", "--net", "--fork",
             "--mount-proc=%s" % os.path.join(root, "proc")] + c.interp.argv(
                 script, c.tpath(ready), c.tpath(out))
    shell = 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"'
    p = c.spawn(["sh", "-c", shell, "sh", cgroup] + inner)
    c.targets.append(("container", p))
    c.out_path = out
    truth = c.wait_json(ready, p, "container target")
    check(truth["pid"] == 1, "the target is not pid 1 of its namespace: %s" % truth["pid"])
    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
        kids = [int(x) for x in f.read().split()]
    check(len(kids) == 1, "unshare has children %s" % kids)
    c.wrapper = p
    return kids[0], truth


def stop_container(c):
    """SIGTERM to the target (signalled directly: its pid 1 has a handler), then its
    truth once the container exited."""
    os.kill(c.hpid, 15)
    c.wait(c.wrapper, 20, "container target")
    c.release(c.wrapper)
    return st.load_json(c.out_path, "truth")


stop_emulated = stop_container


def needs(cg_attr):
    path = getattr(CG, cg_attr) if CG else None
    if not path:
        raise Skip("no writable cgroup v2 hierarchy")
    return path


def dump_checks(c, hpid, truth, want_id):
    """dump --json, three times: host tids mapped from the target's own, names, the
    container; the burner running and the sleepers idle in most dumps (a thread read
    through a wrong tid would have another thread's state). Returns a detail string."""
    m = nspid_map(hpid)
    states = dict((name, []) for name in truth["tids"])
    for _ in range(3):
        res = c.scry_ok(["dump", "--json", "--pid", hpid])
        doc = json.loads(res.out)
        check(doc.get("ns_pid") == 1, "dump ns_pid %r" % doc.get("ns_pid"))
        ctr = doc.get("container") or {}
        check(ctr.get("id") == want_id and ctr.get("runtime") == "docker",
              "dump container %r, want docker %s" % (ctr, want_id))
        by_name = dict((t["name"], t) for t in doc["threads"])
        for name, own in truth["tids"].items():
            t = by_name.get(name)
            check(t is not None, "no thread %r in the dump: %s" % (name, sorted(by_name)))
            check(t.get("ns_tid") == own and t["tid"] == m.get(own),
                  "thread %s: dump tid %s ns_tid %s, want host %s (own %s)"
                  % (name, t["tid"], t.get("ns_tid"), m.get(own), own))
            check(t["tid"] != own, "thread %s: host and own tid are equal (%d)" % (name, own))
            states[name].append(t["state"])
        nap = by_name["napper"]["frames"]
        check(nap and nap[0]["function"] == "nap" and nap[0]["line"] == truth["lines"]["nap"],
              "napper's leaf %r" % (nap[:1],))
    for name, want in (("burner", "running"), ("napper", "idle"), ("MainThread", "idle")):
        check(states[name].count(want) >= 2, "%s: states %s, want mostly %s"
              % (name, states[name], want))
    return "tids %s" % ", ".join("%s %d->%d" % (n, o, m[o])
                                 for n, o in sorted(truth["tids"].items()))


@tests("dump")
def t_dump(c):
    """dump from the host: every thread by host tid with its own tid, names, idle flags,
    --native frames named through the target's root, the container in the header."""
    c.hpid, truth = start_container(c)
    detail = dump_checks(c, c.hpid, truth, c.cid)
    text = c.scry_ok(["dump", "--pid", c.hpid]).out
    check("[pid 1 in its namespace]" in text, "text header: %s" % st.short(text, 300))
    check(("Container docker %s" % c.cid) in text, "no container line: %s" % st.short(text, 300))
    tid = truth["tids"]["napper"]
    check(re.search(r"^Thread \d+ \[tid %d in its namespace\] \(idle\): \"napper\"$" % tid,
                    text, re.M), "no napper line: %s" % st.short(text, 600))
    # --native: the native frames of a thread in time.sleep are named from the root's files.
    nat = json.loads(c.scry_ok(["dump", "--json", "--native", "--pid", c.hpid]).out)
    frames = [f for t in nat["threads"] if t["name"] == "napper" for f in t["frames"]]
    natives = [f for f in frames if f["kind"] == "native"]
    named = [f for f in natives if not f["function"].startswith("??")]
    check(any(f["function"] == "nap" for f in frames), "no Python frame nap: %s" % frames[:8])
    # clock_nanosleep in time.sleep, or pthread_cond_timedwait when caught waking up and
    # waiting for the GIL: either way a libc symbol read from the root's libc.
    check(any(f["file"] == "libc.so.6" for f in named),
          "no libc.so.6 frame named: %s" % [(f["function"], f["file"]) for f in natives])
    # The interpreter's own symbols (sid's python3.14 is stripped of most: PyEval_EvalCode
    # below the main thread's module frame is exported) come from the root's executable.
    every = [f for t in nat["threads"] for f in t["frames"] if f["kind"] == "native"]
    exe = [f["function"] for f in every
           if f["file"] == EXE and not f["function"].startswith("??")]
    check(exe, "no named %s frame: %s" % (EXE, [(f["function"], f["file"]) for f in every]))
    # --container: by id, id prefix and cgroup path, every Python process of it (unshare,
    # also in the group, is not Python); a wrong id and a malformed one are refused.
    cgpath = "/docker/" + c.cid
    for which in (c.cid, c.cid[:12].upper(), cgpath, os.path.dirname(cgpath)):
        res = c.scry_ok(["dump", "--json", "--container", which])
        docs = json.loads(res.out)
        pids = [d["pid"] for d in docs] if isinstance(docs, list) else docs
        # /docker holds every container of the engine (another checkout's suite may share it)
        check(pids == [c.hpid] or (which == "/docker" and c.hpid in pids),
              "--container %s: pids %s, want [%d]" % (which, pids, c.hpid))
    text = c.scry_ok(["dump", "--container", c.cid[:16]]).out
    check(text.startswith("Process %d [pid 1 in its namespace]" % c.hpid), st.short(text, 200))
    for bad, why in ((os.urandom(32).hex(), "no Python process in container"),
                     ("xyz", "--container takes")):
        res = c.scry(["dump", "--container", bad])
        check(res.rc != 0 and why in res.err, "--container %s: %s" % (bad, res))
    return "%s; napper: %d of %d native frames named; %s: %s" % (
        detail, len(named), len(natives), EXE, ", ".join(sorted(set(exe))[:3]))


@tests("pid_reuse", once=True)
def t_pid_reuse(c):
    """dump --container when the pid of a process it listed is given to an unrelated process
    before the dump: strace holds scry for 3 s right after it listed the container (at its
    first access("/proc/PID") as it opens the target), the container's pid 1 is killed and
    its host pid handed to a host Python (through ns_last_pid). scry notices by the start
    time (the listing's against the one after attaching) and prints no dump of that
    impostor: exit 1, an empty JSON array, a message naming the reuse."""
    last = "/proc/sys/kernel/ns_last_pid"
    if not shutil.which("strace") or not os.path.exists(last):
        raise Skip("no strace or no %s to hand a pid to another process" % last)
    c.hpid, truth = start_container(c)
    hpid, log = c.hpid, c.path("strace.log")
    held = '"/proc/%d"' % hpid
    sys_ = "access,faccessat,faccessat2"
    cmd = ["strace", "-qq", "-e", "signal=none", "-o", log, "-P", "/proc/%d" % hpid,
           "-e", "trace=" + sys_, "-e", "inject=%s:delay_exit=3000000" % sys_,
           c.scry_path, "dump", "--json", "--container", c.cid]
    p = c.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.scry_args = ["(under strace)", "dump", "--json", "--container", c.cid]
    d = st.Deadline(20)
    while True:
        try:
            with open(log) as f:
                if held in f.read():
                    break
        except OSError:
            pass
        if d.expired() or p.poll() is not None:
            raise Fail("scry never opened %d: %s" % (hpid, c.scry_finish(p, 10)))
        time.sleep(0.01)
    os.kill(hpid, 9)
    c.wait(c.wrapper, 10, "container target")
    c.release(c.wrapper)
    d = st.Deadline(5)
    while os.path.exists("/proc/%d" % hpid) and not d.expired():
        time.sleep(0.01)
    impostor = None
    for _ in range(50):
        if os.path.exists("/proc/%d" % hpid):
            raise Skip("pid %d was taken by another process first" % hpid)
        with open(last, "w") as f:
            f.write(str(hpid - 1))
        q = c.spawn([sys.executable, "-c", "import time; time.sleep(30)", c.tmp])
        if q.pid == hpid:
            impostor = q
            break
        c.kill(q)
    if impostor is None:
        raise Skip("could not hand pid %d to a new process (a busy machine)" % hpid)
    res = c.scry_finish(p, 30)
    try:
        docs = json.loads(res.out)
    except ValueError:
        raise Fail("not JSON: %s" % res)
    check(docs == [], "the impostor %d was dumped: %s" % (hpid, st.short(res.out, 300)))
    check(res.rc == 1 and ("process %d is not the one listed in container" % hpid) in res.err
          and "pid was reused" in res.err, "no reuse noticed: %s" % res)
    c.kill(impostor)
    return st.short(res.err.strip(), 200)


def shares_of(what, doc, lines):
    """({burn_a, burn_b: self_pct}, their samples) of a JSON report; FAILs unless each
    function's hottest line is its marked line."""
    pct, n = {"burn_a": 0.0, "burn_b": 0.0}, 0
    for fn in doc["functions"]:
        if fn["file"].endswith("ctr_work.py") and fn["function"] in pct:
            pct[fn["function"]] += fn["self_pct"]
            n += fn["self_samples"]
    for k in pct:
        best = max((ln for ln in doc["lines"] if ln["file"].endswith("ctr_work.py")
                    and ln["function"] == k), key=lambda ln: ln["samples"], default=None)
        check(best is not None and best["line"] == lines[k],
              "%s: %s's hottest line %s, want %d" % (what, k, best and best["line"], lines[k]))
    return pct, n


@tests("record")
def t_record(c):
    """record from the host with each sampler, --blocking and --native: CPU shares and exact
    lines match the target's own thread-time truth; the container id in the summary, JSON
    and pprof."""
    c.hpid, truth = start_container(c)
    runs = []
    for extra in (["--sampler", "perf"], ["--sampler", "ptrace"], ["--blocking"], ["--native"]):
        res, text = c.record(["-d", "2", "-r", "250", "--pid", c.hpid] + extra, "json",
                             name="rec%d.json" % len(runs))
        doc = json.loads(text)
        runs.append((" ".join(extra), res, doc, shares_of(" ".join(extra), doc, truth["lines"])))
    _, ptext = c.record(["-d", "0.5", "--pid", c.hpid], "pprof", name="rec.pb.gz")
    with open(c.path("rec.pb.gz"), "rb") as f:
        pb = gzip.decompress(f.read())
    out = stop_container(c)
    cpu = out["cpu_s"]
    want = st.shares(cpu, ("burn_a", "burn_b"))
    details = []
    for what, res, doc, (got, n) in runs:
        check(n >= 20, "%s: %d samples on the burn lines (want >= 20): %s"
              % (what, n, st.short(res.err, 300)))
        details.append(st.compare_shares(st.shares(got, ("burn_a", "burn_b")), want, n, what,
                                         SHARE_TOL))
        tgt = doc["target"]
        check(tgt.get("ns_pid") == 1, "%s: target %r" % (what, tgt))
        ctr = tgt.get("container") or {}
        check(ctr.get("id") == c.cid and ctr.get("runtime") == "docker"
              and ctr.get("cgroup", "").endswith("/docker/%s" % c.cid),
              "%s: target.container %r" % (what, ctr))
        check(("in container docker:%s" % c.cid[:12]) in res.err,
              "%s: summary without the container: %s" % (what, st.short(res.err, 300)))
        names = set(t.get("name") for t in doc.get("threads", []))
        check("burner" in names, "%s: threads %s" % (what, sorted(names)))
    check(b"container_id" in pb and c.cid.encode() in pb, "pprof has no container_id label")
    return "; ".join(details)


FORMATS = (("collapsed", "txt"), ("flamegraph", "svg"), ("html", "html"),
           ("speedscope", "speedscope.json"), ("text", "text"), ("pprof", "pb.gz"))


def format_checks(c, record, pid, where):
    """Records PID with --threads into every format through RECORD(args, out path) and
    checks that each file names the container (stack formats: the thread root frames end
    with [docker:<id12>]; text: its header; pprof: the container_id label) and holds the
    burner's function. Returns the collapsed file's thread roots."""
    tag = "[docker:%s]" % c.cid[:12]
    for fmt, ext in FORMATS:
        out = c.path("%s-f.%s" % (where, ext))
        record(["-d", "1", "-r", "200", "--threads", "--format", fmt, "-o", out, "--pid", pid])
        with open(out, "rb") as f:
            data = f.read()
        if fmt == "pprof":
            data = gzip.decompress(data)
            want = [b"container_id", c.cid.encode()]
        else:
            want = [(("container docker:%s" % c.cid[:12]) if fmt == "text" else tag).encode()]
        check(all(w in data for w in want), "%s %s: no %s in %s"
              % (where, fmt, want, st.short(data.decode("utf-8", "replace"), 200)))
        check(b"burn_a" in data, "%s %s: the burner's function missing" % (where, fmt))
    with open(c.path("%s-f.txt" % where)) as f:
        roots = set(line.split(";", 1)[0] for line in f.read().splitlines() if line)
    check(roots and all(r.startswith("thread ") and r.endswith(tag) for r in roots),
          "%s: collapsed thread roots %s" % (where, sorted(roots)[:4]))
    return roots


@tests("formats", once=True)
def t_formats(c):
    """record from the host into every format with --threads: each file names the
    container (collapsed, flame graph, HTML, speedscope: the thread root frames end with
    [docker:<id12>]; text: its header; pprof: a label) and holds the burner's function."""
    c.hpid, truth = start_container(c)
    roots = format_checks(c, lambda args: c.scry_ok(["record", "-q"] + args), c.hpid, "host")
    stop_container(c)
    return "%s; roots e.g. %s" % (", ".join(f for f, _ in FORMATS), sorted(roots)[0])


def source_report(c, pid, where, burn_src):
    """Records PID into a text and an HTML report (-d 1): both must show the source text of
    burn_a's marked line BURN_SRC (read through the target's root) and no decoy line.
    Returns the text report's line for it."""
    got = None
    for fmt, ext in (("text", "txt"), ("html", "html")):
        res, data = c.record(["-q", "-d", "1", "-r", "200", "--pid", pid], fmt,
                             name="src-%s.%s" % (where, ext))
        check("HOST DECOY" not in data, "%s %s: the host's file was read" % (where, fmt))
        if fmt == "text":
            got = [ln for ln in data.splitlines() if burn_src in ln]
            check(got, "%s text: no source line %r: %s" % (where, burn_src, st.short(data, 900)))
            miss = [ln for ln in data.splitlines()
                    if "source not available" in ln and "ctr_work.py" in ln]
            check(not miss, "%s text: %s" % (where, miss))
        else:
            check(burn_src in data, "%s html: no source line %r" % (where, burn_src))
    return got[0].strip()


@tests("source", once=True)
def t_source(c):
    """Source text of a containerised target in the text and HTML reports: ctr_work.py
    exists only inside the container's root (its path does not exist on the host), and the
    reports show burn_a's marked line; then a decoy file with other text at that path on
    the host: the reports still show the container's text, never the host's."""
    c.hpid, truth = start_container(c)
    path = truth["file"]
    check(path.startswith("/") and not os.path.exists(path),
          "the target's script %s exists on the host" % path)
    with open(c.interp.host_path(path)) as f:
        lines = f.read().splitlines()
    burn_src = lines[truth["lines"]["burn_a"] - 1].strip()
    check("#@burn_a@" in burn_src, "marked line %r" % burn_src)
    line = source_report(c, c.hpid, "only-root", burn_src)
    decoy_dir = os.path.dirname(path)
    os.mkdir(decoy_dir)  # a fresh name (mkdtemp inside the root): nothing of the host's
    try:
        with open(path, "w") as f:
            f.write("\n".join("HOST DECOY %d" % (i + 1) for i in range(len(lines))) + "\n")
        source_report(c, c.hpid, "decoy", burn_src)
    finally:
        shutil.rmtree(decoy_dir, ignore_errors=True)
    stop_container(c)
    return "%s not on the host; text report: %s; a host decoy at that path not read" % (
        path, st.short(line, 100))


@tests("locals")
def t_locals(c):
    """dump --locals (text and --json) of a containerised target: main_wait's argument out
    (the target's path of its output file) on the main thread, and burn_a's argument quota
    (0.75 x 31.7 ms) when the burner is caught in burn_a with an unchanged stack."""
    c.hpid, truth = start_container(c)
    want_out = repr(c.tpath(c.out_path))
    want_quota = repr(0.75 * 0.0317)
    text = c.scry_ok(["dump", "--locals", "--pid", c.hpid]).out
    check(("arg out = %s" % want_out) in text, "text: no 'arg out = %s': %s"
          % (want_out, st.short(text, 900)))
    quota = None
    for _ in range(8):
        doc = json.loads(c.scry_ok(["dump", "--locals", "--json", "--pid", c.hpid]).out)
        by_name = dict((t["name"], t) for t in doc["threads"])
        mw = [f for f in by_name["MainThread"]["frames"] if f.get("function") == "main_wait"]
        check(mw and "locals" in mw[0], "json: main_wait without locals: %s" % mw)
        args = dict((v["name"], v) for v in mw[0]["locals"])
        check(args.get("out", {}).get("repr") == want_out and args["out"].get("arg") is True
              and args["out"].get("type") == "str",
              "json: main_wait's out %r, want %s" % (args.get("out"), want_out))
        ba = [f for f in by_name["burner"]["frames"]
              if f.get("function") == "burn_a" and "locals" in f]
        if ba:
            v = dict((x["name"], x) for x in ba[0]["locals"])
            quota = v.get("quota")
            check(quota and quota.get("arg") is True and quota.get("type") == "float"
                  and quota.get("repr") == want_quota,
                  "json: burn_a's quota %r, want %s" % (quota, want_quota))
            break
    check(quota is not None, "burn_a's locals never read in 8 dumps")
    stop_container(c)
    return "main_wait out = %s; burn_a quota = %s" % (want_out, quota["repr"])


LAUNCH_KEEP = """import sys, time
def ring():
    with open("/proc/self/maps") as f:
        return "scry-ring" in f.read()
t0 = time.time()
while not ring() and time.time() - t0 < 20:
    time.sleep(0.05)  # until scry's shim is in (injected into this root)
time.sleep(0.5)
keep = []
for i in range(1000):
    keep.append(bytes(100000))  #@keep@
time.sleep(float(sys.argv[1]) if sys.argv[1:] else 1.0)
"""


def scry_from_image(rootfs_at):
    """The command that runs scry from scry:local's root mounted at ROOTFS_AT in another
    image (its own loader and libraries: the application image's libc may differ)."""
    return ["%s/lib64/ld-linux-x86-64.so.2" % rootfs_at, "--library-path",
            "%s/lib/x86_64-linux-gnu" % rootfs_at, "%s/usr/bin/scry" % rootfs_at]


@tests("launch_memory")
def t_launch_memory(c):
    """Launch mode in a Docker container: scry (scry:local's root mounted into the
    application's container, as a Dockerfile would COPY it) runs `scry record --memory --
    python3.14 keep.py` as the container's command; the shim preloaded from there charges
    the 100 MB the program keeps to the keeping line (within 15%); the summary names the
    container. No capability added: Docker's seccomp profile refuses process_vm_readv
    without SYS_PTRACE, even on scry's own child, and scry reads /proc/PID/mem instead,
    which the kernel's ptrace check allows. (A Docker container's processes are children of the engine's shim, never
    of a launcher on the host: launch mode from the host does not apply.)"""
    script = c.path("keep.py")
    with open(script, "w") as f:
        f.write(LAUNCH_KEEP)
    at = "/opt/scry"
    out = c.path("launch.json")
    p = ENGINE.run(c, scry_from_image(at) + [
        "record", "--memory", "-f", "json", "-o", c.tpath(out), "--", EXE, c.tpath(script)],
        ["-v", "%s:%s:ro" % (IMAGE_ROOT, at),
         "-e", "SCRY_SHIM=%s/usr/lib/scry/libscry-shim.so" % at])
    rc = c.wait(p, 60, "scry record in the container")
    log = c.proc_log(p)
    check(rc == 0, "scry record in the container: exit %s: %s" % (rc, st.short(log, 400)))
    cid = ENGINE.container_id(c)
    doc = st.load_json(out, "record --memory in the container")
    got = sum(l.get("net_mb", 0) for l in doc["lines"]
              if l["file"] == c.tpath(script) and l["line"] == 11) * (1 << 20)
    want = 1000 * 100033
    check(abs(got - want) <= 0.15 * want, "keep line: %.1f MB kept, truth %.1f MB: %s"
          % (got / 1e6, want / 1e6, st.short(log, 400)))
    check(("docker:%s" % cid[:12]) in log, "summary without the container: %s"
          % st.short(log, 400))
    return "keep line %.1f MB (truth %.1f MB); %s" % (
        got / 1e6, want / 1e6, st.short(log.strip().splitlines()[-1], 120))


def memory_attach(c, how):
    """record --memory --pid from the host into a Docker container (default capabilities
    and seccomp profile), the shim loaded by HOW (--inject): the 100 MB the program keeps
    after the shim is in are charged to the keeping line (within 15%), not to <unknown>
    (the shim validates its stack walks without process_vm_readv, which the profile refuses
    it), and the program lives on."""
    script = c.path("keep.py")
    with open(script, "w") as f:
        f.write(LAUNCH_KEEP)
    p = ENGINE.run(c, [EXE, c.tpath(script), 30])  # outlives the recording
    c.targets.append(("container", p))
    hpid = ENGINE.host_pid(c)
    # until the script runs (its frame in a dump): PEP 768 needs the interpreter's main
    # thread, which is set after the first thread state, just before the script starts
    d = st.Deadline(20)
    while not d.expired():
        r = c.scry(["dump", "--pid", hpid])
        if r.rc == 0 and "keep.py" in r.out:
            break
        time.sleep(0.1)
    out = c.path("attach.json")
    res = c.scry_ok(["record", "--memory", "--inject", how, "-d", "4", "-f", "json", "-o", out,
                     "--pid", hpid], timeout=60)
    c.release(p)
    doc = st.load_json(out, "record --memory --pid")
    got = sum(l.get("net_mb", 0) for l in doc["lines"]
              if l["file"] == c.tpath(script) and l["line"] == 11) * (1 << 20)
    unknown = sum(l.get("alloc_mb", 0) for l in doc["lines"] if l["file"] == "")
    want = 1000 * 100033
    check(abs(got - want) <= 0.15 * want, "keep line: %.1f MB kept, truth %.1f MB; "
          "<unknown> %.1f MB allocated: %s; the target: %s" % (
              got / 1e6, want / 1e6, unknown, st.short(res.err, 400),
              st.short(c.proc_log(p), 300)))
    check("shim attached by %s" % how in res.err, "not by %s: %s" % (how, st.short(res.err)))
    return "keep line %.1f MB (truth %.1f MB), <unknown> %.1f MB allocated" % (
        got / 1e6, want / 1e6, unknown)


@tests("memory_attach")
def t_memory_attach(c):
    """memory_attach by PEP 768 (3.14+'s default)."""
    return memory_attach(c, "remote-exec")


@tests("memory_attach_ptrace", once=True)
def t_memory_attach_ptrace(c):
    """memory_attach by ptrace (3.13 and older, remote debugging off): the borrowed thread,
    asleep in time.sleep, is given back at the marker syscall's exit stop; given back at its
    entry stop, the profile's seccomp filter (which refuses the skipped syscall -1 with
    ENOSYS) overwrote the restored rax and the program's sleep raised OSError ENOSYS (5 runs
    in 5)."""
    return memory_attach(c, "ptrace")


@tests("exec", once=True)
def t_exec(c):
    """The container's pid 1 execs a new Python program while recorded from the host: scry
    notices (the summary says it followed one exec), samples both programs' functions, and
    their CPU shares match the programs' own measures within 12 points."""
    c.hpid, truth = start_container(c, EXEC_WORK)
    # to the second program's exit: both programs whole, however slow a loaded machine is
    res, text = c.record(["-r", "200", "--pid", c.hpid], "collapsed", name="exec.txt",
                         timeout=90)
    c.wait(c.wrapper, 30, "container target")
    c.release(c.wrapper)
    own = st.load_json(c.out_path, "truth")
    check("followed 1 exec" in res.err, "the exec is noticed: %s" % st.short(res.err, 300))
    per = {"first_phase": 0, "second_phase": 0}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        for fn in per:
            if (";" + fn + " (") in (";" + stack):
                per[fn] += int(n)
    total = sum(per.values())
    check(per["first_phase"] > 0 and per["second_phase"] > 0, "both programs sampled: %s" % per)
    want = 100.0 * own["second_s"] / (own["first_s"] + own["second_s"])
    got = 100.0 * per["second_phase"] / total if total else 0
    check(abs(got - want) <= 12, "second program %.1f%% of the two, its own %.1f%%" % (got, want))
    return "followed the exec; second program %.1f%% (own %.1f%%)" % (got, want)


@tests("top", once=True)
def t_top(c):
    """scry top --once from the host on the container's target: its container shown in the
    header, the burner's two functions in the table with their shares near the truth."""
    c.hpid, truth = start_container(c)
    res = c.scry_ok(["top", "--once", "-d", "2", "--pid", c.hpid])
    stop_container(c)
    check(("in container docker:" + c.cid[:12]) in res.out.splitlines()[0],
          "the header names the container: %s" % res.out.splitlines()[:1])
    rows = {}
    for line in res.out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+[\d.]+%.*\s(burn_[ab]) \(", line)
        if m:
            rows[m.group(2)] = float(m.group(1))
    check(set(rows) == {"burn_a", "burn_b"}, "burn_a and burn_b listed: %s" % rows)
    tot = sum(rows.values())
    share = 100.0 * rows.get("burn_a", 0) / tot if tot else 0
    check(abs(share - 75) <= 12, "burn_a %.1f%% of the two (truth about 75%%)" % share)
    return "header %s; burn_a %.1f%% of the two" % (res.out.splitlines()[0][:80], share)


def collapsed_shares(path):
    """burn_a's share of burn_a + burn_b in a collapsed file (each stack counted for its
    leaf-most of the two), and their samples."""
    got = {"burn_a": 0, "burn_b": 0}
    with open(path) as f:
        for frames, n in st.parse_collapsed(f.read()):
            for fn in reversed(frames):
                if fn.split(" ")[0] in got:
                    got[fn.split(" ")[0]] += n
                    break
    tot = got["burn_a"] + got["burn_b"]
    return (100.0 * got["burn_a"] / tot if tot else 0.0), tot


def windows_share(out, wins):
    """burn_a's share of burn_a + burn_b over the collapsed files of windows WINS, and the
    samples of the two."""
    a = tot = 0
    for w in wins:
        f = (w.get("files") or {}).get("collapsed")
        if f and os.path.exists(os.path.join(out, f)):
            share, n = collapsed_shares(os.path.join(out, f))
            a += share * n / 100.0
            tot += n
    return (100.0 * a / tot if tot else 0.0), tot


def burner_samples(out, wins):
    return windows_share(out, wins)[1] if wins else 0


@tests("serve", once=True)
def t_serve(c):
    """scry serve on the host, selecting by container id (a 12-hex prefix): the
    containerised target is found, `scry ctl list` names its container, its windows carry
    the id (index.json, file names) and the burner's two functions keep their 75/25 share
    in the collapsed stacks; SIGTERM writes the last window and leaves the target running."""
    c.hpid, truth = start_container(c)
    out, sock = c.path("serve-out"), c.path("serve.sock")
    log = c.path("serve.log")
    d = c.spawn([c.scry_path, "serve", "--config", "/dev/null", "--out-dir", out, "--socket",
                 sock, "--interval", 2, "--rate", 97, "--container", c.cid[:12]],
                log_name="serve.log")

    def err():
        with open(log, "rb") as f:
            return st.short(f.read().decode("utf-8", "replace"), 600)
    # windows until they hold 1,000 samples of the burner: the daemon charges a thread's CPU
    # when a tick finds it on a CPU, in bunches (docs/daemon.md), so one 2-s window's share
    # of two functions that alternate every 24/8 ms varies by tens of points
    listed, wins = None, []
    deadline = st.Deadline(40)
    while not deadline.expired() and not (listed and burner_samples(out, wins) >= 1000):
        time.sleep(0.5)
        check(d.poll() is None, "scry serve exited: %s" % err())
        if not listed:
            r = subprocess.run([c.scry_path, "ctl", "--socket", sock, "--json", "list"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            try:
                ts = json.loads(r.stdout.decode() or "{}").get("targets", [])
            except ValueError:
                ts = []
            listed = [t for t in ts if t.get("pid") == c.hpid] or None
        if os.path.exists(os.path.join(out, "index.json")):
            wins = [w for w in st.load_json(os.path.join(out, "index.json"),
                                            "index.json")["windows"] if w.get("samples")]
    os.kill(d.pid, 15)
    c.wait(d, 30, "scry serve")
    check(listed, "ctl list never showed pid %d: %s" % (c.hpid, err()))
    check(c.cid[:12] in json.dumps(listed[0]), "ctl list: no container id in %s" % listed[0])
    check(wins, "no window with samples within 30 s: %s" % err())
    w = max(wins, key=lambda x: x["samples"])
    check(w.get("container", "").startswith(c.cid[:12]), "window's container %r, want %s"
          % (w.get("container"), c.cid[:12]))
    files = w.get("files") or {}
    check(set(files) >= {"collapsed", "svg", "pb.gz"} and
          all(c.cid[:12] in f and os.path.exists(os.path.join(out, f)) for f in files.values()),
          "the window's files lack the container id or are missing: %s" % files)
    coll = [files["collapsed"]]
    share, n = windows_share(out, wins)
    check(n >= 40, "only %d samples of burn_a/burn_b in %d windows" % (n, len(wins)))
    check(abs(share - 75) <= 15, "burn_a %.1f%% of the two in the window (truth about 75%%)"
          % share)
    states = st.task_states(c.hpid)
    check(states and not any(x in "tTZX" for x in states.values()),
          "the target after the daemon's exit: %s" % states)
    stop_container(c)
    return "pid %d in %s: %d windows (the fullest %s), %d samples, burn_a %.1f%% of the two" % (
        c.hpid, w.get("container", "")[:12], len(wins), coll[0], n, share)


@tests("cgroup_v2_scope", once=True)
def t_cgroup_v2_scope(c):
    """Emulated, the one case the engine here cannot make: Docker's systemd cgroup driver
    on a cgroup v2 host puts a container in .../docker-<id>.scope (this engine runs the
    cgroupfs driver on a v1 host: /docker/<id>). The target in such a group (unshare +
    chroot): the id is found there, dump maps its threads, --container finds it."""
    cg = needs("v2")
    c.hpid, truth = start_emulated(c, cg)
    detail = dump_checks(c, c.hpid, truth, CG.id2)
    res = c.scry_ok(["dump", "--json", "--container", CG.id2[:12]])
    docs = json.loads(res.out)
    check([d["pid"] for d in docs] == [c.hpid], "--container %s: %s" % (
        CG.id2[:12], [d.get("pid") for d in docs]))
    cgpath = "/" + os.path.relpath(cg, mount_of(cg))
    check(docs[0].get("container", {}).get("cgroup") == cgpath, "cgroup %r, want %s"
          % (docs[0].get("container"), cgpath))
    stop_emulated(c)
    return "%s; id from %s" % (detail, cgpath)


@tests("memory_tids")
def t_memory_tids(c):
    """record --memory from the host: the shim records the container's thread ids; the
    profile shows every thread by its host tid, the burner's memory samples on the same
    thread entry as its CPU samples (no second entry under its own tid)."""
    c.hpid, truth = start_container(c)
    res, text = c.record(["-d", "2", "--memory", "--pid", c.hpid], "json", name="mem.json")
    doc = json.loads(text)
    m = nspid_map(c.hpid)
    threads = doc.get("threads", [])
    mem = [(t["tid"], t.get("name"), t.get("memory_samples", 0)) for t in threads
           if t.get("memory_samples", 0) > 0]
    check(mem, "no thread with memory samples: %s" % st.short(res.err, 300))
    check(all(tid in m.values() for tid, _, _ in mem),
          "memory samples under tids %s, want host tids %s" % (mem, sorted(m.values())))
    burner = [t for t in threads if t["tid"] == m[truth["tids"]["burner"]]]
    check(burner and burner[0].get("samples", 0) > 0 and burner[0].get("memory_samples", 0) > 0,
          "burner %d: %s" % (m[truth["tids"]["burner"]], burner))
    return "memory samples per host tid: %s" % ", ".join("%d %s: %d" % x for x in mem)


def scry_inside(c, hpid, args, timeout=None):
    """Runs scry ARGS inside the target's PID and network namespaces with that namespace's
    own /proc (as scry installed in the image sees it: `nsenter --pid --net`, then a private
    mount namespace with a fresh /proc), the host's file system otherwise and all
    capabilities: Result."""
    args = [str(a) for a in args]
    inner = 'mount -t proc proc /proc && exec "$@"'
    cmd = ["nsenter", "--target", str(hpid), "--pid", "--net", "--", "unshare", "--mount",
           "--fork", "sh", "-c", inner, "sh", c.scry_path] + args
    p = c.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.scry_args = ["(inside)"] + args
    return c.scry_finish(p, timeout)


@tests("inside")
def t_inside(c):
    """scry inside the container (its PID namespace and /proc, CAP_SYS_PTRACE): the target
    is pid 1 and its threads have their own tids only; dump --json (names, idle flags,
    --native frames named, the container), top (the container in its header), record
    --memory (samples under the container's tids), every format naming the container and
    record, --native and --blocking (CPU shares, exact lines)."""
    c.hpid, truth = start_container(c)
    res = scry_inside(c, c.hpid, ["dump", "--json", "--native", "--pid", "1"])
    check(res.rc == 0, str(res))
    doc = json.loads(res.out)
    check(doc.get("pid") == 1 and doc.get("ns_pid") in (None, 1), "dump pid %r ns_pid %r"
          % (doc.get("pid"), doc.get("ns_pid")))
    ctr = doc.get("container") or {}
    check(ctr.get("id") == c.cid and ctr.get("runtime") == "docker",
          "dump container %r, want docker %s" % (ctr, c.cid))
    by_name = dict((t["name"], t) for t in doc["threads"])
    for name, own in truth["tids"].items():
        t = by_name.get(name)
        check(t is not None and t["tid"] == own and t.get("ns_tid") in (None, own),
              "thread %s: %r, want tid %d" % (name, t and (t["tid"], t.get("ns_tid")), own))
    check(by_name["napper"]["state"] == "idle", "napper %s" % by_name["napper"]["state"])
    nat = [f for f in by_name["napper"]["frames"] if f["kind"] == "native"
           and f["file"] == "libc.so.6" and not f["function"].startswith("??")]
    check(nat, "no libc.so.6 frame named: %s" % by_name["napper"]["frames"][:6])
    # top: its header names the container; the burner's two functions in the table
    res = scry_inside(c, c.hpid, ["top", "--once", "-d", "2", "--pid", "1"])
    check(res.rc == 0 and ("in container docker:" + c.cid[:12]) in res.out.splitlines()[0],
          "top inside: %s" % st.short(res.out or str(res), 300))
    check("burn_a" in res.out and "burn_b" in res.out, "top inside: no burn_a/burn_b rows")
    # --memory: the shim loaded into pid 1 from inside; samples under its own tids
    mem = c.path("inside-mem.json")
    res = scry_inside(c, c.hpid, ["record", "-d", "2", "--memory", "--format", "json", "-o",
                                  mem, "--pid", "1"])
    check(res.rc == 0, str(res))
    mdoc = st.load_json(mem, "record --memory inside")
    mthreads = [(t["tid"], t.get("memory_samples", 0)) for t in mdoc.get("threads", [])
                if t.get("memory_samples", 0) > 0]
    own = set(truth["tids"].values())
    check(mthreads and all(tid in own for tid, _ in mthreads),
          "memory samples under tids %s, want the container's own %s: %s"
          % (mthreads, sorted(own), st.short(res.err, 300)))
    def record_inside(args):
        r = scry_inside(c, c.hpid, ["record", "-q"] + args)
        check(r.rc == 0, str(r))
    format_checks(c, record_inside, 1, "inside")
    runs = []
    for extra in ([], ["--native"], ["--blocking"]):
        out = c.path("inside%d.json" % len(runs))
        res = scry_inside(c, c.hpid, ["record", "-d", "2", "-r", "250", "--format", "json",
                                      "-o", out, "--pid", "1"] + extra)
        check(res.rc == 0, str(res))
        check(("in container docker:%s" % c.cid[:12]) in res.err,
              "summary without the container: %s" % st.short(res.err, 300))
        what = "inside " + " ".join(extra)
        runs.append((what, res, shares_of(what, st.load_json(out, what), truth["lines"])))
    want = st.shares(stop_container(c)["cpu_s"], ("burn_a", "burn_b"))
    details = []
    for what, res, (got, n) in runs:
        check(n >= 20, "%s: %d samples on the burn lines (want >= 20): %s"
              % (what, n, st.short(res.err, 300)))
        details.append(st.compare_shares(st.shares(got, ("burn_a", "burn_b")), want, n,
                                         what.strip(), SHARE_TOL))
    return "; ".join(details)


MANIFESTS = os.path.join(engines.REPO, "dist", "kubernetes")


def debug_recipe():
    """dist/kubernetes/scry-debug.yaml: the sidecar's image, capabilities and commands."""
    doc = miniyaml.load_file(os.path.join(MANIFESTS, "scry-debug.yaml"))
    check(doc.get("shareProcessNamespaceWith") == "target", "scry-debug.yaml: %s" % doc)
    caps = ["--cap-add=%s" % x for x in doc["capabilities"]["add"]]
    return doc["image"], caps, doc["commands"]


def sidecar(c, app, argv, name, caps=None):
    """Runs ARGV in scry's image as a sidecar of container APP, the way the recipe says
    (its PID namespace, its capabilities unless CAPS): (exit status, its standard output,
    or its standard error after a failure)."""
    image, recipe_caps, _ = debug_recipe()
    p = ENGINE.run(c, argv, ["--pid=container:%s" % app] + (
        recipe_caps if caps is None else caps), image=image, name=name, stdout=True)
    rc = c.wait(p, 60, "the sidecar %s" % name)
    with open(p.out_path if rc == 0 else p.log_path, "rb") as f:
        return rc, f.read().decode("utf-8", "replace")


@tests("sidecar", once=True)
def t_sidecar(c):
    """scry:local as a sidecar (`docker run --pid=container:APP --cap-add SYS_PTRACE
    scry:local scry dump|record|top --pid 1`, the commands of
    dist/kubernetes/scry-debug.yaml): the dump names APP's container and threads; record's
    burn_a/burn_b shares and lines match the target's own truth; top lists both."""
    c.hpid, truth = start_container(c)
    app = c.cid
    _, _, cmds = debug_recipe()
    rc, out = sidecar(c, app, cmds["dump"], "dump")
    check(rc == 0 and ("Container docker %s" % app) in out and '"napper"' in out
          and '"burner"' in out, "dump: exit %s: %s" % (rc, st.short(out, 500)))
    rc, out = sidecar(c, app, cmds["record"], "record")
    check(rc == 0, "record: exit %s: %s" % (rc, st.short(out, 500)))
    doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
    check((doc["target"].get("container") or {}).get("id") == app,
          "record: target %s" % doc["target"])
    rec = shares_of("sidecar record", doc, truth["lines"])
    rc, top = sidecar(c, app, cmds["top"], "top")
    check(rc == 0 and ("in container docker:" + app[:12]) in top and "burn_a" in top,
          "top: exit %s: %s" % (rc, st.short(top, 400)))
    want = st.shares(stop_container(c)["cpu_s"], ("burn_a", "burn_b"))
    got, n = rec
    check(n >= 20, "record: %d samples on the burn lines" % n)
    return st.compare_shares(st.shares(got, ("burn_a", "burn_b")), want, n, "sidecar record",
                             SHARE_TOL)


@tests("sidecar_nocap", once=True)
def t_sidecar_nocap(c):
    """The sidecar without any added capability (Docker's defaults on both sides, no
    Yama): the seccomp profile refuses process_vm_readv, and scry reads /proc/PID/mem, which
    the kernel's ptrace check allows between containers of the same user and capabilities:
    dump names APP's threads; record's hottest lines are burn_a's and burn_b's marked ones
    and their shares match the truth."""
    c.hpid, truth = start_container(c)
    _, _, cmds = debug_recipe()
    rc, out = sidecar(c, c.cid, cmds["dump"], "dump", caps=[])
    check(rc == 0 and '"burner"' in out and '"napper"' in out,
          "dump: exit %s: %s" % (rc, st.short(out, 500)))
    rc, out = sidecar(c, c.cid, cmds["record"], "record", caps=[])
    check(rc == 0, "record: exit %s: %s" % (rc, st.short(out, 500)))
    doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
    got, n = shares_of("sidecar record", doc, truth["lines"])
    want = st.shares(stop_container(c)["cpu_s"], ("burn_a", "burn_b"))
    check(n >= 20, "record: %d samples on the burn lines" % n)
    return st.compare_shares(st.shares(got, ("burn_a", "burn_b")), want, n,
                             "no capability", SHARE_TOL)


@tests("sidecar_memory", once=True)
def t_sidecar_memory(c):
    """scry:local as a sidecar, `scry record --memory -d 5 -f json -o - --pid 1` (the
    recipe's memory command): the shim, staged from scry's image into APP's root, charges
    the 100 MB APP keeps to the keeping line (within 15%). APP outlives the recording: when
    the pid 1 of a PID namespace exits, the kernel kills the sidecar's scry in it too."""
    script = c.path("keep.py")
    with open(script, "w") as f:
        f.write(LAUNCH_KEEP)
    p = ENGINE.run(c, [EXE, c.tpath(script), 60])
    c.targets.append(("container", p))
    ENGINE.host_pid(c)
    _, _, cmds = debug_recipe()
    rc, out = sidecar(c, c.cid, cmds["memory"], "memory")
    c.release(p)
    check(rc == 0, "record --memory: exit %s: %s" % (rc, st.short(out, 500)))
    doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
    got = sum(l.get("net_mb", 0) for l in doc["lines"]
              if l["file"] == c.tpath(script) and l["line"] == 11) * (1 << 20)
    want = 1000 * 100033
    check(abs(got - want) <= 0.15 * want, "keep line: %.1f MB kept, truth %.1f MB"
          % (got / 1e6, want / 1e6))
    return "keep line %.1f MB (truth %.1f MB)" % (got / 1e6, want / 1e6)


def agent_spec():
    """The DaemonSet of dist/kubernetes/scry-daemonset.yaml as Docker run options: hostPID
    as --pid=host, its capabilities, its hostPath volumes (host path, mount path) and its
    command with arguments."""
    ds = miniyaml.load_file(os.path.join(MANIFESTS, "scry-daemonset.yaml"))
    check(ds.get("kind") == "DaemonSet", "scry-daemonset.yaml: kind %r" % ds.get("kind"))
    pod = ds["spec"]["template"]["spec"]
    check(pod.get("hostPID") is True, "the DaemonSet is not hostPID")
    ctr = pod["containers"][0]
    caps = ctr["securityContext"]["capabilities"]
    opts = ["--pid=host"] + ["--cap-drop=%s" % x for x in caps.get("drop", [])] + [
        "--cap-add=%s" % x for x in caps.get("add", [])]
    vols = dict((v["name"], v["hostPath"]["path"]) for v in pod["volumes"])
    mounts = [(vols[m["name"]], m["mountPath"]) for m in ctr["volumeMounts"]]
    return ctr["image"], opts, mounts, ctr["command"] + ctr["args"]


@tests("agent", once=True)
def t_agent(c):
    """scry:local as the host agent: `docker run -d` with the DaemonSet's options
    (--pid=host, --cap-drop=ALL --cap-add=SYS_PTRACE: the least that works, see agent_caps;
    its two hostPath volumes, here in the test's directory) and its command (scry serve
    --out-dir /var/lib/scry --socket /run/scry/scry.sock), narrowed for the test with
    --container APP --interval 2 --rate 97 (on a shared machine it must not profile the
    other Pythons). The windows of APP carry APP's id (index.json, file names); `scry ctl
    list` from the host over the socket in the ctl volume names it; burn_a's 75% share."""
    c.hpid, truth = start_container(c)
    app = c.cid
    image, opts, mounts, argv = agent_spec()
    vols, host_of = [], {}
    for host, at in mounts:
        d = c.path("hostpath" + host.replace("/", "-"))
        os.mkdir(d)
        host_of[at] = d
        vols += ["-v", "%s:%s" % (d, at)]
    check(set(host_of) == {"/var/lib/scry", "/run/scry"}, "mounts %s" % mounts)
    sock_at = argv[argv.index("--socket") + 1]
    out_at = argv[argv.index("--out-dir") + 1]
    sock = os.path.join(host_of[os.path.dirname(sock_at)], os.path.basename(sock_at))
    out = host_of[out_at]
    agent = ENGINE.run(c, argv + ["--container", app[:12], "--interval", 2, "--rate", 97],
                       opts + vols, image=image, name="agent")
    listed, wins = None, []
    d = st.Deadline(30)
    while not d.expired() and not (listed and wins and wins[-1]["samples"] >= 100):
        time.sleep(0.5)
        check(agent.poll() is None, "the agent exited: %s" % st.short(c.proc_log(agent), 500))
        if not listed and os.path.exists(sock):
            r = c.scry(["ctl", "--socket", sock, "--json", "list"])
            try:
                ts = json.loads(r.out or "{}").get("targets", [])
            except ValueError:
                ts = []
            listed = [t for t in ts if app[:12] in json.dumps(t)] or None
        if os.path.exists(os.path.join(out, "index.json")):
            wins = [w for w in st.load_json(os.path.join(out, "index.json"),
                                            "index.json")["windows"] if w.get("samples")]
    check(listed, "ctl list never showed APP's container: %s" % st.short(c.proc_log(agent), 500))
    text = c.scry_ok(["ctl", "--socket", sock, "list"]).out  # as docs/containers.md shows it
    check(app[:12] in text, "ctl list: no %s in %s" % (app[:12], st.short(text, 300)))
    check(wins, "no window within 30 s: %s" % st.short(c.proc_log(agent), 500))
    w = max(wins, key=lambda x: x["samples"])
    files = w.get("files") or {}
    check(w.get("container") == app and files and all(
        app[:12] in f and os.path.exists(os.path.join(out, f)) for f in files.values()),
        "window %s: container %r, files %s" % (w.get("from"), w.get("container"), files))
    share, n = collapsed_shares(os.path.join(out, files["collapsed"]))
    check(n >= 40 and abs(share - 75) <= 15, "burn_a %.1f%% of %d samples (truth about 75%%)"
          % (share, n))
    ENGINE.out("stop", "-t", "10", ENGINE.container_id(c, agent.cidfile))
    c.wait(agent, 20, "the agent")
    states = st.task_states(c.hpid)
    check(states and not any(x in "tTZX" for x in states.values()),
          "APP after the agent stopped: %s" % states)
    stop_container(c)
    return "%s %s; window %s: %d samples, burn_a %.1f%%" % (
        image, " ".join(opts), os.path.basename(files["collapsed"]), n, share)


@tests("agent_caps", once=True)
def t_agent_caps(c):
    """The agent's capability set is the least: without SYS_PTRACE (--cap-drop=ALL
    alone, the DaemonSet's set less its one addition) scry in the host's PID namespace is
    refused a container's process, with a message naming the capability and a non-zero
    exit."""
    c.hpid, truth = start_container(c)
    image, opts, _, _ = agent_spec()
    less = [o for o in opts if not o.startswith("--cap-add=")]
    check(len(less) == len(opts) - 1, "the DaemonSet adds one capability: %s" % opts)
    p = ENGINE.run(c, ["scry", "dump", "--pid", c.hpid], less, image=image, name="nocap")
    rc = c.wait(p, 60, "scry without SYS_PTRACE")
    log = c.proc_log(p)
    check(rc != 0 and "CAP_SYS_PTRACE" in log, "without SYS_PTRACE: exit %s: %s"
          % (rc, st.short(log, 300)))
    stop_container(c)
    return "%s: %s" % (" ".join(less), st.short(log.strip(), 160))


ROOTLESS = """import os, struct, sys, threading, time
def nap():
    while True:
        time.sleep(0.2)
threading.Thread(target=nap, name="napper", daemon=True).start()
def ring_on():
    # the start address of scry's ring while one is enabled in this process, else None
    try:
        with open("/proc/self/maps") as f:
            starts = [int(ln.split("-")[0], 16) for ln in f if "memfd:scry-ring" in ln]
        with open("/proc/self/mem", "rb", 0) as m:
            for a in starts:
                m.seek(a + 264)
                if struct.unpack("<I", m.read(4))[0] == 1:
                    return a
    except (OSError, ValueError):
        pass
    return None
def save(sessions):
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write("[%s]" % ", ".join("%d" % n for n in sessions))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
def churn():
    # truth: the bytes this line allocates while each session's ring is enabled (looked at
    # every 10 allocations)
    keep, sessions, ring, i = [], [], None, 0
    t0 = time.time()
    while time.time() - t0 < 120:
        if i % 10 == 0:
            now = ring_on()
            if now != ring and ring is not None:
                save(sessions)
            if now is not None and now != ring:
                sessions.append(0)
            ring = now
        i += 1
        keep.append(bytes(100000))  #@churn@
        if ring is not None:
            sessions[-1] += sys.getsizeof(keep[-1])
        if len(keep) > 200:
            del keep[:100]
        time.sleep(0.002)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write('{"pid": %d}' % os.getpid())
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
churn()
"""


def as_user(c, uid, args):
    """scry ARGS run as UID and its primary group (or gid UID without a passwd entry; no
    capabilities, no other groups): Result."""
    args = [str(a) for a in args]
    try:
        gid = pwd.getpwuid(uid).pw_gid
    except KeyError:
        gid = uid
    q = c.spawn(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                 c.scry_path] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    q.scry_args = ["(as %d)" % uid] + args
    return c.scry_finish(q)


@tests("rootless", once=True)
def t_rootless(c):
    """A rootless podman container (podman run as an unprivileged user with its own
    subordinate ids: the target's root is that user in a user namespace). Host root dumps
    it, and the user with its own scry (no capabilities); another unprivileged user (65533)
    is refused with a message naming the missing privilege and a non-zero exit, for dump
    and record; record --memory into it by root, then by the user: each session's churning
    line has the bytes the program counted while that session's ring was enabled (within
    15%), every allocating line is the program's (none of scry's script, none on
    <unknown>), and the target maps one shim."""
    if PODMAN is None:
        raise Skip(PODMAN_SKIP)
    script = c.path("rootless.py")
    with open(script, "w") as f:
        f.write(ROOTLESS)
    ready, truth = c.path("ready.json"), c.path("truth.json")
    p = PODMAN.run(c, [EXE, c.tpath(script), c.tpath(ready), c.tpath(truth)],
                   name="rootless-%s" % c.key.decode())
    c.targets.append(("rootless", p))
    c.wait_json(ready, p, "rootless target")
    # the container's pid 1 by its host pid: the process whose NSpid ends in 1 and whose
    # command line names the test's script (podman's conmon is its parent)
    hpid = None
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if c.tpath(script).encode() not in f.read():
                    continue
            with open("/proc/%s/status" % d) as f:
                nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
        except (OSError, IndexError):
            continue
        if len(nspid) > 1 and nspid[-1] == "1":
            hpid = int(d)
    check(hpid, "no pid 1 of the rootless container found")
    owner = PODMAN.uid
    for who, uid in (("root", None), ("the owner %d" % owner, owner)):
        args = ["dump", "--json", "--pid", hpid]
        res = c.scry(args) if uid is None else as_user(c, uid, args)
        check(res.rc == 0, "%s: %s" % (who, res))
        doc = json.loads(res.out)
        names = dict((t["name"], t) for t in doc["threads"])
        m = nspid_map(hpid)
        nap = names.get("napper") or {}
        check(doc.get("ns_pid") == 1 and nap.get("ns_tid", 0) > 1
              and m.get(nap["ns_tid"]) == nap["tid"] != nap["ns_tid"],
              "%s: ns_pid %r threads %r" % (who, doc.get("ns_pid"),
                                            [(t["name"], t["tid"], t.get("ns_tid"))
                                             for t in doc["threads"]]))
    os.mkdir(c.path("out"))
    os.chmod(c.path("out"), 0o777)  # the output may be written: only the target is refused
    mem = []
    for n, (who, uid) in enumerate((("root", None), ("the owner", owner))):
        out = c.path("out/mem-%s.json" % (uid or 0))
        # every 100 kB allocation sampled (16 KiB mean): the bytes of a 3-s session are
        # known to a few percent however few the load leaves
        args = ["record", "-d", "3", "--memory", "--memory-sample-bytes", "16384", "-f",
                "json", "-o", out, "--pid", hpid]
        res = c.scry(args) if uid is None else as_user(c, uid, args)
        check(res.rc == 0, "%s: record --memory: %s" % (who, res))
        doc = st.load_json(out, "record --memory by %s" % who)
        # every allocating line is the program's: none of scry's script (the first session
        # loads the shim by PEP 768; the owner's, without CAP_SYS_ADMIN to read the deleted
        # copy, finds the same shim by scry's own file's build-id and its script calls it
        # there: no second shim)
        lines = [l for l in doc["lines"] if l.get("alloc_mb", 0) > 0]
        foreign = [(l["file"], l["line"], l["alloc_mb"]) for l in lines
                   if l["file"] != c.tpath(script)]
        check(not foreign, "%s: lines not the program's: %s" % (who, foreign[:5]))
        check("shim attached by remote-exec" in res.err, "%s: the shim not reached by "
              "remote-exec: %s" % (who, st.short(res.err, 300)))
        # (ring_on and save are the truth's own bookkeeping)
        tot = sum(l["alloc_mb"] for l in lines if l["function"] not in ("ring_on", "save"))
        on = sum(l["alloc_mb"] for l in lines if l["function"] == "churn")
        check(on > 5 and on >= 0.9 * tot, "%s: churn %.1f of %.1f MB allocated: %s"
              % (who, on, tot, [(l["file"], l["line"], l["alloc_mb"]) for l in lines][:5]))
        # the bytes the churning line allocated while this session's ring was enabled
        d = st.Deadline(5)
        while not d.expired() and len(st.load_json(truth, "truth") if os.path.exists(truth)
                                       else []) <= n:
            time.sleep(0.1)
        want = st.load_json(truth, "the rootless target's truth")
        check(len(want) > n, "%s: the target saw %d sessions" % (who, len(want)))
        mem.append("%s %s" % (who, st.within(on, want[n] / float(1 << 20), 0.15, "churn")))
        # the shim's private copy (made as the owner where host root owns nothing) is gone
        left = [x for x in os.listdir("/proc/%d/root/tmp" % hpid) if x.startswith(".scry-shim")]
        check(not left, "%s: left in the container's /tmp: %s" % (who, left))
    with open("/proc/%d/maps" % hpid) as f:
        shims = set(ln.split()[5] for ln in f if "libscry-shim.so" in ln)
    check(len(shims) == 1, "the target maps %d shims: %s" % (len(shims), sorted(shims)))
    msgs = []
    for args in (["dump", "--pid", hpid], ["record", "-d", "1", "-o", c.path("out/no.json"),
                                           "--format", "json", "--pid", hpid]):
        res = as_user(c, 65533, args)
        check(res.rc != 0 and not res.out.strip(), "as 65533: %s" % res)
        check("CAP_SYS_PTRACE" in res.err and "user namespace" in res.err
              and str(owner) in res.err, "as 65533, no clear message: %s" % res)
        msgs.append(res.err.strip().splitlines()[0])
    PODMAN.stop(c, p)
    return "churn line: %s; one shim; refused: %s" % ("; ".join(mem), st.short(msgs[0], 200))


def main():
    global CG
    global EXE
    ap = st.add_common_args(st.runner.parser(__doc__))
    ap.add_argument("--python", default="3.14", choices=LABELS, help="sid's interpreter")
    a = ap.parse_args()
    EXE = "python" + a.python
    # the cases that do not depend on the interpreter's version (scry's image, the
    # engine's and the daemon's side, formats) run with 3.14 only: CI keeps its hour
    sel = tests.select(a.k, lambda t: a.python == "3.14" or not t.meta.get("once"))
    if os.geteuid() != 0:
        return st.skip_all("containers", "needs root (namespaces, cgroups, chroot)", len(sel))
    if not shutil.which("unshare"):
        return st.skip_all("containers", "no unshare (util-linux)", len(sel))
    try:
        interp = st.find(a.python)
    except Skip as e:
        return st.skip_all("containers", "%s: %s" % (a.python, e), len(sel))
    probe = subprocess.run(["unshare", "--pid", "--mount", "--uts", "--ipc", "--net", "--fork",
                            "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if probe.returncode != 0:
        return st.skip_all("containers", "unshare cannot make namespaces here: %s"
                           % probe.stdout.decode("utf-8", "replace").strip(), len(sel))
    global ENGINE, IMAGE_ROOT, PODMAN, PODMAN_SKIP
    ENGINE = engines.Docker()
    try:
        ENGINE.start()
    except Skip as e:
        return st.skip_all("containers", "the Docker engine cannot run here: %s" % e, len(sel))
    try:
        ENGINE.image("scry-sid", interp.root)
        # scry's own image (its root is mounted into containers to launch scry there)
        build = os.path.dirname(os.path.dirname(os.path.abspath(a.scry)))
        subprocess.run([os.path.join(engines.REPO, "scripts", "docker-image.sh"), build],
                       check=True, stdout=subprocess.DEVNULL, env=ENGINE.env(os.environ))
        IMAGE_ROOT = os.path.join(build, "docker-image", "rootfs")
        if any(t.name == "rootless" for t in sel):
            try:
                PODMAN = engines.Podman()
                PODMAN.setup("scry-sid", interp.root)
            except Skip as e:
                PODMAN, PODMAN_SKIP = None, str(e)
        CG = Cgroups()
        try:
            return st.run(sel, lambda t: st.Ctx(t.name, interp=interp,
                                                scry=os.path.abspath(a.scry), verbose=a.v,
                                                prefix="scry-ctr"),
                          "containers", verbose=a.v)
        finally:
            CG.remove()
    finally:
        ENGINE.stop()


if __name__ == "__main__":
    sys.exit(main())
