# The installed scry's target (tests/func/install): burn() spends CPU without allocating,
# keep() allocates and keeps 64 KiB blocks (the only line that allocates much), the loop
# sleeps between rounds.
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
    held = []
    while True:
        burn()
        keep(held)
        time.sleep(0.002)


main()
