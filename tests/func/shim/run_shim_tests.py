#!/usr/bin/env python3
"""Functional tests of libscry-shim.so: real interpreters under LD_PRELOAD, a ring made by
the daemon's consumer (through shim_harness), known-answer totals.

usage: run_shim_tests.py --harness PATH --shim PATH [--inject PATH --grab PATH]
                         [--only NAME] [--labels L1,L2] [--mean N]
--inject/--grab (inject_attach and libshim_test_grab.so): attach-mode tests through the real
ptrace injector (test_inject*); skipped without them.
One test per (check, interpreter), each listing its checks ("ok"/"FAIL" lines) under its
PASS/FAIL line (tests/lib/scrytest's runner; the closing line "N passed, N failed, N
skipped"); exit 1 on a failure. Interpreters that are not installed are skipped.
"""
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail  # noqa: E402

WORKLOADS = os.path.join(HERE, "workloads.py")
MB = 1 << 20
# Interpreter labels (scrytest.interp), in this order; the harness gets each one's X.Y.
# Debian sid's 3.14/3.15 (and -dbg) run in the cached sid root: the shim, the workloads and
# the ring are placed inside it, the targets run under chroot in their own mount namespace.
LABELS = ["3.8", "3.11", "debian3.11", "3.10", "3.12", "3.13", "3.14", "3.15", "3.14d",
          "3.15d"]
NUMPY_LABELS = ["debian3.11", "3.14", "3.15"]
THREAD_LABELS = ["3.11", "debian3.11", "3.14", "3.15"]  # inject_threads (3 rounds each)
NOPROC_LABELS = ["3.14", "3.15"]  # inject_noproc: a plain chroot, without /proc
TIMEOUT = 600  # seconds: no harness, injector or target run may take longer

CUR = [None]  # the running test's scrytest.Ctx


def check(cond, what):
    """A soft check of the running test (printed; the test fails at its end)."""
    return CUR[0].expect(cond, what)


def run_checked(cmd, env=None, timeout=TIMEOUT):
    """Runs CMD to its end in its own session (the test's context kills it at cleanup):
    its stdout; FAIL on a non-zero exit or after TIMEOUT."""
    c = CUR[0]
    p = c.spawn(cmd, env=env, stdout=subprocess.PIPE)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        c.kill(p)
        raise Fail("%s: no exit after %d s (killed)" % (" ".join(map(str, cmd)), timeout))
    if p.returncode != 0:
        raise Fail("%s exited %d: %s" % (" ".join(map(str, cmd)), p.returncode,
                                         st.short(c.proc_log(p))))
    return out.decode("utf-8", "replace")


def within(got, want, tol):
    return want > 0 and abs(got - want) <= tol * want


def fresh_path(name):
    """A host path in the running test's directory (inside the root for a rooted
    interpreter) that no earlier run of the test used."""
    c = CUR[0]
    c.runs = getattr(c, "runs", 0) + 1
    return c.path("%s-%d" % (name, c.runs))


def ring_args(it):
    """The harness's/injector's options placing the ring where IT's target sees it."""
    c = CUR[0]
    return ["--ring-dir", c.tmp, "--ring-as", c.tpath(c.tmp)] if it.root else []


def read_codes(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return dict(line.split() for line in f.read().splitlines())


def run(args, it, workload, extra=()):
    c = CUR[0]
    codes = fresh_path("codes")
    cmd = [args.harness, "--shim", c.stage(args.shim), "--pyver", it.pyver] + ring_args(it)
    if args.mean:
        cmd += ["--mean", str(args.mean)]
    cmd += list(extra) + ["--"] + it.argv(c.stage(WORKLOADS), workload, c.tpath(codes))
    t = st.now()
    out = run_checked(cmd)
    wall = st.since(t)
    names = read_codes(codes)
    res = {"total": {}, "code": {}, "stat": {}, "tids": {}, "lines": [], "wall": wall}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "total":
            res["total"][(f[1], f[2])] = int(f[4])
        elif f[0] == "code":
            res["code"][(f[1], f[2], f[3])] = int(f[4])
        elif f[0] == "stat":
            res["stat"][f[1]] = float(f[2])
        elif f[0] == "instr":
            res.setdefault("instr", []).append((f[1], int(f[2]), int(f[3])))
        elif f[0] == "tid":
            res["tids"][int(f[1])] = int(f[2])
        else:
            res["lines"].append(line)
    res["names"] = names
    return res


def by(res, fn, kind, origin="python"):
    addr = res["names"].get(fn)
    return res["code"].get((addr, kind, origin), 0) if addr else 0


def common(res, label):
    s = res["stat"]
    it = CUR[0].interp
    if it.version[:2] >= (3, 14):
        check(s["layout_matches_table"] == 2, "%s: layout read from the target's "
              "_Py_DebugOffsets before the ring was enabled" % label)
    else:
        check(s["layout_matches_table"] == 1,
              "%s: pystate layout == offsetof() table of the test" % label)
    check(s["child_status"] == 0, "%s: target exited 0" % label)
    check(s["bad_records"] == 0 and s["bad_seq"] == 0, "%s: no bad records" % label)
    check(int(s["shim_state"]) & 0x1d == 0x1d,
          "%s: shim attached, PyMem hooks installed, stacks validated (state %#x)"
          % (label, int(s["shim_state"])))


def report(label, got, want):
    return "%s: %.1f MB vs %.1f MB (%+.1f%%)" % (label, got / 1e6, want / 1e6,
                                                (got / want - 1) * 100 if want else 0)


def test_keep(args, it):
    r = run(args, it, "keep")
    common(r, "keep")
    want_large, want_small = 1000 * 100033, 250000 * 433
    got = by(r, "keep_large", "alloc")
    check(within(got, want_large, 0.15), report("keep_large alloc python", got, want_large))
    got = by(r, "keep_large", "net")
    check(within(got, want_large, 0.15), report("keep_large net python", got, want_large))
    got = by(r, "keep_small", "net")
    check(within(got, want_small, 0.15), report("keep_small net python", got, want_small))
    nat = by(r, "keep_large", "alloc", "native") + by(r, "keep_small", "alloc", "native")
    check(nat < 0.05 * want_large, "keep: native-origin bytes on the lines %d < 5%%" % nat)


def test_attach(args, it):
    r = run(args, it, "attach", ["--attach"])
    s = r["stat"]
    check(s["child_status"] == 0, "attach: target exited 0")
    check([l for l in r["lines"] if l.startswith("attach_rc")] == ["attach_rc 0 0"],
          "attach: scry_shim_attach returned 0 twice (idempotent)")
    check(int(s["shim_state"]) & 0x1f == 0x1d,
          "attach: hooks installed, stacks ok, malloc not interposed (state %#x)"
          % int(s["shim_state"]))
    want_large, want_small = 1000 * 100033, 250000 * 433
    got = by(r, "keep_large", "net")
    check(within(got, want_large, 0.15), report("attach keep_large net python", got, want_large))
    got = by(r, "keep_small", "net")
    check(within(got, want_small, 0.15), report("attach keep_small net python", got, want_small))


LINES_HELPER = r"""
import sys, dis, inspect
sys.path.insert(0, sys.argv[1])
import workloads
fn = getattr(workloads, sys.argv[2])
code = fn.__code__
src, start = inspect.getsourcelines(fn)
want = start + [i for i, l in enumerate(src) if l.strip().startswith("return")][0]
def line_of(off):
    if hasattr(code, "co_lines"):
        for start, end, line in code.co_lines():
            if start <= off < end:
                return line
        return None
    last = None
    for start, line in dis.findlinestarts(code):
        if start > off:
            break
        last = line
    return last
offs = [int(x) for x in sys.argv[3:]]
print(sum(1 for o in offs if o >= 0 and line_of(o) == want), len(offs))
"""


def test_lines(args, it):
    """The instruction offsets the shim sends map to the allocating line."""
    r = run(args, it, "keep")
    for fn in ("keep_large", "keep_small"):
        addr = r["names"][fn]
        offs = []
        for code, off, n in r.get("instr", []):
            if code == addr:
                offs += [off] * n
        here = os.path.dirname(CUR[0].stage(WORKLOADS))
        out = run_checked(it.argv("-c", LINES_HELPER, here, fn, *offs))
        good, total = map(int, out.split())
        check(total > 0 and good >= 0.95 * total,
              "%s: %d of %d frames at the allocating line" % (fn, good, total))


def test_churn(args, it):
    r = run(args, it, "churn")
    common(r, "churn")
    want = 512 * (4 * MB + 33)
    a, f = by(r, "churn", "alloc"), by(r, "churn", "free")
    check(within(a, want, 0.15), report("churn alloc python", a, want))
    check(within(f, want, 0.15), report("churn free python", f, want))
    n = by(r, "churn", "net")
    check(abs(n) < 0.05 * want, "churn net python %.1f MB ~ 0" % (n / 1e6))


def test_copy(args, it):
    r = run(args, it, "copy")
    common(r, "copy")
    want = 512 * 4 * MB
    c = by(r, "copy_bytes", "copy", "native")
    check(within(c, want, 0.20), report("bytes(bytearray) copy", c, want))


def test_threads(args, it):
    r = run(args, it, "threads")
    common(r, "threads")
    want = 4 * (50 * MB // 5033) * 5033
    a = by(r, "thread_keep", "alloc")
    check(within(a, want, 0.15), report("4 threads alloc python", a, want))
    check(len(r["tids"]) >= 4, "threads: events from %d threads" % len(r["tids"]))


def test_fork(args, it):
    r = run(args, it, "fork")
    common(r, "fork")
    want = 1000 * 100033
    a = by(r, "parent_keep", "alloc")
    check(within(a, want, 0.15), report("fork: parent alloc python", a, want))
    check(by(r, "fork_child_alloc", "alloc") == 0, "fork: nothing from the fork child")
    pid = int(r["stat"]["child_pid"])
    check(set(r["tids"]) <= {pid}, "fork: every event from the target's thread (%s)"
          % sorted(r["tids"]))
    tot = sum(v for (k, o), v in r["total"].items() if k == "alloc")
    check(tot < want * 1.15 + 80 * MB, "fork: subprocess's 300 MB not in the ring (%.0f MB)"
          % (tot / 1e6))


def test_numpy(args, it):
    r = run(args, it, "numpy")
    common(r, "numpy")
    k = by(r, "np_keep", "alloc", "native")
    check(within(k, 300 * MB, 0.15), report("numpy keep alloc native", k, 300 * MB))
    n = by(r, "np_keep", "net", "native")
    check(within(n, 300 * MB, 0.15), report("numpy keep net native", n, 300 * MB))
    c = by(r, "np_copy", "alloc", "native")
    check(within(c, 2048 * MB, 0.15), report("numpy .copy() alloc native", c, 2048 * MB))
    cp = by(r, "np_copy", "copy", "native")
    check(within(cp, 2048 * MB, 0.20), report("numpy .copy() copy", cp, 2048 * MB))
    p = by(r, "np_keep", "alloc", "python") + by(r, "np_copy", "alloc", "python")
    check(p < 0.02 * 300 * MB, "numpy: python-origin bytes on the lines %.2f MB (headers only)"
          % (p / 1e6))


def test_full(args, it):
    r = run(args, it, "churn", ["--ring-bytes", "65536", "--no-drain"])
    s = r["stat"]
    check(s["child_status"] == 0, "full ring: target exited 0")
    check(s["dropped"] > 0, "full ring: drops counted (%d)" % s["dropped"])
    check(s["consumed"] <= s["nrecords"], "full ring: consumed %d <= %d records"
          % (s["consumed"], s["nrecords"]))
    check(s["bad_records"] == 0 and s["bad_seq"] == 0, "full ring: no bad records")


def timed_plain(it, workload):
    out = run_checked(it.argv(CUR[0].stage(WORKLOADS), workload))
    return float(out.split()[-1])


def test_gone(args, it):
    for mode in ("--stop-after", "--disable-after"):
        t_shim, t_plain = [], []
        for rep in range(3):  # interleaved: the machine may be loaded
            r = run(args, it, "gone", [mode, "0.5"])
            t_plain.append(timed_plain(it, "late"))
            t_shim.append(float([l for l in r["lines"]
                                 if l.startswith("late_churn_s")][0].split()[1]))
        s = r["stat"]
        check(s["child_status"] == 0, "daemon gone (%s): target exited 0" % mode)
        # Every event the shim sampled after the heartbeat stopped / the ring was disabled
        # (at most a few in flight at that instant). Counted from the ring's own totals, not
        # by code object: a code object freed during start-up can share an address with
        # late_churn's, which made a per-function count wrongly non-zero under load.
        late = s["sampled"] - s["sampled_at_stop"]
        if mode == "--stop-after":
            check(late <= 5, "daemon gone: %d events after the heartbeat stopped" % late)
        else:
            check(late <= 5, "disabled: %d events recorded afterwards" % late)
        check(int(s["shim_state"]) & 0x100, "%s: shim went pass-through" % mode)
        ratio = min(t_shim) / min(t_plain)
        print("  info %s: late phase CPU %.3f s vs %.3f s unprofiled (x%.2f)"
              % (mode, min(t_shim), min(t_plain), ratio))
        check(ratio < 1.25, "%s: target back to full speed" % mode)


GOT_PATCHED = 0x200


def stage_grab(args, it):
    """The target's path of the test library loaded after attach. In a root, the library
    it dlopen()s through its RUNPATH (an absolute host path) is copied to that same path
    inside the root, and removed at the test's end."""
    c = CUR[0]
    if not args.grab or not it.root:
        return args.grab or ""
    dep_dir = os.path.join(os.path.dirname(os.path.abspath(args.grab)), "grab_dep")
    inside = it.host_path(dep_dir)
    top = inside
    while not os.path.exists(os.path.dirname(top)):
        top = os.path.dirname(top)
    if not os.path.exists(inside):
        os.makedirs(inside)
        c.cleanup_dirs = getattr(c, "cleanup_dirs", []) + [top]
    for name in os.listdir(dep_dir):
        shutil.copy2(os.path.join(dep_dir, name), inside)
    return c.stage(args.grab)


def map_prots(pid):
    """[(start, end, permissions, path)] of PID's mappings, read from the host."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            out.append((lo, hi, fields[1], fields[5].strip() if len(fields) > 5 else ""))
    return out


def run_inject(args, it, parts, extra=(), timeout=600, maps=None):
    """Starts the target (workloads.py inject:PARTS), injects the shim into it with
    inject_attach once it is ready, returns (inject_attach's JSON, code names, target's
    output lines, target's exit status). MAPS (a list): gets map_prots() of the target
    before the injection and once it is in."""
    c = CUR[0]
    go, codes = fresh_path("go"), fresh_path("codes")
    env = c.env({"SCRY_TEST_GO": c.tpath(go), "SCRY_TEST_GRAB": stage_grab(args, it)})
    t = c.spawn(it.argv(c.stage(WORKLOADS), "inject:" + parts, c.tpath(codes)), env=env,
                stdout=subprocess.PIPE)
    try:
        ready = t.stdout.readline().decode("utf-8", "replace")
        if ready.strip() != "ready":
            raise Fail("target not ready: %r; %s" % (ready, st.short(c.proc_log(t))))
        cmd = [args.inject, "--pid", str(t.pid), "--shim", c.stage(args.shim), "--pyver",
               it.pyver, "--go-file", go] + ring_args(it) + list(extra)
        if args.mean:
            cmd += ["--mean", str(args.mean)]
        if maps is not None:
            maps.append(map_prots(t.pid))
            p = c.spawn(cmd, stdout=subprocess.PIPE)
            t0 = st.now()
            while not os.path.exists(go) and p.poll() is None and st.since(t0) < 60:
                time.sleep(0.005)
            maps.append(map_prots(t.pid))
            inj = p.communicate(timeout=timeout)[0].decode("utf-8", "replace")
        else:
            inj = run_checked(cmd, timeout=timeout)
        out = t.stdout.read().decode("utf-8", "replace").splitlines()
        status = c.wait(t, timeout, "inject target")
    finally:
        c.kill(t)
    data = json.loads(inj)
    return data, read_codes(codes), out, status


def iby(data, names, fn, key):
    addr = names.get(fn)
    return data["codes"].get(addr, {}).get(key, 0) if addr else 0


def inject_common(data, status, label):
    i, sh, st = data["inject"], data["shim"], data["stats"]
    check(i["rc"] == 0 and i["ret"] == 0, "%s: injected, scry_shim_attach returned 0 (rc %s, "
          "ret %d, thread away %.1f ms) %s" % (label, i["rc_name"], i["ret"], i["stopped_ms"],
                                               i["error"]))
    check(status == 0, "%s: target exited 0 (%s)" % (label, status))
    check(sh["state"] & (0x1d | GOT_PATCHED) == 0x1d | GOT_PATCHED and not sh["state"] & 0x2,
          "%s: attached, PyMem hooks, stacks ok, GOT patched, not preloaded (state %#x)"
          % (label, sh["state"]))
    check(sh["got_slots"] > 0 and sh["got_failed"] == 0,
          "%s: %d slots redirected in %d objects, %d objects failed"
          % (label, sh["got_slots"], sh["got_objects"], sh["got_failed"]))
    check(st["bad_records"] == 0 and st["bad_seq"] == 0, "%s: no bad records" % label)


def test_inject(args, it):
    """Attach mode through the real injector: python and native allocations, copies in the
    interpreter (libpython or the static executable), a library loaded after attach."""
    data, names, out, status = run_inject(args, it, "keep,churn,copy,grab")
    inject_common(data, status, "inject")
    want_large, want_small = 1000 * 100033, 250000 * 433
    got = iby(data, names, "keep_large", "net_python")
    check(within(got, want_large, 0.15), report("inject keep_large net python", got, want_large))
    got = iby(data, names, "keep_small", "net_python")
    check(within(got, want_small, 0.15), report("inject keep_small net python", got, want_small))
    nat = sum(iby(data, names, f, "alloc_native") for f in ("keep_large", "keep_small"))
    check(nat < 0.05 * want_large, "inject keep: native-origin bytes on the lines %d < 5%%" % nat)
    want = 512 * (4 * MB + 33)
    a, f = iby(data, names, "churn", "alloc_python"), iby(data, names, "churn", "free_python")
    check(within(a, want, 0.15), report("inject churn alloc python", a, want))
    check(within(f, want, 0.15), report("inject churn free python", f, want))
    n = iby(data, names, "churn", "net_python")
    check(abs(n) < 0.05 * want, "inject churn net python %.1f MB ~ 0" % (n / 1e6))
    nat = iby(data, names, "churn", "alloc_native")
    check(nat < 0.05 * want, "inject churn: pymalloc fall-through not counted twice "
          "(native %.1f MB)" % (nat / 1e6))
    want = 512 * 4 * MB
    c = iby(data, names, "copy_bytes", "copy_native")
    check(within(c, want, 0.20), report("inject bytes(bytearray) copy", c, want))
    check("grab_kept 100" in out, "inject: library loaded after attach ran (%s)" % out)
    want = 100 * MB
    a = iby(data, names, "grab_keep", "alloc_native")
    check(within(a, want, 0.15), report("inject dlopen'ed-later malloc native", a, want))
    n = iby(data, names, "grab_keep", "net_native")
    check(within(n, want, 0.15), report("inject dlopen'ed-later net native", n, want))
    want = 256 * 4 * MB
    c = iby(data, names, "grab_copy", "copy_native")
    check(within(c, want, 0.20), report("inject dlopen'ed-later memcpy", c, want))
    check("grab_dep_kept 50" in out, "inject: dlopen through the caller's RUNPATH still works")
    check("dlerror_kept 1" in out, "inject: a failed dlopen still reports its dlerror() text")
    want = 50 * MB
    a = iby(data, names, "grab_dep", "net_native")
    check(within(a, want, 0.15), report("inject dlopen'ed by a native library, net native", a,
                                        want))


def test_inject_noproc(args, it):
    """Injected into a chrooted target without /proc (the shim cannot read
    /proc/self/maps): the protections of the GOT pages are taken from the program headers;
    numpy's allocations and copies are seen, no object failed, and every mapping the
    target had keeps its permissions."""
    maps = []
    data, names, out, status = run_inject(args, it, "numpy", maps=maps)
    inject_common(data, status, "inject without /proc")
    k = iby(data, names, "np_keep", "alloc_native")
    check(within(k, 300 * MB, 0.15), report("no /proc: numpy keep alloc native", k, 300 * MB))
    cp = iby(data, names, "np_copy", "copy_native")
    check(within(cp, 2048 * MB, 0.20), report("no /proc: numpy .copy() copy", cp, 2048 * MB))
    before, after = maps
    changed = []
    for lo, hi, perm, path in before:  # every part of it now: same permissions
        for lo2, hi2, perm2, _ in after:
            if lo2 < hi and hi2 > lo and perm2 != perm:
                changed.append("%x-%x %s: %s -> %s" % (max(lo, lo2), min(hi, hi2),
                                                       os.path.basename(path), perm, perm2))
    check(before and not changed, "every mapping keeps its permissions (%d compared): %s"
          % (len(before), "; ".join(changed[:5])))


def test_inject_threads(args, it):
    """Injected while 4 threads allocate and copy without pause."""
    for rep in range(3):
        data, names, out, status = run_inject(args, it, "threads")
        inject_common(data, status, "inject threads #%d" % rep)
        loops = [int(l.split()[1]) for l in out if l.startswith("thread_loops")]
        check(loops and loops[0] > 0, "inject threads: every worker kept running (%s)" % loops)
        c = iby(data, names, "thread_busy", "copy_native")
        a = iby(data, names, "thread_busy", "alloc_python")
        check(c > 0 and a > 0 and len(data["tids"]) >= 4,
              "inject threads: copies %.0f MB, python allocs %.0f MB, from %d threads"
              % (c / 1e6, a / 1e6, len(data["tids"])))


def test_inject_numpy(args, it):
    data, names, out, status = run_inject(args, it, "numpy")
    inject_common(data, status, "inject numpy")
    k = iby(data, names, "np_keep", "alloc_native")
    check(within(k, 300 * MB, 0.15), report("inject numpy keep alloc native", k, 300 * MB))
    n = iby(data, names, "np_keep", "net_native")
    check(within(n, 300 * MB, 0.15), report("inject numpy keep net native", n, 300 * MB))
    c = iby(data, names, "np_copy", "alloc_native")
    check(within(c, 2048 * MB, 0.15), report("inject numpy .copy() alloc native", c, 2048 * MB))
    cp = iby(data, names, "np_copy", "copy_native")
    check(within(cp, 2048 * MB, 0.20), report("inject numpy .copy() copy", cp, 2048 * MB))
    p = iby(data, names, "np_keep", "alloc_python") + iby(data, names, "np_copy", "alloc_python")
    check(p < 0.02 * 300 * MB, "inject numpy: python-origin bytes on the lines %.2f MB" % (p / 1e6))


def test_inject_gone(args, it):
    """The injector goes away (heartbeat stops, ring stays enabled): the target survives and
    runs at unprofiled speed with its GOTs still redirected (pass-through hooks)."""
    t_shim, t_plain = [], []
    for rep in range(3):
        data, names, out, status = run_inject(args, it, "late", ["--stop-after", "1.0"])
        t_plain.append(timed_plain(it, "late"))
        t_shim.append(float([l for l in out if l.startswith("late_churn_s")][0].split()[1]))
        check(status == 0, "inject gone: target exited 0 (%s)" % status)
    check(data["inject"]["rc"] == 0 and data["shim"]["state"] & GOT_PATCHED,
          "inject gone: injected and GOT patched (state %#x)" % data["shim"]["state"])
    check(data["stats"]["stopped"] == 1 and data["stats"]["target_alive"] == 1,
          "inject gone: injector exited while the target ran")
    ratio = min(t_shim) / min(t_plain)
    print("  info inject gone: late phase CPU %.3f s vs %.3f s unprofiled (x%.2f)"
          % (min(t_shim), min(t_plain), ratio))
    check(ratio < 1.25, "inject gone: target back to full speed")


TESTS = [test_keep, test_lines, test_churn, test_copy, test_threads, test_fork, test_attach]


def main():
    ap = st.runner.parser(__doc__)
    ap.add_argument("--harness", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--inject", help="inject_attach (attach-mode tests through ptrace)")
    ap.add_argument("--grab", help="libshim_test_grab.so (loaded by the target after attach)")
    ap.add_argument("--only")
    ap.add_argument("--labels", help="comma-separated interpreter labels (default: all)")
    ap.add_argument("--mean", type=int)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    found = {}
    labels = args.labels.split(",") if args.labels else LABELS
    unknown = [l for l in labels if l not in LABELS]
    if unknown:
        ap.error("unknown label(s) %s (known: %s)" % (",".join(unknown), " ".join(LABELS)))
    for label in labels:
        try:
            found[label] = st.find(label)
        except st.Skip as e:
            print("SKIP %s: %s" % (label, e))
    plain = dict(found)  # rooted ones under a plain chroot: no /proc in the root
    for label, it in found.items():
        if it.root:  # a container's view: own mount namespace and /proc (the shim reads
            found[label] = it.isolated("mount")  # /proc/self/maps to patch GOTs)
    pythons = [found[l] for l in LABELS if l in found]
    numpys = [found[l] for l in NUMPY_LABELS if l in found and found[l].has_module("numpy")]
    first = found.get("3.11")
    tests = st.Tests()
    for it in pythons:
        for t in TESTS:
            tests.add("%s %s" % (t.__name__[5:], it.label), t, interp=it)
    for it in numpys:
        tests.add("numpy %s" % it.label, test_numpy, interp=it)
    if first:
        tests.add("full %s" % first.label, test_full, interp=first)
        tests.add("gone %s" % first.label, test_gone, interp=first)
    if args.inject and args.grab:
        for it in pythons:
            tests.add("inject %s" % it.label, test_inject, interp=it)
        for it in numpys:
            tests.add("inject_numpy %s" % it.label, test_inject_numpy, interp=it)
        for it in [plain[l] for l in NOPROC_LABELS if l in plain]:
            if it.has_module("numpy"):
                tests.add("inject_noproc %s" % it.label, test_inject_noproc, interp=it)
        for it in [found[l] for l in THREAD_LABELS if l in found]:
            tests.add("inject_threads %s" % it.label, test_inject_threads, interp=it)
        if first:
            tests.add("inject_gone %s" % first.label, test_inject_gone, interp=first)
    sel = tests.select(where=lambda t: not args.only or args.only in t.fn.__name__)

    def make_ctx(t):
        CUR[0] = st.Ctx(t.name.replace(" ", "-"), t.interp, prefix="scry-shim",
                        verbose=args.v)
        return CUR[0]

    def call(t, c):
        try:
            t.fn(args, t.interp)
        finally:
            for d in getattr(c, "cleanup_dirs", []):
                shutil.rmtree(d, ignore_errors=True)
        return "%d checks on %s" % (len(c.expectations), t.interp.path)

    return st.run(sel, make_ctx, "shim", call=call, verbose=args.v)


if __name__ == "__main__":
    sys.exit(main())
