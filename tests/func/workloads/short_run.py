"""A short program: short_work burns CPU for --seconds (default 0.3) and the program exits.

Used for launch mode (through wrappers and shims, and many launches in a row) and for a
target that exits while scry is attached (it writes --ready once running).
"""
import time

import _wl


def short_work(deadline):
    x = 0
    while time.time() < deadline:
        for i in range(1000):
            x += i
    return x


def main():
    args = _wl.parse()
    seconds = args.seconds if args.seconds > 0 else 0.3
    truth = _wl.base_truth()
    truth["file"] = short_work.__code__.co_filename
    _wl.write_json(args.ready, truth)
    short_work(time.time() + seconds)


main()
