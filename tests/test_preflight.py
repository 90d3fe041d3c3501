"""The pre-flight of DEST: a probe tree sent with the run's own options before the first
byte, compared by a dry run and removed by rsync, against real file systems that refuse
things (bindfs --xattr-none, --chown-deny, --chgrp-deny; an ext4 image of 128-byte inodes,
whose mtimes have whole seconds; one that is full; tmpfs, which holds everything), over
ssh and an rsync daemon, and in --survey; what no file system here can show (a
case-insensitive target, one that refuses names that are not UTF-8) fed to its reader as
rsync prints it.  Every mount is made and unmounted by the test, its bindfs stopped by pid.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

from helpers import (IS_ROOT, assert_no_rsync_left, assert_same_tree, describe, differential,
                     end, load_msrsync, make_tree, processes, rsync_opts_string, run_cmd,
                     run_msrsync, run_rsync, start_msrsync, wait_for)
from remote import serve_rsync_daemon, serve_sshd, serve_sshfs, stop_process

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="mounts file systems: needs root")

OPTS = ["-aHAXS", "--numeric-ids"]
PROBE = b".msrsync-preflight-"


def _mount(argv, where):
    cp = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    if cp.returncode != 0:
        pytest.skip("cannot mount (%s): %s" % (" ".join(argv[:2]), cp.stderr[-300:]))
    assert os.path.ismount(where)


def _umount(where):
    for _ in range(50):
        if not os.path.ismount(where):
            return
        if subprocess.run(["umount", where], stderr=subprocess.DEVNULL).returncode == 0:
            return
        time.sleep(0.1)


@pytest.fixture
def bindfs(tmp_path):
    """bindfs(*options): a directory of the test's own seen through bindfs with those
    options (its own process, in the foreground, stopped by pid): (mount point, the
    directory under it)."""
    if shutil.which("bindfs") is None or not os.path.exists("/dev/fuse"):
        pytest.skip("needs bindfs and /dev/fuse")
    made = []

    def mount(*options):
        under = tmp_path / ("under%d" % len(made))
        mnt = tmp_path / ("mnt%d" % len(made))
        under.mkdir()
        mnt.mkdir()
        proc = subprocess.Popen(["bindfs", "-f"] + list(options) + [str(under), str(mnt)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        made.append((proc, str(mnt)))
        deadline = time.monotonic() + 20
        while not os.path.ismount(str(mnt)):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip("bindfs did not mount: %s" % proc.stderr.read()[-300:])
            time.sleep(0.05)
        return mnt, under

    yield mount
    for proc, mnt in made:
        subprocess.run(["fusermount", "-u", mnt], stderr=subprocess.DEVNULL)
        stop_process(proc)


@pytest.fixture
def ext4(tmp_path):
    """ext4(name, size, *mkfs options): an ext4 image of the test's own mounted (a
    loop device), unmounted afterwards: its mount point."""
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("needs mkfs.ext4")
    made = []

    def mount(name, size, *options):
        image, mnt = str(tmp_path / (name + ".img")), str(tmp_path / name)
        with open(image, "wb") as handle:
            handle.truncate(size)
        cp = run_cmd(["mkfs.ext4", "-q", "-F"] + list(options) + [image])
        assert cp.returncode == 0, describe(cp)
        os.mkdir(mnt)
        _mount(["mount", "-o", "loop", image, mnt], mnt)
        made.append(mnt)
        return os.fsencode(mnt)

    yield mount
    for mnt in made:
        _umount(mnt)


@pytest.fixture
def tmpfs(tmp_path):
    mnt = str(tmp_path / "tmpfs")
    os.mkdir(mnt)
    _mount(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt], mnt)
    yield os.fsencode(mnt)
    _umount(mnt)


def _src(tmp_path):
    """A small tree that carries an xattr, an ACL, a hard link and a sparse file."""
    src = os.fsencode(tmp_path / "src")
    make_tree(src, kind="weird", seed=3)
    extra = os.path.join(src, b"extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, b"x"), "wb") as handle:
        handle.write(b"xattr\n")
    try:
        os.setxattr(os.path.join(extra, b"x"), "user.test", b"1")
    except OSError:
        pass
    with open(os.path.join(extra, b"sparse"), "wb") as handle:
        handle.seek(1 << 20)
        handle.write(b"end")
    os.link(os.path.join(extra, b"x"), os.path.join(extra, b"x.link"))
    os.utime(extra, (1400000000, 1400000000))
    return src


def _dropped(stderr):
    """The kinds the pre-flight's table names (its first column)."""
    lines = stderr.decode("utf-8", "replace").splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if "msrsync: pre-flight:" in l)
    except StopIteration:
        return []
    names = []
    for line in lines[start + 1:]:
        if not line.startswith("msrsync:   "):
            break
        names.append(line[len("msrsync:   "):].split("  ")[0].strip())
    return names


def _probes_left(root):
    left = []
    for top, dirs, files in os.walk(os.fsencode(root)):
        left += [os.path.join(top, n) for n in dirs + files if n.startswith(PROBE)]
    return left


def test_a_dest_that_holds_everything_hears_nothing_and_ends_as_rsyncs(tmp_path, tmpfs):
    """tmpfs holds owners, groups, xattrs, ACLs, links, holes, devices and every name:
    nothing is said, DEST (its own times too) ends as one rsync's, no probe is left."""
    src = _src(tmp_path)
    os.makedirs(os.path.join(tmpfs, b"oracle", b"dest"))
    os.makedirs(os.path.join(tmpfs, b"msrsync", b"dest"))
    for dest in (b"oracle", b"msrsync"):
        os.utime(os.path.join(tmpfs, dest, b"dest"), ns=(10 ** 18, 10 ** 18))
    summary = str(tmp_path / "s.json")
    # (DEST's own mtime: rsync -H makes a link in it after setting it; see below)
    d = differential(tmpfs, [src + b"/"], ["-p", "2", "-f", "3", "--json", summary],
                     OPTS, ignore_root_mtime=True)
    assert b"pre-flight" not in d.msrsync.stderr, describe(d.msrsync)
    with open(summary) as handle:
        preflight = json.load(handle)["preflight"]
    assert preflight["dropped"] == [], preflight
    for key in ("owner", "group", "xattrs", "acls", "hard_links", "sparse", "devices",
                "specials", "long_names", "case", "not_utf8", "subsecond", "symlinks"):
        assert key in preflight["probed"], preflight
    assert not _probes_left(tmpfs)
    # a DEST whose copy of "src" is up to date keeps its own times (rsync leaves them):
    # the probe's coming and going is undone to the nanosecond
    dest = os.path.join(tmpfs, b"again")
    assert run_rsync(src, dest, opts=OPTS).returncode == 0
    os.utime(dest, ns=(10 ** 18, 10 ** 18 + 7))
    cp = run_msrsync("-p", "2", "--rsync", " ".join(OPTS), src, dest)
    assert cp.returncode == 0, describe(cp)
    assert os.stat(dest).st_mtime_ns == 10 ** 18 + 7


@pytest.mark.parametrize("options, rsync_opts, expected", [
    (["--xattr-none"], "-aX", ["extended attributes (user.*)"]),
    (["--xattr-none"], "-aA", ["ACLs"]),
    # (rsync changes a group with the same chown(2) that keeps the owner: refused too)
    (["--chown-deny"], "-a", ["owners", "groups"]),
    (["--chgrp-deny"], "-a", ["owners", "groups"]),
    (["--xattr-none", "--chown-deny", "--chgrp-deny"], "-aHAXS",
     ["owners", "groups", "extended attributes (user.*)", "ACLs"]),
    (["--chown-deny"], "-rlpt", []),
], ids=["xattrs", "acls", "owners", "groups", "all", "not-asked"])
def test_bindfs_refusals_are_named_and_nothing_is_copied(tmp_path, bindfs, options,
                                                         rsync_opts, expected):
    """Exactly what DEST drops of what the options keep is named, and the run refuses
    before the first byte (exit 48), the DEST it made gone again; what the options do
    not ask for (-rlpt keeps no owner) is not probed."""
    src = _src(tmp_path)
    mnt, under = bindfs(*options)
    dest = os.fsencode(mnt / "dest")
    cp = run_msrsync("-p", "2", "-f", "3", "--rsync", rsync_opts, src + b"/", dest)
    assert _dropped(cp.stderr) == expected, describe(cp)
    if not expected:
        assert cp.returncode == 0, describe(cp)
        return
    assert cp.returncode == 48, describe(cp)
    assert b"nothing copied" in cp.stderr and b"Traceback" not in cp.stderr
    assert os.listdir(str(under)) == [], "the refused run left DEST or its probe"


def test_preflight_warn_copies_as_rsync_and_reports(tmp_path, bindfs):
    """--preflight warn: the same table, then the copy goes on and DEST ends as one
    rsync's on the same file system, with rsync's exit code (23: xattrs refused)."""
    src = _src(tmp_path)
    mnt, under = bindfs("--xattr-none")
    summary = str(tmp_path / "s.json")
    d = differential(mnt, [src + b"/"], ["-p", "2", "-f", "3", "--preflight", "warn",
                                         "--json", summary], OPTS, expect_rc=23,
                     compare=False)
    # compared where they are stored (bindfs shows a hard link's count as it goes)
    assert_same_tree(os.fsencode(under / "oracle" / "dest"),
                     os.fsencode(under / "msrsync" / "dest"), ignore_root_mtime=True,
                     label_a="rsync", label_b="msrsync")
    assert _dropped(d.msrsync.stderr) == ["extended attributes (user.*)", "ACLs"]
    assert b"copying anyway" in d.msrsync.stderr, describe(d.msrsync)
    # said again at the end, after the buckets' failures
    lines = d.msrsync.stderr.decode().splitlines()
    again = [n for n, l in enumerate(lines) if l.startswith(
        "msrsync: warning: DEST lacks its extended attributes (user.*), ACLs")]
    failed = [n for n, l in enumerate(lines) if " failed: rsync exited with code " in l]
    assert again and failed and again[0] > failed[-1], describe(d.msrsync)
    with open(summary) as handle:
        dropped = json.load(handle)["preflight"]["dropped"]
    assert [k["kind"] for k in dropped] == ["xattrs", "acls"], dropped
    assert all(k["loss"] for k in dropped)
    assert not _probes_left(under)


def test_preflight_off_probes_nothing(tmp_path, bindfs):
    src = _src(tmp_path)
    mnt, _ = bindfs("--chown-deny")
    cp = run_msrsync("-p", "2", "--preflight", "off", "--rsync", "-a", src + b"/",
                     os.fsencode(mnt / "d"))
    assert cp.returncode == 23, describe(cp)
    assert b"pre-flight" not in cp.stderr, describe(cp)


def test_whole_second_mtimes_are_noted_and_copied(tmp_path, ext4):
    """An ext4 of 128-byte inodes keeps whole seconds: noted (rsync's own check cannot
    see it, no data is lost), never refused; DEST ends as one rsync's there."""
    src = _src(tmp_path)
    mnt = ext4("coarse", 32 << 20, "-I", "128")
    d = differential(mnt, [src + b"/"], ["-p", "2", "-f", "3"], OPTS)
    assert _dropped(d.msrsync.stderr) == ["sub-second modification times"], \
        describe(d.msrsync)
    assert b"error" not in d.msrsync.stderr


def test_a_full_dest_is_said_before_the_first_byte(tmp_path, ext4):
    src = _src(tmp_path)
    mnt = ext4("full", 4 << 20)
    os.makedirs(os.path.join(mnt, b"d"))
    for chunk in (1 << 16, 4096, 1):
        # (root may fill the blocks ext4 keeps for it too: to the last one)
        with open(os.path.join(mnt, b"filler"), "ab", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\1" * chunk)
            except OSError:
                pass
    cp = run_msrsync("-p", "2", "--rsync", "-a", src + b"/", os.path.join(mnt, b"d"))
    assert cp.returncode == 11, describe(cp)
    assert b"out of space" in cp.stderr and b"pre-flight" in cp.stderr, describe(cp)
    assert os.listdir(os.path.join(mnt, b"d")) == []


def test_a_dest_through_another_users_symlink_is_named_up_front(tmp_path):
    """rsync 3.5.0 follows a symlink in DEST's path only when root or the running user
    owns it: named once, before anything is made, with rsync's own exit code (3)."""
    version = run_cmd(["rsync", "--version"]).stdout.split()[2]
    if tuple(int(p) for p in version.split(b".")[:3]) < (3, 5, 0):
        pytest.skip("rsync before 3.5.0 follows it")
    src = _src(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "link"
    os.symlink(str(target), str(link))
    os.lchown(str(link), 1, 1)
    cp = run_msrsync("-p", "2", "--rsync", "-a", src + b"/", os.fsencode(link / "dest"))
    assert cp.returncode == 3, describe(cp)
    lines = cp.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and str(link) in lines[0] and "uid 1" in lines[0], lines
    assert os.listdir(str(target)) == []
    oracle = run_rsync(src + b"/", os.fsencode(link / "dest"), opts=["-a"])
    assert oracle.returncode == 3, describe(oracle)
    cp = run_msrsync("-p", "2", "--rsync", "-a --insecure-links", src + b"/",
                     os.fsencode(link / "dest"))
    assert cp.returncode == 0, describe(cp)


def test_survey_shows_what_dest_drops_with_the_entries_that_carry_it(tmp_path, bindfs):
    src = _src(tmp_path)
    mnt, under = bindfs("--xattr-none", "--chown-deny")
    report = str(tmp_path / "survey.json")
    cp = run_msrsync("--survey", "--json", report, "--rsync", "-aHAXS", src + b"/",
                     os.fsencode(mnt))
    assert cp.returncode == 0, describe(cp)
    table = cp.stdout.decode()
    assert "DEST's pre-flight" in table and "extended attributes (user.*)" in table, table
    with open(report) as handle:
        survey = json.load(handle)
    dropped = dict((k["kind"], k) for k in survey["preflight"]["dropped"])
    assert sorted(dropped) == ["acls", "group", "owner", "xattrs"], dropped
    assert dropped["owner"]["src_entries"] == survey["entries"]
    assert dropped["xattrs"]["src_entries"] == survey["xattrs"] >= 1
    assert os.listdir(str(under)) == []


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    yield from serve_sshd(tmp_path_factory)


@pytest.fixture(scope="module")
def rsync_daemon(tmp_path_factory):
    yield from serve_rsync_daemon(tmp_path_factory)


@pytest.mark.parametrize("how", ["ssh", "daemon"])
def test_a_remote_dest_is_probed_by_rsync_and_keeps_its_times(tmp_path, how, sshd,
                                                              rsync_daemon):
    """Over ssh and to a daemon's module the probe goes and comes the same way, by rsync
    alone: DEST's own mtime is put back (to the second: what rsync -t keeps over the
    wire), nothing is left, the copy is rsync's."""
    src = _src(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    os.utime(str(dest), (1400000000, 1400000000))
    opts = ["-a", "--numeric-ids"]
    oracle = tmp_path / "oracle"
    if how == "ssh":
        target, extra = sshd.remote(str(dest)), ["-e", sshd.rsh]
        oracle_target = sshd.remote(str(oracle))
    else:
        target, extra = rsync_daemon.url(str(dest)), []
        oracle_target = rsync_daemon.url(str(oracle))
    summary = str(tmp_path / "s.json")
    # SRC without a slash: DEST's own entries and times are left to the probe alone
    cp = run_msrsync("-p", "2", "-f", "5", "--json", summary, "--rsync",
                     rsync_opts_string(opts + extra), src, target)
    assert cp.returncode == 0, describe(cp)
    with open(summary) as handle:
        preflight = json.load(handle)["preflight"]
    assert "hard_links" not in preflight["probed"] and "perms" in preflight["probed"]
    assert not _probes_left(dest)
    # (the oracle reaches DEST the same way: a daemon has its own ways with symlinks)
    oracle.mkdir()
    assert run_rsync(src, oracle_target, opts=opts + extra).returncode == 0
    assert_same_tree(os.fsencode(oracle), os.fsencode(dest), ignore_root_mtime=True)
    os.utime(str(dest), (1400000000, 1400000000))
    cp = run_msrsync("-p", "2", "--rsync", rsync_opts_string(opts + extra), src, target)
    assert cp.returncode == 0, describe(cp)
    assert int(os.stat(str(dest)).st_mtime) == 1400000000


# what rsync's dry run prints for targets no file system here can be made into
@pytest.mark.parametrize("lines, dropped", [
    # a case-insensitive target: the two names are one file, of the last one's content
    ([(b">fc........", b"CASE-NAME")], ["case"]),
    # one that refuses names that are not UTF-8 (the send failed: to be created)
    ([(b">f+++++++++", b"not-utf8-\\#377\\#376")], ["not_utf8"]),
    # FAT: no symlink, no owner, 2-second times are fine, no hard link
    ([(b"cL+++++++++", b"symlink"), (b".f...po....", b"owner"),
      (b"hf         ", b"hardlink.2")], ["owner", "hard_links", "symlinks"]),
    # a target that drops permissions shows "p" on every entry: the perms entry names it
    ([(b".f...p.....", b"perms"), (b".f...p.....", b"mtime"), (b".f...p.....", b"owner")],
     ["perms"]),
    # attributes of the probe's directory, and an mtime alone of another kind's entry
    ([(b".d..t......", b"./"), (b".f..t......", b"case-name")], []),
], ids=["case-insensitive", "not-utf8", "fat-like", "perms", "quiet"])
def test_the_reader_of_rsyncs_dry_run(lines, dropped):
    msrsync = load_msrsync()
    end = msrsync.parse_endpoint(b"/nowhere")
    options = msrsync.RsyncOptions("-aH")
    preflight = msrsync.Preflight("rsync", options, end, None)
    preflight.probed = [key for key, why in preflight.asked() if why is None]
    out = b"".join(msrsync.OUT_MARK + itemize + b"|" + name + b"\n" for itemize, name in lines)
    preflight._read(out, b"")
    order = [k.key for k in msrsync.PROBE_KINDS]
    assert sorted(preflight.dropped, key=order.index) == \
        sorted(dropped, key=order.index), preflight.dropped


@pytest.fixture
def sshfs_dir(sshd, tmp_path):
    """(mount point, served directory) of an sshfs mount of the test's own."""
    for mnt, served in serve_sshfs(sshd, str(tmp_path)):
        yield pathlib.Path(mnt), served


def test_an_sshfs_dest_is_probed_through_its_mount(tmp_path, sshfs_dir):
    """sshfs, a network file system over SFTP, keeps no xattr, ACL, hard link, device
    or FIFO, nor holes, and whole seconds: named, refused; what it keeps (owners,
    modes, symlinks, every name) is not named."""
    src = _src(tmp_path)
    mnt, served = sshfs_dir
    cp = run_msrsync("-p", "2", "--rsync", "-aHAXS", src + b"/", os.fsencode(mnt / "d"))
    assert cp.returncode == 48, describe(cp)
    assert _dropped(cp.stderr) == [
        "extended attributes (user.*)", "ACLs", "hard links", "devices", "FIFOs and sockets",
        "sub-second modification times", "holes of sparse files"], describe(cp)
    assert os.listdir(served) == []


def test_a_dest_that_takes_nothing_fails_before_the_first_byte(tmp_path):
    """An immutable DEST takes not even the probe's directory: rsync's own error, its
    code (11: the directory rsync sends into is not made), before any bucket; DEST is
    left as it was."""
    src = _src(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    subprocess.run(["chattr", "+i", str(dest)], check=True)
    try:
        cp = run_msrsync("-p", "2", "--rsync", "-a", src + b"/", os.fsencode(dest))
    finally:
        subprocess.run(["chattr", "-i", str(dest)])
    assert cp.returncode == 11, describe(cp)
    assert b"pre-flight" in cp.stderr and b"Operation not permitted" in cp.stderr, describe(cp)
    assert b"bucket" not in cp.stderr, describe(cp)
    assert os.listdir(str(dest)) == []


def test_a_signal_during_the_preflight_stops_it_and_removes_the_probe(tmp_path):
    """Ctrl-C while the probe's dry run goes on: that rsync stopped as the workers would
    be, the probe removed from DEST all the same, no rsync left, exit 20 and the run's
    own reports (nothing copied)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "rsync"
    # (only the pre-flight's dry run is slowed: it alone has " -n -c -i ")
    script.write_text('#!/bin/sh\ncase " $* " in *" -n -c -i "*) sleep 60;; esac\n'
                      'exec /usr/bin/rsync "$@"\n')
    script.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]))
    src = _src(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    summary = tmp_path / "s.json"
    proc = start_msrsync("-p", "2", "--json", summary, "--rsync", "-a", src + b"/",
                         os.fsencode(dest), env=env)
    try:
        assert wait_for(lambda: _probes_left(dest) or proc.poll() is not None, 20) and \
            proc.poll() is None, "the probe never arrived: %r" % (proc.communicate(),)
        # the dry run, waiting in its wrapper (a shell: no rsync by name yet)
        assert wait_for(lambda: [c for _, _, _, c in processes()
                                 if os.fsencode(script) in c and b"\0-n\0" in c], 20)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        end(proc, tmp_path)
    assert proc.returncode == 20, err
    assert b"Traceback" not in err and b"interrupted" in err, err
    assert not _probes_left(dest) and os.listdir(str(dest)) == [], os.listdir(str(dest))
    assert_no_rsync_left(tmp_path)
    with open(str(summary)) as handle:
        report = json.load(handle)
    assert report["status"] == "INTERRUPTED" and report["buckets_done"] == 0, report


def test_one_supervised_rsync_is_probed_too_where_dest_is_there(tmp_path, bindfs):
    """-p 1 with --stats is one rsync msrsync supervises: a DEST that is there is probed
    as the buckets' is; one still to make (rsync makes it) is not."""
    src = _src(tmp_path)
    mnt, under = bindfs("--chown-deny")
    os.mkdir(str(mnt / "there"))
    cp = run_msrsync("--stats", "--rsync", "-a", src + b"/", os.fsencode(mnt / "there"))
    assert cp.returncode == 48 and _dropped(cp.stderr) == ["owners", "groups"], describe(cp)
    assert os.listdir(str(under / "there")) == []
    cp = run_msrsync("--stats", "--rsync", "-a", src + b"/", os.fsencode(mnt / "new"))
    assert cp.returncode == 23 and b"pre-flight" not in cp.stderr, describe(cp)


def test_the_dry_run_starts_once_the_probe_is_sent_not_once_its_rsync_has_exited(
        tmp_path, monkeypatch):
    """The probe's send is over (DEST as it leaves it) before its rsync exits, which
    first waits out sleeps of 20 ms for its children: the dry run starts meanwhile,
    and the verdict is the same (nothing dropped on this file system)."""
    msrsync = load_msrsync()
    dest = tmp_path / "d"
    dest.mkdir()
    started = []                          # (argv, the send still running then)
    plain_watch = msrsync.watch

    def watched(proc):
        send = started[0][1] if started else None
        started.append((proc.args, proc, send is not None and send.poll() is None))
        return plain_watch(proc)
    monkeypatch.setattr(msrsync, "watch", watched)
    overlapped = []
    for attempt in range(3):
        del started[:]
        work = tmp_path / ("w%d" % attempt)
        work.mkdir()
        preflight = msrsync.Preflight("rsync", msrsync.RsyncOptions("-a"),
                                      msrsync.parse_endpoint(os.fsencode(dest)),
                                      os.fsencode(work))
        preflight.run()
        assert preflight.dropped == {} and preflight.runs == 2
        assert [b"-n" in argv for argv, _, _ in started] == [False, True]
        assert all(proc.returncode == 0 for _, proc, _ in started)
        overlapped.append(started[1][2])
        assert os.listdir(str(dest)) == []
    # (the send's first process sleeps at least once before it exits, unless its
    # children were gone at its first look)
    assert any(overlapped), overlapped
