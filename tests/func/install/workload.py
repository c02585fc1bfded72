# The installed scry's target (tests/func/install): burn() spends CPU without allocating,
# keep() allocates and keeps 64 KiB blocks (the only line that allocates much), the loop
# sleeps between rounds. An argument N adds N idle threads.
import sys
import threading
import time

DATA = bytes(range(256)) * 80


def burn():
    s = 0
    for c in DATA:  # small ints only: cached objects, no allocation
        s ^= c
    return s


def keep(held):
    held.append(bytearray(65536))  # SCRYKEEPLINE
    if len(held) > 400:
        del held[:200]


def main():
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 0):  # idle threads
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    held = []
    while True:
        burn()
        keep(held)
        time.sleep(0.002)


main()
