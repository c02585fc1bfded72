"""Known-answer helpers: a profile compared with the truth a workload measured itself.

  shares(weights, names)        percentages of NAMES, normalised over NAMES only
  compare_shares(...)           shares vs truth within a tolerance in points, where a miss
                                while the target hardly had a CPU is "overloaded", not FAIL
  rel_err / within(...)         a quantity vs its truth within a relative tolerance
  load_json(path, what)         a report or a workload's truth file, or a FAIL saying why
  parse_collapsed(text)         collapsed stacks as ([frame text root first], count)
"""
import json
import re

from .runner import Fail, check, short

MIN_ON_CPU = 0.8  # below this share of a CPU for the target, a share miss is inconclusive


def shares(weights, names):
    """{name: percent of the sum over NAMES} of WEIGHTS ({name: weight}); the sum over
    NAMES must be > 0."""
    inside = sum(weights.get(k, 0) for k in names)
    check(inside > 0, "nothing in %s; have: %s" % (list(names), sorted(weights.items())[:10]))
    return dict((k, 100.0 * weights.get(k, 0) / inside) for k in names)


def compare_shares(got, truth, n, what, tolerance, on_cpu=1.0, overloaded=None,
                   min_on_cpu=MIN_ON_CPU):
    """Checks GOT against TRUTH ({name: percent}) within TOLERANCE points; returns the
    detail text ('WHAT a/b/c vs truth a/b/c (N samples, target on CPU x%)'). When the
    target was on a CPU less than MIN_ON_CPU of the time (ON_CPU = its CPU time / wall
    time: an overloaded machine, where the sampler competes with it for the CPUs) a miss
    is appended to the list OVERLOADED instead of failing; the caller then SKIPs."""
    diffs = dict((k, abs(got[k] - truth[k])) for k in truth)
    detail = "%s %s vs truth %s (%d samples, target on CPU %.0f%%)" % (
        what, "/".join("%.1f" % got[k] for k in sorted(truth)),
        "/".join("%.1f" % truth[k] for k in sorted(truth)), n, 100 * on_cpu)
    worst = max(diffs.values())
    if worst > tolerance:
        msg = "share off by %.1f points > %.1f: %s" % (worst, tolerance, detail)
        if on_cpu < min_on_cpu and overloaded is not None:
            overloaded.append(msg)
        else:
            raise Fail(msg)
    return detail


def rel_err(got, want):
    """(got - want) / want; infinity when WANT is 0."""
    return (got - want) / want if want else float("inf")


def within(got, want, tol, what, unit="MB"):
    """Checks |GOT/WANT - 1| <= TOL; returns 'WHAT got UNIT vs truth want UNIT (+x%)'."""
    e = rel_err(got, want)
    detail = "%s %.1f %s vs truth %.1f %s (%+.1f%%)" % (what, got, unit, want, unit, 100 * e)
    check(abs(e) <= tol, "%s: off by more than %d%%" % (detail, round(100 * tol)))
    return detail


def load_json(path, what="file"):
    """The parsed JSON of PATH; FAILs (not a crash) when it is missing or malformed."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError as e:
        raise Fail("%s %s not readable: %s" % (what, path, e))
    try:
        return json.loads(text)
    except ValueError as e:
        raise Fail("%s %s is not JSON (%s): %s" % (what, path, e, short(text)))


COLLAPSED_RE = re.compile(r"^(.+) (\d+)$")


def parse_collapsed(text, strict=True):
    """Collapsed stacks -> [([frame text, root first], count)]. STRICT: a malformed
    non-empty line FAILs (else it is ignored)."""
    stacks = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        m = COLLAPSED_RE.match(line)
        if m is None:
            check(not strict, "collapsed line %d malformed: %r" % (n, line[:200]))
            continue
        stacks.append((m.group(1).split(";"), int(m.group(2))))
    return stacks
