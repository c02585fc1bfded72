"""A generator-heavy program: generators resumed from C (sum, list(map(...)), sorted) and
from Python, for --seconds (default 2). On 3.12 every resume from C runs through an entry
frame of the interpreter's trampoline code ("<interpreter trampoline>" in "<shim>"), which
scry never shows (docs/usage.md "Entry frames").
"""
import time

import _wl


def leaf(n):
    for i in range(n):
        yield i * i


def mid(n):
    for v in leaf(n):
        yield v + 1


def consume():
    return sum(mid(200))


def via_c():
    return list(map(lambda x: x + 1, mid(100)))


def main():
    args = _wl.parse()
    truth = _wl.base_truth()
    truth["file"] = leaf.__code__.co_filename
    _wl.write_json(args.ready, truth)
    end = time.time() + (args.seconds if args.seconds > 0 else 2)
    while time.time() < end:
        consume()
        via_c()
        sorted(mid(50), key=lambda v: -v)


main()
