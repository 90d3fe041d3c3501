"""Readahead: msrsync asks the kernel for the files each rsync reads next.

Advice changes no byte of DEST, so each case is a differential against plain rsync
plus the --json counts (readahead_files) that show which files were asked for: all
of them with -c, only those rsync sends without it, none with --readahead 0. The
window is checked against a real process's read counter."""

import json
import os
import pathlib
import shutil
import select
import signal
import subprocess
import tempfile
import time

import pytest

from helpers import (age, build, differential, end, load_msrsync, make_tree, processes,
                     rsync_processes_mentioning, run_msrsync, running_rsyncs, start_msrsync,
                     wait_for)


MSR = load_msrsync()


def _on_disk(path):
    return MSR.file_system_type(os.fsencode(str(path))) not in MSR.MEMORY_FS_TYPES


def _disk_dir(mode=0o700):
    """A new directory on a file system that is not in memory, or None."""
    for parent in ("/var/tmp", os.path.dirname(os.path.abspath(__file__))):
        if os.path.isdir(parent) and _on_disk(parent):
            path = tempfile.mkdtemp(prefix="msrsync-readahead-", dir=parent)
            os.chmod(path, mode)
            return path
    return None


@pytest.fixture
def tmp_path(tmp_path):
    """This module's trees live on a disk: in memory (tmpfs, /tmp on some systems)
    msrsync asks for no readahead (see test_a_src_in_memory_gets_no_readahead)."""
    if _on_disk(tmp_path):
        yield tmp_path
        return
    path = _disk_dir()
    if path is None:
        pytest.skip("no directory off tmpfs to build trees in")
    try:
        yield pathlib.Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _summary(tmp_path, *args, default=False, env=None):
    """The --json summary of a run; --readahead given as the default (whose
    default depends on the machine's CPUs) unless default."""
    path = tmp_path / ("summary-%d.json" % len(list(tmp_path.glob("summary-*"))))
    given = [] if default or "--readahead" in args else ["--readahead", "64M"]
    cp = run_msrsync(*(["--json", path] + given + list(args)), env=env)
    assert cp.returncode == 0, cp.stderr
    return json.loads(path.read_text())


def _tree(root, files=30, size=3000, empty=2):
    spec = {"a/": "dir/", "a/b/": "dir/", "link": ("symlink", "a")}
    for n in range(files):
        spec["a/f%02d" % n if n % 2 else "a/b/g%02d" % n] = "x" * (size + n)
    for n in range(empty):
        spec["e%d" % n] = ""          # nothing to read in an empty file
    build(root, spec)
    age(root)
    return files


@pytest.fixture
def late_rsync(tmp_path):
    """An environment whose rsync starts 0.3 s late: without -c the readahead asks
    for what DEST's copy does not match, and a quick rsync would otherwise copy some
    files before the readahead looks at them (then rightly not asked for), which
    would make the counts below depend on timing.  With -c too: on a loaded machine
    a quick rsync could end before the readahead began (a CI-like run under two
    CPU hogs asked for 0 files of 15)."""
    return _late_rsync_env(os.path.join(str(tmp_path), "late-bin"))


def _late_rsync_env(bindir):
    """An environment whose rsync (in bindir, made here, 0755) starts 0.3 s late."""
    os.mkdir(bindir)
    os.chmod(bindir, 0o755)
    wrapper = os.path.join(bindir, "rsync")
    with open(wrapper, "w") as handle:
        handle.write("#!/bin/sh\nsleep 0.3\nexec %s \"$@\"\n" % shutil.which("rsync"))
    os.chmod(wrapper, 0o755)
    return dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))


def _copy_of(src):
    def prepare(dest):
        subprocess.run(["rsync", "-a", os.fsencode(src) + b"/", os.fsencode(dest) + b"/"],
                       check=True)
    return prepare


@pytest.mark.parametrize("procs", ["1", "3"])
def test_a_copy_asks_for_every_file_rsync_sends(tmp_path, procs, late_rsync):
    src = str(tmp_path / "src")
    files = _tree(src)
    differential(tmp_path / "diff", [src + "/"], ["--readahead", "64M", "-p", procs] +
                 (["-f", "4"] if procs != "1" else []))
    summary = _summary(tmp_path, "-p", procs, src + "/", str(tmp_path / "dest2"),
                       env=late_rsync)
    assert summary["readahead_files"] == files
    assert summary["readahead_bytes"] == sum(3000 + n for n in range(files))


def test_an_up_to_date_rerun_asks_for_nothing_and_a_changed_file_only_for_it(tmp_path,
                                                                            late_rsync):
    src = str(tmp_path / "src")
    _tree(src)
    dest = str(tmp_path / "dest")
    first = _summary(tmp_path, "-p", "2", "-f", "5", src + "/", dest, env=late_rsync)
    assert first["readahead_files"] == 30
    stale = str(tmp_path / "stale")
    _copy_of(dest)(stale)
    again = _summary(tmp_path, "-p", "2", "-f", "5", src + "/", dest)
    assert again["readahead_files"] == 0
    # one file changed (size and mtime), one touched only (mtime): rsync sends both
    with open(os.path.join(src, "a", "f01"), "ab") as handle:
        handle.write(b"more")
    os.utime(os.path.join(src, "a", "b", "g02"), (1e9, 1e9))
    changed = _summary(tmp_path, "-p", "2", "-f", "5", src + "/", dest, env=late_rsync)
    assert changed["readahead_files"] == 2
    differential(tmp_path / "diff", [src + "/"], ["--readahead", "64M", "-p", "2", "-f", "5"],
                       prepare_dest=_copy_of(stale))


def test_size_only_asks_only_for_files_whose_size_differs(tmp_path, late_rsync):
    src = str(tmp_path / "src")
    _tree(src)
    dest = str(tmp_path / "dest")
    _summary(tmp_path, "-p", "2", src + "/", dest)
    os.utime(os.path.join(src, "a", "f01"), (1e9, 1e9))   # same size: not sent
    with open(os.path.join(src, "a", "f03"), "ab") as handle:
        handle.write(b"grown")
    summary = _summary(tmp_path, "-p", "2", "--rsync", "-a --size-only", src + "/", dest,
                       env=late_rsync)
    assert summary["readahead_files"] == 1


@pytest.mark.parametrize("opts", ["-ac", "-a -I"])
def test_checksum_or_ignore_times_asks_for_every_file_even_up_to_date(tmp_path, opts,
                                                                      late_rsync):
    src = str(tmp_path / "src")
    files = _tree(src)
    dest = str(tmp_path / "dest")
    _summary(tmp_path, "-p", "2", src + "/", dest)
    summary = _summary(tmp_path, "-p", "2", "--rsync", opts, src + "/", dest, env=late_rsync)
    assert summary["readahead_files"] == files
    differential(tmp_path / "diff", [src + "/"], ["--readahead", "64M", "-p", "2", "-f", "3"],
                       rsync_opts=opts.split(), prepare_dest=_copy_of(dest))


@pytest.mark.parametrize("args", [["--readahead", "0"], ["-d"], ["--rsync", "-an"],
                                  ["--rsync", "-ac --exclude=a/"]],
                         ids=["off", "msrsync-dry-run", "rsync-dry-run", "excluded"])
def test_no_file_is_asked_for_when_none_is_read(tmp_path, args):
    src = str(tmp_path / "src")
    _tree(src, files=8)
    summary = _summary(tmp_path, *(["-p", "2"] + args + [src + "/", str(tmp_path / "dest")]))
    assert summary["readahead_files"] == 0


@pytest.mark.parametrize("procs", ["1", "2"])
def test_excluded_files_are_not_asked_for(tmp_path, procs, late_rsync):
    src = str(tmp_path / "src")
    _tree(src)
    summary = _summary(tmp_path, "-p", procs, "--rsync", "-ac --exclude=g*", src + "/",
                       str(tmp_path / "dest"), env=late_rsync)
    assert summary["readahead_files"] == 15     # the a/fNN, not the a/b/gNN
    differential(tmp_path / "diff", [src + "/"], ["--readahead", "64M", "-p", procs],
                       rsync_opts=["-ac", "--exclude=g*"])


def test_by_default_the_rsyncs_share_a_window_of_64m_a_cpu(tmp_path, late_rsync):
    """Of a 128 MiB file (sparse) and a 3 KB one, -c: 64 MiB is asked for at -p 1,
    and with twice as many rsyncs as CPUs half of that (the page cache holds no more
    however large -p)."""
    src = tmp_path / "src"
    src.mkdir()
    with open(str(src / "big"), "wb") as handle:
        handle.truncate(128 << 20)
    (src / "a").write_bytes(b"s" * 3000)   # first: a sparse file reads no disk,
    cpus = len(os.sched_getaffinity(0))      # which ends the readahead after it
    for procs, window in ((1, 64 << 20), (2 * cpus, 32 << 20)):
        summary = _summary(tmp_path, "-p", str(procs), "--rsync", "-ac", str(src) + "/",
                           str(tmp_path / ("dest%d" % procs)), default=True, env=late_rsync)
        assert summary["readahead_files"] == 2, procs
        assert summary["readahead_bytes"] == window + 3000, procs


def test_an_up_to_date_rerun_stops_looking_after_its_first_thousand_files(tmp_path):
    """Only the last 300 of 1,300 files changed: the walk gave up after 1,000 files that
    rsync does not send (without that probe it would have asked for the 300)."""
    src = tmp_path / "src"
    src.mkdir()
    for n in range(1300):
        (src / ("f%04d" % n)).write_bytes(b"y" * 10)
    age(str(src))
    dest = str(tmp_path / "dest")
    _summary(tmp_path, "-p", "1", str(src) + "/", dest)
    for n in range(1000, 1300):
        (src / ("f%04d" % n)).write_bytes(b"z" * 11)
    summary = _summary(tmp_path, "-p", "1", str(src) + "/", dest)
    assert summary["readahead_files"] == 0
    assert run_msrsync("-p", "1", "--rsync", "-ain", str(src) + "/", dest).stdout == b""


def _has_read_bytes():
    try:
        with open("/proc/self/io", "rb") as handle:
            return b"read_bytes:" in handle.read()
    except OSError:
        return False


@pytest.mark.skipif(not _has_read_bytes(), reason="no /proc/self/io read_bytes here")
def test_files_already_in_memory_stop_the_readahead_after_its_probe(tmp_path, late_rsync,
                                                                   page_cache_lock):
    """40 files of 1 MiB just written (in the page cache): after 16 MiB of advice that
    made the disk read nothing, no more is asked for.  (page_cache_lock: not while
    another test drops the page cache.)"""
    src = tmp_path / "src"
    src.mkdir()
    block = os.urandom(1 << 20)
    for n in range(40):
        (src / ("big%02d" % n)).write_bytes(block[n:] + block[:n])
    summary = _summary(tmp_path, "-p", "1", "--rsync", "-ac", str(src) + "/",
                       str(tmp_path / "dest"), env=late_rsync)
    assert 16 <= summary["readahead_files"] <= 18, summary["readahead_files"]


def _state(pid):
    """A process's state letter (Z: exited, not yet waited for), or None when gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[0]
    except OSError:
        return None


def test_the_readahead_stays_within_its_window_of_what_rsync_read(tmp_path):
    """A real process that reads nothing stands for rsync: the advice stops one window
    past its read counter, and the helper ends that job once the process is gone
    (before it is told to); close() ends the helper."""
    m = load_msrsync()
    src = tmp_path / "src"
    src.mkdir()
    for n in range(64):
        (src / ("f%02d" % n)).write_bytes(b"w" * 65536)
    proc = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.3)
        with open("/proc/%d/io" % proc.pid, "rb") as handle:
            rchar = int([line for line in handle if line.startswith(b"rchar:")][0].split()[1])
        window = 1 << 20
        ra = m.Readahead(window, None, True, False, False, None)
        ra.start(1)
        helper = ra.idle[0]
        ra.useful = True      # no probe: this test is about the window alone
        ra.follow(proc.pid, m.readahead_job([(os.fsencode(str(src)), b".")]))
        assert ra.busy[proc.pid] is helper
        time.sleep(1.0)
        assert not select.select([helper.inp], [], [], 0)[0], \
            "the readahead ended with its rsync alive"
    finally:
        proc.kill()
        proc.wait()
    # it reports by itself, before it is told its rsync is gone
    assert select.select([helper.inp], [], [], 5)[0], "the readahead outlived its process"
    ra.finish(proc.pid)
    assert not ra.busy and ra.idle == [helper] and _state(helper.pid) not in (None, b"Z")
    asked = ra.bytes
    ra.close()
    assert _state(helper.pid) is None, "the helper outlived close()"
    assert rchar + window < 64 * 65536, rchar     # room to stop short of the end
    assert rchar + window < asked <= rchar + window + 65536, (asked, rchar)


@pytest.mark.nonroot
def test_files_of_another_owner_are_asked_for_without_noatime(nonroot):
    """O_NOATIME is refused on a file one does not own (EPERM): as nobody, root's
    readable files are opened without it, and still asked for."""
    prefix, python, work = nonroot
    if not _on_disk(work):
        work = _disk_dir(0o777)
        if work is None:
            pytest.skip("no directory off tmpfs to build trees in")
        work = os.fsencode(work)
    src = os.path.join(work, b"in", b"src")
    _tree(src)                                  # owned by root, 0644 files
    os.chmod(os.path.join(work, b"in"), 0o755)
    for dirpath, dirnames, _ in os.walk(src):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    os.chmod(src, 0o755)
    summary_path = os.path.join(work, b"summary.json")
    # rsync started late, as late_rsync does: a quick rsync on a loaded machine could end
    # before the readahead began
    env = _late_rsync_env(os.path.join(os.fsdecode(work), "late-bin"))
    cp = run_msrsync("--json", summary_path, "--readahead", "64M", "-p", "2", "--rsync",
                     "-rlptc", src + b"/", os.path.join(work, b"dest"), prefix=prefix,
                     python=python, env=env)
    assert cp.returncode == 0, cp.stderr
    with open(summary_path, "rb") as handle:
        assert json.loads(handle.read().decode())["readahead_files"] == 30
    differential(os.path.join(work, b"diff"), [src + b"/"],
                 ["--readahead", "64M", "-p", "2", "-f", "4"], rsync_opts=["-rlptc"],
                 prefix=prefix, python=python)


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or _on_disk("/dev/shm"),
                    reason="no tmpfs at /dev/shm")
def test_a_src_in_memory_gets_no_readahead(tmp_path):
    """tmpfs holds its files in memory: there is no disk to keep busy."""
    shm = tempfile.mkdtemp(prefix="msrsync-readahead-", dir="/dev/shm")
    try:
        src = os.path.join(shm, "src")
        _tree(src)
        by_default = _summary(tmp_path, "-p", "1", "--rsync", "-ac", src + "/",
                              str(tmp_path / "d1"), default=True)
        assert by_default["readahead_files"] == 0
        given = _summary(tmp_path, "-p", "1", "--rsync", "-ac", src + "/",
                         str(tmp_path / "d2"))      # --readahead 64M given
        assert given["readahead_files"] == 0
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_a_file_bigger_than_the_window_is_asked_for_up_to_the_window(tmp_path, late_rsync):
    """Memory holds no more than the window: of a 64 MiB file (sparse) and a 3 KB
    one, with --readahead 1M, 1 MiB and 3 KB are asked for."""
    src = tmp_path / "src"
    src.mkdir()
    with open(str(src / "big"), "wb") as handle:
        handle.truncate(64 << 20)
    (src / "small").write_bytes(b"s" * 3000)
    summary = _summary(tmp_path, "-p", "1", "--readahead", "1M", "--rsync", "-ac",
                       str(src) + "/", str(tmp_path / "dest"), env=late_rsync)
    assert summary["readahead_files"] == 2
    assert summary["readahead_bytes"] == (1 << 20) + 3000


def test_a_copy_run_from_inside_src_still_asks_for_every_file(tmp_path, late_rsync):
    """'cd SRC && msrsync . DEST' into a new DEST: DEST has no directory to look
    names up in, and the names must not be looked up where msrsync runs (which
    holds the very same files, equal by size and mtime, here)."""
    src = tmp_path / "src"
    src.mkdir()
    for n in range(5):
        (src / ("x%d" % n)).write_bytes(b"x" * (100 + n))
    path = tmp_path / "summary.json"
    cp = run_msrsync("--json", path, "--readahead", "64M", "-p", "1", "./",
                     str(tmp_path / "dest"), cwd=str(src), env=late_rsync)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(path.read_text())["readahead_files"] == 5


def _forks_of(pid):
    """Live processes forked by pid that run no other program (its readaheads)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read()
    except OSError:
        return []
    return [child for child, parent, state, argv in processes()
            if parent == pid and state not in (b"Z", b"X") and argv == cmdline]


def _alive(pid):
    state = _state(pid)
    return state is not None and state not in (b"Z", b"X")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_msrsync_alone_leaves_no_readahead_behind(tmp_path, signum):
    """Readaheads wait at their window (64K) while rsync reads at 100 KiB/s: msrsync,
    signalled alone (not its process group), ends it with its rsyncs."""
    src = make_tree(tmp_path / "src", "big", count=8, size=1 << 20)   # 2 files a bucket
    proc = start_msrsync("-p", "2", "-s", "2M", "--readahead", "64K", "--rsync",
                         "-a --bwlimit=100", src + b"/", tmp_path / "dest")
    forks = []
    try:
        assert wait_for(lambda: len(rsync_processes_mentioning(os.fsencode(tmp_path))) >= 2,
                        10), "rsync workers never started"
        assert wait_for(lambda: len(_forks_of(proc.pid)) >= 2, 5), "no readahead running"
        forks = _forks_of(proc.pid)
        time.sleep(0.3)
        assert all(_alive(pid) for pid in forks), "a readahead ended before its rsync"
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 20, err
        assert b"Traceback" not in err
        left = [pid for pid in forks if _alive(pid)]
        assert not left, "readaheads left running: %r" % left
        left = running_rsyncs(tmp_path)
        assert not left, "rsyncs outlived msrsync: %r" % left
    finally:
        end(proc, tmp_path)


def _elsewhere_shell(tmp_path):
    """A --host-shell that runs sh on this machine as if on another: its readlink
    says another pid namespace, so msrsync's check of the host (see check_host)
    finds another kernel and process table there."""
    bindir = tmp_path / "elsewhere-bin"
    bindir.mkdir()
    fake = bindir / "readlink"
    fake.write_text("#!/bin/sh\necho 'pid:[1]'\n")
    fake.chmod(0o755)
    return ["--host-shell", "env PATH=%s:%s sh -c 'exec sh'" % (bindir, os.environ["PATH"])]


def test_with_worker_hosts_the_rsyncs_run_here_get_the_readahead(tmp_path, late_rsync):
    """With --hosts, the buckets run on ":" (this machine) are read ahead of; those
    run on another machine are not (the advice would fill this machine's page cache,
    not the host's). The host is "hx", reached by a --host-shell that runs sh on this
    machine as if on another (see _elsewhere_shell), so that both kinds of buckets
    run in one tree."""
    src = str(tmp_path / "src")
    files = _tree(src)
    shell = _elsewhere_shell(tmp_path)
    summary = _summary(tmp_path, "--hosts", ":2,hx:2", "-f", "3", *shell,
                       src + "/", str(tmp_path / "dest"), env=late_rsync)
    here, there = ({h["host"]: h for h in summary["hosts"]}[name] for name in (":", "hx"))
    assert here["buckets"] and there["buckets"] and there["bytes"]
    assert summary["readahead_files"] > 0
    # every file of the buckets run here, and none of those run on hx
    assert summary["readahead_bytes"] == here["bytes"]
    assert summary["readahead_bytes"] + there["bytes"] == sum(3000 + n for n in range(files))
    elsewhere = _summary(tmp_path, "--hosts", "hx:2", "-f", "3", *shell,
                         src + "/", str(tmp_path / "dest3"), env=late_rsync)
    assert elsewhere["readahead_files"] == 0
    differential(tmp_path / "diff", [src + "/"], ["--hosts", ":2,hx:2", "-f", "3"] + shell)


def test_a_host_in_this_machines_kernel_gets_the_readahead_too(tmp_path, late_rsync):
    """A host that runs in this machine's kernel and process table (a network
    namespace, a container: here sh run by "env -u hx") reads through this machine's
    page cache: its rsyncs are read ahead of as those run here, every file they send
    asked for."""
    src = str(tmp_path / "src")
    files = _tree(src)
    shell = ["--host-shell", "env -u"]
    summary = _summary(tmp_path, "--hosts", "hx:2", "-f", "3", *shell,
                       src + "/", str(tmp_path / "dest"), env=late_rsync)
    there = {h["host"]: h for h in summary["hosts"]}["hx"]
    assert there["buckets"] > 1, summary["hosts"]
    assert summary["readahead_files"] == files
    assert summary["readahead_bytes"] == there["bytes"] == sum(3000 + n for n in range(files))
    differential(tmp_path / "diff", [src + "/"], ["--hosts", "hx:2", "-f", "3"] + shell)
