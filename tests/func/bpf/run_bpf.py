#!/usr/bin/env python3
"""Known-answer tests of `--sampler bpf` (Python stacks walked in the kernel at each
task-clock tick, bpfsamp/): CPU shares of two functions against their own thread_time,
whole stacks of a call-heavy recursive program at 1 kHz (0 torn of at least 2,000), and
`top --once`, --native stacks (the kernel's stack copies unwound and merged), the refusals
(dump, --idle).

usage: run_bpf.py --scry PATH --python LABEL [-k PATTERN] [-v]

Where this scry or this machine cannot load BPF programs (not built, not root, a kernel
without BPF ring buffers) it prints `SKIP <label>: <reason>`. Harness: tests/lib/scrytest.
"""
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "lines"))
sys.path.insert(0, os.path.join(HERE, "..", "attr"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402,F401
import run_lines  # noqa: E402  (its call-heavy workload and what a torn stack is)
import run_attr  # noqa: E402  (its --native workload, scryext and the expected C chain)

VERSIONS = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "debian3.11", "3.14",
            "3.15", "3.14d", "3.15d"]
TESTS = st.Tests()
SHARE_TOL = 4.0  # points
TORN_MIN = 2000  # samples


def leaf_shares(text, names):
    """{name: % of the samples whose leaf is it}, over the samples in NAMES; their count."""
    got = dict((n, 0) for n in names)
    for frames, n in st.parse_collapsed(text):
        leaf = run_lines.split_frame(frames[-1])[0]
        if leaf in got:
            got[leaf] += n
    total = sum(got.values())
    return dict((k, 100.0 * v / total if total else 0.0) for k, v in got.items()), total


@TESTS("shares")
def t_shares(c):
    """fa/fb burn 1:2 of the CPU, each measuring its own thread_time: scry's shares (launch,
    1 kHz, 4 s) within 4 points, every sample walked in the kernel."""
    staged = c.stage(os.path.join(HERE, "workloads"))
    truth_path = c.path("truth.json")
    res, text = c.record(["--sampler", "bpf", "--rate", "1000", "--",
                          *c.interp.argv(os.path.join(staged, "two_funcs.py"), "4",
                                         c.tpath(truth_path))], "collapsed")
    with open(truth_path) as f:
        cpu = json.load(f)["cpu_s"]
    tot = sum(cpu.values())
    truth = dict((k, 100.0 * v / tot) for k, v in cpu.items())
    got, n = leaf_shares(text, truth)
    check(n >= 400, "only %d samples of fa/fb in 4 s at 1 kHz" % n)
    check("sampler: bpf" in res.err, "the summary does not name the bpf sampler: %s" % res.err)
    return st.compare_shares(got, truth, n, "leaf fa/fb %", SHARE_TOL)


@TESTS("torn")
def t_torn(c):
    """A call-heavy recursive program at 1 kHz: 0 torn stacks (stray root, impossible depth,
    wrong caller, truncated) of at least 2,000 samples."""
    p, truth = run_lines.workload(c, "calls.py", ["--seconds", "40"])
    total, bad, tries, examples = 0, {}, 0, []
    while total < TORN_MIN and tries < 4:
        tries += 1
        _, text = c.record(["-q", "--sampler", "bpf", "--pid", p.pid, "--rate", "1000",
                            "--duration", "3"], "collapsed", "calls-%d.txt" % tries)
        for frames, n in st.parse_collapsed(text):
            total += n
            k = run_lines.torn_kind(frames, truth)
            if k:
                bad[k] = bad.get(k, 0) + n
                if len(examples) < 3:
                    examples.append(";".join(frames))
    detail = "%d samples in %d runs, %d torn %s" % (total, tries, sum(bad.values()), bad)
    if total < TORN_MIN:
        raise Skip("machine overloaded, too few samples: " + detail)
    check(not bad, detail + " e.g. " + " | ".join(examples))
    # top reads through the same sampler
    r = c.scry_ok(["top", "--sampler", "bpf", "--once", "--duration", "1", "--pid", p.pid])
    check("recurse (" in r.out, "top --once shows no recurse: %s" % r.out[-500:])
    return detail + "; top --once shows it"


@TESTS("pid_namespace")
def t_pid_namespace(c):
    """scry and its target in a PID namespace of their own (unshare --pid --mount-proc):
    the program names threads by the ids scry sees, so every sample is still walked in
    the kernel (none read in user space for want of a thread state)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or c.interp.root:
        raise Skip("needs root, unshare and a host interpreter")
    staged = c.stage(os.path.join(HERE, "workloads"))
    script = ('"$@" & sleep 0.5; %s record --sampler bpf --pid $! -d 1.5 --rate 1000 '
              '-f collapsed -o %s; rc=$?; wait; exit $rc' % (c.scry_path, c.path("ns.txt")))
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh"]
                       + c.interp.argv(os.path.join(staged, "two_funcs.py"), "2.5",
                                       c.path("truth.json")),
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "scry in the namespace: rc %d %s" % (r.returncode, r.stderr))
    with open(c.path("ns.txt")) as f:
        got, n = leaf_shares(f.read(), ["fa", "fb"])
    check(n >= 200, "only %d samples of fa/fb" % n)
    # (a page not present at a sample may still send one to user space, rarely)
    check(" 0 threads not known yet" in r.stderr, "summary: %s" % r.stderr)
    return "%d samples, fa/fb %.0f/%.0f, every thread known to the program" % (n, got["fa"], got["fb"])


@TESTS("native")
def t_native(c):
    """--native (attr's stack_ext with the bpf sampler): the Python line calling
    scryext.deep has the C chain beneath it (scryext_deep, 4 scry_native_recurse,
    scry_native_burn) in at least 90% of its stacks, and is at least 90% native; the stacks
    come from the kernel's copies (the summary counts them). Samples taken in the kernel
    have native stacks too (native_in_kernel)."""
    d = run_attr.ext_dir(c)
    _, ready = c.workload("stacks.py", ["--mode", "ext", "--ext-dir", d])
    pid = ready["pid"]
    text = c.record(["--pid", pid, "--native", "--rate", 200, "--duration", 2], "collapsed",
                    "native.txt")
    stacks = run_attr.parse_collapsed(text)
    mine = [(fr, n) for fr, n in stacks
            if any(not f.native and f.function == "call_ext" for f in fr)]
    check(sum(n for _, n in mine) >= 20, "only %d samples through call_ext: %s" % (
        sum(n for _, n in mine), st.short(text, 800)))
    detail = run_attr.stack_result(mine, sum(n for _, n in stacks), "ext", run_attr.judge_ext, 90)
    res, out = st.Ctx.record(c, ["--sampler", "bpf", "--pid", pid, "--native", "--rate", 200,
                                 "--duration", 1.5], "json", "native.json")
    src = os.path.join(run_attr.WORKLOADS, "stacks.py")
    with open(src) as f:
        line = [i + 1 for i, l in enumerate(f) if "#@ext@" in l][0]
    g = run_attr.line_split(json.loads(out), "stacks.py", {line: "ext"})["ext"]
    total = g["python"] + g["native"] + g["system"]
    check(g["samples"] >= 20 and g["native"] >= 0.9 * total,
          "the call_ext line: %s" % g)
    m = re.search(r"native stacks of (\d+) \((\d+) without one\)", res.err)
    check(m and int(m.group(1)) >= 4 * int(m.group(2)),
          "the summary counts too few native stacks: %s" % res.err)
    kern = native_in_kernel(c)
    return "%s; the line %.0f%% native of %d samples; %s" % (
        detail, 100.0 * g["native"] / total, g["samples"], kern)


# 0.4 s of its own CPU (200 samples at 500 Hz), however loaded the machine
WRITE_LOOP = ("import os, time\nfd = os.open(os.devnull, os.O_WRONLY)\n"
              "while time.process_time() < 0.4:\n    for i in range(200):\n"
              "        os.write(fd, b'x' * 64)\n")


def native_in_kernel(c):
    """--native for samples taken in the kernel: a loop of small writes spends about half
    its CPU in write(2), and those samples end in the C library's write wrapper (the
    registers the thread entered the kernel with). Without them only the rare user-mode
    sample on the wrapper's few instructions would (9% against 51-60% here)."""
    _, text = st.Ctx.record(c, ["--sampler", "bpf", "--native", "--rate", 500, "--",
                                *c.interp.argv("-c", WRITE_LOOP)], "collapsed", "write.txt")
    stacks = run_attr.parse_collapsed(text)
    total = sum(n for _, n in stacks)
    def in_write(frames):  # below the last Python frame (sid's libc: write -> an unnamed one)
        py = [i for i, f in enumerate(frames) if not f.native]
        return any((f.file or "").startswith("libc") and "write" in (f.function or "")
                   for f in frames[py[-1] + 1 if py else 0:])
    libc = sum(n for fr, n in stacks if in_write(fr))
    check(total >= 50 and libc >= 0.2 * total,
          "%d of %d samples of the write loop end in libc's write: %s" % (
              libc, total, st.short(text, 800)))
    return "write loop: %d%% of %d samples end in libc's write" % (100 * libc // total, total)


@TESTS("refusals")
def t_refusals(c):
    """What the bpf sampler does not do yet is refused with the reason: dump and record
    --blocking; and a user without CAP_BPF is told so."""
    pid = str(os.getpid())
    for args in (["dump", "--sampler", "bpf", "--pid", pid],
                 ["record", "--sampler", "bpf", "--blocking", "--pid", pid]):
        r = c.scry(args)
        check(r.rc != 0 and "bpf sampler is for record" in r.err, "%s" % r)
    what = "dump, --blocking refused"
    host = "/usr/bin/python3"  # one nobody may run (pyenv's live under /root)
    if os.geteuid() == 0 and os.access(host, os.X_OK):
        # without privileges: the program is refused, and the reason says what is missing
        r = c.scry(["record", "--sampler", "bpf", "-d", "1", "-o", "/dev/null", "--",
                    host, "-c", "import time; time.sleep(0.5)"], as_nobody=True)
        check(r.rc != 0 and "CAP_BPF" in r.err, "as nobody: %s" % r)
        what += "; as nobody: needs CAP_BPF"
    return what


def main():
    ap = st.add_common_args(st.runner.parser(__doc__), VERSIONS)
    a = ap.parse_args()
    tests = TESTS.select(a.k)
    scry, interp, rc = st.open_suite(a, tests)
    if rc is not None:
        return rc
    why = st.bpf_refused(scry, interp)
    if why:
        return st.skip_all(a.python, Skip("BPF not allowed here: " + why), len(tests))
    print("scry bpf sampler tests: %s, %s" % (scry, interp.describe()))
    sys.stdout.flush()
    try:
        return st.run(tests, lambda t: make_ctx(t, interp, scry, a.v), "Python %s" % a.python,
                      verbose=a.v)
    finally:
        for d in run_attr.EXT_DIRS.values():
            shutil.rmtree(d, ignore_errors=True)


def make_ctx(t, interp, scry, verbose):
    """The native test runs in attr's context (its workloads, scry record with --sampler
    bpf); the others in scrytest's."""
    if t.name == "native":
        return run_attr.Ctx(interp, scry, t.name, verbose, sampler="bpf")
    return st.Ctx(t.name, interp, scry, verbose, prefix="scry-bpf")


if __name__ == "__main__":
    sys.exit(main())
