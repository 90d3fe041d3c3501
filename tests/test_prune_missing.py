"""-m/--prune-empty-dirs and --delete-missing-args, against plain rsync.

-m: rsync leaves out of the transfer every directory with nothing but directories
left empty below it (after filtering), except "." of "SRC/" and directories a
receiver-side rule protects ("P dir/"); with --delete their DEST copies go.  msrsync's
scanner prunes them itself (the workers run with -m; the directory pass, which sends
directories only, without).

--delete-missing-args: a missing SRC, or a missing name of the user's --files-from
list, deletes its DEST path (a non-empty directory only with --force or --delete);
the missing SRC is an entry of the file list, so "SRC1 missing DEST" makes DEST a
directory even when SRC1 is a single file.
"""

import os
import shlex

import pytest

from helpers import (SETTINGS, age, assert_same_tree, build, contents, dests, differential, p,
                     run_msrsync, run_rsync)


def pruning_tree(root):
    d = "dir/"
    spec = {"a/": d, "a/e/": d, "a/e/e2/": d, "a/x/": d, "a/x/f1": "1", "a/x/f2": "2",
            "b/": d, "b/c/": d, "b/c/d/": d, "b/c/d/deep": "deep", "empty/": d,
            "keep/": d, "keep/sub/": d, "only.o/": d, "objs/": d, "objs/x.o": "o",
            "objs/y.o": "o", "many/": d, "top": "top"}
    for i in range(25):
        spec["many/e%02d/" % i] = d
    spec["many/e07/z"] = "z"
    build(root, spec)
    age(root)


@pytest.mark.parametrize("setting", ["p1-f1", "p2-f7", "p8-f1", "p8-s1K"])
@pytest.mark.parametrize("rsync_opts", [
    "-a -m",
    "-a -m --exclude=*.o",
    "-a -m --filter='P keep/' --exclude=*.o",
    "-a -m --include=*/ --include=f1 --exclude=*",
])
def test_prune_empty_dirs_like_rsync(tmp_path, setting, rsync_opts):
    src = tmp_path / "src"
    pruning_tree(src)
    differential(tmp_path, contents(src), SETTINGS[setting], shlex.split(rsync_opts))


@pytest.mark.parametrize("setting", ["p2-f1", "p8-f1"])
def test_prune_empty_dirs_src_without_slash_prunes_an_empty_top(tmp_path, setting):
    src = tmp_path / "src"
    pruning_tree(src)
    differential(tmp_path, [os.fsencode(p(src, "empty")), os.fsencode(p(src, "a"))],
                 SETTINGS[setting], ["-a", "-m"])


@pytest.mark.parametrize("setting", ["p1-f1", "p2-f7", "p8-f1"])
@pytest.mark.parametrize("rsync_opts", ["-a -m --delete", "-a -m --delete --exclude=*.o",
                                        "-a -m --delete --filter='P empty/'"])
def test_prune_empty_dirs_with_delete_removes_dest_copies(tmp_path, setting, rsync_opts):
    """DEST made without -m holds every empty directory: rsync -m --delete deletes the
    pruned ones (protected ones aside) and what they hold."""
    src = tmp_path / "src"
    pruning_tree(src)

    def prepare(dest):
        build(dest, {"a/": "dir/", "a/e/": "dir/", "a/e/old": "old", "many/": "dir/",
                     "many/e03/": "dir/", "many/e03/q/": "dir/", "many/e03/q/x": "x",
                     "empty/": "dir/", "gone/": "dir/", "gone/f": "f"})
        age(dest)

    differential(tmp_path, contents(src), SETTINGS[setting], shlex.split(rsync_opts),
                 prepare_dest=prepare)


@pytest.mark.parametrize("setting", ["p2-f7", "p8-f1", "p8-s1K"])
@pytest.mark.parametrize("stale", [False, True], ids=["new-dest", "stale-dest"])
def test_prune_with_delete_and_srcs_sharing_dests_root_like_rsync(tmp_path, setting, stale):
    """SRC1/ SRC2/ with -m --delete: the deletion at DEST's root, one rsync over both
    SRCs listing the root with -d, ran with -m, took every root directory for empty
    and deleted all the copies had made.  Root directories pruned in every SRC still
    go, with what their stale DEST copies hold ("empty" of SRC1, "e2" of SRC2)."""
    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    pruning_tree(s1)
    build(s2, {"x/": "dir/", "x/y/": "dir/", "x/y/g": "g", "e2/": "dir/",
               "e2/nothing/": "dir/", "t2": "t"})
    age(s2)

    def prepare(dest):
        if stale:
            build(dest, {"empty/": "dir/", "empty/old": "old", "e2/": "dir/",
                         "e2/nothing/": "dir/", "gone/": "dir/", "gone/f": "f",
                         "x/": "dir/", "x/old": "old"})
            age(dest)

    differential(tmp_path / "w", contents(s1) + contents(s2), SETTINGS[setting],
                 ["-a", "-m", "--delete"], prepare_dest=prepare if stale else None)


def test_prune_compare_can_fail(tmp_path):
    """The trees above tell -m from no -m."""
    src = tmp_path / "src"
    pruning_tree(src)
    a, b = os.fsencode(tmp_path / "with_m"), os.fsencode(tmp_path / "without_m")
    run_rsync(os.fsencode(src) + b"/", a, opts=["-a", "-m"])
    run_msrsync("-p", "2", "-f", "1", "--rsync", "-a", os.fsencode(src) + b"/", b)
    with pytest.raises(AssertionError):
        assert_same_tree(a, b)


# -- --delete-missing-args ------------------------------------------------------

def missing_tree(tmp_path):
    src = tmp_path / "src"
    build(src, {"s/": "dir/", "s/sub/": "dir/", "s/sub/a": "a", "s/b": "b", "lone": "lone"})
    age(src)
    return src


def missing_dest(dest):
    build(dest, {"nope/": "dir/", "nope/z": "z", "nofile": "n", "s/": "dir/",
                 "s/gone/": "dir/", "s/gone/q": "q", "s/gonefile": "g", "s/b": "old b"})
    age(dest)


@pytest.mark.parametrize("setting", ["p1-f1", "p2-f7", "p8-f1"])
@pytest.mark.parametrize("rsync_opts", ["-a --delete-missing-args",
                                        "-a --delete-missing-args --force",
                                        "-a -i --delete-missing-args --delete"])
def test_delete_missing_args_srcs_like_rsync(tmp_path, setting, rsync_opts):
    src = missing_tree(tmp_path)
    srcs = [os.fsencode(p(src, "s")), os.fsencode(p(src, "nope")),
            os.fsencode(p(src, "nofile"))]
    differential(tmp_path, srcs, SETTINGS[setting], shlex.split(rsync_opts),
                 prepare_dest=missing_dest)


def test_delete_missing_args_single_file_and_missing_makes_dest_a_directory(tmp_path):
    src = missing_tree(tmp_path)
    differential(tmp_path, [os.fsencode(p(src, "lone")), os.fsencode(p(src, "nope"))],
                 ["-p", "2"], ["-a", "--delete-missing-args"], dest_name=b"newdest")


def test_delete_missing_args_only_missing_srcs_creates_no_dest(tmp_path):
    src = missing_tree(tmp_path)
    d = differential(tmp_path, [os.fsencode(p(src, "nope"))], ["-p", "2"],
                     ["-a", "--delete-missing-args"], dest_name=b"newdest", compare=False)
    assert not os.path.lexists(d.oracle_dest) and not os.path.lexists(d.msrsync_dest)


@pytest.mark.parametrize("setting", ["p1-f1", "p8-f1"])
@pytest.mark.parametrize("rsync_opts", ["-a --delete-missing-args --force",
                                        "-a --delete-missing-args",
                                        "-a --ignore-missing-args"])
def test_missing_args_in_files_from_like_rsync(tmp_path, setting, rsync_opts):
    """(DEST's root mtime is the time of a deletion on both sides: not compared)"""
    src = missing_tree(tmp_path)
    listing = tmp_path / "list"
    listing.write_bytes(b"s/sub/a\ns/gone\ns/gonefile\ns/b\nnope\n")
    differential(tmp_path, contents(src), SETTINGS[setting],
                 shlex.split(rsync_opts) + ["--files-from=" + str(listing)],
                 prepare_dest=missing_dest, ignore_root_mtime=True)


def test_missing_args_dry_run_deletes_nothing(tmp_path):
    src = missing_tree(tmp_path)
    missing_dest(dests(tmp_path)[1])
    before = sorted(os.listdir(dests(tmp_path)[1]))
    cp = run_msrsync("-p", "2", "--rsync", "-a -n -v --delete-missing-args --force",
                     os.fsencode(p(src, "s")), os.fsencode(p(src, "nope")),
                     dests(tmp_path)[1])
    assert cp.returncode == 0, cp
    assert b"deleting" in cp.stdout and b"nope" in cp.stdout, cp.stdout
    assert sorted(os.listdir(dests(tmp_path)[1])) == before


# -- rsync's no-ops for a recursive copy -----------------------------------------

@pytest.mark.parametrize("setting", ["p2-f1", "p8-f7"] if "p8-f7" in SETTINGS else ["p2-f1"])
@pytest.mark.parametrize("rsync_opts", ["-a -R --no-R", "-a --no-d", "-a --no-relative"])
def test_no_relative_and_no_dirs_are_no_ops_like_rsync(tmp_path, setting, rsync_opts):
    """--no-R (after -R) and --no-d change nothing for rsync -r: msrsync keeps
    them from its workers (their --files-from lists need -R and "dir/" entries)."""
    src = tmp_path / "src"
    pruning_tree(src)
    differential(tmp_path, contents(src) + [os.fsencode(p(src, "a"))], SETTINGS[setting],
                 shlex.split(rsync_opts))
