"""Library-heavy lines: each measured line of this file spends nearly all of its time in the
standard library (csv, json, re, base64) or in numpy's Python wrappers (np.concatenate
through __array_function__, np.ones), so a profiler that charges the leaf line puts it in
csv.py, json/decoder.py, re.py, base64.py or numpy's files instead of here.

Truth: each measured line's thread CPU time (time.thread_time around it), summed over the
run, and the whole loop's, written to --out at exit; the bytes kept by the KEEP lines (launch mode sees every
allocation: the runner checks memory there). Line numbers through #@NAME@ markers, in
--ready.
"""
import base64
import csv
import io
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "workloads"))
import _wl  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None

CSV_TEXT = "a,b,c,d\n" + "".join("%d,x%d,%d.5,hello world\n" % (i, i, i) for i in range(400))
JSON_BLOB = json.dumps([{"id": i, "name": "n%d" % i, "tags": ["a", "b"], "v": i * 0.5} for i in range(300)])
RE_TEXT = " ".join("word%d x-%d" % (i, i) for i in range(3000))
RE_PAT = r"[a-z]+\d+"
PAYLOAD = b"\x01\x02\x03" * (256 * 1024 // 3)
KEEP_CAP = 48 << 20
keep = []


def work_csv():
    return len(list(csv.DictReader(io.StringIO(CSV_TEXT))))  #@CSV@


def work_json():
    return len(json.loads(JSON_BLOB))  #@JSON@


def work_re():
    return len(re.findall(RE_PAT, RE_TEXT))  #@RE@


def work_keep(kept):
    keep.append(base64.b64encode(PAYLOAD))  #@KEEP@
    return kept + len(keep[-1])


def work_cat(parts):
    return np.concatenate(parts).shape[0]  #@CAT@


def work_ones(kept):
    keep.append(np.ones(1 << 17))  #@ONES@
    return kept + keep[-1].nbytes


def main():
    args = _wl.parse()
    _wl.catch_sigterm()
    me = work_csv.__code__.co_filename
    names = ["CSV", "JSON", "RE"] + (["CAT"] if np is not None else [])
    cpu = dict((n, 0.0) for n in names)
    kept = {"KEEP": 0, "ONES": 0}
    parts = [np.arange(2000, dtype=float) for _ in range(50)] if np is not None else None
    funcs = {"CSV": work_csv, "JSON": work_json, "RE": work_re,
             "CAT": lambda: work_cat(parts)}
    # about 10 ms per line and round, whatever the machine
    reps = {}
    for n in names:
        t0 = time.thread_time()
        k = 0
        while time.thread_time() - t0 < 0.01:
            funcs[n]()
            k += 1
        reps[n] = k
    truth = {"pid": os.getpid(), "file": me, "numpy": np is not None,
             "lines": dict((n, _wl.marker_line(me, n)) for n in names + ["KEEP", "ONES"])}
    _wl.write_json(args.ready, truth)
    deadline = time.time() + args.seconds if args.seconds > 0 else None
    loop0 = time.thread_time()
    while not _wl.Stop.flag and (deadline is None or time.time() < deadline):
        for n in names:
            t0 = time.thread_time()
            for _ in range(reps[n]):
                funcs[n]()
            cpu[n] += time.thread_time() - t0
        if kept["KEEP"] < KEEP_CAP:
            kept["KEEP"] = work_keep(kept["KEEP"])
        if np is not None and kept["ONES"] < KEEP_CAP:
            kept["ONES"] = work_ones(kept["ONES"])
    _wl.write_json(args.out, {"cpu": cpu, "kept": kept, "loop_cpu": time.thread_time() - loop0})


main()
