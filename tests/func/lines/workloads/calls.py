"""A call-heavy program for torn stacks: many short calls, a generator, a recursion of
varying depth and the standard library's random.randint, so the frame chain changes
thousands of times per sampling interval.

Every stack the program can have is <module> -> main -> recurse x (1..MAXD+1) -> one of
gen/mid/leaf/randint (and random.py below randint): the test checks each sample against
that grammar (the truth is the program's structure). --ready gets the file and MAXD.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "workloads"))
import _wl  # noqa: E402

MAXD = 24


def leaf(x):
    return x + 1


def mid(n):
    s = 0
    for i in range(n):
        s += leaf(i)
    return s


def gen(n):
    for i in range(n):
        yield leaf(i)


def recurse(d):
    if d == 0:
        return sum(gen(8)) + mid(8) + random.randint(0, 9)
    return recurse(d - 1) + 1


def main():
    args = _wl.parse()
    deadline = time.time() + args.seconds if args.seconds > 0 else None
    truth = {"pid": os.getpid(), "file": recurse.__code__.co_filename, "maxd": MAXD}
    for d in range(MAXD + 1):
        recurse(d)
    _wl.write_json(args.ready, truth)
    n = 0
    while deadline is None or time.time() < deadline:
        for d in range(MAXD + 1):
            n += recurse(d)
    return n


main()
