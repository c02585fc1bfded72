"""A stable call chain <module> -> main -> chain_a -> chain_b -> chain_c; chain_c burns CPU.

The truth (file and the exact call-site lines of main, chain_a and chain_b, via markers)
is written to --ready: every sample in chain_c must have exactly these parents.
"""
import time

import _wl


def chain_c():
    x = 0
    for i in range(20000):
        x += i
    return x


def chain_b():
    return chain_c()  #@CALL_B@


def chain_a(deadline):
    while deadline is None or time.time() < deadline:
        chain_b()  #@CALL_A@


def main():
    args = _wl.parse()
    f = chain_a.__code__.co_filename
    truth = _wl.base_truth()
    truth.update(
        {
            "file": f,
            "main_line": _wl.marker_line(f, "CALL_MAIN"),
            "a_line": _wl.marker_line(f, "CALL_A"),
            "b_line": _wl.marker_line(f, "CALL_B"),
            "module_line": _wl.marker_line(f, "CALL_MODULE"),
        }
    )
    chain_b()
    _wl.write_json(args.ready, truth)
    chain_a(time.time() + args.seconds if args.seconds > 0 else None)  #@CALL_MAIN@


main()  #@CALL_MODULE@
