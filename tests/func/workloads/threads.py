"""Many threads, each parked in its own function: worker_00 ... worker_49.

--count N starts N threads; thread i runs WORKERS[i % 50], so with N <= 50 every thread
is in a distinct function. Each thread naps in a time.sleep loop (--nap seconds), so its
leaf Python frame is its worker function. The truth written to --ready maps every
thread's kernel tid to its function (the main thread runs main_wait, or main_spin,
a CPU-bound loop, with --spin).
"""
import threading
import time

import _wl

_TIDS = {}
_LOCK = threading.Lock()


def _register(name):
    with _LOCK:
        _TIDS[_wl.native_tid()] = name


def worker_00(nap):
    _register("worker_00")
    while True:
        time.sleep(nap)


def worker_01(nap):
    _register("worker_01")
    while True:
        time.sleep(nap)


def worker_02(nap):
    _register("worker_02")
    while True:
        time.sleep(nap)


def worker_03(nap):
    _register("worker_03")
    while True:
        time.sleep(nap)


def worker_04(nap):
    _register("worker_04")
    while True:
        time.sleep(nap)


def worker_05(nap):
    _register("worker_05")
    while True:
        time.sleep(nap)


def worker_06(nap):
    _register("worker_06")
    while True:
        time.sleep(nap)


def worker_07(nap):
    _register("worker_07")
    while True:
        time.sleep(nap)


def worker_08(nap):
    _register("worker_08")
    while True:
        time.sleep(nap)


def worker_09(nap):
    _register("worker_09")
    while True:
        time.sleep(nap)


def worker_10(nap):
    _register("worker_10")
    while True:
        time.sleep(nap)


def worker_11(nap):
    _register("worker_11")
    while True:
        time.sleep(nap)


def worker_12(nap):
    _register("worker_12")
    while True:
        time.sleep(nap)


def worker_13(nap):
    _register("worker_13")
    while True:
        time.sleep(nap)


def worker_14(nap):
    _register("worker_14")
    while True:
        time.sleep(nap)


def worker_15(nap):
    _register("worker_15")
    while True:
        time.sleep(nap)


def worker_16(nap):
    _register("worker_16")
    while True:
        time.sleep(nap)


def worker_17(nap):
    _register("worker_17")
    while True:
        time.sleep(nap)


def worker_18(nap):
    _register("worker_18")
    while True:
        time.sleep(nap)


def worker_19(nap):
    _register("worker_19")
    while True:
        time.sleep(nap)


def worker_20(nap):
    _register("worker_20")
    while True:
        time.sleep(nap)


def worker_21(nap):
    _register("worker_21")
    while True:
        time.sleep(nap)


def worker_22(nap):
    _register("worker_22")
    while True:
        time.sleep(nap)


def worker_23(nap):
    _register("worker_23")
    while True:
        time.sleep(nap)


def worker_24(nap):
    _register("worker_24")
    while True:
        time.sleep(nap)


def worker_25(nap):
    _register("worker_25")
    while True:
        time.sleep(nap)


def worker_26(nap):
    _register("worker_26")
    while True:
        time.sleep(nap)


def worker_27(nap):
    _register("worker_27")
    while True:
        time.sleep(nap)


def worker_28(nap):
    _register("worker_28")
    while True:
        time.sleep(nap)


def worker_29(nap):
    _register("worker_29")
    while True:
        time.sleep(nap)


def worker_30(nap):
    _register("worker_30")
    while True:
        time.sleep(nap)


def worker_31(nap):
    _register("worker_31")
    while True:
        time.sleep(nap)


def worker_32(nap):
    _register("worker_32")
    while True:
        time.sleep(nap)


def worker_33(nap):
    _register("worker_33")
    while True:
        time.sleep(nap)


def worker_34(nap):
    _register("worker_34")
    while True:
        time.sleep(nap)


def worker_35(nap):
    _register("worker_35")
    while True:
        time.sleep(nap)


def worker_36(nap):
    _register("worker_36")
    while True:
        time.sleep(nap)


def worker_37(nap):
    _register("worker_37")
    while True:
        time.sleep(nap)


def worker_38(nap):
    _register("worker_38")
    while True:
        time.sleep(nap)


def worker_39(nap):
    _register("worker_39")
    while True:
        time.sleep(nap)


def worker_40(nap):
    _register("worker_40")
    while True:
        time.sleep(nap)


def worker_41(nap):
    _register("worker_41")
    while True:
        time.sleep(nap)


def worker_42(nap):
    _register("worker_42")
    while True:
        time.sleep(nap)


def worker_43(nap):
    _register("worker_43")
    while True:
        time.sleep(nap)


def worker_44(nap):
    _register("worker_44")
    while True:
        time.sleep(nap)


def worker_45(nap):
    _register("worker_45")
    while True:
        time.sleep(nap)


def worker_46(nap):
    _register("worker_46")
    while True:
        time.sleep(nap)


def worker_47(nap):
    _register("worker_47")
    while True:
        time.sleep(nap)


def worker_48(nap):
    _register("worker_48")
    while True:
        time.sleep(nap)


def worker_49(nap):
    _register("worker_49")
    while True:
        time.sleep(nap)


WORKERS = [worker_00, worker_01, worker_02, worker_03, worker_04, worker_05, worker_06, worker_07, worker_08, worker_09, worker_10, worker_11, worker_12, worker_13, worker_14, worker_15, worker_16, worker_17, worker_18, worker_19, worker_20, worker_21, worker_22, worker_23, worker_24, worker_25, worker_26, worker_27, worker_28, worker_29, worker_30, worker_31, worker_32, worker_33, worker_34, worker_35, worker_36, worker_37, worker_38, worker_39, worker_40, worker_41, worker_42, worker_43, worker_44, worker_45, worker_46, worker_47, worker_48, worker_49]


def main_spin():
    x = 0
    while True:
        for i in range(1000):
            x += i


def main_wait():
    while True:
        time.sleep(1000)


def main():
    args = _wl.parse([("--count", int, 50), ("--nap", float, 0.05), ("--spin", bool, False),
                      ("--ignore-term", bool, False)])
    if args.ignore_term:
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for i in range(args.count):
        t = threading.Thread(target=WORKERS[i % len(WORKERS)], args=(args.nap,))
        t.daemon = True
        t.start()
    deadline = time.time() + 60
    while True:
        with _LOCK:
            if len(_TIDS) >= args.count:
                break
        if time.time() > deadline:
            raise SystemExit("threads did not start")
        time.sleep(0.01)
    truth = _wl.base_truth()
    main_name = "main_spin" if args.spin else "main_wait"
    tids = dict((str(k), v) for k, v in _TIDS.items())
    tids[str(_wl.native_tid())] = main_name
    truth.update({"file": main_spin.__code__.co_filename, "tids": tids, "main": main_name})
    _wl.write_json(args.ready, truth)
    if args.spin:
        main_spin()
    else:
        main_wait()


main()
