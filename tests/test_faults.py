"""Faults and awkward set-ups: DEST inside SRC, and the like.

Each case is compared with what one plain rsync leaves."""

import contextlib
import errno
import os
import re
import resource
import shutil
import subprocess
import sys

import pytest

from helpers import (MSRSYNC, age, assert_same_tree, build, differential, make_tree, run_msrsync,
                     run_rsync, snapshot, start_msrsync, stderr_lines)


def _tree(root):
    build(root, {"a/": "dir/", "a/f": "f", "a/b/": "dir/", "a/b/h": "h", "g": "g",
                 "c/": "dir/", "c/k": "k"})
    age(root)


@pytest.mark.parametrize("dest_rel", ["dst", "a/dst", "a/b/dst"])
@pytest.mark.parametrize("procs,files", [("1", "1"), ("2", "1"), ("4", "3")])
def test_dest_inside_src_is_not_copied_into_itself(tmp_path, dest_rel, procs, files):
    """A DEST made by the run inside SRC is not copied into itself (rsync, racing its
    own mkdir, sometimes does: the oracle is told to leave DEST out); the run ends."""
    sides = {}
    for side in ("oracle", "msrsync"):
        src = tmp_path / side / "src"
        _tree(src)
        sides[side] = src
    # rsync alone copies DEST into itself or not depending on timing (its
    # receiver makes DEST while the sender lists SRC); told to leave DEST out,
    # it gives the result both should: DEST not copied into itself
    oracle = run_rsync(os.fsencode(sides["oracle"]) + b"/",
                       os.fsencode(sides["oracle"] / dest_rel),
                       opts=["-a", "--exclude=/" + dest_rel])
    assert oracle.returncode == 0
    cp = run_msrsync("-p", procs, "-f", files, os.fsencode(sides["msrsync"]) + b"/",
                     os.fsencode(sides["msrsync"] / dest_rel))
    assert cp.returncode == 0, cp.stderr
    # DEST's root is made at run time on both sides, and making it changes the
    # mtime of the SRC directory holding it: rsync had read that directory
    # before, msrsync (which makes DEST before scanning) after.  The copies of
    # DEST's parents inside DEST are the one documented difference: their
    # mtimes are left out, everything else is compared.
    parents = [p for p in ("", "a", "a/b") if dest_rel.startswith(p) and p != dest_rel]
    for side in sides.values():
        for parent in parents:
            os.utime(side / parent, (0, 0))
            if (side / dest_rel / parent).exists():
                os.utime(side / dest_rel / parent, (0, 0))
        os.utime(side / dest_rel, (0, 0))
    assert_same_tree(os.fsencode(sides["oracle"]), os.fsencode(sides["msrsync"]),
                     label_a="rsync", label_b="msrsync")
    shutil.rmtree(tmp_path / "oracle")


@pytest.mark.parametrize("dest_slash", [True, False], ids=["DEST/", "DEST"])
@pytest.mark.parametrize("arg_slash", [True, False], ids=["loop/", "loop"])
def test_a_symlink_loop_as_src_ends_like_rsync(tmp_path, arg_slash, dest_slash):
    """A SRC that is a symlink loop: rsync copies the link itself ("loop") or fails to
    enter it with 23, having made a DEST given as "DEST/" ("loop/"); msrsync does the
    same, with one
    error line and no traceback."""
    os.symlink("loop", str(tmp_path / "loop"))
    arg = os.fsencode(tmp_path / "loop") + (b"/" if arg_slash else b"")
    end = b"/" if dest_slash else b""
    oracle = run_rsync(arg, os.fsencode(tmp_path / "o") + end, opts=["-a"])
    cp = run_msrsync("-p", "2", arg, os.fsencode(tmp_path / "m") + end)
    assert cp.returncode == oracle.returncode == (23 if arg_slash else 0), cp.stderr
    assert b"Traceback" not in cp.stderr
    if arg_slash:
        assert len(stderr_lines(cp)) >= 1 and b"Too many levels" in cp.stderr
    assert os.path.lexists(tmp_path / "o") == os.path.lexists(tmp_path / "m")
    assert os.path.islink(tmp_path / "o") == os.path.islink(tmp_path / "m")


def test_a_thousand_failing_buckets_do_not_flood_the_terminal(tmp_path):
    """Every one of 1,000 buckets fails (rsync refuses a missing --temp-dir): the
    first ten are reported in full, the rest by one summary line; the details are
    in the logs."""
    src = tmp_path / "src"
    build(src, dict(("f%04d" % i, "x") for i in range(1000)))
    cp = run_msrsync("-p", "8", "-f", "1", "--rsync", "-a --temp-dir=/nonexistent/tmp",
                     os.fsencode(src) + b"/", os.fsencode(tmp_path / "dest"))
    assert cp.returncode == 1, cp.stderr[-2000:]     # rsync's own code here
    assert b"Traceback" not in cp.stderr
    failed_blocks = [l for l in cp.stderr.splitlines() if b" failed: rsync exited" in l]
    assert len(failed_blocks) == 10, len(failed_blocks)
    assert re.search(rb"msrsync: 100\d buckets failed; details of the others are in "
                     rb"their logs", cp.stderr)
    assert len(cp.stderr.splitlines()) < 120


# Runs the rest of its argv with fds 3..1102 taken (inheritable), so that every
# pipe and log msrsync opens is numbered above 1024: select() refuses those.
_MANY_FDS = r"""
import os, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 2048 if hard == resource.RLIM_INFINITY else min(hard, 2048)
if soft != resource.RLIM_INFINITY and soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
for _ in range(1100):
    os.set_inheritable(os.open(os.devnull, os.O_RDONLY), True)
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_a_run_whose_fds_are_numbered_past_1024_still_works(tmp_path):
    """msrsync started with its fds 3..1102 taken: its pipes and logs are
    numbered past 1024, where select() raised "filedescriptor out of range"
    (exit 42); it waits on them with poll."""
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 1300:
        pytest.skip("the hard limit on open files is under 1300")
    src = tmp_path / "src"
    build(src, dict(("d%d/f%03d" % (i % 7, i), "x" * i) for i in range(300)))
    cp = run_msrsync("-p", "3", "-f", "10", os.fsencode(src) + b"/",
                     os.fsencode(tmp_path / "dest"),
                     prefix=[sys.executable, "-c", _MANY_FDS])
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert cp.stderr == b""
    assert_same_tree(src, tmp_path / "dest")


def test_rsyncs_that_linger_after_their_transfer_are_not_piled_up(tmp_path):
    """A worker leaves an rsync's exit to the reaper; rsyncs that linger 0.3 s
    after their output must not be started faster than they are reaped: at
    -p 2 no more than 2 * 2 + 1 are alive at once (each holds a pipe and a log
    open; unbounded, a slow reaper let a run of 1,000 buckets run out of fds)."""
    alive = tmp_path / "alive"
    alive.mkdir()
    counts = tmp_path / "counts"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "rsync"
    wrapper.write_text(
        "#!/bin/sh\n"
        "touch %(alive)s/$$\n"
        "ls %(alive)s | wc -l >> %(counts)s\n"
        "%(rsync)s \"$@\"\n"
        "code=$?\n"
        "exec >&-\n"
        "sleep 0.3\n"
        "rm -f %(alive)s/$$\n"
        "exit $code\n" % dict(alive=alive, counts=counts, rsync=shutil.which("rsync")))
    wrapper.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", ""))
    src = tmp_path / "src"
    build(src, dict(("f%03d" % i, "x" * i) for i in range(40)))
    cp = run_msrsync("-p", "2", "-f", "1", os.fsencode(src) + b"/",
                     os.fsencode(tmp_path / "dest"), env=env)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert_same_tree(src, tmp_path / "dest")
    seen = [int(line) for line in counts.read_text().split()]
    assert len(seen) >= 40, seen
    assert max(seen) <= 5, seen


def _hostile_names(rng, count):
    """Names rsync users meet: newlines, tabs, leading dashes, backslashes, quotes,
    invalid UTF-8, wildcards, '#'/';' starts, 255-byte components."""
    pieces = [b"\n", b"\t", b"-", b"--", b"\\", b"'", b'"', b"\xff\xfe", b"*", b"?", b"[a]",
              b"#", b";", b" ", b"$(x)", b"\xc3\xa9", b".", b"x"]
    names = set()
    while len(names) < count:
        name = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.1:
            name = (name + b"L" * 255)[:255]
        if name not in (b".", b"..") and b"/" not in name:
            names.add(name)
    return sorted(names)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_trees_with_hostile_names_match_rsync(tmp_path, seed):
    """Property-style: seeded random trees of hostile names, deep and wide, copied by
    msrsync with tiny buckets equal what plain rsync copies."""
    import random
    rng = random.Random(seed)
    src = os.fsencode(tmp_path / "src")
    os.makedirs(src)
    dirs = [src]
    for name in _hostile_names(rng, 120):
        parent = rng.choice(dirs)
        path = os.path.join(parent, name)
        if len(path) > 3900:
            continue
        if rng.random() < 0.3:
            os.mkdir(path)
            dirs.append(path)
        else:
            with open(path, "wb") as handle:
                handle.write(name * rng.randint(0, 3))
    age(src)
    differential(tmp_path, [src + b"/"], ["-p", str(rng.choice([1, 2, 4])), "-f",
                                          str(rng.choice([1, 3, 7]))], ["-a"])


def test_deep_nesting_and_long_paths_match_rsync(tmp_path):
    """150 levels, and a path of about 4,000 bytes of 255-byte components."""
    src = os.fsencode(tmp_path / "src")
    deep = os.path.join(src, *[b"d%03d" % i for i in range(150)])
    os.makedirs(deep)
    with open(os.path.join(deep, b"leaf"), "wb") as handle:
        handle.write(b"deep")
    long_dir = src
    while len(long_dir) < 3600:
        long_dir = os.path.join(long_dir, b"L" * 250)
    os.makedirs(long_dir)
    with open(os.path.join(long_dir, b"f" * 200), "wb") as handle:
        handle.write(b"long")
    age(src)
    differential(tmp_path, [src + b"/"], ["-p", "2", "-f", "5"], ["-a"])


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-aH"], ["-aL"], ["-a", "--copy-unsafe-links"],
                                        ["-a", "--exclude=*.dat", "--delete"]])
def test_scan_threads_read_ahead_gives_the_same_tree(tmp_path, rsync_opts):
    """--scan-threads N (on by default on network file systems) reads directories
    ahead with threads; the buckets and the result are the same as one thread's."""
    src = make_tree(tmp_path / "src", "weird")
    build(os.fsencode(src), {"deep/": "dir/", "deep/a/": "dir/", "deep/a/b.dat": "b",
                             "deep/a/c": "c", "up": ("symlink", "deep"),
                             "out": ("symlink", "../elsewhere")})
    age(os.fsencode(src))
    # dangling links cannot be followed: rsync says so and exits 23, as msrsync must
    follows = "-aL" in rsync_opts or "--copy-unsafe-links" in rsync_opts
    differential(tmp_path, [src + b"/"], ["--scan-threads", "4", "-p", "2", "-f", "5"],
                 rsync_opts, expect_rc=23 if follows else 0)


def test_scan_threads_cut_the_same_buckets(tmp_path):
    import json
    src = make_tree(tmp_path / "src", "weird")
    counts = []
    for threads in ("0", "4"):
        out = tmp_path / ("s%s.json" % threads)
        cp = run_msrsync("-d", "--scan-threads", threads, "-f", "3", "--json", out,
                         src + b"/", tmp_path / "d")
        assert cp.returncode == 0, cp.stderr
        summary = json.loads(out.read_text())
        counts.append((summary["buckets_total"], summary["entries_total"],
                       summary["bytes_total"]))
    assert counts[0] == counts[1]


@pytest.mark.slow
def test_a_million_entries_at_p8_complete_with_flat_memory(tmp_path):
    """Load: 1,000,000 empty files (1,000 per directory, on /dev/shm when there is
    one) copied with -p 8: exit 0, nothing left for rsync to do, and msrsync's own
    peak RSS well under what holding the list would take (~100 bytes a name)."""
    import subprocess
    import sys
    import tempfile
    import time
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) \
        else str(tmp_path)
    work = tempfile.mkdtemp(prefix="msrsync-load-", dir=base)
    try:
        src = os.path.join(work, "src")
        for d in range(1000):
            path = os.path.join(src, "d%04d" % d)
            os.makedirs(path)
            for f in range(999):
                open(os.path.join(path, "f%03d" % f), "wb").close()
        dest = os.path.join(work, "dest")
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen([sys.executable, MSRSYNC, "-p", "8", src + "/",
                                     dest + "/"], stdout=subprocess.DEVNULL, stderr=errors)
            # msrsync's own peak (VmHWM, the kernel's high-water mark of its resident
            # set), read until it exits. Not the rusage of its end: that is the largest
            # of it and its children, and a child forked while msrsync's heap is
            # large counts the pages it shares with it (under load 2x msrsync's own)
            peak = 0
            deadline = time.monotonic() + 900
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    with open("/proc/%d/status" % proc.pid) as status:
                        for line in status:
                            if line.startswith("VmHWM:"):
                                peak = max(peak, int(line.split()[1]))
                except (OSError, ValueError):
                    pass
                time.sleep(0.02)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            errors.seek(0)
            err = errors.read()
        assert proc.returncode == 0, err[-2000:]
        left = subprocess.run(["rsync", "-ain", src + "/", dest + "/"],
                              stdout=subprocess.PIPE, check=True).stdout
        assert left.strip() == b"", left[:2000]
        assert 0 < peak < 80 * 1024, peak
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------- file systems that fill up

@contextlib.contextmanager
def tmpfs(path, size, read_only=False):
    """A tmpfs of `size` mounted on path for the test, always unmounted after.
    Skips when mounting is refused (not root, or no CAP_SYS_ADMIN in a container)."""
    path = os.fsencode(path)
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    options = "size=%s%s" % (size, ",ro" if read_only else "")
    try:
        cp = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        pytest.skip("cannot run mount: %s" % exc)
    if cp.returncode != 0:
        error = cp.stderr.decode("utf-8", "replace").strip()
        if re.search(r"permission denied|not permitted|only root", error, re.I):
            pytest.skip("mounting a tmpfs was refused: %s" % error)
        pytest.fail("mount -t tmpfs -o %s failed: %s" % (options, error))
    try:
        yield path
    finally:
        if subprocess.run(["umount", path], stderr=subprocess.PIPE).returncode != 0:
            subprocess.run(["umount", "-l", path], stderr=subprocess.PIPE)


def remount(path, size):
    subprocess.run(["mount", "-o", "remount,size=%s" % size, path], check=True)


def fill(directory, leave=0):
    """Fill the file system of directory with one file, up to `leave` bytes free."""
    path = os.path.join(os.fsencode(directory), b"fill")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        while True:
            st = os.statvfs(directory)
            room = st.f_bavail * st.f_frsize - leave
            if room <= 0:
                break
            os.write(fd, b"\xa5" * min(room, 1 << 16))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC and not leave, exc
    finally:
        os.close(fd)
    return path


def _full_dest_src(root):
    """4.8 MB of incompressible, non-sparse files (-S would store zeros as holes),
    small files DEST also holds, and one DEST holds in an older version."""
    spec = {"keep/": "dir/", "keep/same1": os.urandom(20000), "keep/same2": os.urandom(20000),
            "stale": "new version\n" * 100, "big/": "dir/"}
    for i in range(12):
        spec["big/b%02d" % i] = os.urandom(400 * 1024)
    build(root, spec)
    age(root)


def _prepopulate(src, dest):
    """Files identical to SRC's (content and mtime), an older version of one, and
    extraneous entries a --delete would remove."""
    os.makedirs(os.path.join(dest, b"keep"), exist_ok=True)
    for rel in (b"keep/same1", b"keep/same2"):
        shutil.copy2(os.path.join(src, rel), os.path.join(dest, rel))
    build(dest, {"stale": "old version\n", "extra/": "dir/", "extra/e1": "extraneous 1\n",
                 "extra.txt": "extraneous 2\n"})
    for rel in (b"stale", b"extra/e1", b"extra", b"extra.txt"):
        os.utime(os.path.join(dest, rel), (10 ** 9, 10 ** 9))


@pytest.mark.parametrize("rsync_opts", [None, "-a --delete"], ids=["default", "delete"])
def test_a_full_dest_stops_the_run_and_damages_nothing(tmp_path, rsync_opts):
    """DEST (a 3 MB tmpfs) cannot hold SRC (4.8 MB): rsync exits 11 with "No space
    left on device (28)"; msrsync starts no further bucket, retries nothing, skips
    the deletion and directory passes, reports one error and exits 11, and every
    file DEST held whole is still whole.  Once there is room, the same command
    gives plain rsync's tree."""
    import json
    src = os.fsencode(tmp_path / "src")
    _full_dest_src(src)
    src_snap = snapshot(src)
    json_path = os.fsencode(tmp_path / "run.json")
    args = ["-p", "2", "-f", "1", "--retries", "3", "--json", json_path]
    if rsync_opts is not None:
        args += ["--rsync", rsync_opts]
    args += [src + b"/", None]
    oracle = os.fsencode(tmp_path / "oracle")
    _prepopulate(src, oracle)
    cp = run_rsync(src + b"/", oracle, opts=rsync_opts.split() if rsync_opts else None)
    assert cp.returncode == 0, cp.stderr
    with tmpfs(tmp_path / "dest", "3m") as dest:
        args[-1] = dest
        _prepopulate(src, dest)
        before = snapshot(dest)
        cp = run_msrsync(*args)
        assert cp.returncode == 11, cp.stderr[-3000:]
        assert b"Traceback" not in cp.stderr
        lines = stderr_lines(cp)
        errors = [l for l in lines if l.startswith("msrsync: error: ")]
        assert len(errors) == 1 and "out of space at DEST" in errors[0], lines
        assert ("deletions skipped" in errors[0]) == bool(rsync_opts), errors
        assert len([l for l in lines if " failed: rsync exited with code 11" in l]) == 1, lines
        assert b"No space left on device (28)" in cp.stderr
        assert b"will run again" not in cp.stderr
        with open(json_path) as handle:
            summary = json.load(handle)
        assert summary["exit_code"] == 11 and summary["status"] == "FAILURE"
        assert summary["retried"] == [] and summary["out_of_space"], summary
        # only the rsyncs running when DEST filled up failed
        assert 1 <= summary["buckets_failed"] <= 4, summary["failures"]
        launched = summary["rsync_processes"]
        after = snapshot(dest)
        # every file DEST held is still there, whole: as before, or SRC's (the stale
        # one may have been replaced); the extraneous ones were not deleted
        for rel, entry in before.items():
            if entry["type"] == "file":
                assert after.get(rel) in (entry, src_snap.get(rel)), rel
        # nothing half-written: every file is SRC's whole, or was there before
        for rel, entry in after.items():
            assert rel == b"." or not os.path.basename(rel).startswith(b"."), rel  # temp files
            if entry["type"] == "file":
                assert entry in (before.get(rel), src_snap.get(rel)), rel
        # room again: the same command converges
        remount(dest, "16m")
        cp = run_msrsync(*args)
        assert cp.returncode == 0, cp.stderr[-3000:]
        with open(json_path) as handle:
            summary = json.load(handle)
        assert launched < summary["buckets_total"], (launched, summary["buckets_total"])
        assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_an_unwritable_bucket_dir_fails_before_any_transfer(tmp_path, how):
    """-b DIR on a read-only or full file system (root ignores mode 0555, so the
    tmpfs is mounted read-only, or filled): one error line, exit 11 (as for a -b
    that is not a directory), no traceback, DEST not even created, nothing left in DIR."""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    src_snap = snapshot(src)
    dest = os.fsencode(tmp_path / "dest")
    with tmpfs(tmp_path / "buckets", "1m", read_only=how == "read-only") as buckets:
        if how == "full":
            fill(buckets)
        listing = sorted(os.listdir(buckets))
        cp = run_msrsync("-p", "2", "-b", buckets, src + b"/", dest)
        assert cp.returncode == 11, cp.stderr
        assert b"Traceback" not in cp.stderr
        lines = stderr_lines(cp)
        reason = "Read-only file system" if how == "read-only" else "No space left on device"
        assert len(lines) == 1 and lines[0].startswith("msrsync: error: "), lines
        assert "bucket directory" in lines[0] and reason in lines[0], lines
        assert not os.path.lexists(dest)
        assert sorted(os.listdir(buckets)) == listing
    assert_same_tree(src_snap, src)


def test_a_bucket_dir_filling_up_mid_run_is_one_error(tmp_path):
    """The bucket directory fills up while lists and journal entries are written:
    one error line naming it, exit 11, no traceback; run again with room, the same
    copy gives plain rsync's tree."""
    src = os.fsencode(tmp_path / "src")
    build(src, dict(("file%03d" % i, "%d\n" % i) for i in range(300)))
    age(src)
    dest = os.fsencode(tmp_path / "dest")
    with tmpfs(tmp_path / "buckets", "1m") as buckets:
        # room for run.json and the start-up probe, not for 30 buckets' lists and states
        fill(buckets, leave=144 * 1024)
        cp = run_msrsync("-p", "2", "-f", "10", "-b", buckets, src + b"/", dest)
        assert cp.returncode == 11, cp.stderr
        assert b"Traceback" not in cp.stderr
        lines = stderr_lines(cp)
        assert len(lines) == 1 and lines[0].startswith(
            "msrsync: error: cannot write the bucket directory "), lines
        assert "No space left on device" in lines[0]
    cp = run_msrsync("-p", "2", "-f", "10", src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    oracle = os.fsencode(tmp_path / "oracle")
    assert run_rsync(src + b"/", oracle).returncode == 0
    assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")


def test_bucket_files_are_private(tmp_path):
    """The bucket directory is 0700 and every list, log, state and journal in it 0600."""
    import stat
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    buckets = os.fsencode(tmp_path / "buckets")
    os.mkdir(buckets)
    dest = os.fsencode(tmp_path / "dest")
    build(dest, {"extraneous": "x"})
    cp = run_msrsync("-k", "-p", "2", "-f", "1", "-b", buckets, "--rsync", "-a --delete",
                     src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    [run_dir] = os.listdir(buckets)
    run_dir = os.path.join(buckets, run_dir)
    assert stat.S_IMODE(os.stat(run_dir).st_mode) == 0o700
    names = os.listdir(run_dir)
    assert {b"run.json", b"done.journal"} <= set(names), names
    assert any(n.endswith(b".state") for n in names), names
    assert any(n.startswith(b"extraneous-") for n in names), names
    for name in names:
        mode = stat.S_IMODE(os.lstat(os.path.join(run_dir, name)).st_mode)
        assert mode == 0o600, (name, oct(mode))


def test_files_vanishing_mid_run_are_rsyncs_warning_24(tmp_path):
    """Files deleted from SRC while their bucket's rsync runs: rsync's "vanished"
    warning, exit 24 (not a failure to retry), everything else copied."""
    import json
    import time
    src = tmp_path / "src"
    spec = {"a_big": "B" * (600 << 10)}
    spec.update(("z%02d" % i, "small %d\n" % i) for i in range(20))
    build(src, spec)
    dest = tmp_path / "dest"
    proc = start_msrsync("-p", "1", "-f", "100", "--json", tmp_path / "s.json",
                         "--rsync", "-a --bwlimit=300", os.fsencode(src) + b"/", dest)
    try:
        deadline = time.monotonic() + 30
        # rsync has listed the tree once it writes a_big's temporary file
        while time.monotonic() < deadline and not (
                dest.exists() and any(n.startswith(".a_big") for n in os.listdir(dest))):
            time.sleep(0.02)
        for i in range(20):
            os.unlink(str(src / ("z%02d" % i)))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 24, err
    assert b"vanished" in err and b"Traceback" not in err
    assert (dest / "a_big").read_bytes() == b"B" * (600 << 10)
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["retried"] == [], summary
