"""A program that execs itself: before_exec burns CPU for --seconds, then the process
execs the same interpreter with --after, whose after_exec burns for --after-seconds and
exits. Each phase measures its own thread CPU time and writes it into --out (the
second phase reads what the first wrote, then rewrites the file with both). The ready file
is written at the start of the first phase.
"""
import json
import os
import sys
import time

import _wl


def burn(seconds):
    c0 = time.process_time()
    deadline = time.time() + seconds
    x = 0
    while time.time() < deadline:
        for i in range(1000):
            x += i
    return time.process_time() - c0


def before_exec(seconds):
    return burn(seconds)


def after_exec(seconds):
    return burn(seconds)


def main():
    args = _wl.parse([("--after", bool, False), ("--after-seconds", float, 1.5)])
    if not args.after:
        truth = _wl.base_truth()
        truth["file"] = before_exec.__code__.co_filename
        _wl.write_json(args.ready, truth)
        cpu = before_exec(args.seconds if args.seconds > 0 else 1.0)
        _wl.write_json(args.out, {"before_exec": cpu})
        sys.stdout.flush()
        argv = [sys.executable, os.path.abspath(__file__), "--after", "--out", args.out or "",
                "--after-seconds", str(args.after_seconds)]
        os.execv(sys.executable, argv)
    cpu = after_exec(args.after_seconds)
    if args.out:
        with open(args.out) as f:
            out = json.load(f)
        out["after_exec"] = cpu
        _wl.write_json(args.out, out)


main()
