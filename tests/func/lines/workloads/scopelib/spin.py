"""A helper module of scope.py, in its own directory: the user's code by default, a library
when the runner passes --exclude '*/scopelib/*'."""


def spin(n):
    s = 0
    for i in range(n):
        s += i * i  #@LOOP@
    return s
