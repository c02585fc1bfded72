#!/usr/bin/env python3
"""scry serve's windows against the truth of services whose threads mostly wait.

Tests (PASS/FAIL/SKIP name: detail; the run ends with `N passed, N failed, N skipped`):
  pool      two 16-worker thread-pool services (workloads/pool.py: parse, digest,
            main_work, each timed by its own thread CPU clock), one at the default 19 Hz
            and one whose rule says `rate = 99`, and a 100-thread service with 5 busy
            threads (busy0..busy4), in 4-s windows of three daemons reading them at once,
            one with each back end (`--sampler perf`, `ptrace`, `bpf`; the bpf one is not
            judged, and the detail says why, where BPF cannot be loaded): every function's share
            of the samples within 6 points of its share of the process's CPU (or 3
            standard errors when the windows hold too few samples for 6), waiting lines
            (threading, queue, the pool's _worker) under 5% of the samples (plus 2 standard
            errors), `scry record --pid` on the 19 Hz pool within 5 points of serve, and the
            99 Hz windows' rate_hz 99 (window JSON, index.json); a service on less than 30%
            of a CPU (an overloaded host) SKIPs instead of failing
  set_rate  `scry ctl set-rate PID 97`, then two full windows (up to five, until they hold
            0.6 s of the service's CPU): samples per CPU second within 20% of 97 and rate_hz
            97; then `set-rate PID 5`: the same at 5 Hz; with the default back end and, by a
            second daemon at the same time, bpf (where it can be loaded)
About 55 s. Needs root (the daemon reads every process); otherwise SKIP serve-truth.
"""
import math
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check, short  # noqa: E402

sys.path.insert(0, HERE)
from run import Daemon, ctl_json, read_index  # noqa: E402

POOL = os.path.join(HERE, "workloads", "pool.py")
SVC = os.path.join(HERE, "workloads", "svc.py")
TOKEN = "scrytruth%d" % os.getpid()
WAIT_FILES = ("threading.py", "queue.py", "thread.py")
BACKENDS = ("perf", "ptrace", "bpf")  # the daemon's --sampler
tests = st.Tests()


def classify(frames, names):
    """The innermost frame of STACK (root first) whose function is one of NAMES, or
    'wait' for a stack whose leaf is a waiting line, or 'other'."""
    for f in reversed(frames):
        fn = f.split(" ")[0]
        if fn in names:
            return fn
    leaf = frames[-1] if frames else ""
    m = re.search(r"\(([^():]*):\d+\)$", leaf)
    if m and os.path.basename(m.group(1)) in WAIT_FILES:
        return "wait"
    return "other"


def count(paths, names):
    c = {}
    for p in paths:
        with open(p) as f:
            for frames, n in st.parse_collapsed(f.read()):
                k = classify(frames, names)
                c[k] = c.get(k, 0) + n
    return c


def truth_between(path, t0, t1, names):
    """{name: share of the process's CPU} from the workload's history between unix t0, t1."""
    h = st.load_json(path, "truth")["history"]
    a = min(h, key=lambda e: abs(e[0] - t0))
    b = min(h, key=lambda e: abs(e[0] - t1))
    cpu = b[1] - a[1]
    check(cpu > 0.05, "the workload used %.3f s of CPU from %d to %d" % (cpu, t0, t1))
    return dict((k, (b[2].get(k, 0) - a[2].get(k, 0)) / cpu) for k in names), cpu / (b[0] - a[0])


MIN_ON_CPU = 0.3  # a service on less of a CPU than this (an overloaded host): misses SKIP


def check_shares(what, c, truth, on_cpu, overloaded, tol=6.0):
    """Checks the shares of C (samples per function) against TRUTH; a miss of a service on
    less than MIN_ON_CPU of a CPU is appended to OVERLOADED instead of failing."""
    try:
        return _check_shares(what, c, truth, tol)
    except Fail as e:
        if on_cpu >= MIN_ON_CPU:
            raise
        overloaded.append(str(e))
        return "%s: overloaded" % what


def _check_shares(what, c, truth, tol):
    n = sum(c.values())
    check(n >= 30, "%s: only %d samples: %s" % (what, n, c))
    out = []
    for k, want in sorted(truth.items()):
        got = c.get(k, 0) / float(n)
        # samples come in bunches (the records a thread carried until a tick found it on a
        # CPU): half as many independent ones
        sd = 100 * math.sqrt(max(want * (1 - want), 0.01) / (n / 2.0))
        lim = max(tol, 3 * sd)
        check(abs(100 * (got - want)) <= lim, "%s: %s %.1f%% of %d samples vs truth %.1f%% (limit "
              "%.1f points): %s" % (what, k, 100 * got, n, 100 * want, lim, c))
        out.append("%s %.1f/%.1f" % (k, 100 * got, 100 * want))
    wait = c.get("wait", 0) / float(n)
    wlim = 0.05 + 2 * math.sqrt(0.05 * 0.95 / (n / 2.0))
    check(wait < wlim, "%s: waiting lines %.1f%% of %d samples (limit %.1f%%): %s" % (
        what, 100 * wait, n, 100 * wlim, c))
    return "%s (%d samples, waiting %.1f%%): %s" % (what, n, 100 * wait, ", ".join(out))


def start(ctx, script, name, *extra):
    ready = ctx.path("ready-%s.json" % name)
    p = ctx.spawn([sys.executable, script, "--name", "%s-%s" % (TOKEN, name), "--ready", ready]
                  + list(extra))
    ctx.wait_json(ready, p, "workload " + name)
    ctx.targets.append((name, p))
    return p


def bpf_refused(dm, pid):
    """Why daemon DM (`--sampler bpf`) samples target PID with another back end (it logs
    the kernel's refusal, then its fallback), or None: it reads it with bpf."""
    _, l = dm.wait_line(r"target %d: (sampler = bpf refused|[^ ]+, Python)" % pid, 30)
    if "refused" not in l:
        return None
    why = re.search(r"scry: --sampler bpf: (.*)", dm.text())
    return why.group(1) if why else l


def windows_of(out, service, after):
    ws = [w for w in read_index(out) if w["service"] == service and w["from"] >= after]
    ws.sort(key=lambda w: w["from"])
    return ws


@tests("pool")
def t_pool(ctx):
    names = {"pool": ("parse", "digest", "main_work"),
             "many": tuple("busy%d" % k for k in range(5))}
    truths = {}
    for svc, mode in (("pool19", "pool"), ("pool99", "pool"), ("many", "many")):
        truths[svc] = ctx.path("truth-%s.json" % svc)
        start(ctx, POOL, svc, "--mode", mode, "--truth", truths[svc])
    pid19 = [p for n, p in ctx.targets if n == "pool19"][0].pid
    conf = ctx.path("scry.conf")
    with open(conf, "w") as f:
        f.write("interval = 4\nrate = 19\n")
        for svc in ("pool19", "pool99", "many"):
            f.write("\n[service %s]\nmatch = --name %s-%s( |$)\n%s" % (
                svc, TOKEN, svc, "rate = 99\n" if svc == "pool99" else ""))
    outs = []
    for backend in BACKENDS:  # both daemons sample the same services at the same time
        o, so = ctx.path("out-" + backend), ctx.path("scry-%s.sock" % backend)
        dm = Daemon(ctx, ["--config", conf, "--out-dir", o, "--socket", so, "--match", TOKEN,
                          "--sampler", backend])
        outs.append((backend, o, dm))
    for _, _, dm in outs:
        dm.wait_line(r"target %d:" % pid19, 30)
    details, overloaded, failed = [], [], []
    why = bpf_refused(outs[-1][2], pid19)
    if why:  # judged where BPF can be loaded only
        details.append("bpf SKIPPED: %s" % why)
    # A thread's CPU is charged when a tick finds it on a CPU: a worker on a few percent of
    # one carries its first records for seconds. The checks start after 8-12 s of that.
    t_from = (int(time.time()) // 4 + 3) * 4
    time.sleep(max(0, t_from - time.time()))
    rec = ctx.scry_start(["record", "--pid", str(pid19), "--duration", "16", "--format",
                          "collapsed", "-o", ctx.path("rec.collapsed")])
    ctx.scry_finish(rec)
    time.sleep(max(0, t_from + 16.3 - time.time()))
    for _, _, dm in outs:
        check(dm.stop() == 0, "scry serve failed: %s" % short(dm.text(), 600))
    for backend, out, _ in outs:  # each back end judged, the first failure not hiding the other
        if backend == "bpf" and why:
            continue
        try:
            details.append(check_daemon(ctx, backend, out, t_from, truths, names, overloaded))
        except Fail as e:
            failed.append(str(e))
    check(not failed, "; ".join(failed + ["passed: " + d for d in details]))
    if overloaded:
        raise Skip("machine overloaded, shares not conclusive: %s (%s)" % (
            "; ".join(overloaded), "; ".join(details)))
    return "; ".join(details)


def check_daemon(ctx, backend, out, t_from, truths, names, overloaded):
    details = []
    for svc in ("pool19", "pool99", "many"):
        ws = [w for w in windows_of(out, svc, t_from) if w["until"] - w["from"] == 4]
        check(len(ws) >= 2, "%s: %d full windows after %d: %s" % (svc, len(ws), t_from,
                                                                  read_index(out)))
        want = 99.0 if svc == "pool99" else 19.0
        for w in ws:
            meta = os.path.join(out, w["files"]["collapsed"]).rsplit(".", 1)[0] + ".json"
            check(w["rate_hz"] == want and st.load_json(meta, "window")["rate_hz"] == want,
                  "%s: rate_hz %s (index) in a window sampled at %g Hz" % (
                      svc, w["rate_hz"], want))
        fn = names["many" if svc == "many" else "pool"]
        c = count([os.path.join(out, w["files"]["collapsed"]) for w in ws], fn)
        truth, on_cpu = truth_between(truths[svc], ws[0]["from"], ws[-1]["until"], fn)
        details.append(check_shares("%s %s at %g Hz (on CPU %.0f%%)" % (
            backend, svc, want, 100 * on_cpu), c, truth, on_cpu, overloaded))
        if svc == "pool19":
            served, on_cpu19 = c, on_cpu
    rc = count([ctx.path("rec.collapsed")], names["pool"])
    ns, nr = float(sum(served.values())), float(sum(rc.values()))
    for k in names["pool"]:
        a, b = 100 * served.get(k, 0) / ns, 100 * rc.get(k, 0) / nr
        sd = 100 * math.sqrt(0.25 / (ns / 2.0))
        if abs(a - b) > max(5.0, 3 * sd):
            msg = "%s pool19: %s serve %.1f%% vs record %.1f%%: %s / %s" % (
                backend, k, a, b, served, rc)
            check(on_cpu19 < MIN_ON_CPU, msg)
            overloaded.append(msg)
    details.append("record %s" % "/".join("%.1f" % (100 * rc.get(k, 0) / nr)
                                          for k in names["pool"]))
    return "; ".join(details)


def rate_windows(ctx, out, after, n=2, most=5, min_cpu=0.6):
    """The first N or more full windows of service busy that start at AFTER or later: as
    many as hold MIN_CPU seconds of its CPU, at most MOST. A thread's CPU becomes samples
    when a tick finds it on a CPU: at 5 Hz on a loaded host a 3-s window may hold none."""
    d = st.Deadline(8 + 3 * most)
    ws = []
    while not d.expired():
        ws = []
        if os.path.exists(os.path.join(out, "index.json")):
            ws = [w for w in windows_of(out, "busy", after) if w["until"] - w["from"] == 3]
        for k in range(n, min(len(ws), most) + 1):
            if k == most or sum(w["cpu_s"] for w in ws[:k]) >= min_cpu:
                return ws[:k]
        time.sleep(0.2)
    raise Fail("no %d full windows of busy after %d: %s" % (n, after, read_index(out)))


@tests("set_rate")
def t_set_rate(ctx):
    p = start(ctx, SVC, "busy", "--mode", "busy")
    out, sock, conf = ctx.path("out"), ctx.path("scry.sock"), ctx.path("scry.conf")
    with open(conf, "w") as f:
        f.write("interval = 3\nrate = 19\n\n[service busy]\nmatch = --name %s-busy( |$)\n"
                % TOKEN)
    runs = []  # (name, out, socket, daemon): the default back end, and bpf at the same time
    for name, extra in (("default", []), ("bpf", ["--sampler", "bpf"])):
        o, so = ctx.path("out-" + name), ctx.path("scry-%s.sock" % name)
        runs.append((name, o, so, Daemon(ctx, ["--config", conf, "--out-dir", o, "--socket", so,
                                               "--match", TOKEN] + extra)))
    for _, _, _, d in runs:
        d.wait_line(r"target %d:" % p.pid, 30)
    details = []
    why = bpf_refused(runs[1][3], p.pid)
    if why:
        details.append("bpf SKIPPED: %s" % why)
        check(runs[1][3].stop() == 0, "scry serve failed: %s" % short(runs[1][3].text(), 600))
        runs.pop()
    for rate in (97, 5):
        for _, _, sock, _ in runs:
            rc, r, err = ctl_json(ctx, sock, "set-rate", p.pid, rate)
            check(rc == 0 and r.get("ok"), "set-rate %d: %s %s" % (rate, r, err))
        after = int(time.time()) + 4
        for name, out, _, _ in runs:
            details.append("%s %s" % (name, check_rate(ctx, out, after, rate)))
    for _, _, _, d in runs:
        check(d.stop() == 0, "scry serve failed: %s" % short(d.text(), 600))
    return "; ".join(details)


def check_rate(ctx, out, after, rate):
    """Checks the windows after the set-rate to RATE; returns the detail."""
    # from the window after the next (the records of the old rate charged by then), two
    # windows: a thread's records become samples when a tick finds it on a CPU, in bunches
    ws = rate_windows(ctx, out, after)
    samples, cpu = sum(w["samples"] for w in ws), sum(w["cpu_s"] for w in ws)
    per_cpu = samples / max(cpu, 1e-9)
    check(all(w["rate_hz"] == rate for w in ws), "set-rate %d: windows' rate_hz %s" % (
        rate, [w["rate_hz"] for w in ws]))
    check(cpu > 0.3, "set-rate %d: the service used %.2f s of CPU in the windows %s"
          % (rate, cpu, ws))
    check(abs(per_cpu / rate - 1) <= 0.2, "set-rate %d: %.1f samples per CPU second (%d "
          "samples, %.2f CPU s)" % (rate, per_cpu, samples, cpu))
    return "%d Hz: %.1f samples per CPU s (%d samples)" % (rate, per_cpu, samples)


def main():
    ap = st.runner.parser(__doc__)
    st.add_common_args(ap)
    args = ap.parse_args()
    if os.getuid() != 0:
        return st.skip_all("serve-truth", "scry serve's tests need root", 2)

    def make_ctx(t):
        return st.Ctx(t.name, None, args.scry, args.v, prefix="scry-serve-truth")
    return st.run(tests.select(args.k), make_ctx, "serve-truth", verbose=args.v)


if __name__ == "__main__":
    sys.exit(main())
