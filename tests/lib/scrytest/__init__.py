"""scrytest: the one Python test library of scry's functional suites and benchmarks.

Stdlib only, host Python 3.6+. A suite or bench script imports it with one line:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import scrytest as st        # (from tests/func/SUITE/: "..", "..", "lib"; bench/: "..", "tests", "lib")

Modules (docs/testing.md describes them):
  clock   the one clock (now, since, Deadline)
  interp  the interpreter registry (pyenv, Debian, the Debian sid root's 3.14/3.15/-dbg)
  runner  Fail/Skip/XFail, check, the PASS/FAIL/SKIP/XFAIL runner and its closing line
  procs   a test's processes and temporary directory: targets in their own session,
          readiness, reaping, strays, scry with a timeout
  known   known-answer helpers: shares within a tolerance, relative errors, JSON truth
  suite   a suite's main: scry and the interpreter checked, SKIP/FAIL setup, the run
"""
from .clock import Deadline, now, since  # noqa: F401
from .interp import Interpreter, find, from_path, pyenv_root, sid_root  # noqa: F401
from .interp import HOST_LABELS, LABELS, PYENV_LABELS, SID_LABELS  # noqa: F401
from .known import compare_shares, load_json, parse_collapsed, rel_err, shares, within  # noqa: F401
from .procs import Ctx, Result, clean_env, cpu_seconds, task_states, task_tids  # noqa: F401
from .procs import task_tracers  # noqa: F401
from .runner import Fail, Skip, Tests, XFail, add_common_args, check, run, short  # noqa: F401
from .runner import setup_failed, skip_all  # noqa: F401
from .suite import bpf_refused, lookup, open_suite, positional, run_as_root, run_on  # noqa: F401
