"""CPU workload with stable shares for the consumer tests: hot_a 70% of the work, hot_b 30%."""
import random
import sys
import time


def hot_a(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def hot_b(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def main(seconds):
    # hot_a and hot_b do 7 and 3 parts of each round, for SECONDS (argv[1], default 2).
    # The size of each round varies (a seeded pseudo-random 300-1700 parts): a round of fixed
    # length is periodic, and when its period is close to a divisor of the sampling period
    # (2.47 ms per round on sid's python3.15d against 5 ms at --rate 200) every sample lands at
    # nearly the same phase of the round, and the measured share drifted between 57% and 87%
    # (aliasing, as with any fixed-period sampler). Rounds of varying length keep the phase
    # random, so the shares are the work's.
    rng = random.Random(1)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        parts = rng.randint(300, 1700)
        hot_a(7 * parts)
        hot_b(3 * parts)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
