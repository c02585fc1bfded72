"""Helpers shared by the attribution workloads (Python 3.6 to 3.13, stdlib only).

Common options: --ready PATH (JSON truth written atomically once in steady state),
--out PATH (results at the end), --max-seconds S (SIGALRM safety limit, so that no
workload outlives a crashed runner).
"""
import argparse
import json
import os
import signal


class Stop(object):
    flag = False


def _on_term(signum, frame):
    Stop.flag = True


def parse(extra=()):
    p = argparse.ArgumentParser()
    p.add_argument("--ready", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--max-seconds", type=int, default=150)
    for name, typ, default in extra:
        if typ is bool:
            p.add_argument(name, action="store_true")
        else:
            p.add_argument(name, type=typ, default=default)
    args = p.parse_args()
    if args.max_seconds > 0:
        signal.alarm(args.max_seconds)
    signal.signal(signal.SIGTERM, _on_term)
    return args


def write_json(path, obj):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def marker_lines(path):
    """{name: line} for every line of PATH ending with a comment #@name@."""
    out = {}
    with open(path) as f:
        for n, text in enumerate(f, 1):
            t = text.rstrip()
            if t.endswith("@") and "#@" in t:
                out[t[t.rindex("#@") + 2 : -1]] = n
    return out
