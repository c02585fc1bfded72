#!/usr/bin/env python3
"""--subprocesses (issue 13) against real interpreters: programs of several processes whose
CPU time per process is known (family_workload.py: each worker measures the CPU time it
burnt, time.process_time()).

usage: test_subprocesses.py SCRY PYTHON [TEST...]   (PYTHON a path or a scrytest label)

pool: a multiprocessing pool (fork) of 3 workers burning 0.6, 1.2 and 1.8 s, launched:
each worker is in the JSON report's "processes" with its CPU time within 12% (or 0.08 s)
of its own measure, every sample of a worker sits under a root frame "process PID (...)"
of kind "process", and its burn() line is there.
prefork: a parent os.fork()s 3 workers (0.4, 0.8, 1.2 s): the same checks.
shell: 'sh -c "python3 ... burn 1.0; true"' (the shell forks; it is not Python): the
Python grandchild's 1.0 s is found (within 12%), the shell gives no samples.
delayed: 'sh -c "sleep 1.5; exec python3 ... burn 1.0"' (py-spy's delayed_launch.sh): the
launched shell becomes Python after 1.5 s and its 1.0 s is found the same way.
late: a parent idles 2 s, then starts a child by fork+exec (subprocess) that burns 1.0 s
at once: at least 85% of the child's CPU time is sampled, so it was found and read within
about 150 ms of its start.
late_scan: the same with scry in a network namespace of its own, where the kernel's
process-events connector is refused: /proc scans find the child as well.
attach: --pid on a pool whose workers burn 1:2:3 of each 30 ms: over 2.5 s each worker's
share of their sum is its share of their own CPU times within 6 points; the parent is
listed.
dump: dump --subprocesses --json on that pool lists the parent and its 3 workers, parent
first; without --subprocesses only the parent.
top: top --subprocesses --once on that pool shows the CPU of all three workers (their own
rate over the run, within 30%), top without it the idle parent only.
memory: --memory on a launched pool (fork) whose worker k keeps k * 32 MiB in keep<k>():
each line's allocation within 25% (the root keeps its preloaded shim, each fork child gets
a ring of its own through injection). memory_attach: the same with --pid.
mixed: a parent with a shell child, a Python child and an unreaped zombie (the facts of
py-spy's dump_subprocesses_non_python.py and subprocesses_zombie_child.py): dump and record
--subprocesses give the parent and the Python child, the others skipped quietly.
refused: dump --subprocesses with --container is refused (exit 2).
The runner is tests/lib/scrytest's: one PASS/FAIL/SKIP line per test.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
import scrytest as st  # noqa: E402

WORKLOAD = os.path.join(HERE, "family_workload.py")
TOL = 0.12      # relative, for CPU time per process (perf's task-clock: exact but for edges)
TOL_ABS = 0.08  # seconds: the start and end of each process
TOL_PP = 6.0    # percentage points, attach-mode shares


def truths(out):
    """{pid: cpu_s} from the workers' own files."""
    res = {}
    for p in glob.glob(out + ".*.json"):
        with open(p) as f:
            d = json.load(f)
        res[d["pid"]] = d["cpu_s"]
    return res


def marker_line(tag):
    with open(WORKLOAD) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + tag):
                return n
    raise st.Fail("no %s marker" % tag)


def burn_line():
    return marker_line("BURN_LINE")


def per_process(doc):
    """{pid: (samples, value_s, burn_line_seen)} from the stacks of a JSON report, by their
    process root frame."""
    frames = doc["stack_frames"]
    line = burn_line()
    res = {}
    for s in doc["stacks"]:
        root = frames[s["frames"][0]]
        m = re.match(r"process (\d+) \(", root["function"])
        if root["kind"] != "process" or not m:
            raise st.Fail("a stack without a process root: %s" % root)
        pid = int(m.group(1))
        n, v, seen = res.get(pid, (0, 0.0, False))
        hit = any(frames[i]["function"] == "burn" and frames[i]["line"] == line
                  for i in s["frames"])
        res[pid] = (n + s["samples"], v + s["value"] / 1e9, seen or hit)
    return res


def check_workers(c, doc, out, what):
    check = c.expect
    truth = truths(out)
    check(truth, "%s: the workers wrote their truth" % what)
    listed = {p["pid"]: p for p in doc.get("processes", [])}
    stacks = per_process(doc)
    worst = 0.0
    for pid, cpu in sorted(truth.items()):
        got = listed.get(pid, {}).get("cpu_s", 0.0)
        err = abs(got - cpu)
        worst = max(worst, err / cpu if cpu else 0)
        check(err <= max(TOL * cpu, TOL_ABS), "%s: worker %d sampled %.3f s of CPU, its own "
              "measure %.3f s (+- %.0f%%)" % (what, pid, got, cpu, TOL * 100))
        check(pid in stacks and stacks[pid][2], "%s: worker %d's burn() line under its "
              "process root" % (what, pid))
        if pid in stacks:
            check(abs(stacks[pid][1] - got) < 0.01, "%s: worker %d's stacks hold %.3f s, "
                  "the list says %.3f" % (what, pid, stacks[pid][1], got))
    total = sum(listed.get(pid, {}).get("cpu_s", 0.0) for pid in truth)
    want = sum(truth.values())
    check(abs(total - want) <= max(TOL * want, TOL_ABS), "%s: the workers' total %.3f s, "
          "their own %.3f s" % (what, total, want))
    return "%d workers, worst %.1f%% off, total %.2f of %.2f s" % (len(truth), worst * 100,
                                                                   total, want)


def record_launch(c, args, name, extra=()):
    out = c.path(name)
    res, text = c.record(["-q", "--subprocesses", "-r", "200"] + list(extra) + ["--"] + args,
                         "json", name=name + "-report.json", timeout=120)
    return out, json.loads(text)


def run_pool(c):
    out = c.path("pool")
    _, doc = record_launch(c, c.interp.argv(c.stage_workloads(WORKLOAD), "pool", c.tpath(out), "3.6"), "pool")
    return check_workers(c, doc, out, "pool")


def run_prefork(c):
    out = c.path("prefork")
    _, doc = record_launch(c, c.interp.argv(c.stage_workloads(WORKLOAD), "prefork", c.tpath(out), "3"), "prefork")
    return check_workers(c, doc, out, "prefork")


def run_shell(c, delayed=False):
    out = c.path("shell")
    py = [c.interp.path, c.stage_workloads(WORKLOAD), "burn", c.tpath(out), "1.0"]
    # delayed: py-spy's delayed_launch.sh, a shell that sleeps, then becomes Python
    cmd = "sleep 1.5; exec " + " ".join(py) if delayed else " ".join(py) + "; true"
    if c.interp.root:  # the root's own shell, in the root
        if getattr(c.interp, "isolation", None):
            raise st.Skip("an isolated interpreter")
        argv = ["chroot", c.interp.root, "/bin/sh", "-c", cmd]
    else:
        sh = shutil.which("sh")
        if not sh:
            raise st.Skip("no sh")
        argv = [sh, "-c", cmd]
    _, doc = record_launch(c, argv, "shell")
    summary = check_workers(c, doc, out, "shell")
    stacks = per_process(doc)
    shells = [p for p in doc.get("processes", []) if p["pid"] not in truths(out)]
    c.expect(all(stacks.get(p["pid"], (0,))[0] == 0 for p in shells),
             "shell: the shell gives no samples: %s" % shells)
    return summary


def run_delayed(c):
    return run_shell(c, delayed=True)


def run_late(c):
    out = c.path("late")
    _, doc = record_launch(c, c.interp.argv(c.stage_workloads(WORKLOAD), "late", c.tpath(out), "2.0"), "late")
    truth = truths(out)
    listed = {p["pid"]: p for p in doc.get("processes", [])}
    c.expect(len(truth) == 1, "late: one child wrote its truth: %s" % truth)
    for pid, cpu in truth.items():
        got = listed.get(pid, {}).get("cpu_s", 0.0)
        c.expect(got >= 0.85 * cpu and got <= cpu * (1 + TOL),
                 "late: the child %d sampled %.3f s of its %.3f s (>= 85%%: found within "
                 "~150 ms)" % (pid, got, cpu))
        return "child sampled %.0f%% of its CPU" % (100 * got / cpu if cpu else 0)


def run_late_scan(c):
    """late, with scry in a network namespace of its own: the process-events connector is
    refused there, so children are found by /proc scans (every 50 ms)."""
    if not shutil.which("unshare"):
        raise st.Skip("no unshare")
    out = c.path("late")
    report = c.path("late-scan-report.json")
    p = c.spawn(["unshare", "--net", c.scry_path, "record", "--subprocesses", "-r", "200",
                 "-f", "json", "-o", report, "--"]
                + c.interp.argv(c.stage_workloads(WORKLOAD), "late", c.tpath(out), "1.0"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=60)
    err = err.decode("utf-8", "replace")
    c.expect(p.returncode == 0 and "/proc scans" in err,
             "scry ran with /proc scans (rc %d): %s" % (p.returncode, st.short(err, 300)))
    with open(report) as f:
        doc = json.load(f)
    listed = {q["pid"]: q for q in doc.get("processes", [])}
    truth = truths(out)
    c.expect(len(truth) == 1, "late_scan: one child wrote its truth: %s" % truth)
    for pid, cpu in truth.items():
        got = listed.get(pid, {}).get("cpu_s", 0.0)
        c.expect(got >= 0.85 * cpu, "late_scan: the child %d sampled %.3f s of its %.3f s"
                 % (pid, got, cpu))
        return "child sampled %.0f%% of its CPU" % (100 * got / cpu if cpu else 0)
    return ""


def start_hold(c, seconds):
    out = c.path("hold")
    p = c.spawn(c.interp.argv(c.stage_workloads(WORKLOAD), "hold", c.tpath(out), str(seconds)))
    ready = c.wait_json(out + ".ready", p, "pool ready")
    c.release(p)
    time.sleep(0.5)  # the workers are running their task
    return p, ready["pid"], out


def run_attach(c):
    p, parent, out = start_hold(c, 6)
    res, text = c.record(["-q", "--subprocesses", "-r", "200", "-d", "2.5", "--pid", parent],
                         "json", name="attach.json", timeout=60)
    doc = json.loads(text)
    listed = {q["pid"]: q for q in doc.get("processes", [])}
    c.expect(parent in listed, "attach: the parent %d is listed: %s" % (parent, list(listed)))
    workers = [q for q in doc.get("processes", []) if q["pid"] != parent]
    c.expect(len(workers) == 3, "attach: three workers: %s" % [q["pid"] for q in workers])
    c.wait(p, 30, "the pool")
    # the truth: each worker's own CPU time over the whole run (its duty cycle, 1:2:3 on an
    # idle machine, is steady, so its share of the sum is the same in the recorded window)
    truth = truths(out)
    c.expect(len(truth) == 3, "attach: three workers wrote their truth")
    tsum = sum(truth.values())
    total = sum(q["cpu_s"] for q in workers)
    shares = []
    for q in sorted(workers, key=lambda q: truth.get(q["pid"], 0)):
        got = 100.0 * q["cpu_s"] / total if total else 0
        want = 100.0 * truth.get(q["pid"], 0) / tsum if tsum else 0
        shares.append(got)
        c.expect(abs(got - want) <= TOL_PP, "attach: worker %d's share %.1f%%, its own "
                 "%.1f%% +- %.0f" % (q["pid"], got, want, TOL_PP))
    return "shares %s" % ", ".join("%.1f%%" % s for s in shares)


def run_dump(c):
    p, parent, out = start_hold(c, 3)
    res = c.scry_ok(["dump", "--subprocesses", "--json", "--pid", parent])
    docs = json.loads(res.out)
    pids = [d.get("pid") for d in docs]
    c.expect(len(pids) == 4 and pids[0] == parent, "dump: the parent %d first, then its 3 "
             "workers: %s" % (parent, pids))
    one = json.loads(c.scry_ok(["dump", "--json", "--pid", parent]).out)
    c.expect(isinstance(one, dict) and one.get("pid") == parent,
             "dump without --subprocesses: the parent alone")
    c.wait(p, 30, "the pool")
    return "pids %s" % pids


def run_top(c):
    p, parent, out = start_hold(c, 6)
    res = c.scry_ok(["top", "--subprocesses", "--once", "-d", "2", "--pid", parent])
    m = re.search(r"^CPU ([\d.]+)%", res.out, re.M)
    cpu = float(m.group(1)) if m else 0.0
    c.expect("burn (" in res.out, "top: the workers' burn() is listed")
    one = c.scry_ok(["top", "--once", "-d", "1", "--pid", parent])
    m = re.search(r"^CPU ([\d.]+)%", one.out, re.M)
    c.expect(m and float(m.group(1)) < 20, "top without --subprocesses: the idle parent only "
             "(%s)" % (m.group(0) if m else one.out[:200]))
    c.wait(p, 30, "the pool")
    # the truth: the workers' own CPU time over their 6 s, as a rate (steady by design)
    want = 100.0 * sum(truths(out).values()) / 6.0
    c.expect(want > 0 and abs(cpu - want) <= 0.3 * want, "top: CPU %.1f%% of the whole pool, "
             "the workers' own rate %.1f%% (+- 30%%)\n%s" % (cpu, want, st.short(res.out, 600)))
    return "CPU %.1f%% (own %.1f%%)" % (cpu, want)


def check_memory(c, doc, out, what):
    """Each worker's keep<k>() line allocated k * 32 MiB: within 25% (sampled allocation)."""
    truth = {d["k"]: d["bytes"] for d in
             (json.load(open(p)) for p in glob.glob(out + ".*.json"))}
    c.expect(sorted(truth) == [1, 2, 3], "%s: the three workers wrote their truth: %s"
             % (what, sorted(truth)))
    lines = doc.get("memory", {}).get("top_alloc_lines", [])
    got = {}
    for k in (1, 2, 3):
        at = marker_line("KEEP%d" % k)
        mb = sum(l["alloc_mb"] for l in lines if l["line"] == at)
        want = truth.get(k, 0) / 1048576.0
        got[k] = mb
        c.expect(want and abs(mb - want) <= 0.25 * want, "%s: keep%d() allocated %.1f MiB, "
                 "truth %.1f (+- 25%%)" % (what, k, mb, want))
    return "keep1-3: %s MiB" % ", ".join("%.1f" % got[k] for k in (1, 2, 3))


def run_memory(c):
    out = c.path("mem")
    res, text = c.record(["-q", "--subprocesses", "--memory", "--"]
                         + c.interp.argv(c.stage_workloads(WORKLOAD), "mem", c.tpath(out), "1.5"),
                         "json", name="mem-report.json", timeout=120)
    return check_memory(c, json.loads(text), out, "memory")


def run_memory_attach(c):
    out = c.path("mem")
    p = c.spawn(c.interp.argv(c.stage_workloads(WORKLOAD), "mem", c.tpath(out), "2.5"))
    ready = c.wait_json(out + ".ready", p, "pool ready")
    c.release(p)
    res, text = c.record(["-q", "--subprocesses", "--memory", "-d", "4.5", "--pid",
                          ready["pid"]], "json", name="mem-attach.json", timeout=60)
    c.wait(p, 30, "the pool")
    return check_memory(c, json.loads(text), out, "memory_attach")


def run_mixed(c):
    """dump and record --subprocesses on a parent whose children are a shell, a Python and
    an unreaped zombie: the Python child is there, the others are skipped quietly."""
    out = c.path("mixed")
    p = c.spawn(c.interp.argv(c.stage_workloads(WORKLOAD), "mixed", c.tpath(out)))
    ready = c.wait_json(out + ".ready", p, "mixed ready")
    c.release(p)
    parent, child = ready["pid"], ready["python"]
    res = c.scry_ok(["dump", "--subprocesses", "--json", "--pid", parent])
    pids = [d.get("pid") for d in json.loads(res.out)]
    c.expect(pids == [parent, child], "dump: the parent %d and its Python child %d only "
             "(shell %d, zombie %d skipped): %s" % (parent, child, ready["shell"],
                                                     ready["zombie"], pids))
    rec, text = c.record(["-q", "--subprocesses", "-d", "1", "--idle", "--pid", parent], "json",
                         name="mixed.json", timeout=60)
    listed = sorted(q["pid"] for q in json.loads(text).get("processes", []))
    c.expect(listed == sorted([parent, child]), "record: the parent and the Python child "
             "listed: %s" % listed)
    c.stop(p)
    return "dump %s" % pids


def run_refused(c):
    res = c.scry(["dump", "--subprocesses", "--container", "abc123456789"])
    c.expect(res.rc == 2, "dump --subprocesses --container refused (rc %d): %s"
             % (res.rc, res.err))


def main():
    scry, python, patterns = st.positional(__doc__)
    tests = st.Tests()
    for name, fn in (("pool", run_pool), ("prefork", run_prefork), ("shell", run_shell), ("delayed", run_delayed),
                     ("late", run_late), ("late_scan", run_late_scan), ("attach", run_attach), ("dump", run_dump), ("top", run_top),
                     ("memory", run_memory), ("memory_attach", run_memory_attach), ("mixed", run_mixed),
                     ("refused", run_refused)):
        tests.add(name, fn)
    return st.run_on(tests.select(patterns), scry, python, "subprocesses", "scry-subproc",
                     skip_label=python)


if __name__ == "__main__":
    sys.exit(main())
