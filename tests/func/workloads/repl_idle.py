"""Run with -i and stdin a pipe nobody writes to: the script writes its truth and ends, and
the interpreter then waits in its C read loop for a line, with no Python frame on any
thread (a live Python process whose dump has no stack to show)."""
import _wl

_wl.write_json(_wl.parse().ready, _wl.base_truth())
