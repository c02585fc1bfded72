"""A busy thread whose stack never stays put: the module's own loop calls descend(DEPTH),
which calls itself down to descend(0) and returns, over and over, with no sleep anywhere.

So a dump at any moment finds the main thread with between 2 frames (<module>, descend)
and DEPTH + 2 of them (DEPTH + 1 of descend), <module> always at the root. With --vary the
depth of each round changes (1..DEPTH, a fixed pseudo-random walk): the stack changes
shape faster than a reader can copy it.
"""
import _wl


def descend(n):
    if n > 0:
        return descend(n - 1) + 1  #@DESCEND@
    return 0


args = _wl.parse([("--depth", int, 20), ("--vary", bool, False)])
truth = _wl.base_truth()
truth.update({"depth": args.depth, "descend_line": _wl.marker_line(__file__, "DESCEND")})
_wl.write_json(args.ready, truth)
depth, seed = args.depth, 12345
while True:
    if args.vary:
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        depth = 1 + seed % args.depth
    descend(depth)  #@CALL_DESCEND@
