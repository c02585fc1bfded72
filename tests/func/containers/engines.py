"""The container engines of the container suites: the test bed's own dockerd
(scripts/dockerd.sh: own data root, exec root and socket; images imported from the cached
sid root, never pulled) and rootless podman run by a test user with its own subordinate id
ranges. Stdlib only.

Docker().start() starts the engine unless it answers already and registers this process
as its user (stop() stops it when no other user, such as scripts/test.sh or another
checkout's suite, is left); Docker().image(name, dir) imports a directory once per machine (the data
root is cached); Docker().run(ctx, argv, extra) starts a container attached to a client
process that exits with it. Podman(user).setup() makes the user, its /etc/subuid and
/etc/subgid ranges and its runtime directory (idempotent) and imports the image as it.
Where an engine cannot run here, the methods raise scrytest.Skip with the reason.
"""
import hashlib
import os
import pwd
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import scrytest as st  # noqa: E402
from scrytest import Fail, Skip  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
DOCKERD = os.path.join(REPO, "scripts", "dockerd.sh")
# Debian's client (20.10, the engine's API); /usr/local/bin may hold a newer one
DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else "docker"


def root_stamp(root):
    """What identifies a build of the sid root (scripts/sid-root.sh's stamp file)."""
    try:
        with open(os.path.join(root, ".scry-sid-root"), "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()[:16]
    except OSError:
        return "none"


class Docker(object):
    """The test bed's dockerd, through scripts/dockerd.sh."""

    def __init__(self):
        self.started = False
        self.host = None
        self.image_name = None

    def _script(self, *args):
        p = subprocess.run([DOCKERD] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        err = p.stderr.decode("utf-8", "replace").strip()
        if p.returncode == 2:
            raise Skip(err.replace("SKIP dockerd: ", "") or "dockerd cannot start here")
        if p.returncode != 0:
            raise Fail("%s %s: exit %d: %s" % (DOCKERD, " ".join(args), p.returncode, err))
        return p.stdout.decode().strip()

    def start(self):
        """Starts the engine (or finds it answering), this process one of its users; Skip
        where it cannot run."""
        self._script("start", str(os.getpid()))
        self.started = True
        self.host = self._script("env").split("=", 1)[1]

    def stop(self):
        """This process no longer uses the engine: it stops if no other user is left."""
        if self.started:
            self._script("stop", str(os.getpid()))
            self.started = False

    def env(self, extra=None):
        e = dict(extra or {})
        e["DOCKER_HOST"] = self.host
        return e

    def image(self, name, root, stamp=None):
        """Imports directory ROOT as image NAME unless it is there with STAMP already."""
        self._script("image", name, root, stamp or root_stamp(root))
        self.image_name = name
        return name

    def out(self, *args, timeout=60):
        """Runs `docker ARGS`; its stdout (text). Fail on a non-zero exit."""
        env = dict(os.environ)
        env["DOCKER_HOST"] = self.host
        p = subprocess.run([DOCKER] + [str(a) for a in args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=env, timeout=timeout)
        if p.returncode != 0:
            raise Fail("docker %s: %s" % (" ".join(str(a) for a in args[:3]),
                                         st.short(p.stderr.decode("utf-8", "replace"), 300)))
        return p.stdout.decode("utf-8", "replace").strip()

    def run(self, c, argv, extra=(), image=None, name="ctr", stdout=False):
        """Starts `docker run --rm --network none` of IMAGE (default the imported one)
        running ARGV, attached (the client process, returned, exits with the container),
        with the test's directory mounted where the target sees it; with STDOUT its
        standard output goes apart, to the file p.out_path (the log keeps stderr). The
        container's id is then c.cid (see host_pid)."""
        cidfile = c.path("%s.cid" % name)
        cmd = [DOCKER, "run", "--rm", "--network", "none", "--cidfile", cidfile,
               "-v", "%s:%s" % (c.tmp, c.tpath(c.tmp))] + list(extra) + [
                   image or self.image_name] + [str(a) for a in argv]
        if not stdout:
            p = c.spawn(cmd, env=c.env(self.env()), log_name="%s.log" % name)
        else:
            with open(c.path("%s.out" % name), "wb") as out:
                p = c.spawn(cmd, env=c.env(self.env()), log_name="%s.log" % name, stdout=out)
            p.out_path = out.name
        p.cidfile = cidfile
        c.cidfile = cidfile
        return p

    def container_id(self, c, cidfile=None, timeout=30):
        """The id of the container started by run() (waits for its cidfile)."""
        path = cidfile or c.cidfile
        d = st.Deadline(timeout)
        while True:
            try:
                with open(path) as f:
                    cid = f.read().strip()
                if len(cid) == 64:
                    return cid
            except OSError:
                pass
            if d.expired():
                raise Fail("no container id in %s after %d s" % (path, timeout))
            time.sleep(0.05)

    def host_pid(self, c, cidfile=None):
        """The host pid of the container's pid 1; sets c.cid."""
        c.cid = self.container_id(c, cidfile)
        return int(self.out("inspect", "-f", "{{.State.Pid}}", c.cid))


class Podman(object):
    """Rootless podman, run by a test user (made here, with subordinate id ranges)."""

    USER = "scry-podman"
    HOME = "/var/cache/scry-tests/podman-home"
    RANGE = "200000:65536"

    def __init__(self):
        self.uid = None

    def setup(self, image, root):
        """The user, its ranges and runtime directory; image IMAGE imported from ROOT as
        the user (once: labelled with the root's stamp). Skip where podman cannot run."""
        if not os.path.exists("/usr/bin/podman") or not os.path.exists("/usr/bin/newuidmap"):
            raise Skip("no podman or newuidmap (apt-get install podman uidmap)")
        try:
            pw = pwd.getpwnam(self.USER)
        except KeyError:
            os.makedirs(os.path.dirname(self.HOME), exist_ok=True)
            subprocess.run(["useradd", "--system", "--home-dir", self.HOME, "--create-home",
                            "--shell", "/usr/sbin/nologin", self.USER], check=True)
            pw = pwd.getpwnam(self.USER)
        self.uid = pw.pw_uid
        for f in ("/etc/subuid", "/etc/subgid"):
            with open(f, "a+") as fh:
                fh.seek(0)
                if not any(ln.split(":")[0] == self.USER for ln in fh.read().splitlines()):
                    fh.write("%s:%s\n" % (self.USER, self.RANGE))
        run = "/run/user/%d" % self.uid
        os.makedirs(run, exist_ok=True)
        os.chown(run, self.uid, pw.pw_gid)
        os.chmod(run, 0o700)
        self.storage(pw)
        self.reset_pause()
        self.remove_leftovers()
        stamp = "stamp:" + root_stamp(root)
        have = subprocess.run(self.cmd("image", "inspect", "--format",
                                       '{{index .Labels "scry.stamp"}}', image),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/")
        if have.stdout.decode().strip() != stamp:
            print("    (importing %s as %s's image %s, once per machine)" % (root, self.USER,
                                                                          image))
            tar = subprocess.Popen(["tar", "-C", root, "--exclude=./tmp/*",
                                    "--exclude=./proc/*", "-c", "."], stdout=subprocess.PIPE)
            imp = subprocess.run(self.cmd("import", "--change", "LABEL scry.stamp=" + stamp,
                                          "-", image), stdin=tar.stdout,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
            tar.stdout.close()
            tar.wait()
            if imp.returncode != 0:
                raise Skip("podman import as %s failed: %s" % (
                    self.USER, st.short(imp.stdout.decode("utf-8", "replace"), 300)))
        self.image_name = image

    def storage(self, pw):
        """The user's storage on the kernel's own overlayfs (rootless overlay mounts: Linux
        5.13+). Debian's podman picks vfs without fuse-overlayfs, which copies the whole
        1 GB image for every container (30 s a run here, against 1 s)."""
        conf = os.path.join(self.HOME, ".config", "containers", "storage.conf")
        want = '[storage]\ndriver = "overlay"\n'
        try:
            with open(conf) as f:
                if f.read() == want:
                    return
        except OSError:
            pass
        # storage made with another driver is not readable with this one: start afresh
        subprocess.run(self.cmd("system", "reset", "-f"), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd="/")
        d = os.path.dirname(conf)
        os.makedirs(d, exist_ok=True)
        with open(conf, "w") as f:
            f.write(want)
        for path in (os.path.dirname(d), d, conf):
            os.chown(path, self.uid, pw.pw_gid)

    def podman(self, *args):
        """`podman ARGS` as the test user to its end: (exit code, stdout and stderr)."""
        r = subprocess.run(self.cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           cwd="/")
        return r.returncode, r.stdout.decode("utf-8", "replace")

    def reset_pause(self):
        """The user's pause process (it holds the user namespace podman joins) can be gone
        while podman's state says it runs (a kill of its process group; no logind here to
        clear /run/user): every podman command then fails with "invalid internal status,
        try resetting the pause process with podman system migrate", and the rootless case
        skipped. Reset it then, once: podman names the remedy itself, and with no pause
        process no container of the user can be running."""
        rc, out = self.podman("ps", "-aq")
        if rc != 0 and "system migrate" in out:
            print("    (podman's pause process is gone: podman system migrate)")
            self.podman("system", "migrate")

    def remove_leftovers(self):
        """Containers of earlier runs whose suite is gone (named scry-rootless-*-PID, PID
        the suite's; a run killed before it could remove its container leaves it, stuck in
        "Stopping", holding its storage)."""
        rc, out = self.podman("ps", "-a", "--format", "{{.Names}}")
        gone = []
        for name in out.split() if rc == 0 else []:
            pid = name.rsplit("-", 1)[-1]
            if (name.startswith("scry-rootless-") and pid.isdigit()
                    and not os.path.exists("/proc/%s" % pid)):
                gone.append(name)
        if gone:
            self.podman("rm", "-f", "-t", "0", *gone)

    def stop(self, c, p):
        """Removes the container of client P (Podman.run) and reaps the client."""
        self.podman("rm", "-f", "-t", "0", p.container_name)
        c.kill(p)
        c.release(p)

    def cmd(self, *args):
        """`podman ARGS` run as the test user (its home and runtime directory)."""
        return ["runuser", "-u", self.USER, "--", "env", "HOME=" + self.HOME,
                "XDG_RUNTIME_DIR=/run/user/%d" % self.uid, "podman"] + [str(a) for a in args]

    def run(self, c, argv, name="rootless"):
        """`podman run --rm --network none` of the image as the user, attached; the test's
        directory (made writable for the container's root, mapped to the user) mounted where
        the target sees it. Returns the client process."""
        os.chmod(c.tmp, 0o777)
        cname = "scry-%s-%d" % (name, os.getpid())
        cmd = self.cmd("run", "--rm", "--network", "none", "--name", cname, "-v",
                       "%s:%s" % (c.tmp, c.tpath(c.tmp)), self.image_name,
                       *[str(a) for a in argv])
        p = c.spawn(cmd, log_name="%s.log" % name, cwd="/")
        p.container_name = cname
        return p
