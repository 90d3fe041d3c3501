"""Old rsyncs at either end, reproduced with the system rsync (3.2.4 or later) alone.

* check_split_paths: before rsync 3.2.4, or with --old-args / RSYNC_OLD_ARGS=1, a remote
  path is handed to the remote shell, which splits it at whitespace: a push then writes
  into another directory and exits 0. msrsync refuses such a path up front unless -s
  keeps it whole. --old-args and RSYNC_OLD_ARGS=1 make rsync 3.5.0 behave as 3.2.3 here
  (see /work/oldrsync/FINDINGS.md of the research behind these tests).
* remote_usage_error: the other end's rsync refuses an option (an rsync older than the
  option, emulated by a --rsync-path wrapper turning --open-noatime into an unknown
  option; a daemon's "refuse options"): every bucket would fail the same way, so none
  runs again and no further one starts.
* read_error_lines: a failed bucket's report shows rsync's error lines, not a banner or
  chatter that came first in its log.

Everything goes to the private sshd / rsync daemon of remote.py on 127.0.0.1, or to a
closed port of 127.0.0.1 where a connection attempt must fail (ssh: exit 255, or 12).
"""

import json
import os
import re
import shlex
import shutil

import pytest

from helpers import (age, assert_same_tree, build, describe, rsync_opts_string, run_msrsync,
                     run_rsync, stderr_lines, text)
from remote import (RsyncDaemon, closed_port, rsh_command, serve_rsync_daemon, serve_sshd)

OPTS = ["-aS", "--numeric-ids"]
# a connection attempt to a closed port: ssh fails (255), or rsync sees EOF first (12)
CONNECTION_FAILED = {12, 255}
RETRY_LINE = "will run again"
REFUSAL = "msrsync: error: the rsync at the other end refuses the options ("


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    """The private sshd on 127.0.0.1 (remote.SshServer)."""
    yield from serve_sshd(tmp_path_factory)


class RefusingDaemon(RsyncDaemon):
    """remote.RsyncDaemon plus a module "noatime": mod's settings with
    ``refuse options = open-noatime``."""

    def _write_config(self):
        super()._write_config()
        with open(self.config) as handle:
            lines = handle.read().splitlines()
        body = []
        for line in lines[lines.index("[mod]") + 1:]:
            if not line.startswith("    "):
                break
            body.append(line)
        with open(self.config, "a") as handle:
            handle.write("\n".join(["", "[noatime]"] + body +
                                   ["    refuse options = open-noatime", ""]))


@pytest.fixture(scope="module")
def refusing_daemon(tmp_path_factory):
    """A private rsync daemon on 127.0.0.1 serving pytest's base temporary directory,
    with module noatime (refuse options = open-noatime); stopped by its pid."""
    yield from serve_rsync_daemon(tmp_path_factory, RefusingDaemon)


def _tree(root, n=30):
    """n small files in three directories (n + 3 entries)."""
    spec = dict(("d%d/f%02d" % (i % 3, i), "%d\n" % i * (i + 1)) for i in range(n))
    build(root, spec)
    age(root)
    return os.fsencode(root)


def _closed_rsh(tmp_path):
    """An -e string whose ssh connects to a closed port of 127.0.0.1 (fails at once)."""
    key = tmp_path / "no-key"
    key.write_text("")
    return rsh_command(closed_port(), str(key))


def _remote(login, path):
    return login.encode() + b":" + os.fsencode(path)


def _only_entries(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None


# --------------------------------------------------------------------------- check_split_paths

OLD_ARGS_WAYS = {
    "--old-args": (["--old-args"], {}),
    "RSYNC_OLD_ARGS=1": ([], {"RSYNC_OLD_ARGS": "1"}),
}


@pytest.mark.parametrize("way", sorted(OLD_ARGS_WAYS))
@pytest.mark.parametrize("direction", ["push", "pull"])
@pytest.mark.parametrize("name", ["dir with space", "tab\there"])
def test_old_args_remote_path_with_whitespace_is_refused(tmp_path, way, direction, name):
    """With --old-args (or RSYNC_OLD_ARGS=1) a remote path holding whitespace is refused
    before anything: exit 1, one line naming the path and -s, no bucket directory, no
    DEST, no connection (the remote shell's port is closed: an attempt would exit 255 or
    12). Catches the silent misplacement of a push (exit 0, files in another directory)
    and a check made only after connecting."""
    extra, env_extra = OLD_ARGS_WAYS[way]
    env = dict(os.environ, **env_extra)
    src = _tree(tmp_path / "src", 6)
    target = tmp_path / "remote" / name
    os.makedirs(target.parent)
    remote = _remote("127.0.0.1", str(target) + "/")
    local = os.fsencode(tmp_path / "local")
    ends = [src + b"/", remote] if direction == "push" else [remote, local]
    opts = OPTS + extra + ["-e", _closed_rsh(tmp_path)]
    cp = run_msrsync("-p", "2", "-f", "2", "--rsync", rsync_opts_string(opts), *ends, env=env)
    assert cp.returncode == 1, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1 and lines[0].startswith("msrsync: error: "), describe(cp)
    assert text(remote) in lines[0] and "-s" in lines[0].split(), lines
    assert "whitespace" in lines[0], lines
    # nothing made: no bucket directory (private TMPDIR), no local DEST, no split path
    assert os.listdir(os.environ["TMPDIR"]) == [], os.listdir(os.environ["TMPDIR"])
    assert not os.path.lexists(local)
    assert _only_entries(tmp_path / "remote") == [], os.listdir(tmp_path / "remote")


@pytest.mark.parametrize("case", ["old-args, no whitespace", "whitespace, new args"])
def test_other_remote_paths_are_not_refused(tmp_path, case):
    """The refusal is for whitespace under old-style arguments alone: a path without it
    (with --old-args), or one with it where rsync (>= 3.2.4) quotes it itself, goes on
    to connect (closed port: ssh fails, 255 or 12). Catches a check that refuses too
    much (every remote path, or every path with a space)."""
    src = _tree(tmp_path / "src", 6)
    if case.startswith("old-args"):
        extra, name = ["--old-args"], "plain_dir"
    else:
        extra, name = [], "dir with space"
    remote = _remote("127.0.0.1", str(tmp_path / name) + "/")
    opts = OPTS + extra + ["-e", _closed_rsh(tmp_path)]
    cp = run_msrsync("-p", "2", "-f", "2", "--rsync", rsync_opts_string(opts), src + b"/",
                     remote)
    assert cp.returncode in CONNECTION_FAILED, describe(cp)
    assert b"whitespace" not in cp.stderr, describe(cp)


@pytest.mark.parametrize("protect", ["-s", "--protect-args", "--secluded-args"])
def test_rsync_old_args_with_s_copies_to_a_path_with_space(tmp_path, sshd_server, protect):
    """RSYNC_OLD_ARGS=1 with -s on the command line: rsync keeps the path whole (-s wins
    over the variable), and so msrsync lets it through: a real push over ssh to a remote
    "dir with space/" leaves the same tree as plain rsync with the same options and
    environment, and nothing in the directory the split would name. Catches a refusal
    that ignores -s (and its long spellings)."""
    src = _tree(tmp_path / "src")
    env = dict(os.environ, RSYNC_OLD_ARGS="1")
    opts = OPTS + [protect, "-e", sshd_server.rsh]
    dests = {}
    for side in ("oracle", "msrsync"):
        os.makedirs(tmp_path / side)
        dests[side] = tmp_path / side / "dir with space"
    oracle = run_rsync(src + b"/", sshd_server.remote(os.fsencode(dests["oracle"]) + b"/"),
                       opts=opts, env=env, timeout=60)
    assert oracle.returncode == 0, describe(oracle)
    cp = run_msrsync("-p", "2", "-f", "5", "--rsync", rsync_opts_string(opts), src + b"/",
                     sshd_server.remote(os.fsencode(dests["msrsync"]) + b"/"), env=env)
    assert cp.returncode == 0, describe(cp)
    assert cp.stderr == b"", describe(cp)
    for side in ("oracle", "msrsync"):
        assert _only_entries(tmp_path / side) == ["dir with space"], os.listdir(tmp_path / side)
    assert_same_tree(src, dests["oracle"], label_a="src", label_b="rsync")
    assert_same_tree(dests["oracle"], dests["msrsync"], label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("way", sorted(OLD_ARGS_WAYS))
def test_rsync_protect_args_variable_does_not_beat_old_args(tmp_path, sshd_server, way):
    """rsync 3.5.0 with RSYNC_PROTECT_ARGS=1 and --old-args (or RSYNC_OLD_ARGS=1) still
    splits the remote path: plain rsync writes into ".../dir" and exits 0 (checked here
    first). msrsync refuses the path as it does without RSYNC_PROTECT_ARGS (it once let it
    through and misplaced the files the same way, exit 0)."""
    extra, env_extra = OLD_ARGS_WAYS[way]
    env = dict(os.environ, RSYNC_PROTECT_ARGS="1", **env_extra)
    src = _tree(tmp_path / "src", 6)
    opts = OPTS + extra + ["-e", sshd_server.rsh]
    os.makedirs(tmp_path / "oracle")
    oracle = run_rsync(src + b"/",
                       sshd_server.remote(os.fsencode(tmp_path / "oracle" / "dir with space")
                                          + b"/"), opts=opts, env=env, timeout=60)
    assert oracle.returncode == 0, describe(oracle)
    assert _only_entries(tmp_path / "oracle") == ["dir"], "rsync did not split the path"
    # msrsync, towards a closed port: a refusal exits 1, a connection attempt 255 or 12
    remote = _remote("127.0.0.1", str(tmp_path / "msrsync" / "dir with space") + "/")
    opts = OPTS + extra + ["-e", _closed_rsh(tmp_path)]
    cp = run_msrsync("-p", "2", "-f", "2", "--rsync", rsync_opts_string(opts), src + b"/",
                     remote, env=env)
    assert cp.returncode == 1 and b"whitespace" in cp.stderr, describe(cp)


# --------------------------------------------------------------------------- remote usage error

# The system rsync made to reject --open-noatime as an rsync older than 3.2.0 does;
# when it does, its version banner first on stderr (as a wrapper that logs it would).
OLD_REMOTE_RSYNC = """#!/bin/sh
# the system rsync, made to reject --open-noatime as an rsync older than 3.2.0 does
refused=
for a do
    shift
    [ "$a" = --open-noatime ] && a=--no-such-option && refused=1
    set -- "$@" "$a"
done
[ -n "$refused" ] && rsync --version >&2
exec rsync "$@"
"""
BANNER = ("version", "Copyright", "Capabilities", "WARRANTY")


def _old_remote_rsync(tmp_path):
    path = tmp_path / "rsync-without-open-noatime"
    path.write_text(OLD_REMOTE_RSYNC)
    path.chmod(0o755)
    return str(path)


def _failure_blocks(lines):
    """{what failed: [the rsync lines shown under it]} of msrsync's failure reports."""
    blocks, current = {}, None
    for line in lines:
        match = re.match(r"^msrsync: (\S.*?) failed: ", line)
        if current is not None and line.startswith("msrsync:   "):
            current.append(line[len("msrsync:   "):])
        elif match:
            current = blocks.setdefault(match.group(1), [])
        else:
            current = None
    return blocks


def _assert_refused_once(cp, summary_path, code, needle, workers=2):
    """exit code, the refusal line once (naming rsync's error line, not a banner), the
    failure shown once with rsync's error lines, no retry, no --resume hint, few runs."""
    __tracebackhide__ = True
    assert cp.returncode == code, describe(cp)
    assert b"Traceback" not in cp.stderr, describe(cp)
    lines = stderr_lines(cp)
    assert not [l for l in lines if RETRY_LINE in l], describe(cp)
    refusals = [l for l in lines if l.startswith(REFUSAL)]
    assert len(refusals) == 1, describe(cp)
    assert needle in refusals[0], refusals
    assert "--resume" not in text(cp.stderr), describe(cp)
    blocks = _failure_blocks(lines)
    assert len(blocks) == 1, describe(cp)
    (shown,) = blocks.values()
    assert any(needle in l for l in shown), describe(cp)
    assert not any(word in l for l in shown + refusals for word in BANNER), describe(cp)
    summary = json.loads(summary_path.read_text())
    # A worker starts its next bucket once a transfer is over and leaves rsync's exit
    # (and its log's verdict) to the reaper: up to 2 x workers runs were seen (4 with
    # -p 2, 5 with -p 4), 3 x is the margin for a loaded machine. Every bucket run
    # once would be >= 12, run 4 times (--retries 3) >= 48.
    assert summary["rsync_processes"] <= 3 * workers, summary
    assert summary["buckets_total"] >= 12, summary
    return summary


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_old_remote_rsync_refusing_an_option_stops_the_run(tmp_path, sshd_server, direction):
    """The remote rsync (a wrapper as --rsync-path, emulating one older than
    --open-noatime) fails every bucket with "syntax or usage error ... [server=...]" and
    the client exits 12, a code msrsync retries. Now: no retry, no further bucket, the
    failure shown once, one line saying the other end refuses the options, exit 12.
    Catches the old behaviour: every bucket run 4 times (--retries 3), a retry line for
    each, and a --resume hint."""
    src = _tree(tmp_path / "src", 60)
    wrapper = _old_remote_rsync(tmp_path)
    opts = OPTS + ["--open-noatime", "--rsync-path=" + wrapper, "-e", sshd_server.rsh]
    # (the premise: plain rsync fails so, the wrapper's banner first in its stderr)
    far = tmp_path / "far"
    os.makedirs(far)
    oracle = run_rsync(src + b"/", sshd_server.remote(os.fsencode(far / "oracle")),
                       opts=opts, timeout=60)
    assert oracle.returncode == 12, describe(oracle)
    assert oracle.stderr.startswith(b"rsync  version"), describe(oracle)
    assert b"syntax or usage error (code 1)" in oracle.stderr, describe(oracle)
    if direction == "push":
        ends = [src + b"/", sshd_server.remote(os.fsencode(far / "dest") + b"/")]
    else:
        ends = [sshd_server.remote(src + b"/"), os.fsencode(tmp_path / "dest")]
    summary = tmp_path / "summary.json"
    cp = run_msrsync("-p", "2", "-f", "5", "--retries", "3", "--json", summary,
                     "--rsync", rsync_opts_string(opts), *ends, timeout=120)
    _assert_refused_once(cp, summary, 12, "on remote machine")
    refusal = [l for l in stderr_lines(cp) if l.startswith(REFUSAL)][0]
    assert "--no-such-option: unknown option" in refusal, refusal


@pytest.mark.parametrize("direction,code", [("pull", 10), ("push", 4)])
def test_daemon_refusing_an_option_stops_the_run(tmp_path, refusing_daemon, direction,
                                                 code):
    """A daemon module with "refuse options = open-noatime": the pull's rsync exits 10
    (retried before: 16 "will run again" lines, exit 10), the push's 4. Either way: no
    retry, the refusal shown once, one line saying the other end refuses the options,
    rsync's exit code. Catches the pointless retries of the pull and a report of every
    bucket's failure."""
    d = refusing_daemon
    src = _tree(tmp_path / "src", 60)
    opts = OPTS + ["--open-noatime"]
    if direction == "pull":
        ends = [d.url(src + b"/", module="noatime"), os.fsencode(tmp_path / "dest")]
    else:
        ends = [src + b"/", d.url(os.fsencode(tmp_path / "dest") + b"/", module="noatime")]
    oracle = run_rsync(*(ends[:1] + [os.fsencode(tmp_path / "oracle")]
                         if direction == "pull" else
                         [src + b"/", d.url(os.fsencode(tmp_path / "oracle") + b"/",
                                            module="noatime")]), opts=opts, timeout=60)
    assert oracle.returncode == code, describe(oracle)
    summary = tmp_path / "summary.json"
    cp = run_msrsync("-p", "2", "-f", "5", "--retries", "3", "--json", summary,
                     "--rsync", rsync_opts_string(opts), *ends, timeout=120)
    _assert_refused_once(cp, summary, code, "The server is configured to refuse --open-noatime")


# --------------------------------------------------------------------------- read_error_lines

NOISY_RSYNC = """#!/bin/sh
# msrsync's rsync for this test: a bucket's run (stderr is NNNNNN.log) first writes what
# is no error (rsync's version banner, -v chatter), then an error line rsync writes
# without a prefix, ERRORS made-up error lines, and fails with rsync's own two lines
# (an unknown option)
log=$(readlink /proc/$$/fd/2)
case "$log" in
*/[0-9][0-9][0-9][0-9][0-9][0-9].log)
    {rsync} --version >&2
    echo "sending incremental file list" >&2
    echo "could not make way for new symlink: made-up" >&2
    i=1
    while [ $i -le {errors} ]; do
        echo "rsync: [sender] link_stat \\"/made/up/$i\\" failed: No such file or directory (2)" >&2
        echo "building file list ... done" >&2
        i=$((i+1))
    done
    exec {rsync} --no-such-option "$@";;
esac
exec {rsync} "$@"
"""


@pytest.mark.parametrize("errors", [0, 7])
def test_failed_bucket_shows_rsync_error_lines_not_a_banner(tmp_path, errors):
    """A bucket's log that starts with rsync's version banner and -v chatter: the report
    (stderr and --json "errors") shows the error lines, an unprefixed one too, the
    first ones and always the last (rsync's exit line), five at most. Catches the old
    report: the log's first five lines, all banner."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "rsync"
    wrapper.write_text(NOISY_RSYNC.replace("{errors}", str(errors)).replace(
        "{rsync}", shlex.quote(shutil.which("rsync"))))
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    src = tmp_path / "src"
    build(src, {"a": "a", "b": "b", "c": "c"})
    summary = tmp_path / "summary.json"
    cp = run_msrsync("-p", "2", "-f", "1", "--json", summary, os.fsencode(src) + b"/",
                     os.fsencode(tmp_path / "dest"), env=env)
    assert cp.returncode == 1, describe(cp)
    for word in BANNER + ("incremental", "building"):
        assert word.encode() not in cp.stderr, describe(cp)
    unprefixed = "could not make way for new symlink: made-up"
    made_up = ['rsync: [sender] link_stat "/made/up/%d" failed: No such file or directory (2)'
               % i for i in range(1, errors + 1)]
    # all of them, or, more than five, the first four and the last
    expected = ([unprefixed] + made_up[:3] if errors else
                [unprefixed, "rsync: --no-such-option: unknown option"])
    blocks = _failure_blocks(stderr_lines(cp))
    assert blocks, describe(cp)
    failures = json.loads(summary.read_text())["failures"]
    assert len(failures) == len(blocks) >= 1, (failures, describe(cp))
    for shown in list(blocks.values()) + [f["errors"] for f in failures]:
        rsync_lines = [l for l in shown if not l.startswith("list: ")]
        assert len(rsync_lines) <= 5, shown
        assert rsync_lines[:-1] == expected, shown
        assert rsync_lines[-1].startswith("rsync error: syntax or usage error (code 1)"), shown
