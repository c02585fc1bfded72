"""Helpers shared by the functional-test workloads (Python 3.6 to 3.13, stdlib only).

Every workload takes:
  --ready PATH    write a JSON object here (atomically) once it is in its steady state;
                  it holds the workload's own truth (pid, line numbers, thread ids...)
  --out PATH      write measured results here at the end (or on SIGTERM)
  --seconds S     run for S seconds, then exit normally (0 = until SIGTERM)
  --max-seconds S hard safety limit: SIGALRM (default action: terminate) after S seconds,
                  so that no workload outlives a crashed runner (adds no thread)
"""
import argparse
import json
import os
import signal
import sys
import threading


class Stop(object):
    """Set by SIGTERM; workloads poll it between rounds of work."""

    flag = False


def _on_term(signum, frame):
    Stop.flag = True


def parse(extra=None, seconds=0.0, max_seconds=120):
    """Parse the common options (SECONDS and MAX_SECONDS: the defaults of --seconds and
    --max-seconds) plus (name, type, default) extras; arm the safety alarm."""
    p = argparse.ArgumentParser()
    p.add_argument("--ready", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--seconds", type=float, default=seconds)
    p.add_argument("--max-seconds", type=int, default=max_seconds)
    for name, typ, default in extra or []:
        if typ is bool:
            p.add_argument(name, action="store_true")
        else:
            p.add_argument(name, type=typ, default=default)
    args = p.parse_args()
    if args.max_seconds > 0:
        signal.alarm(args.max_seconds)
    return args


def catch_sigterm():
    """SIGTERM sets Stop.flag instead of killing (for workloads that report at the end)."""
    signal.signal(signal.SIGTERM, _on_term)


def write_json(path, obj):
    """Write obj as JSON to path atomically (tmp file + rename); no-op when path is None."""
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def run_threads(target, n):
    """Runs TARGET(out, i) in N threads (i = 0..N-1) to their end; returns out, N slots
    (None) the threads may fill."""
    out = [None] * n
    ts = [threading.Thread(target=target, args=(out, i)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def native_tid():
    """The calling thread's kernel tid (threading.get_native_id appeared in 3.8)."""
    get = getattr(threading, "get_native_id", None)
    if get is not None:
        return get()
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(186)  # SYS_gettid on x86_64


def marker_line(path, name):
    """Line number (1-based) of the line of file `path` ending with the comment `#@name@`."""
    tag = "#@" + name + "@"
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(tag):
                return n
    raise ValueError("marker %r not in %s" % (tag, path))


def marker_lines(path):
    """{name: line} for every line of PATH ending with a comment #@name@."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            t = text.rstrip()
            if t.endswith("@") and "#@" in t:
                out[t[t.rindex("#@") + 2 : -1]] = n
    return out


def base_truth():
    return {
        "pid": os.getpid(),
        "version": list(sys.version_info[:3]),
        "executable": sys.executable,
    }
