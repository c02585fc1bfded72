"""svc.py after an exec: the same service code under another script name (so the daemon's
derived service name changes and the exec is visible)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svc  # noqa: E402

if __name__ == "__main__":
    sys.exit(svc.main())
