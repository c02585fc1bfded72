"""CPU workload with stable shares for the consumer tests: hot_a does 70% of the work and
hot_b 30% (same loop, 7000 vs 3000 iterations), for SECONDS (argv[1], default 2)."""
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
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        hot_a(7000)
        hot_b(3000)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)
