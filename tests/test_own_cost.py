"""What msrsync itself costs, and what it asks of a latency-bound SRC: its own CPU
time by part in --json and --stats, a worker that waits for its rsync's end
without looking, a latency-bound SRC asked less (directories typed by the
listing, a re-run sized by DEST's copies), and the pre-flight's probe removed
without an rsync of its own (nothing copied when it refuses)."""

import json
import os
import shutil
import subprocess
import time

import pytest

from helpers import (age, assert_same_tree, build, differential, load_msrsync,
                     oracle_figures, run_msrsync, run_rsync)

RSYNC = shutil.which("rsync")
PARTS = ["main", "monitor", "scan", "bucket_lists", "workers", "reaper", "beside",
         "readahead", "other"]


def _tree(root, dirs=20, files=60):
    build(root, {"d%02d/f%03d" % (d, f): "%d %d\n" % (d, f) * (f + 1)
                 for d in range(dirs) for f in range(files)})
    age(root)


def _summary(tmp_path, *args):
    path = tmp_path / ("summary-%d.json" % len(list(tmp_path.glob("summary-*"))))
    cp = run_msrsync(*(["--json", path] + list(args)))
    assert cp.returncode == 0, cp.stderr
    return cp, json.loads(path.read_text())


def test_json_and_stats_say_msrsyncs_own_cpu_by_part_apart_from_its_rsyncs(tmp_path):
    """--json's cpu_seconds: msrsync's own CPU (its threads, its readahead
    helpers), each part of it, and its children's (rsync); the parts add up to
    the whole, and --stats prints the same line."""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    cp, s = _summary(tmp_path, "-p", "2", "--stats", src + b"/",
                     os.fsencode(tmp_path / "d"))
    cpu = s["cpu_seconds"]
    assert list(cpu["parts"]) == PARTS, cpu
    assert cpu["msrsync"] > 0 and cpu["children"] > 0, cpu
    assert all(v >= 0 for v in cpu["parts"].values()), cpu
    # the scan of 1,220 entries and the workers that ran its buckets
    assert cpu["parts"]["scan"] + cpu["parts"]["bucket_lists"] > 0, cpu
    assert cpu["parts"]["workers"] > 0 and cpu["parts"]["main"] > 0, cpu
    assert abs(sum(cpu["parts"].values()) - cpu["msrsync"]) < 0.05, cpu
    line = [l for l in cp.stdout.decode().splitlines() if l.startswith("msrsync's own CPU:")]
    assert len(line) == 1 and "rsync and ssh:" in line[0], cp.stdout
    assert_same_tree(tmp_path / "src", tmp_path / "d")


def test_a_dry_run_spends_its_cpu_on_the_scan_and_runs_no_worker(tmp_path):
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    _, s = _summary(tmp_path, "-p", "2", "-d", src + b"/", os.fsencode(tmp_path / "d"))
    parts = s["cpu_seconds"]["parts"]
    assert parts["scan"] + parts["bucket_lists"] > 0, parts
    assert parts["readahead"] == 0, parts     # no rsync reads: no readahead


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="os.pidfd_open needs Python 3.9")
def test_the_end_of_a_transfer_is_waited_for_not_looked_for(tmp_path):
    """A local rsync is three processes, and its transfer is over when the
    innermost one exits: once it is seen, its exit is polled (a pidfd), so
    that a worker sleeps until then; here a shell's grandchild plays it."""
    msrsync = load_msrsync()
    proc = subprocess.Popen(["sh", "-c", "sh -c 'sleep 0.4; exit 0' & wait; sleep 30"],
                            start_new_session=True)
    try:
        watch = msrsync._ProcessWatch(proc.pid)
        deadline = time.monotonic() + 5
        while watch.inner is None and time.monotonic() < deadline:
            assert not watch.transfer_over()
            time.sleep(0.01)
        assert watch.exit_fd is not None
        assert not msrsync.readable(watch.exit_fd, 0)
        assert msrsync.readable(watch.exit_fd, 5)       # its exit, within the wait
        assert watch.transfer_over()
        assert proc.poll() is None                      # the first process lives on
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        watch.close()
    assert watch.exit_fd is None and watch.wchan is None


def test_a_rerun_over_a_latency_bound_src_sizes_its_sample_from_dests_copies(
        tmp_path, monkeypatch):
    """On a SRC where a stat is a round trip (forced with
    MSRSYNC_STAT_ROUND_TRIP=0 and --scan-threads), a re-run stats the sample of
    each directory in DEST's copy, a local stat, not in SRC.  Seen here by a DEST
    whose copies are bigger than SRC's files (sparse, 900 KiB each): the 60 of
    huge/ are then taken for more than the first size cap (32 MiB) and listed
    one by one; SRC's own sizes would have made huge/ one small subtree.  DEST
    ends as rsync's."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "30")     # nothing goes out unwalked
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=3, files=5)
    build(src, {"huge/h%02d" % i: "tiny %d\n" % i for i in range(60)})
    age(src)
    dest = os.fsencode(tmp_path / "d")
    assert run_rsync(src + b"/", dest + b"/", opts=["-a"]).returncode == 0
    for i in range(60):
        with open(os.path.join(dest, b"huge", b"h%02d" % i), "r+b") as f:
            f.truncate(900 << 10)
    bdir = tmp_path / "b"
    bdir.mkdir()
    cp = run_msrsync("--scan-threads", "2", "-p", "3", "-k", "-b", bdir, "--rsync", "-a",
                     src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    (kept,) = list(bdir.iterdir())
    listed = [n for name in os.listdir(kept) if name.endswith(".list") and name[:1].isdigit()
              for n in (kept / name).read_bytes().split(b"\0") if n]
    assert sorted(n for n in listed if n.startswith(b"huge/")) == \
        [b"huge/h%02d" % i for i in range(60)], listed
    assert_same_tree(tmp_path / "src", tmp_path / "d")


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-a", "-x"]], ids=["a", "one-file-system"])
def test_a_latency_bound_scan_types_directories_by_the_listing(tmp_path, monkeypatch,
                                                              rsync_opts):
    """Where neither -x (a device) nor a DEST made inside SRC (an inode) asks
    more of a directory than its type, the read-ahead scan does not stat it;
    DEST ends as plain rsync's, into a new DEST and a stale one."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=8, files=7)
    build(src, {"d00/sub/deep/x": "x", "link": ("symlink", "d01"), "empty/": "dir/"})
    age(src)
    differential(tmp_path / "w", [src + b"/"], ["--scan-threads", "3", "-p", "3"],
                 rsync_opts)


def test_a_dest_made_inside_src_is_left_out_by_a_latency_bound_scan(tmp_path, monkeypatch):
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=4, files=5)
    dest = os.path.join(src, b"d01", b"copy")
    cp = run_msrsync("--scan-threads", "2", "-p", "2", src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    assert not os.path.exists(os.path.join(dest, b"d01", b"copy")), os.listdir(dest)
    assert sorted(os.listdir(dest)) == sorted(os.listdir(src))


@pytest.mark.parametrize("threads", [[], ["--scan-threads", "2"]], ids=["cold", "read-ahead"])
def test_a_preflight_that_refuses_runs_no_copy_and_leaves_nothing(tmp_path, threads):
    """A refusal of the pre-flight, whose probe now leaves a local DEST
    without an rsync of its own: no rsync of the copy ran, no DEST made, no
    bucket directory left, and no probe either.  The refusal is a DEST
    that keeps no owner, played by a wrapper that sends the probe with
    --no-o --no-g last (its dry run, as the run's options ask, then itemizes the
    owner and group); every other rsync is logged, and none may run.  With
    --scan-threads, SRC read ahead beside the pre-flight is given up with it."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the probe gives an entry another owner")
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=30, files=40)
    wrapper = tmp_path / "bin" / "rsync"
    wrapper.parent.mkdir()
    log = tmp_path / "rsyncs.log"
    wrapper.write_text('#!/bin/sh\ncase "$*" in\n*--version*|*" -n "*) exec %s "$@";;\n'
                       '*preflight-*) exec %s "$@" --no-o --no-g;;\n'
                       '*) echo "$*" >> %s; exec %s "$@";;\nesac\n'
                       % (RSYNC, RSYNC, log, RSYNC))
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (wrapper.parent, os.environ["PATH"]))
    bdir = tmp_path / "b"
    bdir.mkdir()
    dest = tmp_path / "new-dest"
    cp = run_msrsync(*(threads + ["-p", "3", "-b", bdir, "--rsync", "-a", src + b"/", dest]),
                     env=env)
    assert cp.returncode == 48, cp.stderr
    assert b"Traceback" not in cp.stderr
    assert b"pre-flight" in cp.stderr and b"owner" in cp.stderr, cp.stderr
    assert not log.exists(), log.read_text()
    assert not dest.exists()
    assert list(bdir.iterdir()) == []


def test_a_rerun_over_a_latency_bound_src_sends_small_subtrees_unwalked_sized_by_dest(
        tmp_path, monkeypatch):
    """A re-run over a latency-bound SRC (forced with MSRSYNC_STAT_ROUND_TRIP=0 and
    --scan-threads) neither walks nor reads ahead a subdirectory whose copy in DEST
    is small (a quarter of a bucket's caps) and has SRC's mtime: rsync -r walks
    it, counted meanwhile by its copy; a bigger one, or a copy cut short, is
    walked.  SRC gained files since
    DEST's copy, and lost some: the totals are still rsync's count, and DEST
    ends as plain rsync leaves the same DEST."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "30")     # none goes out for waiting workers
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=10, files=5)
    build(src, {"big/b%03d" % i: "b %d\n" % i for i in range(400)})
    age(src)
    dest = os.fsencode(tmp_path / "d")
    expected = os.fsencode(tmp_path / "rsync")       # the same DEST, for plain rsync
    for there in (dest, expected):
        assert run_rsync(src + b"/", there + b"/", opts=["-a"]).returncode == 0
    build(src, {"d03/new%d" % i: "new\n" for i in range(3)})
    os.unlink(os.path.join(src, b"d05", b"f000"))
    os.unlink(os.path.join(src, b"d07", b"f001"))
    # the root fits a bucket: its whole subtree goes out, counted partly by
    # DEST's copies; then, with 800 files more, it is split and they go out apart
    for more in (0, 800):
        build(src, {"big2/c%03d" % i: "c\n" for i in range(more)})
        age(src)
        oracle = oracle_figures([src + b"/"], tmp_path, ["-a"])
        _, s = _summary(tmp_path, "--scan-threads", "2", "-p", "3", "--rsync", "-a",
                        src + b"/", dest)
        assert s["scan_handed_out_unwalked"] == 10, s
        assert s["entries_total"] == s["entries_done"] == oracle["Number of files"], \
            (more, s, oracle)
    # a copy cut short (its directory's mtime not SRC's) is walked
    os.utime(os.path.join(dest, b"d04"), (1, 1))
    _, s = _summary(tmp_path, "--scan-threads", "2", "-p", "3", "--rsync", "-a", src + b"/",
                    dest)
    assert s["scan_handed_out_unwalked"] == 9, s
    assert run_rsync(src + b"/", expected + b"/", opts=["-a"]).returncode == 0
    assert_same_tree(tmp_path / "rsync", tmp_path / "d")


def test_a_waiting_worker_is_never_handed_a_subtree_whose_copy_in_dest_is_big(
        tmp_path, monkeypatch):
    """Workers that wait get subtrees the scan has not walked (forced here with
    MSRSYNC_IDLE_CUT=0); on a re-run over a latency-bound SRC, one whose copy in
    DEST is big (big/, 400 files) is walked instead, so that a tree whose top
    level is uneven is not copied by one rsync while the others wait: only the
    six small ones go out unwalked or counted by their copy."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    src = os.fsencode(tmp_path / "src")
    build(src, dict([("big/b%03d" % i, "b %d\n" % i) for i in range(400)] +
                    [("d%d/f%d" % (d, f), "f\n") for d in range(6) for f in range(5)]))
    age(src)
    dest = os.fsencode(tmp_path / "d")
    assert run_rsync(src + b"/", dest + b"/", opts=["-a"]).returncode == 0
    for _ in range(3):
        _, s = _summary(tmp_path, "--scan-threads", "2", "-p", "4", "--rsync", "-a",
                        src + b"/", dest)
        assert s["scan_handed_out_unwalked"] == 6, s
    assert_same_tree(tmp_path / "src", tmp_path / "d")


def test_a_rerun_over_a_latency_bound_src_hands_no_small_copy_alone_to_a_waiting_worker(
        tmp_path, monkeypatch):
    """Workers wait at once (MSRSYNC_IDLE_CUT=0), yet on a re-run over a latency-bound
    SRC a subdirectory whose copy in DEST is small is not handed to one of them
    alone: counted by its copy as soon as the walk reaches it, it goes out with its
    neighbours (rsyncs are starts, and walks of their root's path), here all of
    them in the root, which fits the caps: one rsync -r, not one a subdirectory.
    DEST ends as plain rsync leaves it."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    src = os.fsencode(tmp_path / "src")
    _tree(src, dirs=24, files=5)
    dest = os.fsencode(tmp_path / "d")
    assert run_rsync(src + b"/", dest + b"/", opts=["-a"]).returncode == 0
    build(src, {"d%02d/new" % d: "new\n" for d in (3, 17)})
    age(src)
    for _ in range(3):
        _, s = _summary(tmp_path, "--scan-threads", "2", "-p", "4", "--rsync", "-a",
                        src + b"/", dest)
        assert s["scan_handed_out_unwalked"] == 24, s
        assert s["buckets_total"] == 1, s
    assert_same_tree(tmp_path / "src", tmp_path / "d")
