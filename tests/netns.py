"""Worker hosts for the --hosts tests: network namespaces on this machine, each with an sshd.

A host is a network namespace ``msrt<pid>h<n>`` (pid: the test session's, n: a counter of
the session) joined to the root namespace by a veth pair (``msrt<pid>a<n>`` on this side,
``msrt<pid>b<n>`` in the namespace) with a /30 of the benchmarking range 198.18.0.0/15 and
nothing else: this side .1, the host .2. Inside, ``lo`` is up and an sshd listens on the
host's address only, port 22, with throwaway host and client keys, root login by key only.
The hosts see this machine's file system (shared storage, as --hosts wants), except where
a host is made otherwise on purpose.

Each sshd runs in a private mount namespace of its own (``ip netns exec NS unshare -m``),
where every rsync binary of the system is covered by a small wrapper that notes each call
(its arguments) in the host's ``rsync.log`` and runs the real one: which host ran which
rsync is then a fact, not a sample. The same mount namespace makes the broken hosts:

    rsync="missing"  sessions whose PATH has no rsync (a ForceCommand sets it) and whose
                     rsync binaries answer "not found", exit 127
    rsync="old"      rsync binaries that say "rsync version 3.0.9"
    hide=[DIR, ...]  an empty tmpfs over each DIR: what lies under DIR here is not seen there
    sshd=False       no sshd at all: the address answers, port 22 refuses

A host is lost on purpose with kill_host (its sshd and every process in it killed: the
connections drop), link_down (this side's veth down: nothing answers, nothing closes, its
rsyncs go on with the shared storage) or hang (link down, its sshd stopped, its rsyncs
ended unfinished).

Hosts are stopped by pid, never by name: the sshd SIGTERM then SIGKILL (remote.stop_process,
with its per-connection children), then every process left in the namespace (found by its
/proc/PID/ns/net), then ``ip link del`` and ``ip netns del``. Should pytest be killed, the
sshds get SIGTERM from the kernel (PR_SET_PDEATHSIG).

A test module makes its fixture from the generator at the end (module scope)::

    @pytest.fixture(scope="module")
    def make_hosts(tmp_path_factory):
        yield from netns.serve_hosts(tmp_path_factory)

    hosts = make_hosts(3)      # h1, h2, h3 in hosts.ssh_config
    msrsync --hosts h1,h2,h3 --host-shell hosts.shell ...
"""

import fcntl
import ipaddress
import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time

import pytest

from remote import (SSHD, _pdeathsig_and_session, _proc_stat, _signal_if_same, _tail,
                    _write, ssh_missing, sshd_config_lines, stop_process)

RANGE = ipaddress.ip_network("198.18.0.0/15")   # RFC 2544 benchmarking: nobody's network
PORT = 22
START_TIMEOUT = 15
STOP_TIMEOUT = 5
NETNS_DIRS = ("/run/netns", "/var/run/netns")
# where the address allocation of concurrent sessions (pytest-xdist workers) is serialised
LOCK_FILE = "/tmp/msrsync-tests-netns.lock"
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

_serial = itertools.count(1)


def _ip():
    return shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/bin/ip")
                                       if os.access(p, os.X_OK)), None)


def ip(*args, check=True):
    """Run ``ip ARGS``; raise with its stderr when check and it fails."""
    cp = subprocess.run([_ip()] + list(args), stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if check and cp.returncode != 0:
        raise RuntimeError("ip %s: exit %d: %s" % (" ".join(args), cp.returncode,
                                                   cp.stderr.decode("utf-8", "replace")))
    return cp


# --------------------------------------------------------------------------- can we?

def unusable():
    """None when this machine can make the hosts, else why not (the skip reason)."""
    if os.geteuid() != 0:
        return "the host tests make network namespaces and run sshd in them: they need root"
    missing = ssh_missing()
    if missing:
        return "the host tests need openssh: missing %s" % missing
    if _ip() is None:
        return "the host tests need iproute2's ip (network namespaces)"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return "the host tests need util-linux's %s" % tool
    probe = "msrt%dp" % os.getpid()
    cp = ip("netns", "add", probe, check=False)
    if cp.returncode != 0:
        return "cannot make a network namespace here (ip netns add: %s)" % (
            cp.stderr.decode("utf-8", "replace").strip())
    ip("netns", "del", probe, check=False)
    return None


# --------------------------------------------------------------------------- processes

def _netns_identity(name):
    for d in NETNS_DIRS:
        try:
            st = os.stat(os.path.join(d, name))
            return st.st_dev, st.st_ino
        except OSError:
            continue
    return None


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid, "rb") as f:
            return f.read().strip()
    except OSError:
        return b""


def _argv(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return []


def pids_in_netns(identity):
    """[(pid, starttime, argv)] of the live processes whose network namespace is identity
    ((st_dev, st_ino) of the namespace's file)."""
    return [p[:3] for p in scan([identity]).get(identity, [])]


def scan(identities):
    """{identity: [(pid, starttime, argv, ppid)]}: the live processes of each of the
    network namespaces identities, in one pass over /proc."""
    wanted = set(i for i in identities if i is not None)
    found = {}
    if not wanted:
        return found
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            st = os.stat("/proc/%d/ns/net" % pid)
        except OSError:
            continue
        identity = (st.st_dev, st.st_ino)
        if identity not in wanted:
            continue
        stat = _proc_stat(pid)
        if stat is None or stat[2] == b"Z":
            continue
        found.setdefault(identity, []).append((pid, stat[1], _argv(pid), stat[0]))
    return found


def is_rsync(argv):
    return bool(argv) and os.path.basename(argv[0]).startswith(b"rsync")


def _alive(pid, starttime):
    st = _proc_stat(pid)
    return st is not None and st[1] == starttime and st[2] != b"Z"


def _terminate(procs, timeout=STOP_TIMEOUT):
    """SIGTERM each (pid, starttime, ...) still the same process (and SIGCONT, should
    it be stopped), SIGKILL after timeout; returns once all are gone (or another timeout
    passed)."""
    live = [(p[0], p[1]) for p in procs if _signal_if_same(p[0], p[1], signal.SIGTERM)]
    for pid, starttime in live:
        _signal_if_same(pid, starttime, signal.SIGCONT)
    live = _wait_gone(live, timeout)
    for pid, starttime in live:
        _signal_if_same(pid, starttime, signal.SIGKILL)
    _wait_gone(live, timeout)


def _wait_gone(live, timeout):
    """Wait until the (pid, starttime) processes are gone, or timeout: those left."""
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [p for p in live if _alive(*p)]
    return live


# --------------------------------------------------------------------------- addresses

def _used_subnets():
    """Indexes (in RANGE, /30 steps) of the 198.18/15 addresses this namespace has."""
    out = ip("-o", "-4", "addr", "show").stdout.decode("ascii", "replace")
    used = set()
    for match in re.finditer(r"\binet (\d+\.\d+\.\d+\.\d+)/(\d+)", out):
        address = ipaddress.ip_address(match.group(1))
        if address in RANGE:
            used.add((int(address) - int(RANGE.network_address)) // 4)
    return used


def _subnet(index):
    """(this side's address, the host's address) of the /30 number index of RANGE."""
    base = int(RANGE.network_address) + 4 * index
    return str(ipaddress.ip_address(base + 1)), str(ipaddress.ip_address(base + 2))


# --------------------------------------------------------------------------- one host

class Host(object):
    """One worker host. Attributes:

    alias    -- its name in the ssh_config (h1, h2, ...), what --hosts gets
    netns    -- the network namespace's name (what ``ip netns exec`` takes)
    veth     -- this side's end of the veth pair (link_down sets it down)
    address  -- the host's address (198.18.x.y), outer_address this side's
    log      -- sshd's log file; rsync_log the wrapper's (one line a call, its arguments)
    """

    def __init__(self, directory, alias, sshd=True, rsync="real", hide=()):
        serial = next(_serial)
        self.alias = alias
        self.netns = "msrt%dh%d" % (os.getpid(), serial)
        self.veth = "msrt%da%d" % (os.getpid(), serial)
        self.peer = "msrt%db%d" % (os.getpid(), serial)
        self.with_sshd = sshd
        self.rsync = rsync
        self.hide = [os.fsdecode(os.path.abspath(os.fsencode(h))) for h in hide]
        self.directory = os.path.join(os.fspath(directory), alias)
        d = lambda *p: os.path.join(self.directory, *p)
        self.config = d("sshd_config")
        self.log = d("sshd.log")
        self.out = d("sshd.out")
        self.pidfile = d("sshd.pid")
        self.rsync_log = d("rsync.log")
        self.wrapper = d("rsync-wrapper")
        self.no_rsync_bin = d("no-rsync-bin")
        self.address = self.outer_address = None
        self.identity = None
        self.proc = None
        self.made_netns = self.made_veth = False

    def __repr__(self):
        return "<Host %s netns %s %s pid %s>" % (self.alias, self.netns, self.address,
                                                 self.pid)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    # ----------------------------------------------------------------- network

    def make_network(self, index):
        """The namespace and its veth pair with the /30 number index (under the lock)."""
        self.outer_address, self.address = _subnet(index)
        ip("netns", "add", self.netns)
        self.made_netns = True
        self.identity = _netns_identity(self.netns)
        ip("link", "add", self.veth, "type", "veth", "peer", "name", self.peer)
        self.made_veth = True
        ip("link", "set", self.peer, "netns", self.netns)
        ip("addr", "add", self.outer_address + "/30", "dev", self.veth)
        ip("link", "set", self.veth, "up")
        ip("-n", self.netns, "link", "set", "lo", "up")
        ip("-n", self.netns, "addr", "add", self.address + "/30", "dev", self.peer)
        ip("-n", self.netns, "link", "set", self.peer, "up")

    # ----------------------------------------------------------------- sshd

    def _real_rsyncs(self):
        """Distinct real paths of the rsync binaries a session could run."""
        found = []
        for d in BIN_DIRS + (os.path.dirname(shutil.which("rsync") or "/usr/bin/rsync"),):
            path = os.path.join(d, "rsync")
            if os.path.isfile(path):
                real = os.path.realpath(path)
                if real not in found:
                    found.append(real)
        return found

    def _mount_script(self):
        """The shell lines run in the sshd's private mount namespace before it starts."""
        q = shlex.quote
        lines = ["set -e"]
        rsyncs = self._real_rsyncs()
        if self.rsync == "real":
            for i, real in enumerate(rsyncs):
                # the real binary stays reachable under the host's directory, then the
                # wrapper that notes the call and runs it covers it
                keep = os.path.join(self.directory, "real%d" % i, "rsync")
                os.makedirs(os.path.dirname(keep))
                open(keep, "w").close()
                wrapper = "%s-%d" % (self.wrapper, i)
                _write(wrapper, "\n".join([
                    "#!/bin/sh",
                    "# msrsync's host tests: note this call in the host's rsync.log",
                    "args=$(printf ' %s' \"$@\" | tr '\\n\\t' '??')",
                    "printf '%s\\t%s\\t%s\\n' \"$$\" \"$PWD\" \"${args# }\" >> "
                    + q(self.rsync_log),
                    "exec " + q(keep) + " \"$@\"", ""]), 0o755)
                lines.append("mount --bind %s %s" % (q(real), q(keep)))
                lines.append("mount --bind %s %s" % (q(wrapper), q(real)))
        else:
            stub = self.wrapper + "-" + self.rsync
            if self.rsync == "old":
                body = ["echo 'rsync  version 3.0.9  protocol version 30'", "exit 0"]
            else:
                body = ["echo \"sh: 1: $0: not found\" >&2", "exit 127"]
            _write(stub, "\n".join(["#!/bin/sh"] + body + [""]), 0o755)
            for real in rsyncs:
                lines.append("mount --bind %s %s" % (q(stub), q(real)))
        for d in self.hide:
            lines.append("mount -t tmpfs -o size=1m,mode=755 msrsync-test-hidden %s" % q(d))
        lines.append("exec %s -D -E %s -f %s" % (q(SSHD), q(self.log), q(self.config)))
        return "\n".join(lines) + "\n"

    def _make_no_rsync_bin(self):
        """A PATH directory with every command of the system's bin directories but rsync."""
        os.mkdir(self.no_rsync_bin)
        for bindir in BIN_DIRS:
            try:
                names = os.listdir(bindir)
            except OSError:
                continue
            for name in names:
                link = os.path.join(self.no_rsync_bin, name)
                if not name.startswith("rsync") and not os.path.lexists(link):
                    os.symlink(os.path.join(bindir, name), link)

    def _write_config(self, host_key, authorized_keys):
        extra = []
        if self.rsync == "missing":
            self._make_no_rsync_bin()
            extra.append("ForceCommand PATH=%s; export PATH; exec /bin/sh -c "
                         "\"$SSH_ORIGINAL_COMMAND\"" % self.no_rsync_bin)
        _write(self.config, "\n".join(
            ["# msrsync's host tests: the sshd of host %s (namespace %s), key only"
             % (self.alias, self.netns)] +
            sshd_config_lines(PORT, self.address, host_key, self.pidfile,
                              authorized_keys, "root") +
            # a session whose client is gone (link down) ends within seconds
            ["ClientAliveInterval 2", "ClientAliveCountMax 3"] + extra + [""]), 0o644)

    def start(self, host_key, authorized_keys):
        os.makedirs(self.directory, exist_ok=True)
        open(self.rsync_log, "a").close()
        self._write_config(host_key, authorized_keys)
        if not self.with_sshd:
            return
        script = self._mount_script()
        argv = [_ip(), "netns", "exec", self.netns, "unshare", "-m", "--propagation",
                "private", "/bin/sh", "-c", script]
        out = open(self.out, "ab")
        try:
            # ip netns exec, unshare and sh each exec the next: the pid is sshd's
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, close_fds=True,
                                         preexec_fn=_pdeathsig_and_session)
        finally:
            out.close()
        self._wait_for_banner()

    def _wait_for_banner(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sshd of %s exited with %s before listening:\n%s\n%s"
                                   % (self, self.proc.returncode, _tail(self.out),
                                      _tail(self.log)))
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect((self.address, PORT))
                if s.recv(64).startswith(b"SSH-"):
                    return
            except OSError as e:
                last = str(e)
            finally:
                s.close()
            time.sleep(0.05)
        raise RuntimeError("sshd of %s not answering after %ds (%s):\n%s\n%s"
                           % (self, timeout, last, _tail(self.out), _tail(self.log)))

    # ----------------------------------------------------------------- looking at it

    def processes(self):
        """[(pid, starttime, argv)] of the live processes in this host's namespace."""
        return pids_in_netns(self.identity)

    def rsyncs(self):
        """[(pid, argv)] of the live rsync processes in this host's namespace."""
        return [(p[0], p[2]) for p in self.processes() if is_rsync(p[2])]

    def sessions(self):
        """How many logins the host's sshd accepted so far."""
        try:
            with open(self.log, "rb") as f:
                return f.read().count(b"Accepted publickey")
        except OSError:
            return 0

    def rsync_calls(self):
        """(working directory, arguments) of every rsync run on this host through its
        sshd, in order; the arguments are one str (newlines and tabs made "?")."""
        try:
            with open(self.rsync_log, "rb") as f:
                lines = f.read().decode("utf-8", "surrogateescape").splitlines()
        except OSError:
            return []
        return [tuple(l.split("\t", 2)[1:]) for l in lines if l.count("\t") >= 2]

    def copies(self, needle=""):
        """The arguments of the rsync calls that copy (not a question of its version, not
        a --list-only) and name needle (in their arguments or working directory)."""
        return [args for cwd, args in self.rsync_calls()
                if not re.search(r"(^| )(--version|-V|--list-only)( |$)", args)
                and (needle in args or needle in cwd)]

    # ----------------------------------------------------------------- breaking it

    def kill(self):
        """The host dies: its sshd processes at once (SIGKILL: every connection drops,
        no exit status is sent, the clients' ssh exit 255; none is accepted any more),
        then every other process in its namespace (SIGTERM: an rsync removes its
        temporary file; SIGKILL after a timeout). By pid, never by name."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        for pid, starttime, argv in self.processes():
            if _comm(pid) == b"sshd":
                _signal_if_same(pid, starttime, signal.SIGKILL)
        if self.proc is not None:
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        _terminate(self.processes())

    def link_down(self):
        """This side's end of the veth down: the host neither answers nor is reached."""
        ip("link", "set", self.veth, "down")

    def hang(self):
        """The host hangs: its link goes down and its sshd processes stop (SIGSTOP),
        so the connections neither answer nor close and no exit status comes back; the
        work it had ends unfinished (every other process of it gets SIGTERM: an rsync
        removes its temporary file, and nothing of the host touches DEST afterwards).
        stop() (or kill()) ends the stopped sshds all the same."""
        self.link_down()
        procs = self.processes()
        for pid, starttime, argv in procs:
            if _comm(pid) == b"sshd":
                _signal_if_same(pid, starttime, signal.SIGSTOP)
        _terminate([p for p in procs if _comm(p[0]) != b"sshd"])

    def link_up(self):
        ip("link", "set", self.veth, "up")

    def crash(self):
        """The host dies at once: every process in its namespace SIGKILL (its rsyncs
        get no chance to remove their temporary files), by pid."""
        for pid, starttime, argv in self.processes():
            _signal_if_same(pid, starttime, signal.SIGKILL)

    def freeze(self):
        """The host freezes: every process in its namespace stopped (SIGSTOP), its link
        up; nothing it has answers, nothing closes. thaw() or stop() ends it."""
        for pid, starttime, argv in self.processes():
            _signal_if_same(pid, starttime, signal.SIGSTOP)

    def thaw(self):
        for pid, starttime, argv in self.processes():
            _signal_if_same(pid, starttime, signal.SIGCONT)

    def stop(self):
        """Everything of this host gone (see _stop), a frozen host thawed first."""
        try:
            self.thaw()
        except Exception:       # noqa: BLE001 - teardown goes on regardless
            pass
        self._stop()

    def _stop(self):
        """Everything of this host gone: its sshd (by pid), any process left in its
        namespace, its veth pair, its namespace. Each step runs even if one before
        failed; the first error is raised at the end."""
        errors = []
        for step in (lambda: stop_process(self.proc), lambda: _terminate(self.processes()),
                     self._del_veth, self._del_netns):
            try:
                step()
            except Exception as e:      # noqa: BLE001 - teardown goes on regardless
                errors.append(e)
        if errors:
            raise errors[0]

    def _del_veth(self):
        if self.made_veth:
            # the end in the namespace goes with it (and with the namespace anyway)
            ip("link", "del", self.veth, check=False)
            self.made_veth = False

    def _del_netns(self):
        if self.made_netns:
            ip("netns", "del", self.netns)
            self.made_netns = False
            # the kernel gives the next namespace made the same inode soon: a second
            # stop() (the with-block's, then the fixture's) must find nothing of this one
            self.identity = None

    def leftovers(self):
        """What stop() should have removed and is still there (empty when clean)."""
        left = []
        if self.proc is not None and self.proc.poll() is None:
            left.append("sshd pid %d" % self.proc.pid)
        if self.identity is not None and self.processes():
            left.append("processes in %s: %r" % (self.netns, self.processes()))
        if ip("link", "show", self.veth, check=False).returncode == 0:
            left.append("link %s" % self.veth)
        names = ip("netns", "list", check=False).stdout.decode("utf-8", "replace")
        if re.search(r"^%s\b" % re.escape(self.netns), names, re.M):
            left.append("namespace %s" % self.netns)
        return left


# --------------------------------------------------------------------------- a set of hosts

class Hosts(object):
    """Hosts h1..hN sharing one client key, one host key and one ssh_config. Attributes:

    hosts      -- the Host objects; hosts[0] is h1; hosts.get("h2") by alias
    ssh_config -- the ssh_config path (one ``Host hN`` block each)
    shell      -- ``ssh -F SSH_CONFIG``, what --host-shell gets
    key        -- the client key
    """

    def __init__(self, directory, specs):
        self.directory = os.fspath(directory)
        d = lambda *p: os.path.join(self.directory, *p)
        self.key = d("client_key")
        self.host_key = d("host_ed25519_key")
        self.authorized_keys = d("authorized_keys")
        self.ssh_config = d("ssh_config")
        self.batch_ssh_config = d("ssh_config.batch")
        self.hosts = [Host(self.directory, "h%d" % (i + 1), **spec)
                      for i, spec in enumerate(specs)]

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self):
        return len(self.hosts)

    def __getitem__(self, i):
        return self.hosts[i]

    def get(self, alias):
        return next(h for h in self.hosts if h.alias == alias)

    @property
    def aliases(self):
        return [h.alias for h in self.hosts]

    @property
    def shell(self):
        return "ssh -F %s" % shlex.quote(self.ssh_config)

    @property
    def batch_shell(self):
        """ssh with the configuration automation usually has (BatchMode yes,
        ConnectTimeout 10) and no keep-alive of its own: Debian's ssh then reports
        ServerAliveInterval 300."""
        return "ssh -F %s" % shlex.quote(self.batch_ssh_config)

    def _keygen(self, path, comment):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                        "-f", path], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)

    def _write_ssh_config(self):
        # ssh_config: a host whose link went down is given up within seconds by ssh
        # itself; ssh_config.batch: automation's usual settings, no keep-alive of its own
        for path, header, extra in (
                (self.ssh_config, "ssh -F this file",
                 ["ConnectTimeout 5", "ServerAliveInterval 1", "ServerAliveCountMax 3"]),
                (self.batch_ssh_config, "automation's usual ssh configuration",
                 ["ConnectTimeout 10"])):
            blocks = ["# msrsync's host tests: " + header]
            for h in self.hosts:
                blocks += ["Host %s" % h.alias] + ["    " + line for line in [
                    "HostName %s" % h.address, "Port %d" % PORT, "User root",
                    "IdentityFile %s" % self.key, "IdentitiesOnly yes",
                    "StrictHostKeyChecking no", "UserKnownHostsFile /dev/null",
                    "LogLevel ERROR", "BatchMode yes"] + extra] + [""]
            _write(path, "\n".join(blocks), 0o644)

    def start(self):
        os.makedirs(self.directory, exist_ok=True)
        self._keygen(self.host_key, "msrsync-test-host")
        self._keygen(self.key, "msrsync-test-client")
        with open(self.key + ".pub") as f:
            _write(self.authorized_keys, f.read().strip() + "\n", 0o644)
        if not os.path.isdir("/run/sshd"):
            # the privilege separation directory sshd chroots into when run as root
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        with open(LOCK_FILE, "a") as lock:
            # two sessions (pytest-xdist workers) must not take the same /30
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _used_subnets()
            free = (i for i in range(1, RANGE.num_addresses // 4) if i not in used)
            for h in self.hosts:
                h.make_network(next(free))
        self._write_ssh_config()
        for h in self.hosts:
            h.start(self.host_key, self.authorized_keys)
        return self

    def close(self):
        errors = []
        for h in reversed(self.hosts):
            try:
                h.stop()
            except Exception as e:      # noqa: BLE001 - every host is stopped regardless
                errors.append(e)
        if errors:
            raise errors[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def processes_in(self, alias):
        return self.get(alias).processes()

    def kill_host(self, alias):
        self.get(alias).kill()

    def link_down(self, alias):
        self.get(alias).link_down()

    def hang(self, alias):
        self.get(alias).hang()


# --------------------------------------------------------------------------- the helpers by name

def kill_host(host):
    """Stop a Host's sshd and every session process in its namespace, by pid."""
    host.kill()


def link_down(host):
    """``ip link set <this side's veth> down`` for a Host."""
    host.link_down()


def hang(host):
    """A Host's link down, its sshds stopped (SIGSTOP), its work ended unfinished."""
    host.hang()


def processes_in(host):
    """(pid, starttime, argv) of the processes whose /proc/PID/ns/net is the Host's."""
    return host.processes()


def sessions(host):
    """The logins a Host's sshd accepted ("Accepted publickey" lines of its log)."""
    return host.sessions()


# --------------------------------------------------------------------------- fixture

def serve_hosts(tmp_path_factory):
    """Generator for a (module-scoped) pytest fixture: yields make(n=3, specs=None) ->
    a started Hosts (specs: one dict of Host options a host: sshd, rsync, hide); stops
    every Hosts it made afterwards, even on failure. Skips, saying why, where the hosts
    cannot be made (not root, no ip, no sshd, no network namespaces)."""
    reason = unusable()
    if reason:
        pytest.skip(reason)
    made = []

    def make(n=3, specs=None):
        hosts = Hosts(tmp_path_factory.mktemp("hosts"), specs or [{}] * n)
        made.append(hosts)
        return hosts.start()

    try:
        yield make
    finally:
        errors = []
        for hosts in reversed(made):
            try:
                hosts.close()
            except Exception as e:      # noqa: BLE001
                errors.append(e)
        if errors:
            raise errors[0]
