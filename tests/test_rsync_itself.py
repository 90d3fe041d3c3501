"""-p 1 without caps, where nothing msrsync adds would help, is the user's rsync
itself (become_rsync): msrsync's process execs "rsync OPTS SRC... DEST" once its
checks of the input pass.  Everything else is supervised as before."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import (BASE_TIME_NS, MSRSYNC, assert_no_rsync_left, differential, end, make_tree,
                     run_msrsync, running_rsyncs, snapshot, start_msrsync, stderr_lines, text,
                     wait_for)


def _fs_type(path):
    """The type of the mount holding path, as /proc/self/mounts says."""
    path, best, kind = os.path.realpath(path), "", ""
    with open("/proc/self/mounts") as handle:
        for line in handle:
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            if (path == point or path.startswith(point.rstrip("/") + "/")) and \
                    len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


@pytest.fixture
def shm_dir(tmp_path):
    """A private directory in memory (tmpfs), where no readahead helps."""
    if not os.path.isdir("/dev/shm") or _fs_type("/dev/shm") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    path = os.path.join("/dev/shm", "msrsync-test-%d-%s" % (os.getpid(), tmp_path.name))
    os.mkdir(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def logged_rsync(tmp_path):
    """(env, log): an rsync on PATH that appends "PID PPID" to log when it is
    started for a transfer (not for msrsync's --version probe), then execs
    the real one under the same pid."""
    bindir = tmp_path / "logged-bin"
    bindir.mkdir()
    log = tmp_path / "rsync.log"
    log.write_text("")
    wrapper = bindir / "rsync"
    wrapper.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = --version ] && exec %s "$@"; done\n'
                       'echo "$$ $PPID" >> %s\nexec %s "$@"\n'
                       % (shutil.which("rsync"), log, shutil.which("rsync")))
    wrapper.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", ""))
    return env, log


def _transfers(log):
    """(pid, ppid) of each rsync started for a transfer."""
    return [tuple(int(n) for n in line.split()) for line in log.read_text().splitlines()]


def _run(logged_rsync, *args):
    """msrsync ARGS, started by pid; returns (its pid, exit code, stderr, transfers)."""
    env, log = logged_rsync
    argv = [a if isinstance(a, (str, bytes)) else os.fsencode(a) for a in args]
    proc = subprocess.Popen([sys.executable, MSRSYNC] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, env=env)
    _, err = proc.communicate(timeout=120)
    return proc.pid, proc.returncode, text(err), _transfers(log)


def test_a_run_in_memory_becomes_rsync_and_leaves_its_tree(shm_dir, logged_rsync):
    src = make_tree(os.path.join(shm_dir, "src"), "weird")
    dest = os.path.join(shm_dir, "dest")
    pid, code, err, transfers = _run(logged_rsync, src + b"/", dest)
    assert code == 0, err
    # one rsync, msrsync's own process: not a child of it
    assert len(transfers) == 1 and transfers[0][0] == pid, (pid, transfers)
    differential(os.path.join(shm_dir, "diff"), [src + b"/"],
                 rsync_opts=["-aH", "--delete", "--exclude=*.txt"],
                 prepare_dest=lambda d: make_tree(d, "small", seed=3))


def test_a_run_on_disk_without_readahead_becomes_rsync(tmp_path, logged_rsync):
    src = make_tree(tmp_path / "src", "small", seed=2)
    pid, code, err, transfers = _run(logged_rsync, "--readahead", "0", "--rsync",
                                     "-a --delete", src + b"/", tmp_path / "dest")
    assert code == 0, err
    assert transfers == [(pid, transfers[0][1])], (pid, transfers)
    assert not os.listdir(str(tmp_path / "TMPDIR")), "a bucket directory was made"


@pytest.mark.parametrize("extra", [
    ["-p", "2"], ["-f", "100"], ["-s", "1G"], ["--stats"], ["--json", "-"], ["-P"], ["-k"],
    ["-j"], ["-d"], ["-b", "SHM"], ["--retries", "0"], ["--retries", "3"],
], ids=lambda e: " ".join(e))
def test_what_msrsync_adds_keeps_it_supervising(shm_dir, logged_rsync, extra):
    src = make_tree(os.path.join(shm_dir, "src"), "small", seed=2)
    args = [shm_dir if e == "SHM" else e for e in extra]
    pid, code, err, transfers = _run(logged_rsync, *(args + [src + b"/",
                                                             os.path.join(shm_dir, "d")]))
    assert code == 0, err
    assert transfers or extra == ["-d"], "no rsync ran"     # (-d runs none)
    assert all(p != pid for p, _ in transfers), (pid, transfers)


@pytest.mark.parametrize("extra", [[], ["--retries", "0"]], ids=["become", "supervised"])
def test_a_whole_run_of_several_srcs_is_what_one_rsync_does(shm_dir, logged_rsync, extra):
    """-p 1 without caps is one rsync of every SRC, become or supervised alike:
    -H across SRCs and --delete with SRCs whose names overlap, which runs that
    split the SRCs refuse (exit 4), leave rsync's tree either way (they were
    refused when supervised only, so that the outcome hung on the file system)."""
    s1 = make_tree(os.path.join(shm_dir, "s1"), "small", seed=4)
    s2 = make_tree(os.path.join(shm_dir, "s2"), "small", seed=5)   # the same names
    os.link(os.path.join(s1, b"mode644"), os.path.join(s2, b"linked from s1"))

    def stale(dest):
        make_tree(dest, "flat", n=3, seed=6)

    pid, code, err, transfers = _run(logged_rsync, *(extra + [
        "--rsync", "-aH --delete", s1 + b"/", s2 + b"/", os.path.join(shm_dir, "d")]))
    assert code == 0, err
    assert len(transfers) == 1 and (transfers[0][0] == pid) == (not extra), (pid, transfers)
    result = differential(os.path.join(shm_dir, "diff"), [s1 + b"/", s2 + b"/"], extra,
                          rsync_opts=["-aH", "--delete"], prepare_dest=stale)
    snap = snapshot(result.msrsync_dest)
    assert snap[b"linked from s1"].get("hardlinks"), "the link across SRCs was lost"


def test_a_readahead_on_disk_keeps_it_supervising(tmp_path, logged_rsync):
    if _fs_type(str(tmp_path)) in ("tmpfs", "ramfs", ""):
        pytest.skip("the test directory is not on a disk")
    src = make_tree(tmp_path / "src", "small", seed=2)
    pid, code, err, transfers = _run(logged_rsync, src + b"/", tmp_path / "dest")
    assert code == 0, err
    assert transfers and transfers[0][1] == pid, (pid, transfers)


def test_bad_input_still_gets_msrsyncs_one_line(shm_dir):
    src = make_tree(os.path.join(shm_dir, "src"), "small", seed=2)
    for args, code in [(["--rsync", "-a --no-such-option"], 1), (["--rsync", "-a --server"], 4)]:
        m = run_msrsync(*(args + [src + b"/", os.path.join(shm_dir, "d")]))
        lines = stderr_lines(m)
        assert m.returncode == code and len(lines) == 1, (args, m.returncode, lines)
        assert lines[0].startswith("msrsync: error:"), lines
    assert not os.path.exists(os.path.join(shm_dir, "d"))


def _with_extra_files(dest):
    os.makedirs(dest)
    for name in (b"extra-1", b"extra-2"):
        with open(os.path.join(dest, name), "wb") as handle:
            handle.write(name)
        os.utime(os.path.join(dest, name), ns=(BASE_TIME_NS, BASE_TIME_NS))


def test_the_exit_status_is_rsyncs(shm_dir):
    """--max-delete=1 with two files to delete: rsync's 25, and the same DEST."""
    src = make_tree(os.path.join(shm_dir, "src"), "small", seed=2)
    differential(os.path.join(shm_dir, "diff"), [src + b"/"],
                 rsync_opts=["-a", "--delete", "--max-delete=1"], expect_rc=25,
                 prepare_dest=_with_extra_files)


def test_closed_stdout_ends_as_rsync_does(shm_dir):
    """With stdout closed the probe cannot use fds 0-2 for its pipe (and rsync
    cannot write): the same exit code as rsync's own."""
    src = make_tree(os.path.join(shm_dir, "src"), "small", seed=2)
    codes = []
    for argv in ([shutil.which("rsync"), "-aS", "--numeric-ids"],
                 [sys.executable, MSRSYNC]):
        dest = os.path.join(shm_dir, "d%d" % len(codes))
        codes.append(subprocess.call(["sh", "-c", 'exec "$@" >&-', "sh"] + argv +
                                     [src + b"/", dest], stderr=subprocess.DEVNULL,
                                     timeout=60))
    assert codes[0] == codes[1], codes


def _slow_run(shm_dir):
    src = make_tree(os.path.join(shm_dir, "src"), "big", count=4, size=1 << 20)
    return start_msrsync("--rsync", "-a --bwlimit=100", src + b"/",
                         os.path.join(shm_dir, "dest"))


@pytest.mark.slow
@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 20), (signal.SIGTERM, 20),
                                         (signal.SIGKILL, -signal.SIGKILL)],
                         ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_a_signal_to_msrsync_stops_every_rsync(shm_dir, signum, code):
    """Its pid is rsync's: a signal, SIGKILL included, reaches rsync itself,
    whose other processes end with it."""
    proc = _slow_run(shm_dir)
    try:
        assert wait_for(lambda: len(running_rsyncs(shm_dir)) >= 2, 10), "rsync never started"
        assert proc.pid in [pid for pid, _ in running_rsyncs(shm_dir)]
        time.sleep(0.3)
        os.kill(proc.pid, signum)
        proc.communicate(timeout=15)
        assert proc.returncode == code
        assert_no_rsync_left(shm_dir)
    finally:
        end(proc, shm_dir)
