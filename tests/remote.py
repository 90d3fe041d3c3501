"""Private servers for the remote-endpoint tests: an sshd and an rsync daemon on loopback.

Both listen on 127.0.0.1 only, on a free port, with everything they need (keys, config,
pid file, logs) in a throwaway directory. Each runs as a child process in its own
session, in the foreground (``sshd -D``, ``rsync --daemon --no-detach``), and is stopped
by its pid: SIGTERM, then SIGKILL after a timeout, and the same for the per-connection
children it had forked (found through /proc by parent pid, checked by start time so a
reused pid is never hit). Nothing is ever killed by name. Should pytest itself be killed,
the servers get SIGTERM from the kernel (PR_SET_PDEATHSIG).

A test module makes its fixtures from the generators at the end (module scope: one
server for all the tests of the module)::

    @pytest.fixture(scope="module")
    def sshd_server(tmp_path_factory):
        yield from remote.serve_sshd(tmp_path_factory)
"""

import ctypes
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import time

import pytest

SSHD = "/usr/sbin/sshd"
LOOPBACK = "127.0.0.1"
START_TIMEOUT = 15
STOP_TIMEOUT = 5


# --------------------------------------------------------------------------- sshd

def sshd_config_lines(port, address, host_key, pidfile, authorized_keys, user):
    """The sshd_config of a test sshd: one address and port, one user, key only,
    quick to log in to, no forwarding, no terminal."""
    return [
        "Port %d" % port,
        "ListenAddress %s" % address,
        "AddressFamily inet",
        "HostKey %s" % host_key,
        "PidFile %s" % pidfile,
        "AuthorizedKeysFile %s" % authorized_keys,
        "AllowUsers %s" % user,
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "HostbasedAuthentication no",
        "UsePAM no",
        "UseDNS no",
        # the post-quantum default key exchange costs a lot of CPU per connection;
        # the tests open hundreds of them
        "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
        "PermitUserEnvironment no",
        # bash sources ~/.bashrc for a command run through sshd only at shell level 1;
        # SHLVL=1 makes it level 2: the runner's own dotfiles (and their cost with a
        # pyenv) stay out of the sessions, as on a stock server
        "SetEnv SHLVL=1",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "PermitTTY no",
        # many parallel rsyncs open their sessions at the same moment
        "MaxStartups 200",
        "MaxSessions 200",
        "LoginGraceTime 30",
        "LogLevel INFO",
    ]


# --------------------------------------------------------------------------- processes

def _pdeathsig_and_session():
    """preexec_fn: new session (no stray terminal signal), SIGTERM when pytest dies."""
    os.setsid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _proc_stat(pid):
    """(ppid, starttime, state) of pid from /proc, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19]), fields[0]


def descendants(pid):
    """[(pid, starttime)] of every live descendant of pid (children first)."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _proc_stat(int(name))
            if st is not None and st[2] != b"Z":
                children.setdefault(st[0], []).append((int(name), st[1]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _signal_if_same(pid, starttime, signum):
    """Send signum to pid only if it is still the process that started at starttime."""
    st = _proc_stat(pid)
    if st is None or st[1] != starttime or st[2] == b"Z":
        return False
    try:
        os.kill(pid, signum)
    except OSError:
        return False
    return True


def stop_process(proc, timeout=STOP_TIMEOUT):
    """Stop a server started by us, by its pid: SIGTERM, SIGKILL after timeout; then its
    leftover descendants (connection handlers) the same way."""
    if proc is None:
        return
    kids = descendants(proc.pid) if proc.poll() is None else []
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    live = [k for k in kids if _signal_if_same(k[0], k[1], signal.SIGTERM)]
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [k for k in live if _proc_stat(k[0]) is not None
                and _proc_stat(k[0])[1] == k[1] and _proc_stat(k[0])[2] != b"Z"]
    for pid, starttime in live:
        _signal_if_same(pid, starttime, signal.SIGKILL)


def processes_mentioning(needle, exclude=()):
    """(pid, argv) of live processes (any program) whose command line contains needle."""
    needle = os.fsencode(needle)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        st = _proc_stat(int(name))
        if st is None or st[2] == b"Z" or not cmdline:
            continue
        if needle in cmdline:
            found.append((int(name), cmdline.rstrip(b"\0").split(b"\0")))
    return found


# --------------------------------------------------------------------------- ports

def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]
    finally:
        s.close()


def closed_port():
    """A port of 127.0.0.1 where a connection is refused (nothing listens)."""
    for _ in range(20):
        port = free_port()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((LOOPBACK, port))
        except ConnectionRefusedError:
            return port
        except OSError:
            pass
        finally:
            s.close()
    raise RuntimeError("no closed port found on %s" % LOOPBACK)


def _wait_for_banner(proc, port, prefix, log_path, timeout=START_TIMEOUT):
    """Wait until proc listens on port and greets with prefix; raise with its log if it
    exits or never answers."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerStartError("exited with %s before listening:\n%s"
                                   % (proc.returncode, _tail(log_path)))
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((LOOPBACK, port))
            data = s.recv(64)
            if data.startswith(prefix) and proc.poll() is None:
                return
            last = "unexpected greeting %r" % data
        except OSError as e:
            last = str(e)
        finally:
            s.close()
        time.sleep(0.05)
    raise ServerStartError("not answering on %s:%d after %ds (%s):\n%s"
                           % (LOOPBACK, port, timeout, last, _tail(log_path)))


class ServerStartError(RuntimeError):
    pass


def _tail(path, n=4000):
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def _start(argv, port, banner, log_path, env=None):
    log = open(log_path, "ab")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=_pdeathsig_and_session,
                                env=env, close_fds=True)
    finally:
        log.close()
    try:
        _wait_for_banner(proc, port, banner, log_path)
    except BaseException:
        stop_process(proc)
        raise
    return proc


def _write(path, data, mode=0o600):
    with open(path, "w") as f:
        f.write(data)
    os.chmod(path, mode)


def user_name():
    return pwd.getpwuid(os.getuid()).pw_name


# --------------------------------------------------------------------------- sshd

def ssh_missing():
    """None when sshd, ssh and ssh-keygen are all there, else what is missing."""
    missing = []
    if not os.access(SSHD, os.X_OK):
        missing.append(SSHD + " (openssh-server)")
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            missing.append(tool + " (openssh-client)")
    return ", ".join(missing) or None


def rsh_command(port, key):
    """The ssh command (one string, for rsync's -e) that logs in to our sshd with key."""
    return " ".join(["ssh", "-p", str(port), "-i", shlex.quote(key),
                     "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                     "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                     "-o", "IdentitiesOnly=yes"])


class SshServer(object):
    """A running private sshd. Attributes:

    rsh          -- the -e string for rsync: ``ssh -p PORT -i KEY -o ...``
    rsh_nopython -- the same with a key whose sessions have no python3 on their PATH
    rsh_wrongkey -- the same with a key the server does not accept (auth fails)
    rsh_home     -- the same with a key whose sessions have HOME=home (for "host:~/path")
    login        -- ``user@127.0.0.1``, the user being root or whoever runs the tests
    port, key, directory, pid, log
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        self.proc = None
        self.port = None
        self.login = "%s@%s" % (user_name(), LOOPBACK)
        d = lambda *p: os.path.join(self.directory, *p)
        self.key = d("client_key")
        self.key_nopython = d("client_key_nopython")
        self.key_wrong = d("client_key_wrong")
        self.key_home = d("client_key_home")
        self.home = d("home")
        self.host_key = d("host_ed25519_key")
        self.config = d("sshd_config")
        self.log = d("sshd.log")
        self.pidfile = d("sshd.pid")
        self.authorized_keys = d("authorized_keys")
        self.nopython_bin = d("nopython-bin")

    def remote(self, path):
        """``user@127.0.0.1:path`` (str or bytes, like path)."""
        if isinstance(path, bytes):
            return self.login.encode() + b":" + path
        return self.login + ":" + os.fspath(path)

    @property
    def rsh(self):
        return rsh_command(self.port, self.key)

    @property
    def rsh_nopython(self):
        return rsh_command(self.port, self.key_nopython)

    @property
    def rsh_home(self):
        return rsh_command(self.port, self.key_home)

    @property
    def rsh_wrongkey(self):
        return rsh_command(self.port, self.key_wrong)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def _keygen(self, path, comment):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                        "-f", path], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)

    def _make_nopython_bin(self):
        """A PATH directory holding links to every command of the system's bin directories
        except python*: sessions logged in with key_nopython see no python3."""
        os.mkdir(self.nopython_bin)
        for bindir in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                       "/sbin", "/bin"):
            try:
                names = os.listdir(bindir)
            except OSError:
                continue
            for name in names:
                link = os.path.join(self.nopython_bin, name)
                if name.startswith("python") or os.path.lexists(link):
                    continue
                os.symlink(os.path.join(bindir, name), link)

    def prepare(self):
        os.makedirs(self.directory, exist_ok=True)
        self._keygen(self.host_key, "msrsync-test-host")
        self._keygen(self.key, "msrsync-test-client")
        self._keygen(self.key_nopython, "msrsync-test-nopython")
        self._keygen(self.key_wrong, "msrsync-test-not-authorized")
        self._keygen(self.key_home, "msrsync-test-home")
        self._make_nopython_bin()
        os.mkdir(self.home)
        with open(self.key + ".pub") as f:
            pub = f.read().strip()
        with open(self.key_nopython + ".pub") as f:
            pub_nopython = f.read().strip()
        with open(self.key_home + ".pub") as f:
            pub_home = f.read().strip()
        # The PATH is set by a forced command, after the login shell's startup files (a
        # ~/.bashrc may prepend its own directories, a pyenv's shims for one).
        forced = "PATH=%s; export PATH; exec /bin/sh -c \\\"$SSH_ORIGINAL_COMMAND\\\"" % (
            self.nopython_bin)
        # the shell expands "~/" from HOME: a home of the tests' own
        forced_home = "HOME=%s; export HOME; exec /bin/sh -c \\\"$SSH_ORIGINAL_COMMAND\\\"" % (
            self.home)
        _write(self.authorized_keys, "%s\ncommand=\"%s\" %s\ncommand=\"%s\" %s\n"
               % (pub, forced, pub_nopython, forced_home, pub_home))
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
            # the privilege separation directory sshd chroots into when run as root
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def _write_config(self):
        _write(self.config, "\n".join(
            ["# private sshd of msrsync's test suite: loopback only, key only"] +
            sshd_config_lines(self.port, LOOPBACK, self.host_key, self.pidfile,
                              self.authorized_keys, user_name()) + [""]), 0o644)

    def start(self, attempts=5):
        error = None
        for _ in range(attempts):
            self.port = free_port()
            self._write_config()
            try:
                self.proc = _start([SSHD, "-D", "-e", "-f", self.config], self.port,
                                   b"SSH-", self.log)
                return self
            except ServerStartError as e:   # port taken meanwhile: another one
                error = e
        raise ServerStartError("sshd: %s" % error)

    def stop(self):
        stop_process(self.proc)

    def __repr__(self):
        return "<SshServer pid=%s %s port %s>" % (self.pid, self.login, self.port)


def start_sshd(directory):
    server = SshServer(directory)
    server.prepare()
    return server.start()


# --------------------------------------------------------------------------- rsync daemon

class RsyncDaemon(object):
    """A running private ``rsync --daemon``. Its modules serve ``root`` (a directory
    under which the tests keep their files, so that a local path under root has a
    daemon address):

    mod      -- writable, no authentication
    secure   -- writable, ``auth users = USER`` with PASSWORD from a secrets file
    nodelete -- as mod, with ``refuse options = delete``
    tree     -- as mod, serving ``tree`` (DIRECTORY/tree, empty at first) alone

    Attributes: port, root, user, password, password_file (a 0600 file holding the
    password, for --password-file), pid, log.
    """

    user = "msrsync"
    password = "s3cret pass"

    def __init__(self, directory, root):
        self.directory = os.fspath(directory)
        self.root = os.path.realpath(os.fspath(root))
        self.proc = None
        self.port = None
        d = lambda *p: os.path.join(self.directory, *p)
        self.config = d("rsyncd.conf")
        self.log = d("rsyncd.log")
        self.pidfile = d("rsyncd.pid")
        self.secrets = d("rsyncd.secrets")
        self.password_file = d("password")
        self.wrong_password_file = d("wrong-password")
        self.tree = d("tree")

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def _rel(self, path):
        fs = os.fsencode(os.path.abspath(os.fsencode(path)))
        if isinstance(path, (str, bytes)) and os.fsencode(path).endswith(b"/"):
            fs += b"/"
        root = os.fsencode(self.root)
        if not (fs == root or fs.startswith(root + b"/")):
            raise ValueError("%r is not under the daemon's root %r" % (path, self.root))
        return fs[len(root) + 1:]

    def url(self, path, module="mod", user=None):
        """``rsync://[user@]127.0.0.1:PORT/module/REL`` for the local path under root
        (bytes; a trailing slash of path is kept)."""
        who = (user.encode() + b"@") if user else b""
        return b"rsync://%s%s:%d/%s/%s" % (who, LOOPBACK.encode(), self.port,
                                           module.encode(), self._rel(path))

    def dcolon(self, path, module="mod", user=None):
        """``[user@]127.0.0.1::module/REL`` (needs --port=PORT among rsync's options)."""
        who = (user.encode() + b"@") if user else b""
        return b"%s%s::%s/%s" % (who, LOOPBACK.encode(), module.encode(), self._rel(path))

    def prepare(self):
        os.makedirs(self.directory, exist_ok=True)
        _write(self.secrets, "%s:%s\n" % (self.user, self.password))
        _write(self.password_file, self.password + "\n")
        _write(self.wrong_password_file, "not the password\n")
        os.makedirs(self.tree, exist_ok=True)

    def _write_config(self):
        module = [
            "    path = %s" % self.root,
            "    read only = false",
            "    write only = false",
            "    list = true",
            "    use chroot = false",
            "    munge symlinks = false",
            "    hosts allow = %s" % LOOPBACK,
            "    max connections = 0",
            "    timeout = 120",
        ]
        if os.geteuid() == 0:
            # the daemon copies as this user (root: owners are kept); one not run as root
            # is this user already, and fails "setgroups" if told to switch
            module += ["    uid = %d" % os.getuid(), "    gid = %d" % os.getgid()]
        _write(self.config, "\n".join(
            ["# private rsync daemon of msrsync's test suite: loopback only",
             "pid file = %s" % self.pidfile,
             "log file = %s" % self.log,
             "use chroot = false",
             "strict modes = false",
             "",
             "[mod]"] + module +
            ["", "[secure]"] + module +
            ["    auth users = %s" % self.user,
             "    secrets file = %s" % self.secrets,
             "", "[nodelete]"] + module +
            ["    refuse options = delete",
             "", "[tree]"] + [m if not m.startswith("    path =") else "    path = %s" % self.tree
                              for m in module] + [""]), 0o644)

    def start(self, attempts=5):
        error = None
        for _ in range(attempts):
            self.port = free_port()
            self._write_config()
            if os.path.exists(self.pidfile):
                os.unlink(self.pidfile)
            try:
                self.proc = _start(["rsync", "--daemon", "--no-detach",
                                    "--address=%s" % LOOPBACK, "--port=%d" % self.port,
                                    "--config=%s" % self.config], self.port,
                                   b"@RSYNCD:", self.log)
                return self
            except ServerStartError as e:
                error = e
        raise ServerStartError("rsync daemon: %s" % error)

    def stop(self):
        stop_process(self.proc)

    def __repr__(self):
        return "<RsyncDaemon pid=%s port %s root %s>" % (self.pid, self.port, self.root)


def start_rsync_daemon(directory, root):
    daemon = RsyncDaemon(directory, root)
    daemon.prepare()
    return daemon.start()


# --------------------------------------------------------------------------- fixtures

def serve_sshd(tmp_path_factory):
    """Generator for a pytest fixture: yields a running SshServer, stops it afterwards
    (even on failure); skips the tests when openssh is not installed."""
    missing = ssh_missing()
    if missing:
        pytest.skip("remote tests need openssh: missing %s" % missing)
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        server.prepare()
        server.start()
        yield server
    finally:
        server.stop()


def serve_rsync_daemon(tmp_path_factory, kind=None):
    """Generator for a pytest fixture: yields a running RsyncDaemon (or KIND, a subclass)
    whose modules serve pytest's base temporary directory (so every test's tmp_path has a
    daemon address), stops it afterwards."""
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed")
    daemon = (kind or RsyncDaemon)(tmp_path_factory.mktemp("rsyncd"),
                                   tmp_path_factory.getbasetemp())
    try:
        daemon.prepare()
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


def serve_sshfs(sshd, directory):
    """Generator for a pytest fixture: DIRECTORY/served mounted over sshfs from the
    private sshd (a network file system msrsync knows by its type, fuse.sshfs) at
    DIRECTORY/mnt; yields (mount point, served directory), unmounts it and stops its
    sshfs by pid afterwards; skips the test without sshfs, /dev/fuse or sftp-server."""
    # the private sshd has no sftp subsystem: sshfs runs the server as a command
    server = [p for p in ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                          "/usr/lib/ssh/sftp-server") if os.path.exists(p)]
    if shutil.which("sshfs") is None or not os.path.exists("/dev/fuse") or not server:
        pytest.skip("needs sshfs, /dev/fuse and sftp-server")
    served, mnt = os.path.join(directory, "served"), os.path.join(directory, "mnt")
    os.mkdir(served)
    os.mkdir(mnt)
    proc = subprocess.Popen(
        ["sshfs", "-f", "-o", "ssh_command=" + sshd.rsh, "-o", "sftp_server=" + server[0],
         sshd.remote(served), mnt],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_process(proc)          # (its stderr then ends: no read hangs)
                pytest.skip("sshfs did not mount: %s" % proc.stderr.read()[-300:])
            time.sleep(0.05)
        yield mnt, served
    finally:
        subprocess.run(["fusermount", "-u", mnt], stderr=subprocess.DEVNULL)
        stop_process(proc)
