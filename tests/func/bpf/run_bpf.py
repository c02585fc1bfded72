#!/usr/bin/env python3
"""Known-answer tests of `--sampler bpf` (Python stacks walked in the kernel at each
task-clock tick, bpfsamp/): CPU shares of two functions against their own thread_time,
whole stacks of a call-heavy recursive program at 1 kHz (0 torn of at least 2,000), and
`top --once`, the refusals (dump, --native, --idle).

usage: run_bpf.py --scry PATH --python LABEL [-k PATTERN] [-v]

Where this scry or this machine cannot load BPF programs (not built, not root, a kernel
without BPF ring buffers) it prints `SKIP <label>: <reason>`. Harness: tests/lib/scrytest.
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "lines"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip, check  # noqa: E402,F401
import run_lines  # noqa: E402  (its call-heavy workload and what a torn stack is)

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


@TESTS("refusals")
def t_refusals(c):
    """What the bpf sampler does not do yet is refused with the reason: dump and record
    --native; and a user without CAP_BPF is told so."""
    pid = str(os.getpid())
    for args in (["dump", "--sampler", "bpf", "--pid", pid],
                 ["record", "--sampler", "bpf", "--native", "--pid", pid]):
        r = c.scry(args)
        check(r.rc != 0 and "bpf sampler is for record" in r.err, "%s" % r)
    what = "dump, --native refused"
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
    return st.run(tests, lambda t: st.Ctx(t.name, interp, scry, a.v, prefix="scry-bpf"),
                  "Python %s" % a.python, verbose=a.v)


if __name__ == "__main__":
    sys.exit(main())
