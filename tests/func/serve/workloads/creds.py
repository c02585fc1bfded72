"""A process with chosen credentials, for the two-user tests of scry serve (run as root).

  --uids R,E,S   setresuid(R, E, S) (after the groups and gids)
  --gid G        setresgid(G, G, G)
  --groups LIST  setgroups(LIST) first (comma-separated; empty: none)
  --nodump       prctl(PR_SET_DUMPABLE, 0) at the end
  --secret PATH  the busy loop's code object is named PATH (co_filename): a report that
                 shows its source reads PATH with someone's credentials
--ready PATH gets {"pid"} once running (written before the ids change, by root). Then it
burns CPU in a function "hot" (named after --secret when given) until killed. --name is
only there to be matched by rules.
"""
import argparse
import ctypes
import json
import os
import signal
import time

HOT = """
def hot(n):
    x = 0
    for i in range(n):
        x += i
    return x
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uids", required=True)
    ap.add_argument("--gid", type=int, required=True)
    ap.add_argument("--groups", default="")
    ap.add_argument("--nodump", action="store_true")
    ap.add_argument("--secret")
    ap.add_argument("--ready")
    ap.add_argument("--name", default="creds")
    a = ap.parse_args()
    signal.alarm(120)
    ns = {}
    exec(compile(HOT, a.secret or "<hot>", "exec"), ns)
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            json.dump({"pid": os.getpid()}, f)
        os.rename(a.ready + ".tmp", a.ready)
    os.setgroups([int(g) for g in a.groups.split(",") if g])
    os.setresgid(a.gid, a.gid, a.gid)
    r, e, s = (int(x) for x in a.uids.split(","))
    os.setresuid(r, e, s)
    # a change of effective uid clears the dumpable flag; a plain process of the user has it
    ctypes.CDLL(None).prctl(4, 0 if a.nodump else 1, 0, 0, 0)  # PR_SET_DUMPABLE
    while True:
        ns["hot"](20000)
        time.sleep(0.001)


if __name__ == "__main__":
    main()
