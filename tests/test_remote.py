"""Remote endpoints: push and pull over ssh, to and from rsync daemons.

Every transfer goes through a private sshd or rsync daemon on 127.0.0.1 (see remote.py),
so a "remote" DEST is a local directory that can be snapshotted. The oracle is, as
everywhere, plain rsync: the same remote form is copied once with ``rsync OPTS SRC DEST``
and once with ``msrsync ... --rsync "OPTS" SRC DEST``; exit codes and trees must agree.

Surprise worth knowing when reading the error tests: when ssh itself fails (connection
refused, key refused), plain rsync exits 255 or 12 at random. It reads EOF from ssh, then
polls (WNOHANG) whether ssh has exited: if it has, rsync takes ssh's 255, if not yet, it
keeps its own 12 ("error in rsync protocol data stream"). Those tests accept either code.
"""

import json
import os
import re
import shlex
import signal
import time

import pytest

from helpers import (age, assert_same_tree, build, describe, kill_leftovers, make_tree,
                     rsync_opts_string, run_cmd, run_msrsync, run_rsync, snapshot,
                     start_msrsync, stderr_lines, text, wait_for)
from remote import (closed_port, descendants, processes_mentioning, rsh_command,
                    serve_rsync_daemon, serve_sshd, ssh_missing, start_rsync_daemon,
                    start_sshd)

OPTS = ["-aS", "--numeric-ids"]
# what plain rsync exits with when ssh cannot log in (see the module's docstring)
SSH_FAILURE_CODES = {12, 255}


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    """The private sshd on 127.0.0.1 (remote.SshServer): .rsh, .remote(path), .login."""
    yield from serve_sshd(tmp_path_factory)


@pytest.fixture(scope="module")
def rsync_daemon(tmp_path_factory):
    """The private rsync daemon on 127.0.0.1 (remote.RsyncDaemon): .url(path),
    .dcolon(path), modules mod and secure."""
    yield from serve_rsync_daemon(tmp_path_factory)


@pytest.fixture(scope="module")
def tiny_src(tmp_path_factory):
    """About twenty entries with a few awkward names; never modified by tests."""
    return make_tree(tmp_path_factory.mktemp("tiny") / "src", "tiny", seed=2)


# --------------------------------------------------------------------------- helpers

def ssh_opts(sshd, *extra):
    return OPTS + list(extra) + ["-e", sshd.rsh]


def _codes(expect):
    return set(expect) if isinstance(expect, (set, frozenset, tuple, list)) else {expect}


def _no_traceback(cp):
    assert b"Traceback" not in cp.stderr, describe(cp)


def remote_differential(tmp_path, srcs, to_dest, rsync_opts, msrsync_opts=("-p", "2"),
                        expect_rc=0, env=None, prepare_dest=None, ignore_root_mtime=None,
                        compare=True, timeout=120, input=None):
    """Run ``rsync OPTS SRCS to_dest(D1)`` and ``msrsync ... SRCS to_dest(D2)`` where D1 and
    D2 are tmp_path/oracle/dest and tmp_path/msrsync/dest; check the exit codes (expect_rc,
    one code or a set) and compare D1 with D2. srcs are passed unchanged to both.

    Both run in an empty directory, which must stay empty: a remote path such as
    ``host:dir`` must never become a local directory named so. Returns (oracle, msrsync,
    D1, D2)."""
    work = os.fsencode(tmp_path)
    cwd = os.path.join(work, b"cwd")
    os.makedirs(cwd, exist_ok=True)
    srcs = [os.fsencode(s) if not isinstance(s, bytes) else s for s in srcs]
    if ignore_root_mtime is None:
        ignore_root_mtime = not (len(srcs) == 1 and re.search(rb"/(\.\.?)?$", srcs[0]))
    dests = []
    for side in (b"oracle", b"msrsync"):
        parent = os.path.join(work, side)
        os.makedirs(parent, exist_ok=True)
        dest = os.path.join(parent, b"dest")
        if prepare_dest is not None:
            prepare_dest(dest)
        dests.append(dest)
    oracle = run_rsync(*(srcs + [to_dest(dests[0])]), opts=rsync_opts, env=env, cwd=cwd,
                       timeout=timeout, input=input)
    args = list(msrsync_opts) + ["--rsync", rsync_opts_string(rsync_opts)]
    result = run_msrsync(*(args + srcs + [to_dest(dests[1])]), env=env, cwd=cwd,
                         timeout=timeout, input=input)
    codes = _codes(expect_rc)
    assert oracle.returncode in codes, "plain rsync (the oracle) did not exit %s:\n%s" % (
        sorted(codes), describe(oracle))
    assert result.returncode in codes, "msrsync did not exit %s like rsync:\n%s" % (
        sorted(codes), describe(result))
    _no_traceback(result)
    assert os.listdir(cwd) == [], "msrsync created %r in its working directory" % (
        os.listdir(cwd),)
    if compare:
        exists = [os.path.lexists(d) for d in dests]
        assert exists[0] == exists[1], "DEST exists: rsync %s, msrsync %s" % tuple(exists)
        if exists[0]:
            assert_same_tree(dests[0], dests[1], ignore_root_mtime=ignore_root_mtime,
                             label_a="rsync", label_b="msrsync")
    return oracle, result, dests[0], dests[1]


def local(path):
    return os.fsencode(path)


def with_slash(path):
    return os.fsencode(path) + b"/"


def assert_one_error_line(cp, codes, *needles):
    """Exit code in codes, stderr is exactly one 'msrsync: error: ...' line, no traceback;
    each needle (case-insensitive) is in that line."""
    __tracebackhide__ = True
    assert cp.returncode in _codes(codes), describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, "expected one stderr line:\n" + describe(cp)
    assert lines[0].startswith("msrsync: error: "), describe(cp)
    _no_traceback(cp)
    for needle in needles:
        assert needle.lower() in lines[0].lower(), "%r not in %r" % (needle, lines[0])
    return lines[0]


def _listening_addresses(port):
    """Local IPv4/IPv6 addresses (hex, as in /proc/net/tcp*) LISTENing on port."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            addr, hexport = fields[1].split(":")
            if int(hexport, 16) == port and fields[3] == "0A":
                found.append(addr)
    return found


# --------------------------------------------------------------------------- the servers

def test_fixtures_work(tmp_path, sshd_server, rsync_daemon, tiny_src):
    """Plain rsync through the private sshd and rsync daemon reproduces the source, in
    every remote form the other tests use; the servers listen on 127.0.0.1 only."""
    for server in (sshd_server, rsync_daemon):
        assert _listening_addresses(server.port) == ["0100007F"], server
        assert server.proc.poll() is None, server
    src = tiny_src + b"/"
    d = rsync_daemon
    secret_env = dict(os.environ, RSYNC_PASSWORD=d.password)
    n = iter(range(100))

    def dest():
        return os.path.join(local(tmp_path), b"d%d" % next(n))

    cases = [
        # push and pull over ssh
        (OPTS + ["-e", sshd_server.rsh], [src], sshd_server.remote, None),
        (OPTS + ["-e", sshd_server.rsh], [sshd_server.remote(src)], local, None),
        # the key whose sessions have no python3 on their PATH
        (OPTS + ["-e", sshd_server.rsh_nopython], [sshd_server.remote(src)], local, None),
        # daemon, both syntaxes, push and pull
        (OPTS, [src], d.url, None),
        (OPTS, [d.url(src)], local, None),
        (OPTS + ["--port=%d" % d.port], [src], d.dcolon, None),
        (OPTS + ["--port=%d" % d.port], [d.dcolon(src)], local, None),
        # the password-protected module
        (OPTS, [src], lambda p: d.url(p, "secure", d.user), secret_env),
        (OPTS + ["--password-file", d.password_file], [d.url(src, "secure", d.user)],
         local, None),
        (OPTS + ["--port=%d" % d.port, "--password-file", d.password_file], [src],
         lambda p: d.dcolon(p, "secure", d.user), None),
    ]
    for opts, srcs, to_dest, env in cases:
        target = dest()
        cp = run_rsync(*(srcs + [to_dest(target)]), opts=opts, env=env, timeout=60)
        assert cp.returncode == 0, describe(cp)
        assert_same_tree(tiny_src, target, label_a="source", label_b="copy")

    # the nopython key really hides python3, the normal one does not, the wrong key fails
    probe = "command -v python3 || echo none"
    argv = lambda rsh: shlex.split(rsh) + ["127.0.0.1", probe]
    cp = run_cmd(argv(sshd_server.rsh_nopython), timeout=30)
    assert cp.returncode == 0 and cp.stdout.strip() == b"none", describe(cp)
    cp = run_cmd(argv(sshd_server.rsh), timeout=30)
    assert cp.returncode == 0 and cp.stdout.strip().endswith(b"/python3"), describe(cp)
    cp = run_cmd(argv(sshd_server.rsh_wrongkey), timeout=30)
    assert cp.returncode == 255, describe(cp)
    # and the password module refuses a wrong password
    cp = run_rsync(src, d.url(dest(), "secure", d.user), opts=OPTS,
                   env=dict(os.environ, RSYNC_PASSWORD="wrong"), timeout=30)
    assert cp.returncode == 5, describe(cp)


def test_servers_stop_by_pid(tmp_path):
    """A server started and stopped again leaves no process and no listening port."""
    servers = [start_rsync_daemon(tmp_path / "rsyncd", tmp_path)]
    if not ssh_missing():
        servers.append(start_sshd(tmp_path / "sshd"))
    for server in servers:
        pid, port = server.pid, server.port
        assert _listening_addresses(port)
        server.stop()
        assert server.proc.returncode is not None
        assert not os.path.exists("/proc/%d/cmdline" % pid) or not descendants(pid)
        assert _listening_addresses(port) == [], server


# --------------------------------------------------------------------------- over ssh

@pytest.mark.parametrize("slash", [True, False], ids=["SRC-slash", "SRC"])
def test_push_over_ssh(tmp_path, sshd_server, small_src, slash):
    src = with_slash(small_src) if slash else local(small_src)
    remote_differential(tmp_path, [src], sshd_server.remote, ssh_opts(sshd_server),
                        ["-p", "2", "-f", "40"])


def test_push_over_ssh_from_worker_hosts(tmp_path, sshd_server, small_src):
    """A remote DEST with --hosts: each host runs the rsync that pushes to it (here two
    hosts whose shell notes its calls and runs sh on this machine)."""
    log = tmp_path / "shell.log"
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\nprintf '%s\\n' \"$1\" >> " + shlex.quote(str(log)) +
                     "\nshift\nexec \"$@\"\n")
    shell.chmod(0o755)
    remote_differential(tmp_path, [with_slash(small_src)], sshd_server.remote,
                        ssh_opts(sshd_server),
                        ["-p", "1", "-f", "10", "--hosts", "fake1:2,fake2",
                         "--host-shell", str(shell)])
    calls = log.read_text().split()
    # the check of each host, then buckets on both
    assert calls.count("fake1") > 1 and calls.count("fake2") > 1, calls


@pytest.mark.parametrize("opts", [["-rlt", "-E"], ["-rlt"], ["-a"]])
def test_push_makes_read_only_dirs_as_rsync_does_without_p(tmp_path, sshd_server, opts):
    """Over ssh (or as a non-root user) the copies get --chmod=Du+w, and the directory
    pass sets the real modes, which rsync sets only with -p (or -a, -A).  -E counted
    as -p: a new directory of a read-only SRC one was left 0755, rsync makes 0555."""
    src = make_tree(tmp_path / "in" / "src", "tiny", seed=4)     # "ro" is 0555
    remote_differential(tmp_path / "w", [with_slash(src)], sshd_server.remote,
                        opts + ["-e", sshd_server.rsh], ["-p", "2", "-f", "2"])


def _logins(sshd):
    with open(sshd.log, "rb") as log:
        return log.read().count(b"Accepted publickey")


def _push_counting_logins(tmp_path, sshd, src, buckets_parent):
    """Push src with -p 2 into a bucket directory under buckets_parent; returns
    (msrsync's logins, its --json summary).  The oracle, plain rsync, logs in
    once."""
    os.makedirs(buckets_parent)
    summary = tmp_path / "summary.json"
    before = _logins(sshd)
    remote_differential(tmp_path, [with_slash(src)], sshd.remote, ssh_opts(sshd),
                        ["-p", "2", "-f", "40", "-b", buckets_parent, "--json", summary])
    return _logins(sshd) - before - 1, json.loads(summary.read_text())


def test_push_logins(tmp_path, sshd_server, small_src):
    """One login checks the host, then one master connection a worker carries
    every session: DEST is prepared over the first master (a login of its own
    was 0.17 s on loopback), and no bucket logs in."""
    logins, summary = _push_counting_logins(tmp_path, sshd_server, small_src,
                                            os.fsencode(tmp_path / "b"))
    assert summary["buckets_total"] > 2, summary
    assert logins == 1 + 2


def test_big_files_pushed_over_ssh_share_buckets(tmp_path, sshd_server, monkeypatch):
    """Without -f/-s a bucket over ssh holds up to 128M from the start (an ssh
    session, a remote shell and a remote rsync are ~40 ms a bucket): five
    40 MiB files (sparse) go in 3 buckets, where into a local DEST each is a
    bucket of its own (over 32M)."""
    # the caps alone: no bucket cut early for workers that wait (on a loaded
    # machine a scan of five files may take longer than IDLE_CUT)
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "5")
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        with open(src / ("big%d" % i), "wb") as f:
            f.truncate(40 << 20)
    # an old time: rsync leaves a new DEST root's mtime alone when SRC's falls in
    # the same second as its making (the comparison then failed 1 run in 6)
    os.utime(str(src), (10 ** 9, 10 ** 9))
    summary = tmp_path / "summary.json"
    remote_differential(tmp_path / "ssh", [with_slash(src)], sshd_server.remote,
                        ssh_opts(sshd_server), ["-p", "2", "--json", summary])
    assert json.loads(summary.read_text())["buckets_total"] <= 3
    cp = run_msrsync("-d", "-p", "2", "--json", summary, with_slash(src),
                     os.fsencode(tmp_path / "local-dest"))
    assert cp.returncode == 0, describe(cp)
    assert json.loads(summary.read_text())["buckets_total"] == 5


def test_push_logins_with_a_long_bucket_dir(tmp_path, sshd_server, small_src):
    """Where the master's socket path would pass 90 bytes (ssh first listens on
    it plus 17 characters, in 107), no master is tried: each one died after its
    login, and the buckets logged in anyway."""
    base = os.fsencode(tmp_path / "b")
    # a bucket directory of 86 bytes (mkdtemp adds "/msrsync-" and 8 characters):
    # its socket, "ssh0" in it, is 91
    parent = base + b"/" + b"x" * (86 - len(base) - 1 - 17)
    logins, summary = _push_counting_logins(tmp_path, sshd_server, small_src, parent)
    # the check, the preparation of DEST, one login an rsync (the pre-flight's, the
    # buckets, the directory pass)
    assert summary["rsync_processes"] > 2, summary
    assert logins == 2 + summary["preflight"]["rsync_runs"] + summary["rsync_processes"], \
        summary


@pytest.mark.parametrize("slash", [True, False], ids=["SRC-slash", "SRC"])
def test_pull_over_ssh(tmp_path, sshd_server, small_src, slash):
    src = with_slash(small_src) if slash else local(small_src)
    remote_differential(tmp_path, [sshd_server.remote(src)], local, ssh_opts(sshd_server),
                        ["-p", "2", "-f", "40"])


def test_pull_over_ssh_without_python_on_the_remote(tmp_path, sshd_server, small_src):
    """The remote scan falls back to find when the server has no python3."""
    opts = OPTS + ["-e", sshd_server.rsh_nopython]
    remote_differential(tmp_path, [sshd_server.remote(with_slash(small_src))], local, opts,
                        ["-p", "2", "-f", "40"])


def test_push_over_ssh_rsh_from_environment(tmp_path, sshd_server, tiny_src):
    """No -e: the remote shell comes from RSYNC_RSH, for the workers and the scan."""
    env = dict(os.environ, RSYNC_RSH=sshd_server.rsh)
    remote_differential(tmp_path, [with_slash(tiny_src)], sshd_server.remote, OPTS,
                        ["-p", "2", "-f", "5"], env=env)
    remote_differential(tmp_path / "pull", [sshd_server.remote(with_slash(tiny_src))], local,
                        OPTS, ["-p", "2", "-f", "5"], env=env)


def test_rsync_path_is_honoured(tmp_path, sshd_server, tiny_src):
    """--rsync-path names the remote rsync: every msrsync worker runs it."""
    log = os.path.join(local(tmp_path), b"rsync-path.log")
    wrapper = os.path.join(local(tmp_path), b"remote-rsync")
    with open(wrapper, "wb") as f:
        f.write(b"#!/bin/sh\necho \"$$\" >> '%s'\nexec rsync \"$@\"\n" % log)
    os.chmod(wrapper, 0o755)
    opts = ssh_opts(sshd_server, "--rsync-path=" + text(wrapper))
    remote_differential(tmp_path, [with_slash(tiny_src)], sshd_server.remote, opts,
                        ["-p", "2", "-f", "5"])
    with open(log, "rb") as f:
        runs = f.read().split()
    # one run by rsync, at least one per bucket by msrsync (about 4 buckets)
    assert len(runs) >= 3, runs


def test_push_over_ssh_delete(tmp_path, sshd_server, small_src):
    def prepare(dest):
        make_tree(dest, "flat", n=12, seed=5)
        os.makedirs(os.path.join(dest, b"many", b"extra dir", b"deeper"))
        with open(os.path.join(dest, b"many", b"extra dir", b"deeper", b"x"), "wb") as f:
            f.write(b"to be deleted\n")
        with open(os.path.join(dest, b"mode644"), "wb") as f:
            f.write(b"to be replaced\n")
    remote_differential(tmp_path, [with_slash(small_src)], sshd_server.remote,
                        ssh_opts(sshd_server, "--delete"), ["-p", "2", "-f", "40"],
                        prepare_dest=prepare)


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_compress_over_ssh(tmp_path, sshd_server, small_src, direction):
    src = with_slash(small_src)
    if direction == "push":
        srcs, to_dest = [src], sshd_server.remote
    else:
        srcs, to_dest = [sshd_server.remote(src)], local
    remote_differential(tmp_path, srcs, to_dest, ssh_opts(sshd_server, "-z"),
                        ["-p", "2", "-f", "40"])


def test_hard_links_over_ssh_push(tmp_path, sshd_server, small_src):
    remote_differential(tmp_path, [with_slash(small_src)], sshd_server.remote,
                        ssh_opts(sshd_server, "-H"), ["-p", "2", "-f", "40"])


@pytest.mark.parametrize("processes,files", [(1, 1), (2, 1), (4, 1), (2, 7), (4, 7)],
                         ids=["p1-f1", "p2-f1", "p4-f1", "p2-f7", "p4-f7"])
def test_tiny_buckets_push_over_ssh(tmp_path, sshd_server, tiny_src, small_src,
                                    processes, files):
    src = tiny_src if files == 1 else small_src
    remote_differential(tmp_path, [with_slash(src)], sshd_server.remote,
                        ssh_opts(sshd_server),
                        ["-p", str(processes), "-f", str(files)])


@pytest.mark.parametrize("processes,files", [(4, 1), (2, 7)], ids=["p4-f1", "p2-f7"])
def test_tiny_buckets_pull_over_ssh(tmp_path, sshd_server, tiny_src, small_src,
                                    processes, files):
    src = tiny_src if files == 1 else small_src
    remote_differential(tmp_path, [sshd_server.remote(with_slash(src))], local,
                        ssh_opts(sshd_server), ["-p", str(processes), "-f", str(files)])


def _injection_path(tmp_path):
    """A directory whose path would run commands if any shell evaluated it: $(...),
    backquotes, ';' and '&', quotes. The commands would create the markers. (No newline:
    see test_newline_in_remote_path.)"""
    work = local(tmp_path)
    markers = [os.path.join(work, b"pwned%d" % i) for i in range(3)]
    name = (b"inj $(touch " + markers[0] + b") `touch " + markers[1] + b"`;touch "
            + markers[2] + b" & 'q\" \xc3\xa9 end")
    return os.path.join(work, b"in", name), markers


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_injection_names_run_nothing(tmp_path, sshd_server, tiny_src, direction):
    """SRC and DEST paths with shell syntax in them are copied, never executed."""
    src, markers = _injection_path(tmp_path)
    os.makedirs(os.path.dirname(src))
    r = run_rsync(with_slash(tiny_src), src, opts=OPTS)
    assert r.returncode == 0, describe(r)
    if direction == "push":
        srcs, to_dest = [src + b"/"], sshd_server.remote
    else:
        srcs, to_dest = [sshd_server.remote(src + b"/")], local
    # DEST too: "dest $(touch /abs/pwned0);x" (its parent directories made beforehand)
    suffix = b" $(touch " + markers[0] + b");x"
    remote_differential(tmp_path / "run", srcs, lambda d: to_dest(d + suffix),
                        ssh_opts(sshd_server), ["-p", "2", "-f", "5"], compare=False,
                        prepare_dest=lambda d: os.makedirs(os.path.dirname(d + suffix)))
    for side in (b"oracle", b"msrsync"):
        d = os.path.join(local(tmp_path / "run"), side, b"dest" + suffix)
        assert_same_tree(tiny_src, d, label_a="source", label_b=side.decode())
    for m in markers:
        assert not os.path.lexists(m), "a shell ran a command from a path: %r" % m


@pytest.mark.parametrize("secluded", [False, True], ids=["plain-args", "secluded-args"])
@pytest.mark.parametrize("direction", ["push", "pull"])
def test_newline_in_remote_path(tmp_path, sshd_server, tiny_src, direction, secluded):
    """rsync passes a remote path to the remote shell with each special character
    backslash-escaped; a backslash-newline is a line continuation to the shell, so the
    newline silently disappears: pushing to host:"a<NL>b" writes host:"ab", pulling from
    host:"a<NL>b/" reads host:"ab/" (missing: 23). With -s (--secluded-args) the paths go
    over the protocol and arrive intact. msrsync must do what rsync does in both cases."""
    work = local(tmp_path)
    src = os.path.join(work, b"in", b"src\nline")
    r = run_rsync(with_slash(tiny_src), src, opts=["-a", "--mkpath"])
    assert r.returncode == 0, describe(r)
    opts = ssh_opts(sshd_server, *(["-s"] if secluded else []))
    if direction == "push":
        remote_differential(tmp_path / "run", [src + b"/"],
                            lambda d: sshd_server.remote(d + b"\nx"), opts,
                            ["-p", "2", "-f", "5"], compare=False)
        for side in (b"oracle", b"msrsync"):
            d = os.path.join(local(tmp_path / "run"), side, b"dest")
            assert os.path.lexists(d + b"\nx") == secluded, side
            assert os.path.lexists(d + b"x") != secluded, side
            assert_same_tree(tiny_src, d + (b"\nx" if secluded else b"x"),
                             label_a="source", label_b=side.decode())
    else:
        remote_differential(tmp_path / "run", [sshd_server.remote(src + b"/")], local, opts,
                            ["-p", "2", "-f", "5"], expect_rc=0 if secluded else 23)


# --------------------------------------------------------------------------- rsync daemon

@pytest.mark.parametrize("form", ["url", "double-colon"])
def test_push_to_daemon(tmp_path, rsync_daemon, small_src, form):
    d = rsync_daemon
    if form == "url":
        opts, to_dest = OPTS, d.url
    else:
        opts, to_dest = OPTS + ["--port=%d" % d.port], d.dcolon
    remote_differential(tmp_path, [with_slash(small_src)], to_dest, opts,
                        ["-p", "2", "-f", "40"])


@pytest.mark.parametrize("form", ["url", "double-colon"])
def test_pull_from_daemon(tmp_path, rsync_daemon, small_src, form):
    d = rsync_daemon
    if form == "url":
        opts, src = OPTS, d.url(with_slash(small_src))
    else:
        opts, src = OPTS + ["--port=%d" % d.port], d.dcolon(with_slash(small_src))
    remote_differential(tmp_path, [src], local, opts, ["-p", "2", "-f", "40"])


def test_pull_from_daemon_without_slash_and_tiny_buckets(tmp_path, rsync_daemon, tiny_src):
    remote_differential(tmp_path, [rsync_daemon.url(tiny_src)], local, OPTS,
                        ["-p", "4", "-f", "1"])


@pytest.mark.parametrize("how", ["RSYNC_PASSWORD", "password-file", "password-file=-"])
@pytest.mark.parametrize("direction", ["push", "pull"])
def test_password_module(tmp_path, rsync_daemon, tiny_src, how, direction):
    """(--password-file=-: the password on stdin, which msrsync reads once and
    hands to each of its rsyncs, whose stdin is empty.)"""
    d = rsync_daemon
    env, opts, given = None, list(OPTS), None
    if how == "RSYNC_PASSWORD":
        env = dict(os.environ, RSYNC_PASSWORD=d.password)
    elif how == "password-file=-":
        env = {k: v for k, v in os.environ.items() if k != "RSYNC_PASSWORD"}
        opts += ["--password-file=-"]
        given = d.password.encode() + b"\n"
    else:
        opts += ["--password-file", d.password_file]
    to_remote = lambda p: d.url(p, "secure", d.user)
    if direction == "push":
        srcs, to_dest = [with_slash(tiny_src)], to_remote
    else:
        srcs, to_dest = [to_remote(with_slash(tiny_src))], local
    remote_differential(tmp_path, srcs, to_dest, opts, ["-p", "2", "-f", "5"], env=env,
                        input=given)


# --------------------------------------------------------------------------- failures

def _nothing_created(tmp_path, before):
    assert_same_tree(before, snapshot(tmp_path), label_a="before", label_b="after")


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_ssh_connection_refused(tmp_path, sshd_server, tiny_src, direction):
    """Nothing listens on the port: one error line and rsync's exit code (255, or 12
    when rsync loses the race with ssh's exit; see the module's docstring)."""
    rsh = rsh_command(closed_port(), sshd_server.key)
    opts = OPTS + ["-e", rsh]
    target = os.path.join(local(tmp_path), b"dest")
    if direction == "push":
        args = [with_slash(tiny_src), sshd_server.remote(target)]
    else:
        args = [sshd_server.remote(with_slash(tiny_src)), target]
    before = snapshot(tmp_path)
    oracle = run_rsync(*args, opts=opts, timeout=60)
    assert oracle.returncode in SSH_FAILURE_CODES, describe(oracle)
    cp = run_msrsync("-p", "4", "-f", "2", "--rsync", rsync_opts_string(opts), *args,
                     cwd=tmp_path, timeout=60)
    assert_one_error_line(cp, SSH_FAILURE_CODES, "refused")
    _nothing_created(tmp_path, before)


def test_ssh_key_refused(tmp_path, sshd_server, tiny_src):
    opts = OPTS + ["-e", sshd_server.rsh_wrongkey]
    args = [with_slash(tiny_src), sshd_server.remote(os.path.join(local(tmp_path), b"dest"))]
    before = snapshot(tmp_path)
    oracle = run_rsync(*args, opts=opts, timeout=60)
    assert oracle.returncode in SSH_FAILURE_CODES, describe(oracle)
    cp = run_msrsync("-p", "4", "-f", "2", "--rsync", rsync_opts_string(opts), *args,
                     cwd=tmp_path, timeout=60)
    assert_one_error_line(cp, SSH_FAILURE_CODES, "Permission denied")
    _nothing_created(tmp_path, before)


@pytest.mark.parametrize("form", ["url-push", "url-pull", "double-colon-push"])
def test_daemon_connection_refused_exits_10(tmp_path, tiny_src, form):
    port = closed_port()
    target = os.path.join(local(tmp_path), b"dest")
    opts = list(OPTS)
    if form == "url-push":
        args = [with_slash(tiny_src), b"rsync://127.0.0.1:%d/mod/x" % port]
    elif form == "url-pull":
        args = [b"rsync://127.0.0.1:%d/mod/x/" % port, target]
    else:
        opts.append("--port=%d" % port)
        args = [with_slash(tiny_src), b"127.0.0.1::mod/x"]
    before = snapshot(tmp_path)
    oracle = run_rsync(*args, opts=opts, timeout=60)
    assert oracle.returncode == 10, describe(oracle)
    cp = run_msrsync("-p", "4", "-f", "2", "--rsync", rsync_opts_string(opts), *args,
                     cwd=tmp_path, timeout=60)
    assert_one_error_line(cp, 10, "refused")
    _nothing_created(tmp_path, before)


@pytest.mark.parametrize("how", ["RSYNC_PASSWORD", "password-file"])
@pytest.mark.parametrize("direction", ["push", "pull"])
def test_wrong_password_exits_5(tmp_path, rsync_daemon, tiny_src, how, direction):
    d = rsync_daemon
    env, opts = None, list(OPTS)
    if how == "RSYNC_PASSWORD":
        env = dict(os.environ, RSYNC_PASSWORD="not the password")
    else:
        opts += ["--password-file", d.wrong_password_file]
    target = os.path.join(local(tmp_path), b"dest")
    if direction == "push":
        args = [with_slash(tiny_src), d.url(target, "secure", d.user)]
    else:
        args = [d.url(with_slash(tiny_src), "secure", d.user), target]
    before = snapshot(tmp_path)
    oracle = run_rsync(*args, opts=opts, env=env, timeout=60)
    assert oracle.returncode == 5, describe(oracle)
    cp = run_msrsync("-p", "4", "-f", "2", "--rsync", rsync_opts_string(opts), *args,
                     env=env, cwd=tmp_path, timeout=60)
    assert_one_error_line(cp, 5, "auth failed")
    _nothing_created(tmp_path, before)


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_unknown_daemon_module_exits_5(tmp_path, rsync_daemon, tiny_src, direction):
    url = b"rsync://127.0.0.1:%d/no-such-module/x" % rsync_daemon.port
    target = os.path.join(local(tmp_path), b"dest")
    args = [with_slash(tiny_src), url] if direction == "push" else [url + b"/", target]
    before = snapshot(tmp_path)
    oracle = run_rsync(*args, timeout=60)
    assert oracle.returncode == 5, describe(oracle)
    cp = run_msrsync("-p", "4", "-f", "2", *args, cwd=tmp_path, timeout=60)
    assert_one_error_line(cp, 5, "Unknown module")
    _nothing_created(tmp_path, before)


@pytest.mark.parametrize("form", ["ssh", "daemon"])
@pytest.mark.parametrize("slash", [True, False], ids=["SRC-slash", "SRC"])
def test_missing_remote_src_exits_23(tmp_path, request, form, slash):
    missing = os.path.join(local(tmp_path), b"no such src")
    path = missing + b"/" if slash else missing
    if form == "ssh":
        sshd = request.getfixturevalue("sshd_server")
        src, opts = sshd.remote(path), ssh_opts(sshd)
    else:
        src, opts = request.getfixturevalue("rsync_daemon").url(path), list(OPTS)
    oracle, result, _, _ = remote_differential(tmp_path, [src], local, opts,
                                               ["-p", "2", "-f", "5"], expect_rc=23)
    assert b"no such src" in result.stderr, describe(result)


@pytest.mark.parametrize("form", ["ssh", "daemon"])
def test_missing_remote_dest_parent_exits_11(tmp_path, request, tiny_src, form):
    """rsync creates DEST but not its parents; the check is made remotely (or left to
    rsync), never on a local path."""
    if form == "ssh":
        sshd = request.getfixturevalue("sshd_server")
        to_dest, opts = sshd.remote, ssh_opts(sshd)
    else:
        to_dest, opts = request.getfixturevalue("rsync_daemon").url, list(OPTS)
    remote_differential(tmp_path, [with_slash(tiny_src)],
                        lambda d: to_dest(os.path.join(d, b"no parent", b"dest")), opts,
                        ["-p", "2", "-f", "5"], expect_rc=11)


# --------------------------------------------------------------------------- interruption

def _ours(tmp_path):
    """Processes of any program (rsync, ssh, the remote rsync server) whose command line
    names this test's own directory: only this test can have started them."""
    return processes_mentioning(os.fsencode(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["push", "pull"])
def test_sigint_during_remote_copy_leaves_nothing_running(tmp_path, sshd_server, direction):
    # four 1 MiB files at 200 KiB/s each: about five seconds of work per worker
    src = make_tree(tmp_path / "src", "big", count=4, size=1 << 20)
    dest = os.path.join(local(tmp_path), b"dest")
    opts = ["-a", "--bwlimit=200", "-e", sshd_server.rsh]
    if direction == "push":
        args = [src + b"/", sshd_server.remote(dest)]
    else:
        args = [sshd_server.remote(src + b"/"), dest]
    proc = start_msrsync("-p", "2", "-s", "1M", "--rsync", rsync_opts_string(opts), *args)
    try:
        started = wait_for(lambda: proc.poll() is not None or
                           len([p for p in _ours(tmp_path)
                                if os.path.basename(p[1][0]) == b"ssh"]) >= 2, 20)
        assert started and proc.poll() is None, \
            "two ssh sessions never started; msrsync:\n%s" % (
                text(proc.communicate(timeout=10)[1]) if proc.poll() is not None else "")
        time.sleep(0.5)
        sent = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        took = time.monotonic() - sent
        assert proc.returncode == 20, (proc.returncode, text(err))
        assert took < 10, "msrsync took %.1f s to stop" % took
        assert b"Traceback" not in err
        left = wait_for(lambda: not _ours(tmp_path), 5) or _ours(tmp_path)
        assert left is True, "processes left running: %r" % (left,)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(tmp_path, _ours)



# --------------------------------------------------------------------------- paths rsync's
# other end resolves: "~", symlinks named as SRC, a module named alone (found by a fuzz of
# remote ends)

def _small_tree(root):
    """a/f, a/in/g, b/, top: a few entries, at least two buckets at -f 2."""
    # old times: rsync 3.5 leaves a new directory's time alone when SRC's is of the same
    # second as the copy, which a tree made just now would be
    return age(build(root, {"a/in/": None, "b/": None, "a/f": "1\n", "a/in/g": "22\n",
                            "top": "333\n"}), 1500000000)


def _stale_dest(dest):
    age(build(dest, {"stale": "x\n"}), 1400000000)


@pytest.mark.parametrize("path", ["~/tree", "~/tree/", "~/tree/a"])
def test_pull_of_a_home_relative_path_like_rsync(tmp_path, sshd_server, path):
    """host:~/path: the remote shell expands "~" in rsync's own argument. msrsync's scan
    and its buckets took "~" for a directory of that name: exit 23, nothing copied, and
    with --delete nothing deleted."""
    _small_tree(os.path.join(sshd_server.home, "tree"))
    opts = OPTS + ["--delete", "-e", sshd_server.rsh_home]
    remote_differential(tmp_path, [sshd_server.remote(path)], local, opts,
                        ["-p", "2", "-f", "2"], prepare_dest=_stale_dest)


@pytest.mark.parametrize("name,extra", [("la/", []), ("abs/", []),
                                        ("abs", ["--copy-unsafe-links"]), ("la", ["-L"])],
                         ids=["link-slash", "abs-link-slash", "unsafe-link", "link-L"])
def test_pull_of_a_symlink_to_a_directory_like_rsync(tmp_path, sshd_server, name, extra):
    """A remote SRC that is a symlink rsync follows: named "link/", unsafe with
    --copy-unsafe-links, or with -L. msrsync's remote scan read the link itself (exit 23,
    --delete skipped)."""
    src = _small_tree(tmp_path / "src")
    os.symlink(b"a", os.path.join(src, b"la"))
    os.symlink(os.path.join(src, b"a"), os.path.join(src, b"abs"))
    remote_differential(tmp_path / "run",
                        [sshd_server.remote(os.path.join(src, os.fsencode(name)))],
                        local, ssh_opts(sshd_server, "--delete", *extra), ["-p", "2", "-f", "2"],
                        prepare_dest=_stale_dest)


@pytest.mark.parametrize("form", ["url", "double-colon"])
def test_pull_of_a_module_named_alone_like_rsync(tmp_path, rsync_daemon, form):
    """rsync://host/module (no slash) is the module's contents. msrsync listed the
    daemon's modules, copied nothing and exited 0 (::module: exit 5)."""
    d = rsync_daemon
    _small_tree(d.tree)
    if form == "url":
        opts, src = OPTS, b"rsync://127.0.0.1:%d/tree" % d.port
    else:
        opts, src = OPTS + ["--port=%d" % d.port], b"127.0.0.1::tree"
    remote_differential(tmp_path, [src], local, opts + ["--delete"], ["-p", "2", "-f", "2"],
                        prepare_dest=_stale_dest)


@pytest.mark.parametrize("what", ["dir", "file"])
def test_push_with_delete_to_a_module_that_refuses_it_like_rsync(tmp_path, rsync_daemon,
                                                                 what):
    """"refuse options = delete": rsync stops before copying anything (exit 4); msrsync's
    copies, which run without --delete, were accepted (a lone file: exit 0)."""
    src = _small_tree(tmp_path / "src")
    srcs = [with_slash(src)] if what == "dir" else [os.path.join(src, b"top")]
    to_dest = lambda dest: rsync_daemon.url(dest, module="nodelete")  # noqa: E731
    oracle, result, _, _ = remote_differential(
        tmp_path / "run", srcs, to_dest, OPTS + ["--delete"], ["-p", "2", "-f", "2"],
        expect_rc=4, prepare_dest=_stale_dest)
    assert_one_error_line(result, 4, "refuse")
    # the same module takes a run without deletion
    remote_differential(tmp_path / "copy", srcs, to_dest, OPTS, ["-p", "2", "-f", "2"])


def test_a_files_from_list_on_the_remote_host_is_one_rsync(tmp_path, sshd_server, tiny_src):
    """--files-from=:FILE and --files-from=HOST:FILE name a list rsync reads on the other
    host (msrsync once opened them as local paths): one plain rsync runs it, with a
    note, and DEST is what rsync makes of it."""
    listing = os.fsencode(tmp_path / "list")
    name = sorted(n for n in os.listdir(tiny_src) if n[:1].isalnum() and
                  os.path.isfile(os.path.join(tiny_src, n)))[0]
    with open(listing, "wb") as handle:
        handle.write(name + b"\n")
    for n, spec in enumerate((b":" + listing, b"127.0.0.1:" + listing)):
        opts = ssh_opts(sshd_server, b"--files-from=" + spec)
        dest, oracle = (os.fsencode(tmp_path / ("%s%d" % (side, n))) for side in ("d", "o"))
        cp = run_msrsync("-p", "2", "--rsync", rsync_opts_string(opts), with_slash(tiny_src),
                         sshd_server.remote(dest))
        lines = stderr_lines(cp)
        assert lines[0].startswith("msrsync: note: ") and "remote host" in lines[0], lines
        o = run_rsync(with_slash(tiny_src), sshd_server.remote(oracle), opts=opts)
        assert cp.returncode == o.returncode, describe(cp) + describe(o)
        assert os.path.lexists(dest) == os.path.lexists(oracle)
        if os.path.lexists(oracle):
            assert_same_tree(oracle, dest, ignore_root_mtime=True)


def test_a_shorthand_second_remote_src_is_one_rsync(tmp_path, sshd_server, rsync_daemon,
                                                    tiny_src):
    """After a remote SRC, ":path" and "::module/path" are more SRCs of that host (rsync's
    shorthand), not local paths: several remote SRCs, which one plain rsync copies, with
    a note; DEST is rsync's."""
    cases = [(ssh_opts(sshd_server), [sshd_server.remote(with_slash(tiny_src)),
                                      b":" + os.fsencode(tiny_src)]),
             (OPTS, [rsync_daemon.url(with_slash(tiny_src)),
                     b"::mod/" + rsync_daemon._rel(tiny_src)])]
    for n, (opts, srcs) in enumerate(cases):
        dest, oracle = (os.fsencode(tmp_path / ("%s%d" % (side, n))) for side in ("d", "o"))
        cp = run_msrsync("-p", "2", "--rsync", rsync_opts_string(opts), *(srcs + [dest]))
        lines = stderr_lines(cp)
        assert len(lines) == 1 and lines[0].startswith("msrsync: note: "), describe(cp)
        assert "several remote" in lines[0], lines
        o = run_rsync(*(srcs + [oracle]), opts=opts)
        assert cp.returncode == o.returncode == 0, describe(cp) + describe(o)
        assert_same_tree(oracle, dest)


def test_pull_from_daemon_whose_listing_ends_in_23_like_rsync(tmp_path, rsync_daemon):
    """-L and a dangling symlink: rsync's listing of the daemon's tree ends in 23 after
    it listed everything else, and rsync copies everything else. msrsync's scan
    stopped at that exit: the entries it still held were never copied."""
    src = _small_tree(tmp_path / "src")
    os.makedirs(os.path.join(src, b"c"))
    with open(os.path.join(src, b"c", b"g"), "wb") as handle:
        handle.write(b"g\n")
    os.symlink(b"nowhere", os.path.join(src, b"b", b"l"))
    for name in (b"c/g", b"c", b"b", b""):
        os.utime(os.path.join(src, name), (1500000000, 1500000000))
    oracle, result, _, _ = remote_differential(
        tmp_path / "run", [rsync_daemon.url(with_slash(src))], local, OPTS + ["-L"],
        ["-p", "2", "-f", "1"], expect_rc=23)
    assert os.path.exists(tmp_path / "run" / "msrsync" / "dest" / "c" / "g")
