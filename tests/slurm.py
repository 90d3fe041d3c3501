"""A real Slurm cluster for the worker-host tests: Debian's slurm-wlm and munge, private to
the test run.

One munged (its own key and socket), one slurmctld on this machine and one slurmd per
network-namespace host of netns.py (``slurmd -N hN``, entered into the host's network
namespace alone with nsenter, so that it sees this machine's file system and its
cgroups: ``ip netns exec`` would remount /sys). Everything is under one directory: the
slurm.conf that SLURM_CONF names, the munge key and socket (AuthInfo=socket=...), state,
spool, logs and pid files; nothing under /etc is read or changed, and the ports are
picked free. The controller listens on this side of h1's veth; the other hosts get a
route to that one address.

Every daemon is started and stopped by pid (SIGTERM, SIGKILL after a timeout; SIGTERM
from the kernel should pytest die, PR_SET_PDEATHSIG), slurmds first. A test module makes
the cluster once (module scope)::

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        yield from slurm.serve_cluster(tmp_path_factory, nodes=3)

    cp = cluster.run(["salloc", "-N3", "msrsync", ...])    # SLURM_CONF set
"""

import os
import shutil
import socket
import subprocess
import time

import pytest

import netns
from remote import _pdeathsig_and_session, stop_process

DAEMONS = ("munged", "slurmctld", "slurmd", "salloc", "srun", "sbatch", "scontrol",
           "scancel", "sinfo", "squeue", "nsenter")
START_TIMEOUT = 60


def unusable():
    """Why a Slurm cluster cannot be made here, or None."""
    reason = netns.unusable()
    if reason:
        return reason
    missing = [name for name in DAEMONS if shutil.which(name) is None and
               not any(os.access(os.path.join(d, name), os.X_OK) for d in netns.BIN_DIRS)]
    if missing:
        return "Slurm is not installed (no %s: apt-get install slurm-wlm munge)" % \
            ", ".join(missing)
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class Cluster(object):
    """munged + slurmctld here + one slurmd per host of `hosts` (a started netns.Hosts).

    env    -- os.environ plus SLURM_CONF
    nodes  -- the node names (the hosts' aliases)
    """

    def __init__(self, directory, hosts):
        self.directory = os.fspath(directory)
        self.hosts = hosts
        self.nodes = hosts.aliases
        d = lambda *p: os.path.join(self.directory, *p)
        self.conf = d("slurm.conf")
        self.key, self.socket = d("munge.key"), d("munge.sock")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.env.pop("SLURM_JOB_ID", None)
        self.munged = self.slurmctld = None
        self.slurmds = {}

    def _daemon(self, argv, log_name, prefix=()):
        log = open(os.path.join(self.directory, log_name), "ab")
        try:
            return subprocess.Popen(list(prefix) + argv, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=self.env,
                                    preexec_fn=_pdeathsig_and_session)
        finally:
            log.close()

    def _write_conf(self):
        controller = self.hosts[0].outer_address
        lines = [
            "ClusterName=msrtests",
            "SlurmctldHost=%s(%s)" % (socket.gethostname().split(".")[0], controller),
            "SlurmctldPort=%d" % _free_port(), "SlurmdPort=%d" % _free_port(),
            "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % self.socket,
            "SlurmUser=root", "SlurmdUser=root", "MailProg=/bin/true",
            "StateSaveLocation=%s/state" % self.directory,
            "SlurmdSpoolDir=%s/spool-%%n" % self.directory,
            "SlurmctldPidFile=%s/slurmctld.pid" % self.directory,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % self.directory,
            "SlurmctldLogFile=%s/slurmctld.log" % self.directory,
            "SlurmdLogFile=%s/slurmd-%%n.log" % self.directory,
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "ReturnToService=2", "SlurmdParameters=config_overrides",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SlurmctldTimeout=10", "SlurmdTimeout=10", "InactiveLimit=0", "KillWait=2",
            "MinJobAge=5",
        ]
        for host in self.hosts:
            lines.append("NodeName=%s NodeAddr=%s CPUs=2 State=UNKNOWN" % (host.alias,
                                                                           host.address))
        lines.append("PartitionName=tests Nodes=%s Default=YES MaxTime=INFINITE State=UP"
                     % ",".join(self.nodes))
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self):
        os.makedirs(os.path.join(self.directory, "state"), exist_ok=True)
        with open(self.key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.key, 0o600)
        controller = self.hosts[0].outer_address
        for host in self.hosts.hosts[1:]:
            netns.ip("-n", host.netns, "route", "add", controller + "/32", "via",
                     host.outer_address)
        self._write_conf()
        self.munged = self._daemon(
            ["munged", "-F", "--force", "--key-file=" + self.key, "--socket=" + self.socket,
             "--pid-file=" + os.path.join(self.directory, "munged.pid"),
             "--log-file=" + os.path.join(self.directory, "munged.log"),
             "--seed-file=" + os.path.join(self.directory, "munge.seed")], "munged.out")
        deadline = time.monotonic() + START_TIMEOUT
        while not os.path.exists(self.socket):
            if self.munged.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("munged did not start: %s" % self.log("munged.out"))
            time.sleep(0.05)
        self.slurmctld = self._daemon(["slurmctld", "-D", "-i", "-f", self.conf],
                                      "slurmctld.out")
        for host in self.hosts:
            self.start_node(host.alias)
        self.wait_idle(self.nodes)
        return self

    def start_node(self, alias):
        host = self.hosts.get(alias)
        self.slurmds[alias] = self._daemon(
            ["slurmd", "-D", "-N", alias, "-f", self.conf], "slurmd-%s.out" % alias,
            prefix=["nsenter", "--net=/run/netns/" + host.netns])

    def node_states(self):
        cp = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, timeout=30)
        return dict(line.split() for line in cp.stdout.decode().splitlines()
                    if len(line.split()) == 2)

    def wait_idle(self, nodes, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if all(states.get(n) == "idle" for n in nodes):
                return
            if time.monotonic() > deadline or (self.slurmctld.poll() is not None):
                raise RuntimeError("Slurm nodes not idle: %r\n%s\n%s" % (
                    states, self.log("slurmctld.log")[-2000:],
                    "".join(self.log("slurmd-%s.log" % n)[-800:] for n in nodes)))
            time.sleep(0.3)

    def kill_node(self, alias):
        """The node dies: its slurmd and every process in its namespace, SIGKILL."""
        proc = self.slurmds.get(alias)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self.hosts.get(alias).crash()

    def log(self, name):
        try:
            with open(os.path.join(self.directory, name), "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, argv, timeout=300, **kwargs):
        return subprocess.run(argv, env=kwargs.pop("env", self.env), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              **kwargs)

    def stop(self):
        """slurmds, then slurmctld, then munged: by pid, SIGTERM then SIGKILL."""
        for proc in list(self.slurmds.values()) + [self.slurmctld, self.munged]:
            stop_process(proc)


def serve_cluster(tmp_path_factory, nodes=3):
    """Generator for a module-scoped fixture: a started Cluster of `nodes` namespace
    hosts, stopped (daemons, then hosts) afterwards, even on failure; skips, saying why,
    where Slurm or the namespaces cannot be had."""
    reason = unusable()
    if reason:
        pytest.skip(reason)
    hosts = netns.Hosts(tmp_path_factory.mktemp("slurm-hosts"), [{}] * nodes)
    cluster = Cluster(tmp_path_factory.mktemp("slurm"), hosts)
    try:
        hosts.start()
        cluster.start()
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            hosts.close()
