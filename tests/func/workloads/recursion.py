"""Deep recursion: recurse(DEPTH) calls itself down to recurse(0), which sleeps.

So the main thread's stack holds exactly DEPTH + 1 frames of `recurse` (default 500 + 1),
DEPTH of them at the recursive call's line, then main and <module>.
With --busy the bottom frame burns CPU instead of sleeping.
"""
import sys
import time

import _wl


def recurse(n, args):
    if n > 0:
        return recurse(n - 1, args)  #@RECURSE@
    truth = _wl.base_truth()
    f = recurse.__code__.co_filename
    truth.update(
        {
            "file": f,
            "depth": args.depth,
            "call_line": _wl.marker_line(f, "RECURSE"),
            "bottom_line": _wl.marker_line(f, "BOTTOM_BUSY" if args.busy else "BOTTOM"),
            "main_line": _wl.marker_line(f, "CALL_MAIN"),
            "module_line": _wl.marker_line(f, "CALL_MODULE"),
        }
    )
    _wl.write_json(args.ready, truth)
    if args.busy:
        x = 0
        while True: x += 1  #@BOTTOM_BUSY@
    while True:
        time.sleep(1000)  #@BOTTOM@


def main():
    args = _wl.parse([("--depth", int, 500), ("--busy", bool, False)])
    sys.setrecursionlimit(max(1000, args.depth + 200))
    recurse(args.depth, args)  #@CALL_MAIN@


main()  #@CALL_MODULE@
