# -*- coding: utf-8 -*-
"""dump --locals known answers: inner() holds arguments and locals of known values (non-ASCII
str of every kind, a big and a negative int, float, bytes, lists nested deeper than the
bound, dicts (nested, with a deleted key, more items than shown), sets and a frozenset (one
with a deleted item), tuple, None/bools) and a closure cell from outer(), then waits. The
truth (--ready) is written once every value is set; the test compares the dump with it."""
import time

import _wl


def outer(ready, count, *rest, **opts):
    captured = "cellval"

    def inner(flag, label="x"):
        text = u"h\u00e9llo w\u00f6rld \u4e16\u754c \U0001F600"
        latin = u"caf\u00e9"
        long_text = u"\u00e9" * 100
        big = 2 ** 200 + 12345
        neg = -987654321987654321
        small = 7
        ratio = 2.5
        raw = b"ab\x00\xff"
        nested = [1, [2, [3, [4, [5]]]], "s", None, 9]
        table = {"a": 1, "b": 2, "c": 3}
        flags = {"a": False, "b": (1, 2, 3)}
        deep = {"k": {"k": {"k": "v"}}}
        holes = {"a": 1, "b": 2, "c": 3}
        del holes["b"]
        squares = dict((i, i * i) for i in range(12))
        empty = {}
        mixed = [{"x": 1}, {2}]
        seq = list(range(20))
        nothing = None
        yes = True
        no = False
        group = {1, 2}
        gaps = {1, 2, 3}
        gaps.discard(2)
        frozen = frozenset(["x"])
        none_yet = set()
        pair = (1, "two")
        closed = captured
        _wl.write_json(ready, _wl.base_truth())
        while True:
            time.sleep(0.05)

    return inner(True)


outer(_wl.parse().ready, 3, "r1", key="v")
