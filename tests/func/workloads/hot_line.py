"""One hot line: hot_loop's single-line loop takes nearly all of the CPU.

The truth (file, function, line number of the loop, found through its #@HOT@ marker,
and the line's source text) is written to --ready.
"""
import time

import _wl


def hot_loop():
    x = 0
    for i in range(200000): x += i * 7  #@HOT@
    return x


def main():
    args = _wl.parse()
    code = hot_loop.__code__
    truth = _wl.base_truth()
    truth.update(
        {
            "file": code.co_filename,
            "function": "hot_loop",
            "line": _wl.marker_line(code.co_filename, "HOT"),
            "source": "for i in range(200000): x += i * 7",
        }
    )
    deadline = time.time() + args.seconds if args.seconds > 0 else None
    hot_loop()
    _wl.write_json(args.ready, truth)
    while deadline is None or time.time() < deadline:
        hot_loop()


main()
