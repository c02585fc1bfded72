"""benchlib.py - what the benchmark scripts share: the command line they all start from.

Stdlib only; imported by the scripts of bench/ (their own directory is on sys.path).
"""
import argparse


def parser(doc, python=None, seconds=None, reps=None):
    """An argparse parser described by the first paragraph of DOC (the script's __doc__) with
    --scry PATH (required) and, for each of PYTHON, SECONDS, REPS that is given: --python
    (PYTHON is a (help, default) pair), --seconds S (a float, default SECONDS) and --reps N
    (an int, default REPS). The caller adds its own options."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--scry", required=True)
    if python is not None:
        ap.add_argument("--python", help=python[0], default=python[1])
    if seconds is not None:
        ap.add_argument("--seconds", type=float, default=seconds)
    if reps is not None:
        ap.add_argument("--reps", type=int, default=reps)
    return ap
