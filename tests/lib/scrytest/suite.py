"""A suite's main: its scry and interpreter checked before the first test, its run.

Two shapes of command line: the option suites (`--scry PATH --python LABEL`, from
runner.add_common_args) call open_suite(); the positional ones (`SUITE SCRY [PYTHON
[PATTERN...]]`, consumers/ and whole/) call positional() and run_on(); the suites that
bring their own interpreter path (security/) run_as_root().
"""
import os
import subprocess
import sys

from .interp import LABELS, find, from_path
from .procs import Ctx
from .runner import Skip, run, setup_failed, skip_all


def open_suite(a, tests, isolate=None):
    """What a suite does with its parsed --scry and --python (A) before it runs TESTS:
    returns (scry, interp, None), scry's absolute path and the interpreter (in its own
    ISOLATE namespace, Interpreter.isolated, when it lives in the sid root), or
    (scry, None, exit code) after printing `FAIL setup` (no scry executable) or
    `SKIP <label>` for every test (the interpreter is missing)."""
    scry = os.path.abspath(a.scry)
    if not os.access(scry, os.X_OK):
        return scry, None, setup_failed("scry executable %s not found" % scry)
    try:
        interp = find(a.python)
        if isolate and interp.root:
            interp = interp.isolated(isolate)
    except Skip as e:
        return scry, None, skip_all(a.python, e, len(tests))
    return scry, interp, None


def positional(doc):
    """`SUITE SCRY [PYTHON [PATTERN...]]`: returns (scry's absolute path, PYTHON (default
    /usr/bin/python3), the patterns); without SCRY prints DOC and exits 2 (as argparse)."""
    if len(sys.argv) < 2:
        print(doc)
        sys.exit(2)
    python = sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/python3"
    return os.path.abspath(sys.argv[1]), python, sys.argv[3:]


def lookup(python):
    """The interpreter PYTHON names: a label of the registry or a path; raises Skip."""
    return find(python) if python in LABELS else from_path(python)


def run_on(tests, scry, python, label, prefix, skip_label=None):
    """Runs TESTS (selected) with SCRY on PYTHON (lookup()), each in a Ctx whose directory
    starts with PREFIX, under LABEL; a missing interpreter prints `SKIP SKIP_LABEL`
    (default LABEL) for all of them. Returns the exit code."""
    try:
        interp = lookup(python)
    except Skip as e:
        return skip_all(skip_label or label, e, len(tests))
    return run(tests, lambda t: Ctx(t.name, interp, scry, prefix=prefix), label)


def run_as_root(a, tests, label, prefix, python):
    """A suite with no interpreter label (security): runs the TESTS that A's -k selects with
    A's --scry and -v, each in a Ctx without an interpreter whose directory starts with
    PREFIX, under LABEL; `SKIP LABEL` for all of them unless root and PYTHON (the suite's
    own interpreter path) exist. Returns the exit code."""
    sel = tests.select(a.k)
    if os.geteuid() != 0:
        return skip_all(label, "needs root", len(sel))
    if not os.path.exists(python):
        return skip_all(label, "no %s" % python, len(sel))
    return run(sel, lambda t: Ctx(t.name, scry=os.path.abspath(a.scry), verbose=a.v,
                                  prefix=prefix), label, verbose=a.v)


def bpf_refused(scry, interp):
    """Why this scry cannot load its BPF program here, or None (one short record)."""
    p = subprocess.Popen(interp.argv("-c", "import time\nwhile True: time.sleep(0.05)"))
    try:
        r = subprocess.run([scry, "record", "-q", "--sampler", "bpf", "--pid", str(p.pid),
                            "--duration", "0.2", "-o", os.devnull], capture_output=True,
                           text=True, timeout=30)
    finally:
        p.kill()
        p.wait()
    if r.returncode == 0:
        return None
    for why in ("built without", "needs root", "refused the BPF program"):
        if why in r.stderr:
            return r.stderr.strip()
    return None  # another failure: the tests say what
