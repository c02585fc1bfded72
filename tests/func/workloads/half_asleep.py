"""One thread that burns 10 ms of CPU and sleeps 10 ms, for --seconds (default 2): every
sample taken of it (on a CPU) holds the GIL, though the GIL is held only about half the
time and the thread may get little CPU on a busy machine.
"""
import time

import _wl


def burn_and_nap():
    end = time.process_time() + 0.01
    while time.process_time() < end:
        pass
    time.sleep(0.01)


def main():
    args = _wl.parse()
    truth = _wl.base_truth()
    _wl.write_json(args.ready, truth)
    end = time.time() + (args.seconds if args.seconds > 0 else 2)
    while time.time() < end:
        burn_and_nap()


main()
