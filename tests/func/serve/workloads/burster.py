"""Forks N children at once (argv[1]); each sleeps 2 s and exits; waits for them all. A
matched parent makes every child a target of scry serve for a moment: the burst of
process churn of issue 24 (item 5). Other arguments (--name) are only there for rules."""
import os
import sys
import time

kids = []
for i in range(int(sys.argv[1])):
    p = os.fork()
    if p == 0:
        time.sleep(2)
        os._exit(0)
    kids.append(p)
for p in kids:
    os.waitpid(p, 0)
