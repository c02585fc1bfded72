"""The interpreter registry: every CPython the tests and benchmarks run, found by label.

Labels:
  3.6 ... 3.13     pyenv builds, $(pyenv root)/versions/X.Y.Z/bin/pythonX.Y
                   (`pyenv root` defaults to $PYENV_ROOT, then /root/.pyenv)
  debian3.11       Debian's /usr/bin/python3.11 (static, non-PIE, stripped; python3-numpy)
  2.7              pyenv's 2.7 (only scry's "unsupported version" test runs it)
  3.14 3.15        the Debian sid root's python3.14 / python3.15 (scripts/sid-root.sh)
  3.14d 3.15d      the same root's debug builds (python3.14d / python3.15d, from -dbg)

An interpreter in the sid root runs as `chroot ROOT /usr/bin/pythonX.Y SCRIPT`: its files
live inside the root, so paths differ inside and outside as in a container.
`Interpreter.target_path()` gives the path the target sees, `host_path()` the path the
test (and scry) see; `Interpreter.scratch()` makes a private directory inside the root (or
the host's temporary directory for a host interpreter) and `stage()` copies workload files
into it. find() raises runner.Skip with the reason when an interpreter is missing, which
the suites print as `SKIP <label>: <reason>`.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time

from .runner import Fail, Skip, short

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SID_ROOT_SCRIPT = os.path.join(REPO, "scripts", "sid-root.sh")

PYENV_LABELS = ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
HOST_LABELS = PYENV_LABELS + ["debian3.11", "2.7"]
SID_LABELS = ["3.14", "3.15", "3.14d", "3.15d"]
LABELS = HOST_LABELS + SID_LABELS
DEBIAN_PYTHON = "/usr/bin/python3.11"
SID_STAMP = ".scry-sid-root"  # written by scripts/sid-root.sh once the root is complete


def pyenv_root():
    """pyenv's root: `pyenv root` when pyenv is on PATH, else $PYENV_ROOT or /root/.pyenv."""
    exe = shutil.which("pyenv")
    if exe:
        try:
            out = subprocess.run([exe, "root"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=20)
            root = out.stdout.decode().strip()
            if out.returncode == 0 and root and os.path.isdir(root):
                return root
        except (OSError, subprocess.SubprocessError):
            pass
    return os.environ.get("PYENV_ROOT") or "/root/.pyenv"


def sid_root():
    """Host path of the Debian sid root, as `scripts/sid-root.sh --path` prints it
    ($SCRY_SID_ROOT, default /var/cache/scry-tests/sid-root). Raises Skip when the root is
    not (yet) built; never builds it (scripts/test.sh does, once per machine)."""
    try:
        out = subprocess.run(["sh", SID_ROOT_SCRIPT, "--path"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        raise Skip("%s --path failed: %s" % (SID_ROOT_SCRIPT, e))
    root = out.stdout.decode().strip()
    if out.returncode != 0 or not root:
        raise Skip("%s --path failed: %s" % (SID_ROOT_SCRIPT, short(out.stderr.decode())))
    if not os.path.isfile(os.path.join(root, SID_STAMP)):
        raise Skip("Debian sid root %s not built (scripts/sid-root.sh builds it)" % root)
    return root


class Interpreter(object):
    """One interpreter: label, executable (target-side path), root (None on the host),
    pyenv version name (or None), version tuple (major, minor, micro) once probed."""

    def __init__(self, label, path, root=None, pyenv_name=None):
        self.label = label
        self.path = path
        self.root = root
        self.pyenv_name = pyenv_name
        self.version = None
        self.isolation = None  # None, "mount" or "pid": see isolated()
        self._modules = {}

    def __repr__(self):
        where = " in %s" % self.root if self.root else ""
        return "%s (%s%s)" % (self.label, self.path, where)

    @property
    def pyver(self):
        """'X.Y' of the probed version."""
        return "%d.%d" % self.version[:2]

    def describe(self):
        """'Python X.Y.Z (path[ in root])' for the suites' first line."""
        return "Python %s (%s%s%s)" % (".".join(map(str, self.version)), self.path,
                                       " in " + self.root if self.root else "",
                                       ", %s namespace" % self.isolation if self.isolation
                                       else "")

    # -- paths: the target's view and the host's ----------------------------------------

    def host_path(self, path):
        """The host's path of a path the target sees (unchanged on the host)."""
        if not self.root:
            return path
        return os.path.join(self.root, os.path.relpath(path, "/"))

    def target_path(self, path):
        """The target's path of a host path inside the root (unchanged on the host).
        Raises ValueError for a host path outside the root (the target cannot see it)."""
        if not self.root:
            return path
        path = os.path.abspath(path)
        rel = os.path.relpath(path, self.root)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError("%s is outside the root %s" % (path, self.root))
        return "/" if rel == "." else "/" + rel

    def scratch(self, prefix, parent=None):
        """A new private directory (mode 0755) the target can reach; its host path. Inside
        the root's /tmp for a rooted interpreter. The caller removes it (procs.Ctx does)."""
        if parent is None and self.root:
            parent = os.path.join(self.root, "tmp")
        d = tempfile.mkdtemp(prefix=prefix, dir=parent)
        os.chmod(d, 0o755)
        return d

    def stage(self, src, scratch_dir):
        """The target's path of workload file or directory SRC (a host path). On the host
        that is SRC itself; for a rooted interpreter SRC is first copied into SCRATCH_DIR
        (a host path made by scratch())."""
        if not self.root:
            return src
        dst = os.path.join(scratch_dir, os.path.basename(src.rstrip("/")))
        if not os.path.exists(dst):
            if os.path.isdir(src):
                shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, dst)
        return self.target_path(dst)

    # -- running it -----------------------------------------------------------------------

    def argv(self, *args):
        """The command line that runs the interpreter with ARGS (target-side paths)."""
        pre = ["chroot", self.root, self.path] if self.root else [self.path]
        if self.root and self.isolation == "mount":
            # a private mount namespace with its own /proc inside the root (the host never
            # sees that mount); exec all the way, so the target keeps unshare's pid
            pre = ["unshare", "--mount", "sh", "-c",
                   'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', self.root,
                   self.path]
        elif self.root and self.isolation == "pid":
            # like a container: its own PID and mount namespaces and /proc (the target is
            # pid 1 there, a child of unshare here: host_pid() finds it)
            pre = ["unshare", "--pid", "--mount", "--fork",
                   "--mount-proc=%s" % os.path.join(self.root, "proc"), "chroot", self.root,
                   self.path]
        return pre + [str(a) for a in args]

    def isolated(self, kind):
        """A copy of this rooted interpreter run in namespaces (KIND "mount": a private
        mount namespace with its own /proc, then chroot; "pid": PID and mount namespaces,
        `unshare --pid --mount --fork`, own /proc, then chroot). Raises Skip when unshare
        is missing, ValueError for a host interpreter."""
        if not self.root or kind not in ("mount", "pid"):
            raise ValueError("isolated(%r) needs a rooted interpreter" % kind)
        if not shutil.which("unshare"):
            raise Skip("no unshare (util-linux) to run %s in namespaces" % self.label)
        it = Interpreter(self.label, self.path, self.root, self.pyenv_name)
        it.version, it.isolation = self.version, kind
        return it

    def host_pid(self, launcher):
        """The host pid of the target started by argv() as the process LAUNCHER (a Popen
        pid): LAUNCHER itself, except with "pid" isolation, where the target is unshare's
        child (pid 1 in its namespace)."""
        if self.isolation != "pid":
            return launcher
        for _ in range(500):
            try:
                with open("/proc/%d/task/%d/children" % (launcher, launcher)) as f:
                    kids = f.read().split()
            except OSError:
                kids = []
            if kids:
                return int(kids[0])
            time.sleep(0.01)
        raise Fail("unshare (pid %d) started no child in 5 s" % launcher)

    def run(self, args, timeout=60, env=None):
        """Runs the interpreter with ARGS to its end: subprocess.CompletedProcess."""
        return subprocess.run(self.argv(*args), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout, env=env)

    def eval(self, code, timeout=60):
        """stdout (stripped) of `python -c CODE`; raises Skip when it fails."""
        out = self.run(["-c", code], timeout=timeout)
        if out.returncode != 0:
            raise Skip("%s -c %r failed: %s" % (self.path, code,
                                                 short(out.stderr.decode("utf-8", "replace"))))
        return out.stdout.decode().strip()

    def has_module(self, name):
        """Whether `import NAME` works (cached)."""
        if name not in self._modules:
            self._modules[name] = self.run(["-c", "import " + name]).returncode == 0
        return self._modules[name]

    def probe(self):
        """Reads the version (sys.version_info); raises Skip when the interpreter does not
        run. Returns self."""
        out = self.run(["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                       timeout=30)
        if out.returncode != 0:
            raise Skip("%s does not run: %s" % (
                self.path, short(out.stderr.decode("utf-8", "replace"))))
        self.version = tuple(int(x) for x in out.stdout.decode().strip().split("."))
        return self


def _pyenv(label):
    vdir = os.path.join(pyenv_root(), "versions")
    try:
        names = sorted(os.listdir(vdir), key=lambda n: [int(x) if x.isdigit() else x
                                                        for x in n.split(".")])
    except OSError:
        raise Skip("no pyenv versions directory %s" % vdir)
    found = None
    for name in names:
        if re.match(r"^%s\.\d+$" % re.escape(label), name):
            path = os.path.join(vdir, name, "bin", "python" + label)
            if os.access(path, os.X_OK):
                found = Interpreter(label, path, pyenv_name=name)
    if found is None:
        raise Skip("no CPython %s.x under %s" % (label, vdir))
    return found


def _sid(label):
    root = sid_root()
    path = "/usr/bin/python" + label
    if not os.access(os.path.join(root, path.lstrip("/")), os.X_OK):
        raise Skip("no %s in the Debian sid root %s" % (path, root))
    if os.geteuid() != 0:
        raise Skip("running %s in %s needs root (chroot)" % (path, root))
    return Interpreter(label, path, root=root)


def find(label):
    """The interpreter of LABEL (one of LABELS), probed; raises Skip with the reason when
    it is missing or does not run, ValueError for an unknown label."""
    if label == "debian3.11":
        if not os.access(DEBIAN_PYTHON, os.X_OK):
            raise Skip("%s not found" % DEBIAN_PYTHON)
        it = Interpreter(label, DEBIAN_PYTHON)
    elif label in SID_LABELS:
        it = _sid(label)
    elif label in PYENV_LABELS or label == "2.7":
        it = _pyenv(label)
    else:
        raise ValueError("unknown interpreter label %r (known: %s)" % (label, " ".join(LABELS)))
    return it.probe()


def from_path(path, label=None):
    """An interpreter given by its host path (e.g. a suite's --python PATH), probed;
    raises Skip when it is missing or does not run."""
    if not os.access(path, os.X_OK):
        raise Skip("no interpreter at %s" % path)
    return Interpreter(label or os.path.basename(path), path).probe()
