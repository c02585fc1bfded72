"""Helpers shared by scry serve's test services, svc.py and pool.py (CPython 3.6+, stdlib
only; staged with them, beside them)."""
import argparse
import json
import os


def write_json(path, obj):
    """Writes OBJ as JSON to PATH atomically (a temporary file, then a rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def options(mode, name):
    """A parser of the services' common options: --mode (default MODE), --name (default
    NAME; only there to be matched by rules), --ready PATH and --truth PATH. The caller
    adds its own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default=mode)
    ap.add_argument("--name", default=name)
    ap.add_argument("--ready")
    ap.add_argument("--truth")
    return ap
