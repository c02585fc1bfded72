"""The PASS/FAIL/SKIP/XFAIL runner every Python suite uses.

A suite registers its tests with a Tests object (`tests = Tests()`, then `@tests("name",
key=value...)` above each function), builds one context per test (procs.Ctx), and hands
both to run(). Each test prints one line `PASS|FAIL|SKIP|XFAIL name: detail [seconds]`
(the detail of a PASS is what the test returned: its measurement); the run ends with the
total time, the expected failures and the failed tests if any, and exactly one closing
line `N passed, N failed, N skipped` (XFAILs count as skipped). run() returns the exit
code: 1 if any test failed, else 0.

A test raises Fail (wrong answer), Skip (cannot run here: a missing tool, an overloaded
machine) or XFail (a feature scry itself reports as "not implemented"; never for a wrong
answer). Any other exception is a FAIL too. check(cond, msg) raises Fail; Ctx.expect()
records a soft check (printed as an `ok`/`FAIL` line under the test, the test fails at its
end if one failed) for tests that list many independent checks.
"""
import argparse
import sys
import traceback

from . import clock


class Fail(Exception):
    """A wrong answer, or a target harmed."""


class Skip(Exception):
    """The test cannot run here; the message says why."""


class XFail(Exception):
    """scry says the feature is not implemented."""


def check(cond, msg):
    """Raises Fail(msg) unless cond."""
    if not cond:
        raise Fail(msg)


def short(text, n=400):
    """TEXT stripped, its middle cut to keep about N characters."""
    text = (text or "").strip()
    return text if len(text) <= n else text[: n // 2] + " ... " + text[-n // 2:]


class Test(object):
    def __init__(self, name, fn, meta):
        self.name, self.fn, self.meta = name, fn, meta

    def __getattr__(self, key):  # meta keys read as attributes: t.smoke, t.mode
        try:
            return self.__dict__["meta"][key]
        except KeyError:
            raise AttributeError(key)


class Tests(object):
    """The ordered list of a suite's tests. `@tests("name", **meta)` registers a function;
    tests.add(name, fn, **meta) does the same without a decorator."""

    def __init__(self):
        self.all = []

    def __call__(self, name, **meta):
        def deco(fn):
            self.add(name, fn, **meta)
            return fn

        return deco

    def add(self, name, fn, **meta):
        self.all.append(Test(name, fn, meta))

    def select(self, patterns=(), where=None):
        """Tests whose name contains one of PATTERNS (all when empty) and for which
        where(test) is true."""
        return [t for t in self.all if (not patterns or any(p in t.name for p in patterns))
                and (where is None or where(t))]


def add_common_args(ap, labels=None):
    """--scry PATH (required), --python LABEL (when LABELS is given), -k PATTERN, -v."""
    ap.add_argument("--scry", required=True, help="path of the scry executable")
    if labels is not None:
        ap.add_argument("--python", required=True, choices=labels,
                        help="interpreter label (scrytest.interp)")
    ap.add_argument("-k", action="append", default=[], metavar="PATTERN",
                    help="run only tests whose name contains PATTERN (repeatable)")
    ap.add_argument("-v", action="store_true", help="print every scry command and its result")
    return ap


def parser(doc):
    """An ArgumentParser described by the first paragraph of DOC."""
    return argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])


def closing(passed, failed, skipped):
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.stdout.flush()


def setup_failed(msg):
    """Prints `FAIL setup: MSG` and the closing line; returns the exit code 1."""
    print("FAIL setup: %s" % msg)
    closing(0, 1, 0)
    return 1


def skip_all(label, reason, n):
    """The whole suite cannot run: prints `SKIP LABEL: REASON` (what ctest's
    SKIP_REGULAR_EXPRESSION matches) and the closing line; returns the exit code 0."""
    print("SKIP %s: %s" % (label, reason))
    closing(0, 0, n)
    return 0


def run(tests, make_ctx, label, call=None, verbose=False):
    """Runs TESTS in order: ctx = make_ctx(test); detail = call(test, ctx) (default
    test.fn(ctx)); ctx.finish() (the target-alive and soft checks); ctx.cleanup() whatever
    happened. Prints the lines described above; returns the exit code."""
    call = call or (lambda t, c: t.fn(c))
    passed = failed = skipped = 0
    xfails, failures = [], []
    t_all = clock.now()
    for t in tests:
        t0 = clock.now()
        c = None
        try:
            c = make_ctx(t)
            detail = call(t, c) or ""
            c.finish()
            status = "PASS"
        except Skip as e:
            status, detail = "SKIP", str(e)
        except XFail as e:
            status, detail = "XFAIL", str(e)
        except Fail as e:
            status, detail = "FAIL", str(e)
        except Exception as e:  # a crash of the test itself (bad JSON, KeyError...)
            status, detail = "FAIL", "%s: %s" % (type(e).__name__, e)
            if verbose:
                traceback.print_exc()
        finally:
            if c is not None:
                c.cleanup()
        print("%s %s: %s [%.1f s]" % (status, t.name, str(detail).replace("\n", " | "),
                                       clock.since(t0)))
        sys.stdout.flush()
        if status == "PASS":
            passed += 1
        elif status == "FAIL":
            failed += 1
            failures.append(t.name)
        else:
            skipped += 1
            if status == "XFAIL":
                xfails.append(t.name)
    print("%s: %.1f s" % (label, clock.since(t_all)))
    if xfails:
        print("expected failures (counted as skipped): %s" % ", ".join(xfails))
    if failures:
        print("failed: %s" % ", ".join(failures))
    closing(passed, failed, skipped)
    return 1 if failed else 0
