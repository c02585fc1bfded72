"""A containerised program that replaces itself (os.execv of a new Python program, as a
supervisor or a re-exec'ing server does) while scry records it from the host.

usage: ctr_exec.py READY OUT [second]

First program: writes READY ({"pid"}), idles 0.5 s (scry attaches), burns in
first_phase() for 1.0 s of CPU, then execs itself with "second". Second program: burns in second_phase() for 1.5 s of
CPU, writes OUT ({"pid", "first_s", "second_s"}) and exits.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workloads"))
from _wl import write_json  # noqa: E402  (beside this file in a root)


def burn(quota):
    end, x = time.process_time() + quota, 0
    while time.process_time() < end:
        x = (x * 31 + 7) % 1000003
    return x


def first_phase():
    return burn(1.0)


def second_phase():
    return burn(1.5)


def main():
    ready, out = sys.argv[1], sys.argv[2]
    if len(sys.argv) < 4:
        write_json(ready, {"pid": os.getpid()})
        time.sleep(0.5)  # the recording starts meanwhile
        t0 = time.process_time()
        first_phase()
        os.environ["FIRST_S"] = str(time.process_time() - t0)
        os.execv(sys.executable, [sys.executable, __file__, ready, out, "second"])
    t0 = time.process_time()
    second_phase()
    write_json(out, {"pid": os.getpid(), "first_s": float(os.environ.get("FIRST_S", 0)),
                     "second_s": time.process_time() - t0})


main()
