"""dump --core of a crash: a worker thread named crasher calls crash_here(), whose locals
have known values, which reads address 16 through ctypes (SIGSEGV in native code) while the
main thread waits in main_wait(); faulthandler's watchdog is a thread the interpreter does
not know (C code only). Run under gdb, which writes the core at the fault.
Python 3.6+ stdlib only."""
import ctypes
import faulthandler
import signal
import threading
import time

signal.alarm(120)  # no workload outlives a runner that died (SIGALRM ends it)


def crash_here(depth, label):
    answer = 42
    word = "boom"
    ctypes.string_at(16)
    return answer, word, depth, label


def worker():
    time.sleep(0.2)
    crash_here(3, "pm")


def main_wait():
    faulthandler.dump_traceback_later(3600)
    t = threading.Thread(target=worker, name="crasher")
    t.start()
    while True:
        time.sleep(0.05)


main_wait()
