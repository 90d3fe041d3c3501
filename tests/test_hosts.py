"""Worker hosts: --hosts, --hostfile, --host-shell, a host lost mid-run.

The hosts are network namespaces of this machine (see netns.py), each with its own sshd
on a 198.18/15 address: they see this machine's file system, as hosts on shared storage
see SRC and DEST at the same paths. Every rsync a host runs through its sshd is noted in
its rsync.log (a wrapper covers the rsync binaries in the sshd's mount namespace), so
"this host ran buckets" is a fact the tests read, not a guess.

The oracle is plain rsync, as everywhere: ``rsync OPTS SRC/ oracle/dest`` against
``msrsync ... --hosts ... --rsync "OPTS" SRC/ msrsync/dest``; the trees must be the same.
Options that only slow a run down (--bwlimit, so a host can be lost while it works) are
given to msrsync's rsyncs alone.

Worker hosts are tested in three files, this one first: test_hosts.py (the options,
the host sessions, what each host ran, a host lost mid-run), test_host_loss.py (hosts
lost the hard ways: a cut link, a frozen or crashed host) and test_slurm.py (srun as
the host shell on a real Slurm cluster); the other two reuse this file's runs and
trees.  Hosts beside another feature are with that feature: --check (test_check.py),
--metrics (test_metrics.py), readahead (test_readahead.py), --verify
(test_verify.py), a remote DEST (test_remote.py), completion (test_completion.py).
"""

import collections
import ipaddress
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time

import pytest

import netns
from helpers import (transferring, age, assert_same_tree, build, describe, differential, end, extras,
                     hardlink_tree, make_tree, rsync_opts_string, run_cmd, run_msrsync,
                     run_rsync, running_rsyncs, snapshot, start_msrsync, stderr_lines,
                     text, wait_for)
from remote import processes_mentioning

OPTS = ["-aS", "--numeric-ids"]
# one 256 KiB file a bucket at 256 KiB/s: about a second each (see slow_tree)
SLOW = ["--bwlimit=256"]
SLOW_CAPS = ["-s", "256K"]
# one 4 MiB file a bucket at 128 KiB/s: half a minute each (see long_src), so that an
# rsync still running after a signal was left running, not merely finishing
LONG = ["--bwlimit=128"]
LONG_CAPS = ["-s", "4M"]
# where a lost host's bound is not what is tested (test_host_loss tests it): msrsync's
# limits for a silent host and the host's own watcher made short (see HOST_SILENCE)
QUICK = {"MSRSYNC_HOST_SILENCE": "4", "MSRSYNC_HOST_FENCE": "3"}


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def make_hosts(tmp_path_factory):
    """make(n=3, specs=None) -> netns.Hosts, all stopped at the end of the module."""
    yield from netns.serve_hosts(tmp_path_factory)


@pytest.fixture(scope="module")
def hosts(make_hosts):
    """h1, h2, h3: working hosts, shared by the tests that leave them working."""
    return make_hosts(3)


@pytest.fixture(scope="module")
def private(tmp_path_factory):
    """A directory host h5 of broken_hosts does not see (an empty tmpfs covers it there)."""
    return tmp_path_factory.mktemp("private")


@pytest.fixture(scope="module")
def broken_hosts(make_hosts, private):
    """h1 works; h2 has no sshd (nothing listens); h3 has no rsync; h4 an rsync 3.0.9;
    h5 does not see what lies under the private directory."""
    return make_hosts(specs=[{}, {"sshd": False}, {"rsync": "missing"}, {"rsync": "old"},
                             {"hide": [str(private)]}])


@pytest.fixture(scope="module")
def hosts_src(tmp_path_factory):
    """The host tests' tree: the small tree's awkward names, links and modes plus 240
    files in 16 directories (about 430 entries); never modified by tests."""
    return hosts_tree(tmp_path_factory.mktemp("hosts-src") / "src", seed=3)


@pytest.fixture(scope="module")
def slow_src(tmp_path_factory):
    """18 files of 256 KiB, a bucket each with -s 256K, about a second each with SLOW:
    a host lost once it copies leaves the others a dozen buckets to run."""
    return slow_tree(tmp_path_factory.mktemp("slow-src") / "src", count=18)


@pytest.fixture(scope="module")
def long_src(tmp_path_factory):
    """6 files of 4 MiB: a bucket each with LONG_CAPS, half a minute each with LONG."""
    return age(make_tree(tmp_path_factory.mktemp("long-src") / "src", "big", count=6,
                         size=4 << 20))


# --------------------------------------------------------------------------- trees

def hosts_tree(root, seed=0, files=240):
    root = make_tree(root, "small", seed=seed)
    rng = random.Random(seed)
    spec = {}
    for i in range(files):
        size = rng.choice([0, 1, 100, 1000, 5000, 20000])
        spec[b"spread/d%02d/f%03d.dat" % (i % 16, i)] = os.urandom(size)
    spec[b"spread/empty dir/"] = None
    spec[b"spread/d03/link"] = ("symlink", b"f003.dat")
    build(root, spec)
    return age(root)


def slow_tree(root, count=30):
    root = make_tree(root, "big", count=count, size=256 << 10)
    build(root, {b"sub/small": b"small\n", b"sub/empty/": None})
    return age(root)


# --------------------------------------------------------------------------- helpers

def slash(path):
    return os.fsencode(path) + b"/"


def names_host(line, alias):
    """Whether line names the host alias (as a word: h1 is not in h10)."""
    return re.search(r"(?<![\w@.-])%s(?![\w.-])" % re.escape(alias), line) is not None


def host_lines(cp, alias):
    return [l for l in stderr_lines(cp) if names_host(l, alias)]


def no_traceback(cp):
    __tracebackhide__ = True
    assert b"Traceback" not in cp.stderr, describe(cp)


def copies(hosts, needle=""):
    """{alias: how many copying rsyncs naming needle (a path) it ran so far}."""
    return {h.alias: len(h.copies(os.fsdecode(needle))) for h in hosts}


def top_rsyncs(host, processes=None):
    """The rsyncs in host's namespace that are not forked by another rsync: one a
    transfer (rsync forks its generator, which forks its receiver). processes: what
    netns.scan found there, else looked up."""
    if processes is None:
        processes = netns.scan([host.identity]).get(host.identity, [])
    rsyncs = {p[0] for p in processes if netns.is_rsync(p[2])}
    return [p[0] for p in processes if p[0] in rsyncs and p[3] not in rsyncs]


def transfers(processes, ended=None):
    """Of the top rsyncs among processes, those whose transfer is not over. Once it is
    over rsync says so on a host (see HOST_END_LINE), and while its processes end the
    worker starts its next bucket, as a worker here does: they then sleep in rsync's
    msleep (nanosleep), which a transfer calls on no other path but errors and
    signals, the receiver until the generator kills it, the generator and the first
    process until their child has exited; the first one, its children reaped, prints
    its stats and exits. ended: a set of (pid, start time) of the tops seen over, kept
    from sample to sample (a process awake between two sleeps looks busy)."""
    ended = set() if ended is None else ended
    rsyncs = dict((p[0], p) for p in processes if netns.is_rsync(p[2]))
    children = collections.defaultdict(list)
    for pid, p in rsyncs.items():
        children[p[3]].append(pid)

    def over(top):
        kids = children.get(top)
        if not kids:
            return True
        tree = [top] + kids + [g for k in kids for g in children.get(k, [])]
        return any(b"nanosleep" in _wchan(pid) for pid in tree)
    running = []
    for pid, p in rsyncs.items():
        if p[3] in rsyncs or (pid, p[1]) in ended:
            continue
        if over(pid):
            ended.add((pid, p[1]))
        else:
            running.append(pid)
    return running


def _wchan(pid):
    try:
        with open("/proc/%d/wchan" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class Watch(object):
    """Samples, while a run goes on, the rsyncs running in each host's namespace: the
    pids seen (seen[alias]) and the most transfers at once (most[alias], see
    transfers), counted in two samples in a row: a transfer that ends is caught between
    two of its processes' sleeps now and then (on a loaded machine a process woken from
    one may wait for a CPU), never in two samples, where a transfer too many lasts its
    bucket's time."""

    def __init__(self, hosts, interval=0.02):
        self.hosts = list(hosts)
        self.seen = {h.alias: set() for h in self.hosts}
        self.most = {h.alias: 0 for h in self.hosts}
        self.ended = set()          # the transfers seen over (see transfers)
        self.last = {h.alias: set() for h in self.hosts}    # those of the last sample
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            found = netns.scan([h.identity for h in self.hosts])
            for h in self.hosts:
                processes = found.get(h.identity, [])
                self.seen[h.alias].update(top_rsyncs(h, processes))
                now = set(transfers(processes, self.ended))
                self.most[h.alias] = max(self.most[h.alias], len(now & self.last[h.alias]))
                self.last[h.alias] = now
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        return self


def finish_like_rsync(run):
    """Wait for a Run: exit 0, no traceback, DEST as rsync's; clean up either way."""
    try:
        cp = run.wait()
        assert cp.returncode == 0, describe(cp)
        no_traceback(cp)
        run.compare()
    finally:
        run.end()
    return cp


class Run(object):
    """One differential run with msrsync in the background: the oracle first (plain
    rsync OPTS), then msrsync MSRSYNC_OPTS --rsync "OPTS + SLOWER" SRCS msrsync/dest.
    wait() gives its CompletedProcess; compare() checks the trees; end() cleans up."""

    def __init__(self, tmp_path, srcs, rsync_opts, msrsync_opts, slower=(),
                 prepare_dest=None, watch=(), env=None):
        self.tmp_path = tmp_path
        self.env = dict(os.environ, **env) if env else None
        work = os.fsencode(tmp_path)
        self.dests = []
        for side in (b"oracle", b"msrsync"):
            os.makedirs(os.path.join(work, side), exist_ok=True)
            dest = os.path.join(work, side, b"dest")
            if prepare_dest is not None:
                prepare_dest(dest)
            self.dests.append(dest)
        self.oracle = run_rsync(*(list(srcs) + [self.dests[0]]), opts=rsync_opts)
        assert self.oracle.returncode == 0, describe(self.oracle)
        self.args = list(msrsync_opts) + ["--rsync", rsync_opts_string(list(rsync_opts) +
                                                                      list(slower))]
        self.args += list(srcs) + [self.dests[1]]
        self.proc = self._start(self.args)
        self.watch = Watch(watch) if watch else None
        self.result = None

    def _start(self, args):
        return start_msrsync(*args, env=self.env)

    def wait(self, timeout=120):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            if self.watch:
                self.watch.stop()
        self.result = subprocess.CompletedProcess(self.proc.args, self.proc.returncode,
                                                  out, err)
        return self.result

    def compare(self):
        assert_same_tree(self.dests[0], self.dests[1], label_a="rsync", label_b="msrsync")
        assert_no_witness(self.tmp_path)

    def end(self):
        if self.watch:
            self.watch.stop()
        end(self.proc, self.tmp_path)


def assert_no_witness(workdir):
    """msrsync's DEST (workdir/msrsync/dest) is alone in its directory: the witness file
    of the hosts' check (written in DEST's nearest existing directory) is gone."""
    __tracebackhide__ = True
    parent = os.path.join(os.fsencode(workdir), b"msrsync")
    assert os.listdir(parent) == [b"dest"], os.listdir(parent)


def host_opts(hs, aliases=None, *more):
    return ["--hosts", ",".join(aliases or hs.aliases), "--host-shell", hs.shell] + list(more)


def host_summaries(path):
    """The "hosts" list of a --json summary, by host name."""
    with open(path) as f:
        summary = json.load(f)
    assert isinstance(summary.get("hosts"), list), summary
    return {entry["host"]: entry for entry in summary["hosts"]}


def assert_no_rsync_in(hs, tmp_path, timeout):
    """Within timeout: no rsync left in any host's namespace, none on this machine
    naming this test's directory, no ssh client of the hosts' ssh_config."""
    __tracebackhide__ = True

    def left():
        found = [(h.alias, h.rsyncs()) for h in hs if h.rsyncs()]
        found += [("here", running_rsyncs(tmp_path))] if running_rsyncs(tmp_path) else []
        ssh = processes_mentioning(hs.ssh_config)
        found += [("ssh", ssh)] if ssh else []
        return found

    assert wait_for(lambda: not left(), timeout), "left running: %r" % (left(),)


def wait_for_copies(hs, aliases, needle, timeout=30):
    """Until each of aliases runs a copy naming needle (this test's directory): in its
    rsync.log and an rsync in its namespace."""
    needle = os.fsdecode(needle)

    def busy():
        return all(hs.get(a).copies(needle) and top_rsyncs(hs.get(a)) for a in aliases)
    assert wait_for(busy, timeout), "no copy started on %s: %r" % (
        aliases, [(h.alias, h.copies()[-3:], h.rsyncs()) for h in hs])


# --------------------------------------------------------------------------- the test hosts

def test_the_test_hosts_answer_over_ssh_and_share_this_file_system(tmp_path, make_hosts):
    """Each host answers over ssh -F its ssh_config from its own namespace and sees this
    machine's files; its rsyncs are noted; kill_host and link_down make ssh fail (255);
    teardown leaves no sshd, no process in the namespace, no veth, no namespace."""
    witness = tmp_path / "witness"
    witness.write_bytes(b"seen from the host\n")
    with make_hosts(3) as hs:
        for h in hs:
            assert ipaddress.ip_address(h.address) in netns.RANGE
            assert ipaddress.ip_address(h.outer_address) in netns.RANGE
            cp = run_cmd(["ssh", "-F", hs.ssh_config, h.alias,
                          "cat %s; ip -o -4 addr show; rsync --version" % witness],
                         timeout=30)
            assert cp.returncode == 0, describe(cp)
            out = text(cp.stdout)
            assert out.startswith("seen from the host\n"), describe(cp)
            assert " inet %s/30 " % h.address in out, out      # run inside the namespace
            assert " inet %s/30 " % h.outer_address not in out, out
            assert "rsync  version" in out, out
            assert netns.sessions(h) == 1
            assert [args for cwd, args in h.rsync_calls()] == ["--version"]
            assert h.copies() == []
            assert [p for p in netns.processes_in(h) if b"sshd" in p[2][0]], \
                "no sshd in %s" % h.netns
        netns.kill_host(hs[0])
        assert netns.processes_in(hs[0]) == []
        netns.link_down(hs[1])
        for h in hs[:2]:
            cp = run_cmd(["ssh", "-F", hs.ssh_config, "-o", "ConnectTimeout=1", h.alias,
                          "true"], timeout=30)
            assert cp.returncode == 255, describe(cp)
        cp = run_cmd(["ssh", "-F", hs.ssh_config, "h3", "true"], timeout=30)
        assert cp.returncode == 0, describe(cp)
        pids = [h.pid for h in hs]
    for h, pid in zip(hs, pids):
        assert h.leftovers() == []
        assert not os.path.exists("/proc/%d/cmdline" % pid) or h.proc.poll() is not None


def test_the_broken_test_hosts_are_broken_as_meant(tmp_path, broken_hosts, private):
    """h1 works; h2 refuses connections (ssh 255); h3 finds no rsync on its PATH nor at
    its path (127); h4's rsync says 3.0.9; h5 sees this machine's files but the private
    directory, empty there."""
    hs = broken_hosts
    rsync_path = os.path.realpath(shutil.which("rsync"))

    def ssh(alias, command):
        return run_cmd(["ssh", "-F", hs.ssh_config, alias, command], timeout=30)

    hidden = os.path.join(str(private), "hidden-%d" % os.getpid())
    with open(hidden, "w") as f:
        f.write("here only\n")
    seen = tmp_path / "seen"
    seen.write_text("everywhere\n")
    try:
        cp = ssh("h1", "command -v rsync && rsync --version | head -1")
        assert cp.returncode == 0 and b"rsync  version 3." in cp.stdout, describe(cp)
        assert b"version 3.0.9" not in cp.stdout
        assert ssh("h2", "true").returncode == 255           # nothing listens
        cp = ssh("h3", "command -v rsync; echo $?; rsync --version")
        assert cp.stdout in (b"1\n", b"127\n") and cp.returncode == 127, describe(cp)
        cp = ssh("h3", "%s --version" % rsync_path)         # by its path: not found
        assert cp.stdout == b"" and cp.returncode == 127, describe(cp)
        cp = ssh("h4", "rsync --version")
        assert cp.returncode == 0 and b"version 3.0.9 " in cp.stdout, describe(cp)
        cp = ssh("h5", "cat %s; ls -A %s; test -e %s" % (seen, private, hidden))
        assert cp.stdout == b"everywhere\n", describe(cp)      # private is empty there
        assert cp.returncode == 1, describe(cp)
        cp = ssh("h1", "cat %s" % hidden)
        assert cp.stdout == b"here only\n", describe(cp)
    finally:
        os.unlink(hidden)


# --------------------------------------------------------------------------- copies

def test_three_hosts_copy_the_tree_like_rsync_and_each_runs_buckets(tmp_path, hosts,
                                                                    hosts_src):
    """-p 2 with --hosts h1,h2,h3: two rsyncs at once on each; DEST as plain rsync makes
    it; every host ran copies (its rsync.log), --json and --stats give each host."""
    before = copies(hosts, tmp_path)
    summary = tmp_path / "summary.json"
    run = Run(tmp_path, [slash(hosts_src)], OPTS,
              ["-p", "2", "-f", "20", "--stats", "--json", summary] + host_opts(hosts),
              watch=hosts)
    cp = finish_like_rsync(run)
    after = copies(hosts, tmp_path)
    assert all(after[a] > before[a] for a in after), (before, after)
    assert all(run.watch.most[a] <= 2 for a in after), run.watch.most
    entries = host_summaries(summary)
    assert sorted(entries) == ["h1", "h2", "h3"], entries
    assert all(entries[a]["buckets"] >= 1 for a in entries), entries
    for alias in hosts.aliases:
        assert [l for l in text(cp.stdout).splitlines() if names_host(l, alias)], \
            "--stats says nothing of %s:\n%s" % (alias, text(cp.stdout))


def test_awkward_names_copy_like_rsync_over_two_hosts(tmp_path, hosts, weird_src):
    """Newlines, invalid UTF-8, quotes, leading dashes in the bucket lists that travel
    to the hosts on their standard input."""
    before = copies(hosts, tmp_path)
    differential(tmp_path, [slash(weird_src)], msrsync_opts=["-p", "2", "-f", "20"] +
                 host_opts(hosts, ["h1", "h2"]), rsync_opts=OPTS)
    assert_no_witness(tmp_path)
    after = copies(hosts, tmp_path)
    assert after["h1"] > before["h1"] and after["h2"] > before["h2"], (before, after)
    assert after["h3"] == before["h3"], "h3 was not in --hosts"


def test_hard_links_copy_like_rsync_over_three_hosts(tmp_path, hosts):
    src = hardlink_tree(tmp_path / "src")
    before = copies(hosts, tmp_path)
    differential(tmp_path / "w", [slash(src)], msrsync_opts=["-p", "2", "-f", "5"] +
                 host_opts(hosts), rsync_opts=["-aH", "--numeric-ids"])
    assert_no_witness(tmp_path / "w")
    assert sum(copies(hosts, tmp_path).values()) > sum(before.values())


def test_delete_with_excludes_onto_a_stale_dest_like_rsync_over_three_hosts(tmp_path,
                                                                          hosts):
    src = make_tree(tmp_path / "src", "small", seed=7)
    build(src, {b"many/d01/x.tmp": b"excluded in SRC\n", b"top.tmp": b"t\n"})
    age(src)

    def stale(dest):
        extras(dest)
        build(dest, {b"many/d01/old.tmp": b"kept: excluded\n", b"zz gone/y.tmp": b"z\n",
                     b"many/d02/gone.dat": b"deleted\n"})
        age(dest, 10 ** 9, everything=True)

    d = differential(tmp_path / "w", [slash(src)], msrsync_opts=["-p", "2", "-f", "10"] +
                     host_opts(hosts), rsync_opts=["-a", "--delete", "--exclude=*.tmp"],
                     prepare_dest=stale)
    assert_no_witness(tmp_path / "w")
    # the comparison is not an empty one: deletions and kept excluded files happened
    dest = d.msrsync_dest
    assert os.path.exists(os.path.join(dest, b"many/d01/old.tmp"))
    assert not os.path.lexists(os.path.join(dest, b"many/d02/gone.dat"))
    assert not os.path.lexists(os.path.join(dest, b"extra top file"))
    assert not os.path.lexists(os.path.join(dest, b"top.tmp"))


def test_ip_netns_exec_as_host_shell_with_this_machine_mixed_in(tmp_path, hosts,
                                                                 hosts_src):
    """--host-shell "ip netns exec" and --hosts ":,NS:2": no sshd involved (no login, no
    rsync through it), rsyncs run in the namespace and here."""
    ns = hosts[0]
    sessions, calls = netns.sessions(ns), len(ns.rsync_calls())
    summary = tmp_path / "summary.json"
    run = Run(tmp_path, [slash(hosts_src)], OPTS,
              ["-p", "1", "-f", "20", "--json", summary, "--hosts", ":,%s:2" % ns.netns,
               "--host-shell", "ip netns exec"], slower=["--bwlimit=2000"], watch=[ns])
    finish_like_rsync(run)
    assert run.watch.seen[ns.alias], "no rsync seen in namespace %s" % ns.netns
    assert run.watch.most[ns.alias] <= 2, run.watch.most
    assert netns.sessions(ns) == sessions and len(ns.rsync_calls()) == calls, \
        "the run went through h1's sshd"
    entries = host_summaries(summary)
    assert len(entries) == 2, entries
    assert all(e["buckets"] >= 1 for e in entries.values()), entries
    assert [name for name in entries if ns.netns in name], entries


def test_this_machine_alone_runs_without_any_remote_shell(tmp_path, hosts_src):
    """--hosts ":" is this machine: the remote shell (here one that always fails) is
    never started."""
    differential(tmp_path, [slash(hosts_src)], msrsync_opts=[
        "-p", "2", "-f", "40", "--hosts", ":", "--host-shell", "false"], rsync_opts=OPTS)


def test_the_host_shell_gets_the_host_and_sh_and_no_path_on_its_command_line(
        tmp_path, hosts_src):
    """--host-shell CMD is split as a shell would and started as CMD... HOST sh: the
    rsync commands and bucket lists travel on its standard input, never a path on its
    command line. An IPv6 literal in brackets, user@host and host:N are hosts. (The
    shell here notes its arguments and runs sh on this machine.)"""
    log = tmp_path / "shell.log"
    shell = tmp_path / "shell"
    shell.write_text("\n".join([
        "#!/bin/sh",
        "line=$(for a in \"$@\"; do printf '%s\\t' \"$a\"; done)",
        "printf '%s\\n' \"$line\" >> " + shlex.quote(str(log)),
        "shift 2",
        "exec \"$@\"", ""]))
    shell.chmod(0o755)
    differential(tmp_path / "w", [slash(hosts_src)], msrsync_opts=[
        "-p", "1", "-f", "40", "--hosts", "fake1:2,someone@fake2,[fd00::1]:1",
        "--host-shell", "%s 'first arg'" % shlex.quote(str(shell))], rsync_opts=OPTS)
    calls = [line.split("\t")[:-1] for line in log.read_text().splitlines()]
    assert calls, "the host shell was never started"
    for call in calls:
        assert len(call) == 3 and call[0] == "first arg" and call[2] == "sh", calls
    hosts = {call[1] for call in calls}
    assert hosts in ({"fake1", "someone@fake2", "fd00::1"},
                     {"fake1", "someone@fake2", "[fd00::1]"}), hosts


def test_a_host_runs_bucket_after_bucket_in_a_few_sessions_kept_open(tmp_path, hosts_src):
    """A host's sh is started once for each rsync it runs at once (one more while one
    ends), not once a bucket: dozens of buckets on a host of 2 rsyncs take a handful of
    host shells (the first is the check before the run). The shell here notes each start
    and runs sh on this machine; the copy is rsync's."""
    log = tmp_path / "shell.log"
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\necho \"$1\" >> %s\nshift\nexec \"$@\"\n"
                     % shlex.quote(str(log)))
    shell.chmod(0o755)
    summary = tmp_path / "summary.json"
    run = differential(tmp_path / "w", [slash(hosts_src)], msrsync_opts=[
        "-f", "10", "--json", str(summary), "--hosts", "fake1:2", "--host-shell", str(shell)],
        rsync_opts=OPTS)
    buckets = host_summaries(summary)["fake1"]["buckets"]
    starts = log.read_text().split()
    assert buckets >= 20, buckets
    assert set(starts) == {"fake1"} and len(starts) <= 1 + 3 * 2, (len(starts), buckets)
    assert b"msrsync-" not in run.msrsync.stdout + run.msrsync.stderr


def test_an_rsync_that_fails_on_a_host_without_stats_is_its_buckets_failure_not_a_loss(
        tmp_path, hosts_src):
    """An rsync that stops at once on a host (no stats, no end of transfer: a fatal
    error) ends its bucket with its exit code and its message, and its session runs
    the next bucket: the host is not taken for silent, nor lost."""
    wrapper = tmp_path / "bin" / "rsync"
    wrapper.parent.mkdir()
    wrapper.write_text("\n".join([
        "#!/bin/sh",
        "[ -n \"$ON_HOST\" ] && [ \"$1\" != --version ] || exec %s \"$@\""
        % shutil.which("rsync"),
        "echo 'rsync: [sender] write error: Input/output error (5)' >&2",
        "echo 'rsync error: error in file IO (code 11) at io.c(1) [sender=3]' >&2",
        "exit 11", ""]))
    wrapper.chmod(0o755)
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\nshift\nON_HOST=1 exec \"$@\"\n")
    shell.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (wrapper.parent, os.environ["PATH"]),
               MSRSYNC_HOST_SILENCE="60")
    summary = tmp_path / "summary.json"
    cp = run_msrsync("-f", "100", "--json", summary, "--hosts", "fake1", "--host-shell",
                     str(shell), slash(hosts_src), tmp_path / "dest", env=env, timeout=50)
    assert cp.returncode == 11, describe(cp)
    assert b"Input/output error" in cp.stderr, describe(cp)
    assert b"lost" not in cp.stderr and b"gone" not in cp.stderr, describe(cp)
    entry = host_summaries(summary)["fake1"]
    assert entry["buckets"] >= 2 and entry["buckets_moved_away"] == 0, entry


def test_a_hosts_next_bucket_starts_when_the_transfer_is_over_not_at_rsyncs_exit(
        tmp_path, hosts_src):
    """rsync ends with its processes waiting for each other in sleeps: a worker on a host
    starts its next bucket once rsync says its transfer is over, as a worker here does.
    The host (a shell that runs sh on this machine) has an rsync whose exit comes a
    second after its transfer; every event is logged in order (its transfer's end,
    before the sleeps of rsync's own exit, is not seen there). rsync's words about its
    end are not shown."""
    events = tmp_path / "events"
    wrapper = tmp_path / "bin" / "rsync"
    wrapper.parent.mkdir()
    real = shutil.which("rsync")
    wrapper.write_text("\n".join([
        "#!/bin/sh",
        "[ -n \"$ON_HOST\" ] || exec %s \"$@\"" % real,
        "echo \"start $$\" >> %s" % shlex.quote(str(events)),
        "%s \"$@\"; rc=$?" % real,
        "echo \"over $$\" >> %s" % shlex.quote(str(events)),
        "sleep 1",
        "echo \"exit $$\" >> %s" % shlex.quote(str(events)),
        "exit $rc", ""]))
    wrapper.chmod(0o755)
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\nshift\nON_HOST=1 exec \"$@\"\n")
    shell.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (wrapper.parent, os.environ["PATH"]))
    oracle, dest = tmp_path / "oracle", tmp_path / "dest"
    cp = run_rsync(slash(hosts_src), oracle, opts=OPTS)
    assert cp.returncode == 0, describe(cp)
    cp = run_msrsync("-p", "1", "-f", "60", "--hosts", "fake1", "--host-shell", str(shell),
                     "--rsync", " ".join(OPTS + ["-i", "--stats"]),
                     slash(hosts_src), dest, env=env)
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")
    for word in (b"_exit_cleanup", b"client_run", b"<msrsync-"):
        assert word not in cp.stdout + cp.stderr, describe(cp)
    log = [line.split() for line in events.read_text().splitlines()]
    starts = [pid for what, pid in log if what == "start"]
    assert len(starts) >= 4, log
    at = dict(((what, pid), i) for i, (what, pid) in enumerate(log))
    overlapped = [pid for pid in starts if any(
        at[("over", pid)] < at[("start", other)] < at[("exit", pid)] for other in starts)]
    assert overlapped, "every bucket waited for the previous rsync's exit: %s" % log


def test_hostfile_with_comments_and_blank_lines(tmp_path, hosts, hosts_src):
    """--hostfile: comment lines and blank lines are no hosts (h9 does not exist: taken
    for a host it would fail the check), user@host and host:N are; h3:1 runs one rsync
    at a time."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the hosts of the test\n\nh1\n# h9:4\n\nroot@h2\n   \nh3:1\n")
    before = copies(hosts, tmp_path)
    summary = tmp_path / "summary.json"
    run = Run(tmp_path, [slash(hosts_src)], OPTS,
              ["-p", "2", "-f", "20", "--json", summary, "--hostfile", hostfile,
               "--host-shell", hosts.shell], watch=hosts)
    finish_like_rsync(run)
    after = copies(hosts, tmp_path)
    assert all(after[a] > before[a] for a in after), (before, after)
    assert run.watch.most["h3"] <= 1, run.watch.most
    entries = host_summaries(summary)
    assert len(entries) == 3 and not [n for n in entries if "h9" in n], entries


# --------------------------------------------------------------------------- hosts lost

def _lose_a_host(tmp_path, make_hosts, slow_src, lose):
    """Three fresh hosts, a slow run; once h2 copies, lose(h2); the run must end as plain
    rsync does, exit 0, with a line naming h2. Returns (hosts, the CompletedProcess)."""
    with make_hosts(3) as hs:
        run = Run(tmp_path, [slash(slow_src)], OPTS,
                  ["-p", "2"] + SLOW_CAPS + host_opts(hs), slower=SLOW, watch=hs, env=QUICK)
        try:
            wait_for_copies(hs, ["h2"], tmp_path)
            assert transferring(run.dests[1]), "nothing copied"
            at_loss = copies(hs)
            lose(hs.get("h2"))
            cp = run.wait(timeout=120)
            # a host cut off may still be finishing what it had: gone before comparing
            netns.kill_host(hs.get("h2"))
            assert cp.returncode == 0, describe(cp)
            no_traceback(cp)
            run.compare()
        finally:
            run.end()
        after = copies(hs)
        assert after["h1"] > at_loss["h1"] and after["h3"] > at_loss["h3"], \
            (at_loss, after)
        lines = host_lines(cp, "h2")
        assert lines, "no line of stderr names h2:\n" + describe(cp)
        assert not [l for l in lines if l.startswith("msrsync: error")], describe(cp)
        return hs, cp


@pytest.mark.slow
def test_a_host_killed_mid_run_has_its_buckets_run_elsewhere(tmp_path, make_hosts,
                                                             slow_src):
    _lose_a_host(tmp_path, make_hosts, slow_src, netns.kill_host)


@pytest.mark.slow
def test_a_host_whose_link_goes_down_mid_run_has_its_buckets_run_elsewhere(
        tmp_path, make_hosts, slow_src):
    """The host neither answers nor closes: ssh's keep-alive gives up, msrsync runs its
    buckets on the others. (The rsyncs it had go on with the shared storage: they may
    well finish their buckets, which then are copied twice, alike.)"""
    started = time.monotonic()
    _lose_a_host(tmp_path, make_hosts, slow_src, netns.link_down)
    assert time.monotonic() - started < 90


@pytest.mark.slow
def test_a_host_that_hangs_mid_run_has_its_buckets_run_elsewhere(tmp_path, make_hosts,
                                                                 slow_src):
    """Link down, the host's sshd stopped, the rsyncs it ran ended unfinished: only the
    keep-alive tells the host is gone, and only another host finishes its buckets."""
    started = time.monotonic()
    _lose_a_host(tmp_path, make_hosts, slow_src, netns.hang)
    assert time.monotonic() - started < 90


@pytest.mark.slow
def test_every_host_lost_keeps_the_bucket_directory_and_exits_255_then_resume_goes_on(
        tmp_path, make_hosts, slow_src):
    """Both hosts die mid-run: exit 255, the bucket directory kept; --resume DIR with
    other --hosts (and their --host-shell) finishes the copy as plain rsync makes it."""
    buckets = tmp_path / "buckets"
    buckets.mkdir()
    with make_hosts(2) as hs:
        run = Run(tmp_path, [slash(slow_src)], OPTS,
                  ["-p", "2", "-b", buckets] + SLOW_CAPS + host_opts(hs), slower=SLOW,
                  env=QUICK)
        try:
            wait_for_copies(hs, ["h1", "h2"], tmp_path)
            for h in hs:
                netns.kill_host(h)
            cp = run.wait(timeout=120)
        finally:
            run.end()
    assert cp.returncode == 255, describe(cp)
    no_traceback(cp)
    (run_dir,) = os.listdir(buckets)
    run_dir = os.path.join(buckets, run_dir)
    assert os.path.exists(os.path.join(run_dir, "run.json")), os.listdir(run_dir)
    with make_hosts(2) as others:
        cp = run_msrsync(*(host_opts(others) + ["--resume", run_dir]), timeout=120)
        assert cp.returncode == 0, describe(cp)
        no_traceback(cp)
        run.compare()
        assert all(copies(others, tmp_path).values()), copies(others, tmp_path)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_leaves_no_rsync_on_any_host(tmp_path, hosts, long_src, signum):
    """Ctrl-C and SIGTERM: exit 20 within seconds; SIGKILL too: afterwards no rsync runs
    in any host's namespace (each had half a minute of work left), none here, no ssh to
    the hosts."""
    run = Run(tmp_path, [slash(long_src)], OPTS,
              ["-p", "2"] + LONG_CAPS + host_opts(hosts), slower=LONG)
    try:
        wait_for_copies(hosts, hosts.aliases, tmp_path)
        assert transferring(run.dests[1]), "nothing copied"
        sent = time.monotonic()
        os.kill(run.proc.pid, signum)
        cp = run.wait(timeout=30)
        if signum == signal.SIGKILL:
            assert cp.returncode == -signal.SIGKILL
        else:
            assert cp.returncode == 20, describe(cp)
            assert time.monotonic() - sent < 10, "msrsync took %.1f s to stop" % (
                time.monotonic() - sent)
            no_traceback(cp)
        assert_no_rsync_in(hosts, tmp_path, 10 if signum == signal.SIGKILL else 5)
    finally:
        run.end()
        for h in hosts:
            for pid, argv in h.rsyncs():
                if os.fsencode(tmp_path) in b"\0".join(argv):
                    os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- the check

def _check_fails(tmp_path, hs, aliases, src, dest, code):
    """msrsync with a bad host among aliases: exit code, one line naming it, nothing
    copied (no copy on any host, DEST not made when it was not there)."""
    before = copies(hs, dest)
    existed = os.path.lexists(dest)
    cp = run_msrsync(*(["-p", "2", "-f", "5"] + host_opts(hs, aliases) +
                       ["--rsync", rsync_opts_string(OPTS), slash(src), dest]), timeout=60)
    assert cp.returncode == code, describe(cp)
    no_traceback(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, "expected one line on stderr:\n" + describe(cp)
    assert names_host(lines[0], aliases[-1]), describe(cp)
    assert not names_host(lines[0], aliases[0]), describe(cp)
    assert copies(hs, dest) == before, "copies were started"
    if not existed:
        assert not os.path.lexists(dest), "DEST was made"
    return lines[0]


@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    return make_tree(tmp_path_factory.mktemp("tiny") / "src", "tiny", seed=2)


def test_an_unreachable_host_stops_the_run_before_copying_with_255(tmp_path, broken_hosts,
                                                                   tiny_src):
    _check_fails(tmp_path, broken_hosts, ["h1", "h2"], tiny_src, tmp_path / "dest", 255)


@pytest.mark.parametrize("alias", ["h3", "h4"], ids=["missing", "3.0.9"])
def test_a_host_without_a_usable_rsync_stops_the_run_before_copying_with_40(
        tmp_path, broken_hosts, tiny_src, alias):
    line = _check_fails(tmp_path, broken_hosts, ["h1", alias], tiny_src,
                        tmp_path / "dest", 40)
    assert "rsync" in line.lower(), line


def test_a_host_that_does_not_see_src_stops_the_run_before_copying_with_3(
        tmp_path, broken_hosts, private):
    src = make_tree(os.path.join(str(private), tmp_path.name, "src"), "tiny", seed=5)
    _check_fails(tmp_path, broken_hosts, ["h1", "h5"], src, tmp_path / "dest", 3)


@pytest.mark.parametrize("existing", [False, True], ids=["new-DEST", "existing-DEST"])
def test_a_host_that_does_not_share_dest_stops_the_run_before_copying_with_3(
        tmp_path, broken_hosts, private, tiny_src, existing):
    """h5 sees SRC but not DEST (another directory there): the witness msrsync writes
    into DEST is not seen. An existing DEST is left as it was (the witness removed; its
    own time aside)."""
    dest = os.path.join(str(private), tmp_path.name, "dest")
    os.makedirs(os.path.dirname(dest))
    if existing:
        build(dest, {"old file": "old\n", "old dir/inner": "x\n"})
        age(dest, 10 ** 9, everything=True)
        was = snapshot(dest)
    _check_fails(tmp_path, broken_hosts, ["h1", "h5"], tiny_src, dest, 3)
    if existing:
        assert_same_tree(was, dest, ignore_root_mtime=True, label_a="before",
                         label_b="after")
