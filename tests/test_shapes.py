"""How a run is cut: one plain rsync at -p 1 without caps, subtree
buckets named as arguments, and the --files-from fallback for long ones.

Each shape is checked two ways: the tree it leaves equals one plain rsync's,
and the --json summary (or the kept bucket directory) shows the shape was
really the one meant, so a test cannot pass by taking the other path."""

import json
import os
import pathlib
import shutil
import time

import pytest

from helpers import (age, assert_same_tree, build, differential, item_lines, oracle_figures,
                     run_msrsync, run_rsync)
from remote import serve_sshd, serve_sshfs


def _summary(tmp_path, *args):
    path = tmp_path / ("summary-%d.json" % len(list(tmp_path.glob("summary-*"))))
    cp = run_msrsync(*(["--json", path] + list(args)))
    return cp, json.loads(path.read_text())


def _tree(root, dirs=6, files=4):
    spec = {}
    for d in range(dirs):
        spec["d%d/" % d] = "dir/"
        spec["d%d/sub/" % d] = "dir/"
        for f in range(files):
            spec["d%d/f%d" % (d, f)] = "data %d %d\n" % (d, f)
            spec["d%d/sub/g%d" % (d, f)] = "more %d %d\n" % (d, f)
    spec["top"] = "top\n"
    spec["-dash/"] = "dir/"
    spec["-dash/x"] = "x"
    spec["sp ace/"] = "dir/"
    spec["sp ace/y"] = "y"
    build(root, spec)
    age(root)


def _extraneous(dest):
    # the same times on both sides (kept where nothing deletes them)
    build(dest, {"gone/": None, "gone/deep/": None, "gone/deep/f": "old", "stale": "old"},
          mtime=1000000000)


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-a", "--delete"], ["-aH", "--delete"],
                                        ["-a", "--delete", "--exclude=sub"]],
                         ids=["a", "delete", "H-delete", "exclude"])
def test_one_worker_without_caps_is_one_plain_rsync(tmp_path, rsync_opts):
    """-p 1 and no -f/-s: one rsync, with the user's deletion options, and the tree
    rsync leaves (extraneous DEST entries included)."""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    differential(tmp_path / "w", [src + b"/"], ["-p", "1"], rsync_opts,
                 prepare_dest=_extraneous)
    dest = os.fsencode(tmp_path / "d2")
    _extraneous(dest)
    cp, s = _summary(tmp_path, "--rsync", " ".join(rsync_opts), src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    assert s["buckets_total"] == 1 and s["rsync_processes"] == 1, s
    # rsync's own count of what it saw (the tree: 6 x 10 + 5 entries, and "."),
    # without the 6 sub/ directories and their 4 files each when excluded
    expected = 1 + 6 * 10 + 5 - (30 if "--exclude=sub" in rsync_opts else 0)
    assert s["entries_total"] == s["entries_done"] == expected, s


def test_one_worker_with_a_cap_still_cuts_buckets(tmp_path):
    """-p 1 -f N: buckets as asked (their journal is what --resume skips)."""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    cp, s = _summary(tmp_path, "-p", "1", "-f", "5", src + b"/", os.fsencode(tmp_path / "d"))
    assert cp.returncode == 0, cp.stderr
    assert s["buckets_total"] > 5 and s["rsync_processes"] > 5, s
    differential(tmp_path / "w", [src + b"/"], ["-p", "1", "-f", "5"], ["-a", "--delete"],
                 prepare_dest=_extraneous)


def test_several_srcs_one_worker_first_wins_like_rsync(tmp_path):
    """One plain rsync of several SRCs that share names: rsync's first-wins."""
    a, b = os.fsencode(tmp_path / "a"), os.fsencode(tmp_path / "b")
    build(a, {"same": "from a\n", "onlya": "a\n", "dir/": "dir/", "dir/f": "a\n"})
    build(b, {"same": "from b, longer\n", "onlyb": "b\n", "dir/": "dir/", "dir/f": "bb\n"})
    age(a)
    age(b)
    differential(tmp_path / "w", [a + b"/", b + b"/"], ["-p", "1"], ["-a"])


def _kept_bucket_dir(*args):
    """Run with -k -j; the bucket directory it kept."""
    cp = run_msrsync(*(["-k", "-j"] + list(args)))
    assert cp.returncode == 0, cp.stderr
    line = [l for l in cp.stdout.splitlines() if l.startswith(b"buckets dir is ")][0]
    return line[len(b"buckets dir is "):]


def _bucket_commands(tmp_path, *args):
    """Run with -k -j and return the bucket directory's lists (name -> entries)."""
    bdir = _kept_bucket_dir(*args)
    lists = {}
    for name in sorted(os.listdir(bdir)):
        if name.endswith(b".list") and name[:1].isdigit():
            with open(os.path.join(bdir, name), "rb") as f:
                lists[name] = [n for n in f.read().split(b"\0") if n]
    return lists


@pytest.mark.parametrize("procs,files", [("2", "12"), ("3", "30")])
def test_subtree_buckets_named_as_arguments_leave_rsyncs_tree(tmp_path, procs, files):
    """Buckets of subtrees (copied as BASE/./NAME arguments with -R) with names
    that start with a dash or hold a space: the tree rsync leaves."""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    lists = _bucket_commands(tmp_path, "-p", procs, "-f", files, src + b"/",
                             os.fsencode(tmp_path / "d"))
    names = [n for entries in lists.values() for n in entries]
    assert b"-dash" in names and b"sp ace" in names, lists   # subtree units
    differential(tmp_path / "w", [src + b"/"], ["-p", procs, "-f", files], ["-a", "--delete"],
                 prepare_dest=_extraneous)


def test_a_bucket_of_more_subtrees_than_fit_as_arguments(tmp_path):
    """Over 2,000 subtrees in one bucket: the --files-from list is used instead
    (the command line stays short); same tree as rsync."""
    src = os.fsencode(tmp_path / "src")
    spec = {}
    for d in range(2100):
        spec["d%04d/" % d] = "dir/"
    spec["d0000/f"] = "f\n"
    spec["d2099/g"] = "g\n"
    build(src, spec)
    age(src)
    # the whole tree (2,103 entries) does not fit: its 2,100 subtrees fill buckets
    lists = _bucket_commands(tmp_path, "-p", "2", "-f", "2060", src + b"/",
                             os.fsencode(tmp_path / "d"))
    assert max(len(v) for v in lists.values()) > 2000, {k: len(v) for k, v in lists.items()}
    differential(tmp_path / "w", [src + b"/"], ["-p", "2", "-f", "2060"], ["-a"])


def test_the_tail_is_cut_so_that_workers_finish_together(tmp_path, monkeypatch):
    """Growing caps, -p 4: what the scan still holds at its end (here three
    subtrees, under one bucket's cap) goes out as one bucket per subtree, not one
    bucket for a single worker; same tree as rsync."""
    # the scan first: no bucket cut early for workers that wait (the -p 4 of
    # the start, for a scan slower than IDLE_CUT, as on a loaded CI machine)
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "5")
    src = os.fsencode(tmp_path / "src")
    spec = {}
    for d in range(30):
        spec["d%02d/" % d] = "dir/"
        for f in range(100):
            spec["d%02d/f%03d" % (d, f)] = ""
    build(src, spec)
    age(src)
    lists = _bucket_commands(tmp_path, "-p", "4", src + b"/", os.fsencode(tmp_path / "d"))
    trees = sorted(len(v) for v in lists.values())
    # 3,030 entries: three buckets of nine 101-entry subtrees (the first cap,
    # 1,000), then the last three subtrees one per bucket
    assert trees.count(9) == 3 and trees.count(1) >= 3, lists
    differential(tmp_path / "w", [src + b"/"], ["-p", "4"], ["-a", "--delete"],
                 prepare_dest=_extraneous)


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-a", "--exclude=s1", "--exclude=f0?"]],
                         ids=["a", "exclude"])
def test_subtrees_handed_out_unwalked_leave_rsyncs_tree(tmp_path, monkeypatch, rsync_opts):
    """Growing caps and waiting workers (forced at once here by
    MSRSYNC_IDLE_CUT=0): subtrees not walked yet go out as they are, for rsync -r
    to walk; the tree is rsync's, filters and awkward names included."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    for d in range(12):
        for s in range(3):
            os.makedirs(os.path.join(src, b"deep%02d" % d, b"s%d" % s, b"x"))
            for f in range(12):
                with open(os.path.join(src, b"deep%02d/s%d/x/f%02d" % (d, s, f)), "wb") as h:
                    h.write(b"y" * f)
    age(src)
    cp, s = _summary(tmp_path, "-p", "4", "--rsync", " ".join(rsync_opts), src + b"/",
                     os.fsencode(tmp_path / "d"))
    assert cp.returncode == 0, cp.stderr
    assert s["scan_handed_out_unwalked"] >= 1, s
    differential(tmp_path / "w", [src + b"/"], ["-p", "4"], rsync_opts)


def _slow_stat_tree(src):
    _tree(src, dirs=12)
    build(src, {"d0/link": ("symlink", "f0"), "d1/dangling": ("symlink", "nowhere"),
                "d2/big": b"z" * 200000, "d3/sub/deeper/": "dir/"})
    os.mkfifo(os.path.join(src, b"d4", b"fifo"))
    # more files than the first cap (1,000): listed one by one, so the scan's
    # view of each entry (its subdirectory included) decides what is sent
    build(src, dict([("wide/sub/deep/x", "x"), ("wide/sub/y", "y")] +
                    [("wide/w%04d" % i, "w") for i in range(1100)]))
    age(src)


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-a", "--delete"],
                                        ["-a", "-m", "--exclude=g1", "--exclude=sub"]],
                         ids=["a", "delete", "prune-exclude"])
def test_a_scan_whose_stats_are_round_trips_counts_files_without_them(
        tmp_path, monkeypatch, rsync_opts):
    """A read-ahead scan (--scan-threads, on by default on NFS or sshfs) whose stats
    are network round trips stops stat'ing files, forced here with
    MSRSYNC_STAT_ROUND_TRIP=0: buckets are cut by counts, the tree is rsync's, and
    the byte total, unknown to the scan, is rsync's."""
    src = os.fsencode(tmp_path / "src")
    _slow_stat_tree(src)
    args = ["--scan-threads", "4", "-p", "3", "--rsync", " ".join(rsync_opts), src + b"/"]
    # a stat on a local disk is never taken for a round trip, however slow
    # it looks (as on a loaded machine: a CI run saw the default 0.5 ms)
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "1e-9")
    cp, fast = _summary(tmp_path, *(args + [os.fsencode(tmp_path / "d1")]))
    assert cp.returncode == 0, cp.stderr
    assert fast["scan_names_only"] is False, fast
    # and workers that wait at once: held subtrees are released, directories
    # split, so the scan's view of each entry decides what is sent
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    cp, slow = _summary(tmp_path, *(args + [os.fsencode(tmp_path / "d2")]))
    assert cp.returncode == 0, cp.stderr
    assert slow["scan_names_only"] is True, slow
    assert slow["bytes_total"] == fast["bytes_total"] > 200000
    differential(tmp_path / "w", [src + b"/"], ["--scan-threads", "4", "-p", "3"], rsync_opts,
                 prepare_dest=_extraneous)


def test_subtrees_handed_out_unwalked_are_counted_by_rsync(tmp_path, monkeypatch):
    """Workers that wait get subdirectories the scan has not walked (forced here
    with MSRSYNC_IDLE_CUT=0); the scan counts each as 1 entry and 0 bytes, so the
    totals of --json take rsync's own count of them: entries and bytes are plain
    rsync's (a loaded CI machine once reported 1,813 bytes of 201,997)."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    src = os.fsencode(tmp_path / "src")
    _slow_stat_tree(src)
    oracle = oracle_figures([src + b"/"], tmp_path, ["-a"])
    cp, summary = _summary(tmp_path, "--scan-threads", "4", "-p", "3", "--rsync", "-a",
                           src + b"/", os.fsencode(tmp_path / "d"))
    assert cp.returncode == 0, cp.stderr
    assert summary["scan_handed_out_unwalked"] > 0, summary
    assert summary["entries_total"] == oracle["Number of files"] == 1236
    assert summary["entries_done"] == summary["entries_total"]
    assert summary["bytes_total"] == oracle["Total file size"] == 201997
    assert_same_tree(tmp_path / "src", tmp_path / "d")


def _wide_tree(src, dirs):
    """A root holding directories alone, each with three small subdirectories."""
    spec = {}
    for d in range(dirs):
        for s in range(3):
            spec["d%02d/s%d/" % (d, s)] = "dir/"
            for f in range(2):
                spec["d%02d/s%d/f%d" % (d, s, f)] = "%d %d %d\n" % (d, s, f)
    build(src, spec)
    age(src)


def test_unwalked_subtrees_carrying_the_split_root_are_counted_like_rsync(tmp_path,
                                                                         monkeypatch):
    """The root holds directories alone: once split, its own entry rides on the next
    unit, here a subtree handed out unwalked.  rsync's count of that bucket holds no
    root, so the totals were one short (200 entries against rsync's 201)."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "0")
    src = os.fsencode(tmp_path / "src")
    _wide_tree(src, 20)
    oracle = oracle_figures([src + b"/"], tmp_path, ["-a"])
    cp, s = _summary(tmp_path, "-p", "2", "--rsync", "-a", src + b"/",
                     os.fsencode(tmp_path / "d"))
    assert cp.returncode == 0, cp.stderr
    assert s["scan_handed_out_unwalked"] > 0, s
    assert s["entries_total"] == s["entries_done"] == oracle["Number of files"] == 201
    assert_same_tree(tmp_path / "src", tmp_path / "d")


def _stale_copy_of(src, dest):
    """DEST: a copy of SRC as it was; then SRC changes at both ends of its root's
    list, where the walk and the subtrees handed out unwalked each begin."""
    cp = run_rsync(src + b"/", dest, opts=["-a"])
    assert cp.returncode == 0, cp.stderr
    for rel, data in ((b"d00/s0/f0", b"new front\n"), (b"d23/s2/f1", b"new back\n"),
                      (b"d22/s1/added", b"added\n"), (b"d12/s0/f0", b"middle\n")):
        with open(os.path.join(src, rel), "wb") as f:
            f.write(data)
    os.unlink(os.path.join(src, b"d21/s0/f0"))
    age(src, time.time() - 3600)


@pytest.mark.parametrize("rsync_opts", [["-a"],
                                        ["-a", "--exclude=s1", "--exclude=/d23/s0/"]],
                         ids=["a", "exclude"])
def test_a_rerun_hands_out_the_roots_subtrees_unwalked_at_once(tmp_path, monkeypatch,
                                                                rsync_opts):
    """Into a DEST that holds a copy, the workers waiting at the start get 1/-p of
    the root's subdirectories each, unwalked, from the end of its list, with no
    IDLE_CUT wait (set far off here); the walk takes the rest from the front.  The
    changes in both parts reach DEST as rsync's do, and the totals are rsync's."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "100")
    src = os.fsencode(tmp_path / "src")
    _wide_tree(src, 24)
    stale = os.fsencode(tmp_path / "stale")
    _stale_copy_of(src, stale)
    oracle = oracle_figures([src + b"/"], tmp_path, rsync_opts)
    summary = tmp_path / "summary.json"
    differential(tmp_path / "w", [src + b"/"], ["--json", summary, "-p", "2"], rsync_opts,
                 prepare_dest=lambda dest: shutil.copytree(stale, dest, symlinks=True))
    s = json.loads(summary.read_text())
    # 24 subdirectories: 12, then 6 of the 12 left, to the two workers at once
    assert s["scan_handed_out_unwalked"] >= 18, s
    assert s["buckets_total"] < 12, s
    assert s["entries_total"] == s["entries_done"] == oracle["Number of files"]


def test_a_rerun_shares_the_roots_subtrees_out_by_their_subdirectories(tmp_path,
                                                                      monkeypatch):
    """The subtrees handed out unwalked are weighed by the directories each holds
    (its link count): the last two of 16 hold 20 each, the others one, so the first
    worker gets the last one alone and the second the next two, where sharing by
    count gave the first worker the last eight, most of the tree."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "100")
    src = os.fsencode(tmp_path / "src")
    spec = {}
    for d in range(16):
        for s in range(20 if d >= 14 else 1):
            spec["d%02d/s%02d/f" % (d, s)] = "%d %d\n" % (d, s)
    build(src, spec)
    age(src)
    dest = os.fsencode(tmp_path / "d")
    assert run_rsync(src + b"/", dest, opts=["-a"]).returncode == 0
    lists = _bucket_commands(tmp_path, "-p", "2", "--rsync", "-a", src + b"/", dest)
    first = [lists[name] for name in sorted(lists, key=lambda n: int(n.split(b".")[0]))]
    assert first[:2] == [[b"d15"], [b"d13", b"d14"]], lists
    assert_same_tree(tmp_path / "src", tmp_path / "d")


def test_an_initial_copy_into_a_nonempty_dest_walks_its_subtrees(tmp_path, monkeypatch):
    """DEST holds entries, but not the root's subdirectories: their files are to be
    copied, so the scan walks and counts them rather than guess (the control of the
    test above)."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "100")
    src = os.fsencode(tmp_path / "src")
    _wide_tree(src, 24)
    summary = tmp_path / "summary.json"
    differential(tmp_path / "w", [src + b"/"], ["--json", summary, "-p", "2"], ["-a"],
                 prepare_dest=lambda dest: age(build(dest, {"other": "x"})))
    s = json.loads(summary.read_text())
    assert s["scan_names_only"] is True, s
    assert s["scan_handed_out_unwalked"] == 0, s


@pytest.mark.parametrize("extra,rsync_opts", [([], ["-aH"]), ([], ["-aL"]),
                                              (["-f", "50"], ["-a"])],
                         ids=["hard-links", "copy-links", "caps-given"])
def test_a_scan_keeps_stating_files_where_it_needs_them(tmp_path, monkeypatch, extra,
                                                        rsync_opts):
    """-H groups links by inode, -L follows links, and -f/-s caps are the user's
    promise: there every file is still stat'ed, however slow."""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    src = os.fsencode(tmp_path / "src")
    _slow_stat_tree(src)
    os.unlink(os.path.join(src, b"d1", b"dangling"))
    cp, s = _summary(tmp_path, *(["--scan-threads", "4", "-p", "3"] + extra +
                                 ["--rsync", " ".join(rsync_opts), src + b"/",
                                  os.fsencode(tmp_path / "d")]))
    assert cp.returncode == 0, cp.stderr
    assert s["scan_names_only"] is False, s


def test_a_scan_without_file_stats_still_sends_huge_files_one_per_bucket(tmp_path,
                                                                         monkeypatch):
    """Without stats a directory of six 40 MiB files would be one 240 MiB unit;
    four are stat'ed as its sample and the other two get their mean size, so
    each file, bigger than the first size cap (32 MiB), gets a bucket of its own.
    (No idle hand-out: on a loaded machine a worker waiting IDLE_CUT got `huge`
    whole, unwalked, before the scan reached it.)"""
    monkeypatch.setenv("MSRSYNC_STAT_ROUND_TRIP", "0")
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "3600")
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    os.makedirs(os.path.join(src, b"huge"))
    for i in range(6):
        with open(os.path.join(src, b"huge", b"h%d" % i), "wb") as f:
            f.truncate(40 << 20)          # sparse: quick to make and to copy
    age(src)
    lists = _bucket_commands(tmp_path, "--scan-threads", "2", "-p", "3", src + b"/",
                             os.fsencode(tmp_path / "d"))
    alone = sorted(e for entries in lists.values() for e in entries
                   if e.startswith(b"huge/") and len(entries) == 1)
    assert alone == [b"huge/h%d" % i for i in range(6)], lists
    differential(tmp_path / "w", [src + b"/"], ["--scan-threads", "2", "-p", "3"], ["-aS"])


def _stale_dirs(src):
    """A DEST made up to date, then given extraneous entries in a split directory,
    in a subtree and at the root, which the deletion pass removes once every
    bucket is done."""
    def prepare(dest):
        assert run_rsync(src + b"/", dest + b"/", opts=["-a"]).returncode == 0
        for extra in (b"d0/extra", b"d3/sub/extra", b"extra"):
            with open(os.path.join(dest, extra), "wb") as f:
                f.write(b"x")
    return prepare


def test_the_directory_pass_leaves_out_directories_already_like_srcs(tmp_path):
    """Once every bucket is done, a directory whose DEST copy has SRC's mtime, mode,
    owner and group is left out of the directory pass: an up-to-date re-run runs no
    pass at all, and DEST still ends as rsync leaves it.  (Where the pass is still
    needed, on a fresh copy whose later buckets make entries in a directory an
    earlier one set, the differential tests of every shape fail without it.)"""
    src = os.fsencode(tmp_path / "src")
    _tree(src)
    dest = os.fsencode(tmp_path / "d")
    opts = ["-p", "3", "-f", "5", src + b"/", dest]     # d0..d5 are split
    cp, first = _summary(tmp_path, *opts)
    assert cp.returncode == 0, cp.stderr
    cp, again = _summary(tmp_path, *opts)
    assert cp.returncode == 0, cp.stderr
    assert again["rsync_processes"] == again["buckets_total"], again       # no pass
    differential(tmp_path / "w", [src + b"/"], ["-p", "3", "-f", "5"], ["-a", "--delete"],
                 prepare_dest=_stale_dirs(src))


def _dirs_of_dirs(src):
    """A root and a directory "big" that hold directories alone, both over the
    first cap (1,000 entries): the scan splits them."""
    spec = {}
    for g in range(4):
        for s in range(2):
            for f in range(90):
                spec["g%d/s%d/f%02d" % (g, s, f)] = "g%d s%d %d\n" % (g, s, f)
    for s in range(4):
        for f in range(300):
            spec["big/s%d/f%03d" % (s, f)] = "big %d %d\n" % (s, f)
    build(src, spec)
    os.chmod(os.path.join(src, b"big"), 0o750)
    os.chmod(os.path.join(src, b"g1"), 0o700)
    age(src)


def _old_copy(dest):
    """DEST from before: "big" and the root with other modes and times."""
    os.makedirs(os.path.join(dest, b"big", b"s0"))
    os.chmod(os.path.join(dest, b"big"), 0o777)
    os.chmod(dest, 0o700)


@pytest.mark.parametrize("idle", ["5", "0"], ids=["scan-first", "waiting-workers"])
def test_a_directory_of_directories_alone_gets_no_rsync_of_its_own(tmp_path, monkeypatch,
                                                                   idle):
    """A split directory holding directories alone is no "dir/" entry (an rsync -d
    stat'ing each of its subdirectories: over sshfs the root's took a worker 0.23 s,
    41 rsyncs at -p 8 where 40 were five rounds): its subtrees create it and the
    directory pass gives it its mode and time.  Growing caps only; the tree and
    the item lines are rsync's, into a new DEST and into an old copy."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", idle)
    src = os.fsencode(tmp_path / "src")
    _dirs_of_dirs(src)
    lists = _bucket_commands(tmp_path, "-p", "3", src + b"/", os.fsencode(tmp_path / "d"))
    names = [n for entries in lists.values() for n in entries]
    if idle != "0":     # (waiting workers get the root's subtrees unwalked)
        assert b"big/s0" in names, lists      # "big" was split
    assert not {b"./", b"big/", b"."} & set(names), lists
    for prepare, where in ((None, "new"), (_old_copy, "old")):
        result = differential(tmp_path / where, [src + b"/"], ["-p", "3"], ["-ai"],
                              prepare_dest=prepare)
        assert sorted(item_lines(result.msrsync.stdout)) == \
            sorted(item_lines(result.oracle.stdout)), result.msrsync.stdout


def _pass_ran(tmp_path, *args):
    """Run with -k -j; whether the directory pass ran an rsync (its log)."""
    bdir = _kept_bucket_dir(*args)
    return any(n.startswith(b"dirs-") and n.endswith(b".log") for n in os.listdir(bdir))


@pytest.mark.parametrize("rsync_opts,pass_runs", [
    (["-a"], False), (["-a", "-O"], True), (["-rlpgoD"], True), (["-ai"], True),
    (["-a", "--chmod=D0700"], True)], ids=["a", "omit-dir-times", "no-times", "itemize",
                                           "chmod"])
def test_directories_that_differ_by_their_mtime_alone_get_it_without_an_rsync(
        tmp_path, rsync_opts, pass_runs):
    """After a copy the split directories differ from SRC's by their mtime alone
    (buckets wrote in them): with -t, msrsync gives them SRC's (as the directory
    pass would) and runs no pass (over sshfs, rsync -d on "." stat'ed every entry
    of the root: 0.15 s alone at the end); without -t, with -O, with lines per
    item or where modes differ the pass still runs.  The tree is rsync's (where
    directory times are copied: else they are the time of the run)."""
    src = os.fsencode(tmp_path / "src")
    _dirs_of_dirs(src)
    os.makedirs(os.path.join(src, b"g2", b"files"))
    build(src, dict(("g2/files/h%04d" % i, "h") for i in range(1100)))   # split: "dir/"
    age(src)
    opts = ["--rsync", " ".join(rsync_opts)]
    assert _pass_ran(tmp_path, *(["-p", "3"] + opts + [src + b"/",
                                                        os.fsencode(tmp_path / "d")])) \
        is pass_runs
    differential(tmp_path / "w", [src + b"/"], ["-p", "3"], rsync_opts,
                 prepare_dest=_old_copy, compare="-O" not in rsync_opts and "-a" in rsync_opts[0])


def test_a_dry_run_of_rsync_sets_no_directory_time(tmp_path):
    """--rsync "-an": DEST's directories keep their times (no pass changes them)."""
    src = os.fsencode(tmp_path / "src")
    _dirs_of_dirs(src)
    dest = os.fsencode(tmp_path / "d")
    run_rsync(src + b"/", dest, opts=["-a"])
    os.utime(os.path.join(dest, b"big"), ns=(10 ** 18, 10 ** 18))
    os.utime(dest, ns=(10 ** 18, 10 ** 18))
    cp = run_msrsync("-p", "3", "--rsync", "-an", src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    assert os.lstat(os.path.join(dest, b"big")).st_mtime_ns == 10 ** 18
    assert os.lstat(dest).st_mtime_ns == 10 ** 18


def _small_tree(root, dirs=6, files=40):
    build(root, dict(("d%d/f%02d" % (d, f), "small %d %d\n" % (d, f))
                     for d in range(dirs) for f in range(files)))
    age(root)


def test_a_local_scan_into_a_dest_holding_a_copy_samples_file_sizes(tmp_path):
    """Where DEST holds a copy (an update, a re-run), the scan stats a sample of
    each directory's files, their type from the listing (scan_names_only): rsync's
    quick check says what is sent.  A file grown big, a changed one, a new
    directory and a symlink: the tree is rsync's, and the byte total is rsync's,
    the one a scan stat'ing every file finds into an empty DEST."""
    old = os.fsencode(tmp_path / "old")
    _small_tree(old)
    src = os.fsencode(tmp_path / "src")
    _small_tree(src)
    build(src, {"d0/zbig": "B" * (3 << 20), "d1/f03": "changed\n", "new/g": "g\n",
                "d2/link": ("symlink", "f00")})
    age(src)

    def copy_of_old(dest):
        run_rsync(old + b"/", dest, opts=["-a"])

    copy_of_old(os.fsencode(tmp_path / "d1"))
    cp, update = _summary(tmp_path, "-p", "3", src + b"/", os.fsencode(tmp_path / "d1"))
    assert cp.returncode == 0, cp.stderr
    cp, fresh = _summary(tmp_path, "-p", "3", src + b"/", os.fsencode(tmp_path / "d2"))
    assert cp.returncode == 0, cp.stderr
    assert update["scan_names_only"] is True, update
    assert fresh["scan_names_only"] is False, fresh
    assert update["bytes_total"] == fresh["bytes_total"] > 3 << 20
    differential(tmp_path / "w", [src + b"/"], ["-p", "3"], ["-a", "--delete"],
                 prepare_dest=copy_of_old)


def test_a_re_run_cuts_bigger_buckets_from_the_first(tmp_path):
    """Into a DEST holding a copy an entry costs rsync a stat or two, its start
    ~10 ms of CPU: a bucket is held open up to RERUN_FILES entries, past the
    growing caps (DEFAULT_FILES at first), while no worker waits.  3,000 files
    cut in 1,000s into an empty DEST go in one bucket's worth on the re-run, its
    tail shared by the -p 2 workers.  (-d: no worker ever waits, so buckets are
    cut by the sizes alone, not by how fast the workers took them.)"""
    src = os.fsencode(tmp_path / "src")
    _small_tree(src, dirs=20, files=150)
    dest = os.fsencode(tmp_path / "d")
    cp, first = _summary(tmp_path, "-d", "-p", "2", src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    assert first["buckets_total"] >= 3, first
    run_rsync(src + b"/", dest, opts=["-a"])
    cp, again = _summary(tmp_path, "-d", "-p", "2", src + b"/", dest)
    assert cp.returncode == 0, cp.stderr
    assert again["scan_names_only"] is True, again
    assert again["buckets_total"] == 2, again
    assert again["entries_total"] == first["entries_total"] == 3021


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    yield from serve_sshd(tmp_path_factory)


@pytest.fixture
def sshfs_dir(sshd, tmp_path):
    """A directory of the test's own, mounted over sshfs from the private sshd."""
    for mnt, _ in serve_sshfs(sshd, str(tmp_path)):
        yield pathlib.Path(mnt)


@pytest.mark.slow
def test_buckets_are_not_held_where_dest_is_a_network_file_system(tmp_path, sshfs_dir):
    """On NFS or sshfs an entry is a round trip: there balance, not rsync
    start-ups, makes the time, and the re-run's buckets keep the caps (1,000s)."""
    src = os.fsencode(tmp_path / "src")
    _small_tree(src, dirs=20, files=150)
    for dest in (os.fsencode(tmp_path / "local"), os.fsencode(sshfs_dir / "d")):
        run_rsync(src + b"/", dest, opts=["-a"])
        cp, again = _summary(tmp_path, "-d", "-p", "2", src + b"/", dest)
        assert cp.returncode == 0, cp.stderr
        assert again["scan_names_only"] is True, again
        held = dest.startswith(os.fsencode(tmp_path / "local"))
        assert (again["buckets_total"] == 2) == held, (dest, again)


def test_over_sshfs_workers_get_subtrees_at_once_but_the_one_walked_next(tmp_path,
                                                                           sshfs_dir,
                                                                           monkeypatch):
    """SRC over sshfs, whose type says a stat is a round trip: the workers waiting at
    the start get subtrees unwalked at once, however long IDLE_CUT (the scan's first
    buckets are a round trip an entry away), from the end of the root's list, and
    never the first, which the walk enters next; DEST ends as rsync leaves it."""
    served = os.fsencode(tmp_path / "served")
    spec = {}
    for d in range(3):
        for f in range(4):
            spec["d%d/s/f%d" % (d, f)] = "%d %d\n" % (d, f)
    build(os.path.join(served, b"src"), spec)
    age(os.path.join(served, b"src"))
    src = os.fsencode(sshfs_dir / "src")
    summary = tmp_path / "summary.json"
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "3600")
    differential(tmp_path / "w", [src + b"/"], ["--json", summary, "-p", "4"], ["-a"])
    s = json.loads(summary.read_text())
    assert s["scan_handed_out_unwalked"] == 2, s


def _served_with_modes(tmp_path, sshfs_dir, spec, modes):
    """SRC built from spec in the directory sshfs_dir serves, its directories given
    modes (rel -> mode), aged; its path through the mount."""
    served = os.path.join(os.fsencode(tmp_path / "served"), b"src")
    build(served, spec)
    for rel, mode in modes.items():
        os.chmod(os.path.join(served, rel), mode)
    age(served)
    return os.fsencode(sshfs_dir / "src")


def test_over_sshfs_subtrees_handed_out_at_once_go_one_level_deeper_where_they_can(
        tmp_path, sshfs_dir, monkeypatch):
    """SRC over sshfs, workers waiting at the start: a subtree handed out at once
    that holds one subdirectory alone goes out as it (rsync opens each file by a walk
    from the subtree it was named, a round trip a level), one holding a file too
    goes out whole; with --delete, what DEST holds beside the subdirectory of one
    named deeper still goes, and its mode and times are SRC's: DEST ends as rsync
    leaves it."""
    spec = {"d3/f": "f\n", "d3/u/f": "u\n"}
    for d in range(3):
        for f in range(4):
            spec["d%d/s/f%d" % (d, f)] = "%d %d\n" % (d, f)
    src = _served_with_modes(tmp_path, sshfs_dir, spec, {b"d1": 0o750, b"d2": 0o711})
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "3600")
    lists = _bucket_commands(tmp_path, "-p", "4", src + b"/", os.fsencode(tmp_path / "d"))
    names = sorted(n for entries in lists.values() for n in entries)
    assert b"d1/s" in names and b"d2/s" in names and b"d3" in names, lists
    assert b"d1" not in names and b"d2" not in names, lists

    def stale(dest):
        build(dest, {"d1/old": "old", "d2/gone/x": "old", "d2/s/old": "old"},
              mtime=1000000000)
    differential(tmp_path / "w", [src + b"/"], ["-p", "4"], ["-a", "--delete"],
                 prepare_dest=stale)


def test_over_sshfs_directories_of_directories_go_out_as_them_and_end_as_rsyncs(
        tmp_path, sshfs_dir, monkeypatch):
    """SRC over sshfs: a directory holding subdirectories alone goes out as them (a
    round trip a file fewer for rsync, which opens each file by a walk from the
    subtree it was named), at every depth; the directory pass gives those
    directories their modes and times: DEST ends as rsync leaves it."""
    spec = {"top": "top\n", "x/y/f": "y\n", "x/y/g": "g\n"}
    for leaf in ("c", "d"):
        for f in range(3):
            spec["a/b/%s/f%d" % (leaf, f)] = "%s %d\n" % (leaf, f)
    src = _served_with_modes(tmp_path, sshfs_dir, spec,
                             {b"a": 0o750, b"a/b": 0o711, b"x": 0o700})
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", "3600")
    lists = _bucket_commands(tmp_path, "-p", "2", src + b"/", os.fsencode(tmp_path / "d"))
    names = sorted(n for entries in lists.values() for n in entries)
    assert b"a/b/c" in names and b"a/b/d" in names, lists
    assert b"a" not in names and b"a/b" not in names, lists
    differential(tmp_path / "w", [src + b"/"], ["-p", "2"], ["-a"])


@pytest.mark.parametrize("extra", [["-f", "50"], ["--rsync", "-aH"]], ids=["caps-given", "H"])
def test_a_local_scan_stats_every_file_where_it_needs_them(tmp_path, extra):
    src = os.fsencode(tmp_path / "src")
    _small_tree(src)
    dest = os.fsencode(tmp_path / "d")
    run_rsync(src + b"/", dest, opts=["-a"])
    cp, s = _summary(tmp_path, *(["-p", "3"] + extra + [src + b"/", dest]))
    assert cp.returncode == 0, cp.stderr
    assert s["scan_names_only"] is False, s
