"""A module with a non-ASCII file name and function name (loaded by naming.py)."""
import time


def 関数():
    time.sleep(1000)  #@UNICODE@
