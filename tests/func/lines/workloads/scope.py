"""Whose line (--include/--exclude/--all-lines): one line calls a helper module of this
program (scopelib/spin.py, the user's code unless excluded), one calls json.loads (the
standard library unless included). Truth: each line's thread CPU time (time.thread_time
around it), written to --out at exit; line numbers through #@NAME@ markers, in --ready.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "workloads"))
sys.path.insert(0, HERE)
import _wl  # noqa: E402
from scopelib import spin  # noqa: E402

BLOB = json.dumps([{"id": i, "name": "n%d" % i, "v": [i, i * 0.5, "x"]} for i in range(300)])


def work_spin():
    return spin.spin(2000)  #@SPIN@


def work_json():
    return len(json.loads(BLOB))  #@JSON@


def main():
    args = _wl.parse()
    _wl.catch_sigterm()
    me = work_spin.__code__.co_filename
    funcs = {"SPIN": work_spin, "JSON": work_json}
    cpu = dict((n, 0.0) for n in funcs)
    reps = {}
    for n, f in funcs.items():  # about 10 ms per line and round
        t0 = time.thread_time()
        k = 0
        while time.thread_time() - t0 < 0.01:
            f()
            k += 1
        reps[n] = k
    truth = {"pid": os.getpid(), "file": me, "spin_file": spin.spin.__code__.co_filename,
             "lines": dict((n, _wl.marker_line(me, n)) for n in funcs)}
    _wl.write_json(args.ready, truth)
    deadline = time.time() + args.seconds
    while not _wl.Stop.flag and time.time() < deadline:
        for n, f in funcs.items():
            t0 = time.thread_time()
            for _ in range(reps[n]):
                f()
            cpu[n] += time.thread_time() - t0
    _wl.write_json(args.out, {"cpu": cpu})


main()
