"""rsync semantics msrsync keeps: deletion, hard links, filter rules, pass-through options.

The rule under test: for the rsync options a user passes with ``--rsync "OPTS"``,
``msrsync -p N -f F --rsync "OPTS" SRC DEST`` leaves DEST exactly as ``rsync OPTS SRC DEST``
(entries, types, modes, owners, sizes, contents, mtimes of files and directories, symlink
targets, hard-link groups) and exits with the same status.  Plain rsync is the oracle of
every test (helpers.differential); incremental scenarios sync both destinations, mutate
SRC (and put the same extraneous entries in both destinations), then sync again.

Every source entry gets an mtime in the past (``age``: deepest first, directories last),
since rsync leaves alone a directory mtime that falls in the second of the copy.
"""

import collections
import os
import re
import shutil
import struct
import sys

import pytest

from helpers import (IS_ROOT, MSRSYNC, NOBODY, SETTINGS, T0, age, assert_same_tree, build,
                     chown_tree, contents, describe, dests, differential, item_lines,
                     mask_run_time_dir_mtimes, on_both_dests, p, run_cmd, run_msrsync,
                     run_rsync, snapshot, text)


def settings(*names):
    return [pytest.param(SETTINGS[n], id=n) for n in names]


# --------------------------------------------------------------------------- deletion

def mirror_tree():
    spec = {
        "top.txt": "top\n",
        "keep/k1": "k1\n", "keep/k2": "k2" * 300, "keep/sub/k3": "k3\n",
        "mod/m1": "same size 1\n", "mod/m2": "grows\n",
        "gone.txt": "bye\n",
        "gonedir/y": "y\n", "gonedir/sub/x": "x\n", "gonedir/sub/deeper/z": "z\n",
        "ren/old.txt": "renamed content\n",
        "morph": "I am a file\n",
        "wasdir/a": "a\n", "wasdir/b/c": "c\n",
        "perm.txt": "perm\n", "permdir/p": "p\n",
        "deep/d1/d2/d3/leaf": "leaf\n",
        "link": ("symlink", "top.txt"),
        "emptydir/": None,
        "swap/s1": "dir that becomes a symlink\n",
    }
    for i in range(12):
        spec["many/f%02d" % i] = "%02d" % i * (10 + 60 * i)
    return spec


def mutate_round2(src):
    """Files modified (same and other size), a file and a whole directory deleted, a file
    renamed, a file turned into a directory and a directory into a file, permissions of a
    file and a directory changed, a new deep file, a symlink retargeted."""
    build(src, {"mod/m1": "SAME size 1\n", "mod/m2": "grows a lot\n" * 20})
    os.unlink(p(src, "gone.txt"))
    shutil.rmtree(p(src, "gonedir"))
    os.rename(p(src, "ren/old.txt"), p(src, "ren/new.txt"))
    os.unlink(p(src, "morph"))
    build(src, {"morph/inside": "now a directory\n"})
    shutil.rmtree(p(src, "wasdir"))
    build(src, {"wasdir": "now a file\n"})
    os.chmod(p(src, "perm.txt"), 0o600)
    os.chmod(p(src, "permdir"), 0o700)
    build(src, {"deep/d1/d2/d3/new": "new\n"})
    os.unlink(p(src, "link"))
    os.symlink(b"keep", p(src, "link"))
    shutil.rmtree(p(src, "swap"))
    os.symlink(b"keep", p(src, "swap"))
    age(src, T0 + 1000)


def mutate_round3(src):
    """The directory back to a file and the file back to a directory."""
    shutil.rmtree(p(src, "morph"))
    build(src, {"morph": "a file again\n"})
    os.unlink(p(src, "wasdir"))
    build(src, {"wasdir/a": "a again\n", "wasdir/b/c": "c again\n"})
    os.unlink(p(src, "many/f05"))
    os.unlink(p(src, "swap"))
    build(src, {"swap/s2": "a directory again\n"})
    age(src, T0 + 2000)


EXTRANEOUS_2 = {
    "extra_top.txt": "only at DEST\n",
    "extra_dir/e1": "e1\n", "extra_dir/sub/e2": "e2\n",
    "deep/d1/d2/d3/extra_deep": "deep\n",
    "many/extra_m": "m\n",
    "keep/sub/extra_link": ("symlink", "nowhere"),
}
EXTRANEOUS_3 = {
    "keep/extra3": "3\n",
    "morph/extra_in_morph": "z\n",
}


def run_mirror_scenario(tmp_path, opts, msr, rcs=(0, 0, 0), rounds=3):
    src = age(build(tmp_path / "src", mirror_tree()))
    work = tmp_path / "w"
    differential(work, contents(src), msr, opts, expect_rc=rcs[0])
    on_both_dests(work, EXTRANEOUS_2, T0 + 500)
    mutate_round2(src)
    result = differential(work, contents(src), msr, opts, expect_rc=rcs[1])
    if rounds == 2:
        return result
    on_both_dests(work, EXTRANEOUS_3, T0 + 1500)
    mutate_round3(src)
    return differential(work, contents(src), msr, opts, expect_rc=rcs[2])


@pytest.mark.parametrize("delete_opt,msr", [
    pytest.param("--delete", SETTINGS["p1-f1"], id="delete-p1-f1"),
    pytest.param("--delete", SETTINGS["p2-f7"], id="delete-p2-f7"),
    pytest.param("--delete", SETTINGS["p8-s1K"], id="delete-p8-s1K"),
    pytest.param("--del", SETTINGS["p2-f7"], id="del-p2-f7"),
    pytest.param("--delete-before", SETTINGS["p2-f7"], id="delete-before-p2-f7"),
    pytest.param("--delete-during", SETTINGS["p8-s1K"], id="delete-during-p8-s1K"),
    pytest.param("--delete-after", SETTINGS["p2-f7"], id="delete-after-p2-f7"),
    pytest.param("--delete-delay", SETTINGS["p8-s1K"], id="delete-delay-p8-s1K"),
])
def test_delete_mirrors_src_through_incremental_changes(tmp_path, delete_opt, msr):
    """Modified, deleted, renamed files, a deleted directory, file<->directory<->symlink
    swaps, permission changes, extraneous DEST entries at the top and deep down: DEST
    mirrors SRC exactly as rsync's does, whichever --delete variant (the swaps back,
    a third round, for --delete itself)."""
    final = run_mirror_scenario(tmp_path, ["-a", delete_opt], msr,
                                rounds=3 if delete_opt == "--delete" else 2)
    names = set(snapshot(final.msrsync_dest))
    assert b"extra_top.txt" not in names and b"deep/d1/d2/d3/extra_deep" not in names


@pytest.mark.parametrize("msr", settings("p2-f7", "p8-s1K"))
def test_without_delete_extraneous_entries_stay_and_dir_to_file_fails_like_rsync(tmp_path,
                                                                                msr):
    """No deletion option: extraneous entries survive, and a non-empty directory cannot
    become a file (rsync exits 23) -- msrsync does the same, no implicit --force."""
    final = run_mirror_scenario(tmp_path, ["-a"], msr, rcs=(0, 23, 23))
    names = set(snapshot(final.msrsync_dest))
    assert {b"extra_top.txt", b"deep/d1/d2/d3/extra_deep", b"gone.txt",
            b"gonedir/sub/deeper/z"} <= names


def test_force_replaces_non_empty_directory_by_file_without_delete(tmp_path):
    src = age(build(tmp_path / "src", {"wasdir/a": "a\n", "wasdir/b/c": "c\n", "x": "x\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    shutil.rmtree(p(src, "wasdir"))
    build(src, {"wasdir": "file now\n"})
    age(src, T0 + 100)
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a", "--force"])


@pytest.mark.parametrize("extra,msr", [
    pytest.param(["--delete"], SETTINGS["p2-f1"], id="excluded-protected-p2-f1"),
    pytest.param(["--delete", "--delete-excluded"], SETTINGS["p8-s1K"],
                 id="delete-excluded-p8-s1K"),
    pytest.param(["--delete-excluded"], SETTINGS["p2-f7"], id="delete-excluded-alone-p2-f7"),
])
def test_delete_with_excludes_protects_or_deletes_excluded_like_rsync(tmp_path, extra, msr):
    src = age(build(tmp_path / "src", {
        "a.c": "c\n", "a.o": "o\n", "sub/b.c": "b\n", "sub/b.o": "o\n",
        "cache/sub/x": "x\n", "cache/y": "y\n", "sub/cache/z": "z\n", "keep/k": "k\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"stale.o": "o\n", "sub/deep/stale.o": "o\n", "stale.c": "c\n",
                         "cache/extra": "e\n"}, T0 + 50)
    os.unlink(p(src, "keep/k"))
    age(src, T0 + 100)
    opts = ["-a", "--exclude=*.o", "--exclude=cache/"] + extra
    result = differential(work, contents(src), msr, opts)
    names = set(snapshot(result.msrsync_dest))
    if "--delete-excluded" in extra:
        assert not names & {b"a.o", b"sub/b.o", b"stale.o", b"cache", b"sub/cache"}
    else:
        assert {b"a.o", b"stale.o", b"cache/sub/x", b"cache/extra"} <= names
    assert b"stale.c" not in names and b"keep/k" not in names


def test_protect_and_receiver_side_rules_shield_dest_entries_from_delete(tmp_path):
    src = age(build(tmp_path / "src", {"a": "a\n", "d/b": "b\n", "d/e/c": "c\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"keep.me": "1\n", "d/keep.me": "2\n", "d/e/gone.x": "3\n",
                         "d/local.r": "4\n", "risky/keep.me": "5\n"}, T0 + 50)
    differential(work, contents(src), SETTINGS["p2-f1"],
                 ["-a", "--delete", "--filter=P keep.me", "--filter=R risky/***",
                  "--filter=-r *.r"])
    names = set(snapshot(dests(work)[1]))
    assert {b"keep.me", b"d/keep.me", b"d/local.r"} <= names
    assert b"d/e/gone.x" not in names


@pytest.mark.parametrize("msr", settings("p1-f1", "p8-s1K"))
def test_delete_keeps_hardlink_groups_when_links_are_added_and_removed(tmp_path, msr):
    src = age(build(tmp_path / "src", {"a/f": "shared\n", "b/g": "other\n", "c/h": "h\n",
                                       "c/i": "i\n"}))
    work = tmp_path / "w"
    opts = ["-aH", "--delete"]
    differential(work, contents(src), msr, opts)
    build(src, {"b/f-link": ("hardlink", "a/f"), "f-top": ("hardlink", "a/f"),
                "c/g-link": ("hardlink", "b/g")})
    age(src, T0 + 100)
    result = differential(work, contents(src), msr, opts)
    snap = snapshot(result.msrsync_dest)
    assert snap[b"a/f"]["hardlinks"] == (b"a/f", b"b/f-link", b"f-top")
    os.unlink(p(src, "f-top"))
    os.unlink(p(src, "c/g-link"))
    age(src, T0 + 200)
    differential(work, contents(src), msr, opts)


def _extraneous_names(root):
    return sorted(rel for rel in snapshot(root) if os.path.basename(rel).startswith(b"xtra"))


def _without(snap, names):
    return {k: v for k, v in snap.items() if k not in set(names)}


@pytest.mark.parametrize("msr", settings("p1-f1", "p8-f1"))
def test_max_delete_limit_is_one_for_the_whole_run(tmp_path, msr):
    """5 deletions due in 5 directories, --max-delete=2: rsync deletes 2 and exits 25;
    so must msrsync, however many buckets and workers."""
    spec = {"d%d/f" % i: "%d\n" % i for i in range(1, 5)}
    spec["top"] = "t\n"
    src = age(build(tmp_path / "src", spec))
    work = tmp_path / "w"
    differential(work, contents(src), msr, ["-a"])
    on_both_dests(work, {"xtra0": "0", "d1/xtra1": "1", "d2/xtra2": "2", "d3/xtra3": "3",
                         "d4/xtra4": "4"}, T0 + 50)
    result = differential(work, contents(src), msr, ["-a", "--delete", "--max-delete=2"],
                          expect_rc=25, compare=False)
    left_rsync = _extraneous_names(result.oracle_dest)
    left_msrsync = _extraneous_names(result.msrsync_dest)
    assert len(left_rsync) == 3, left_rsync
    assert len(left_msrsync) == len(left_rsync), (left_msrsync, describe(result.msrsync))
    # everything else as rsync left it, directory mtimes included
    a = snapshot(result.oracle_dest)
    b = snapshot(result.msrsync_dest)
    assert_same_tree(_without(a, left_rsync), _without(b, left_msrsync),
                     label_a="rsync", label_b="msrsync")


def test_max_delete_limit_is_one_for_the_whole_run_with_two_sources(tmp_path):
    """Two SRC/ into one DEST, 3 deletions due below each: --max-delete=2 allows 2 in
    all, not 2 per source."""
    s1 = age(build(tmp_path / "s1", {"d1/a": "a\n"}))
    s2 = age(build(tmp_path / "s2", {"d2/b": "b\n"}))
    work = tmp_path / "w"
    srcs = [s1 + b"/", s2 + b"/"]
    differential(work, srcs, SETTINGS["p2-f7"], ["-a"])
    on_both_dests(work, {"d1/xtra1": "1", "d1/xtra2": "2", "d1/xtra3": "3",
                         "d2/xtra4": "4", "d2/xtra5": "5", "d2/xtra6": "6"}, T0 + 50)
    result = differential(work, srcs, SETTINGS["p2-f7"],
                          ["-a", "--delete", "--max-delete=2"], expect_rc=25, compare=False)
    left_rsync = _extraneous_names(result.oracle_dest)
    left_msrsync = _extraneous_names(result.msrsync_dest)
    assert len(left_rsync) == 4, left_rsync
    assert len(left_msrsync) == len(left_rsync), (left_msrsync, describe(result.msrsync))


@pytest.mark.parametrize("limit,rc,left", [pytest.param(3, 0, 0, id="above-the-count"),
                                           pytest.param(0, 25, 3, id="zero")])
def test_max_delete_at_zero_or_above_the_count_matches_rsync(tmp_path, limit, rc, left):
    """--max-delete=0 deletes nothing and exits 25; a limit not reached changes nothing."""
    src = age(build(tmp_path / "src", {"d1/f": "1\n", "d2/f": "2\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"xtra0": "0", "d1/xtra1": "1", "d2/xtra2": "2"}, T0 + 50)
    result = differential(work, contents(src), SETTINGS["p2-f1"],
                          ["-a", "--delete", "--max-delete=%d" % limit], expect_rc=rc)
    assert len(_extraneous_names(result.msrsync_dest)) == left


def _deleting_lines(output):
    return sorted(l for l in text(output).splitlines() if l.startswith("deleting "))


@pytest.mark.parametrize("how", [
    pytest.param((["-d", "-p", "2", "-f", "1"], "-a --delete"), id="msrsync-d"),
    pytest.param((["-p", "2", "-f", "1"], "-an --delete"), id="rsync-n"),
])
def test_dry_run_with_delete_deletes_nothing_and_lists_what_it_would_delete(tmp_path, how):
    msr, rsync_opts = how
    src = age(build(tmp_path / "src", {"a": "a\n", "d/b": "b\n", "d/e/c": "c\n",
                                       "m": "mod\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"xtra_top": "1\n", "d/e/xtra_deep": "2\n",
                         "xtra_dir/f": "3\n", "xtra_dir/sub/g": "4\n"}, T0 + 50)
    build(src, {"m": "modified\n"})
    age(src, T0 + 100)
    oracle_dest, dest = dests(work)
    before = snapshot(dest)
    cp = run_msrsync(*(msr + ["--rsync", rsync_opts, src + b"/", dest]))
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(before, snapshot(dest), label_a="before", label_b="after dry run")
    oracle = run_rsync(src + b"/", oracle_dest, opts=["-anv", "--delete"])
    assert oracle.returncode == 0, describe(oracle)
    expected = _deleting_lines(oracle.stdout)
    assert expected, describe(oracle)
    assert _deleting_lines(cp.stdout) == expected, describe(cp)


@pytest.mark.parametrize("trailing", [pytest.param(True, id="SRC/"),
                                      pytest.param(False, id="SRC")])
def test_delete_never_touches_anything_outside_dest(tmp_path, trailing):
    src = age(build(tmp_path / "src", {"a": "a\n", "d/b": "b\n"}))
    work = tmp_path / "w"
    srcs = contents(src) if trailing else [src]
    neighbours = {"dest-sibling/f": "s\n", "dest-sibling/sub/g": "g\n", "dest.bak": "b\n",
                  "dest2/x": "x\n"}
    for dest in dests(work):
        build(os.path.dirname(dest), neighbours)
        age(os.path.dirname(dest), T0 + 10)
        build(dest, {"xtra": "x\n", "xtra_dir/y": "y\n"})
        if not trailing:
            build(dest, {"src/a": "a\n", "src/xtra_in": "z\n", "src/d/xtra_deep": "z\n"})
        age(dest, T0 + 20)
    before = [snapshot(os.path.join(os.path.dirname(d), os.fsencode(n.split("/")[0])))
              for d in dests(work) for n in ("dest-sibling", "dest.bak", "dest2")]
    differential(work, srcs, SETTINGS["p2-f1"], ["-a", "--delete"])
    after = [snapshot(os.path.join(os.path.dirname(d), os.fsencode(n.split("/")[0])))
             for d in dests(work) for n in ("dest-sibling", "dest.bak", "dest2")]
    assert before == after
    if not trailing:
        # "rsync --delete SRC DEST" mirrors DEST/SRC only: DEST's own entries stay
        names = set(snapshot(dests(work)[1]))
        assert b"xtra" in names and b"xtra_dir/y" in names
        assert b"src/xtra_in" not in names and b"src/d/xtra_deep" not in names


# ----------------------------------------------- deletion after errors (as user nobody)

def _nobody_setup(nonroot):
    """A tree synced once as nobody, then the same extraneous entries in both DESTs."""
    prefix, python, workdir = nonroot
    src = age(build(os.path.join(workdir, b"src"), {
        "a/f": "f\n", "locked/g": "g\n", "locked/sub/h": "h\n", "z/h": "h\n",
        "top": "t\n"}))
    chown_tree(src, NOBODY, NOBODY)
    work = os.path.join(workdir, b"w")
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"], prefix=prefix,
                 python=python)
    for dest in dests(work):
        build(dest, {"xtra_top": "1\n", "a/xtra_a": "2\n", "z/xtra_z": "3\n",
                     "locked/xtra_l": "4\n"})
        age(dest, T0 + 50)
        chown_tree(dest, NOBODY, NOBODY)
    return prefix, python, src, work


XTRA_ALL = [b"a/xtra_a", b"locked/xtra_l", b"xtra_top", b"z/xtra_z"]


@pytest.mark.nonroot
def test_delete_skipped_when_scan_hits_unreadable_directory(nonroot):
    prefix, python, src, work = _nobody_setup(nonroot)
    os.chmod(p(src, "locked"), 0)
    oracle_dest, dest = dests(work)
    oracle = run_rsync(src + b"/", oracle_dest, opts=["-a", "--delete"], prefix=prefix)
    cp = run_msrsync("-p", "2", "-f", "1", "--rsync", "-a --delete", src + b"/", dest,
                     prefix=prefix, python=python)
    assert oracle.returncode == 23, describe(oracle)
    assert cp.returncode == 23, describe(cp)
    assert _extraneous_names(dest) == XTRA_ALL, describe(cp)
    assert re.search(r"delet\w* skipped|skipp\w* (file )?delet", text(cp.stderr), re.I), \
        describe(cp)


@pytest.mark.nonroot
def test_delete_after_with_unreadable_directory_leaves_dest_as_rsync(nonroot):
    prefix, python, src, work = _nobody_setup(nonroot)
    os.chmod(p(src, "locked"), 0)
    differential(work, contents(src), SETTINGS["p8-f1"], ["-a", "--delete-after"],
                 expect_rc=23, prefix=prefix, python=python)
    assert _extraneous_names(dests(work)[1]) == XTRA_ALL


@pytest.mark.nonroot
def test_delete_skipped_when_a_copy_bucket_fails(nonroot):
    prefix, python, src, work = _nobody_setup(nonroot)
    build(src, {"a/secret": "unreadable\n"})
    os.chmod(p(src, "a/secret"), 0)
    chown_tree(src, NOBODY, NOBODY)
    age(src, T0 + 100)
    # --delete-after: rsync too skips every deletion after the failed file
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a", "--delete-after"],
                 expect_rc=23, prefix=prefix, python=python)
    assert _extraneous_names(dests(work)[1]) == XTRA_ALL
    cp = run_msrsync("-p", "2", "-f", "1", "--rsync", "-a --delete", src + b"/",
                     dests(work)[1], prefix=prefix, python=python)
    assert cp.returncode == 23, describe(cp)
    assert _extraneous_names(dests(work)[1]) == XTRA_ALL, describe(cp)
    assert re.search(r"delet\w* skipped", text(cp.stderr), re.I), describe(cp)


@pytest.mark.nonroot
def test_ignore_errors_deletes_despite_unreadable_directory(nonroot):
    prefix, python, src, work = _nobody_setup(nonroot)
    os.chmod(p(src, "locked"), 0)
    cp = run_msrsync("-p", "2", "-f", "1", "--rsync", "-a --delete --ignore-errors",
                     src + b"/", dests(work)[1], prefix=prefix, python=python)
    assert cp.returncode == 23, describe(cp)
    left = _extraneous_names(dests(work)[1])
    assert not set(left) & {b"a/xtra_a", b"xtra_top", b"z/xtra_z"}, (left, describe(cp))


@pytest.mark.nonroot
def test_ignore_errors_with_unreadable_directory_leaves_dest_as_rsync(nonroot):
    """rsync sends an unreadable directory as empty, and with --ignore-errors deletes the
    DEST copy's contents too."""
    prefix, python, src, work = _nobody_setup(nonroot)
    os.chmod(p(src, "locked"), 0)
    differential(work, contents(src), SETTINGS["p2-f1"],
                 ["-a", "--delete", "--ignore-errors"], expect_rc=23, prefix=prefix,
                 python=python)


# --------------------------------------------------------------------------- hard links

def link_tree(root, outside):
    spec = {
        "a/one": "one\n", "a/one.b": ("hardlink", "a/one"),             # inside one dir
        "a/x/g": "g" * 700, "c/g2": ("hardlink", "a/x/g"),               # across dirs,
        "g3": ("hardlink", "a/x/g"), "a/g4": ("hardlink", "a/x/g"),      # top level, 4
        "b/h1": "h\n", "c/h2": ("hardlink", "b/h1"),                     # across top dirs
        "e/e0": "", "e/e1": ("hardlink", "e/e0"),                       # empty file
        "sym": ("symlink", "a/one"),
    }
    for i in range(12):                                                  # 13 > any -f
        spec["d/L%02d" % i] = "L" * 300 if i == 0 else ("hardlink", "d/L00")
    spec["e/L12"] = ("hardlink", "d/L00")
    for i in range(30):
        spec["many/f%02d" % i] = "%02d" % i * (5 + 20 * i)
    build(outside, {"o": "outside member\n"})
    spec["a/o1"] = ("hardlink", os.path.join(os.fsencode(outside), b"o"))
    spec["c/o2"] = ("hardlink", os.path.join(os.fsencode(outside), b"o"))
    age(outside)
    return age(build(root, spec))


@pytest.mark.parametrize("msr", settings("p1-f1", "p2-f7", "p8-s1K"))
def test_hardlink_groups_match_rsync(tmp_path, msr):
    """Groups in one dir, across dirs and top-level dirs, of 2, 4 and 13 paths, an empty
    file's group, a group with a member outside SRC: same groups as rsync -aH."""
    src = link_tree(tmp_path / "src", tmp_path / "outside")
    result = differential(tmp_path / "w", contents(src), msr, ["-aH"])
    snap = snapshot(result.msrsync_dest)
    assert len(snap[b"d/L00"]["hardlinks"]) == 13
    assert snap[b"a/o1"]["hardlinks"] == (b"a/o1", b"c/o2")


def test_hardlink_groups_match_rsync_for_src_without_slash_and_excluded_member(tmp_path):
    src = link_tree(tmp_path / "src", tmp_path / "outside")
    differential(tmp_path / "w", [src], SETTINGS["p2-f1"], ["-aH", "--exclude=g3",
                                                            "--exclude=/src/d/L05"])


def test_hardlinks_with_several_srcs_are_one_rsync_naming_it(tmp_path):
    """rsync -aH s1/ s2/ DEST links paths of one inode found under both sources;
    one --files-from list has one base, so buckets cannot make that exact: one plain
    rsync runs it, with one note naming -H, and DEST keeps the link."""
    s1 = age(build(tmp_path / "s1", {"a": "shared\n", "d/x": "x\n"}))
    s2 = build(tmp_path / "s2", {"c": "c\n"})
    build(s2, {"b": ("hardlink", os.path.join(s1, b"a"))})
    age(s2)
    d = differential(tmp_path / "w", [s1 + b"/", s2 + b"/"], ["-p", "2"], rsync_opts=["-aH"])
    lines = text(d.msrsync.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("msrsync: note:") and "-H" in lines[0]
    assert os.stat(os.path.join(d.msrsync_dest, b"a")).st_ino == \
        os.stat(os.path.join(d.msrsync_dest, b"b")).st_ino


def test_hardlinks_without_H_are_separate_files_like_rsync(tmp_path):
    src = link_tree(tmp_path / "src", tmp_path / "outside")
    result = differential(tmp_path / "w", contents(src), SETTINGS["p2-f7"], ["-a"])
    assert "hardlinks" not in snapshot(result.msrsync_dest)[b"d/L00"]


# --------------------------------------------------------------------------- filters

def filter_tree(root):
    spec = {
        "top.txt": "t\n", "top.o": "o\n", "build": "a file named build\n",
        "src/main.c": "c\n", "src/util.c": "c\n", "src/util.o": "o\n",
        "src/build/out.bin": "bin\n", "src/build/sub/deeper.bin": "bin\n",
        "cache/sub/x": "x\n", "cache/keep": "k\n", "a/cache/y": "y\n",
        "keep/k1": "k\n", "keep/deep/k2": "k\n",
        "9dir/n": "n\n", "9file": "9\n", "Upper/u": "u\n", "lower/l": "l\n",
        "br[ack]et": "b\n", "q?mark": "q\n", "star*name": "s\n",
        "a/b/c/deep.txt": "d\n", "a/b/deep.txt": "d\n", "deep.txt": "d\n",
        "notes/readme.md": "r\n", "notes/sub/x": "x\n",
        "sp ace/f 1": "s\n",
    }
    return age(build(root, spec))


FILTER_CASES = [
    ("exclude-glob-and-anchored", ["--exclude=*.o", "--exclude=/top.txt",
                                   "--exclude=/src/build/"]),
    ("include-dirs-and-c-only", ["--include=*/", "--include=*.c", "--exclude=*"]),
    ("anchored-not-deeper", ["--exclude=/deep.txt", "--exclude=/b/"]),
    ("double-star-middle", ["--exclude=a/**/deep.txt"]),
    ("double-star-leading", ["--exclude=**/deep.txt"]),
    ("double-star-anchored-and-triple-star", ["--exclude=/a/**", "--exclude=src/***"]),
    ("triple-star-include", ["--include=keep/***", "--exclude=*"]),
    ("question-mark-and-classes", ["--exclude=?eep.txt", "--exclude=[0-9]*",
                                   "--exclude=[!a-s]*"]),
    ("posix-classes", ["--exclude=[[:digit:]]*", "--exclude=[[:upper:]]*"]),
    ("escaped-wildcards", ["--exclude=br\\[ack]et", "--exclude=q\\?mark",
                           "--exclude=star\\*name"]),
    ("trailing-slash-dirs-only", ["--exclude=build/"]),
    ("no-slash-matches-files-and-dirs", ["--exclude=build"]),
    ("unanchored-with-slash", ["--exclude=b/c", "--exclude=notes/sub"]),
    ("first-match-wins-include", ["--include=top.o", "--exclude=*.o"]),
    ("first-match-wins-exclude", ["--exclude=*.o", "--include=top.o"]),
    ("include-then-excluded-parent", ["--include=cache/sub/x", "--exclude=cache/"]),
    ("bang-clears-rules", ["--exclude=*.o", "--exclude=!", "--exclude=*.txt"]),
    ("filter-bang-and-clear", ["--filter=- *.o", "--filter=!", "--filter=- *.c",
                               "--filter=clear", "--filter=- *.txt"]),
    ("filter-plus-minus", ["--filter=+ keep/", "--filter=+ keep/**", "--filter=- *"]),
    ("filter-short-f-and-words", ["-f", "- *.o", "--filter=exclude cache/",
                                  "--filter=include *.c", "--filter=exclude src/*"]),
    ("modifier-negate-dirs", ["--filter=-! */"]),
    ("modifier-negate", ["--filter=+ */", "--filter=-! *.c"]),
    ("modifier-negate-subtree", ["--filter=-! src/***"]),
    ("modifier-comma-negate", ["--filter=-,! src/***"]),
    ("modifier-sender", ["--filter=-s *.o", "--filter=-s cache/"]),
    ("modifier-comma-sender", ["--filter=-,s cache/"]),
    ("modifier-word-comma-sender", ["--filter=exclude,s cache/"]),
    ("modifier-receiver-only", ["--filter=-r *.o", "--filter=-r cache/"]),
    ("hide-show", ["--filter=S top.o", "--filter=H *.o", "--filter=H cache/"]),
    ("rule-syntax-variants", ["--exclude=+ top.o", "--filter=-_*.o", "--exclude=sp ace/"]),
]


@pytest.mark.parametrize("rules", [pytest.param(r, id=i) for i, r in FILTER_CASES])
def test_filter_rules_select_the_same_entries_as_rsync(tmp_path, rules):
    src = filter_tree(tmp_path / "src")
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-a"] + rules)


@pytest.mark.parametrize("rules", [
    pytest.param(["--exclude=cache/", "--include=*/", "--include=*.c", "--exclude=*.o"],
                 id="mixed"),
    pytest.param(["--exclude=/src/build/", "--exclude=*.txt"], id="anchored-src-name"),
])
def test_filter_rules_match_rsync_for_src_without_trailing_slash(tmp_path, rules):
    src = filter_tree(tmp_path / "src")
    differential(tmp_path / "w", [src], SETTINGS["p2-f7"], ["-a"] + rules)


@pytest.mark.parametrize("msr", settings("p1-f1", "p2-f1", "p8-f1"))
def test_excluded_directory_contents_never_copied_even_when_a_bucket_lists_them(tmp_path,
                                                                                 msr):
    """THE TRAP: cache/sub/x with --exclude=cache/ at -f 1, where a bucket would name
    cache/sub/x itself (rsync applies no directory exclude to a listed name's parents)."""
    src = age(build(tmp_path / "src", {"cache/sub/x": "x\n", "cache/sub/y/z": "z\n",
                                       "cache/f": "f\n", "a/cache/sub/x": "x\n",
                                       "keep": "k\n", "b/c": "c\n"}))
    result = differential(tmp_path / "w", contents(src), msr, ["-a", "--exclude=cache/"])
    names = set(snapshot(result.msrsync_dest))
    assert not any(n.startswith(b"cache") or b"/cache" in n for n in names), sorted(names)


def test_exclude_from_and_include_from_files_match_rsync(tmp_path):
    src = filter_tree(tmp_path / "src")
    inc = tmp_path / "include.txt"
    exc = tmp_path / "exclude.txt"
    inc.write_bytes(b"# a comment\n; another\nkeep/***\r\n\n*.c\n*/\n")
    exc.write_bytes(b"*.o\n- top.txt\n+ deep.txt\n*\n")
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"],
                 ["-a", "--include-from=%s" % inc, "--exclude-from=%s" % exc])


@pytest.mark.parametrize("rules", [
    pytest.param(["--exclude=src"], id="exclude-name"),
    pytest.param(["--exclude=/src/"], id="exclude-anchored-dir"),
    pytest.param(["--exclude=*/"], id="exclude-all-dirs"),
])
def test_exclude_matching_the_src_directory_itself_copies_like_rsync(tmp_path, rules):
    """"rsync -a --exclude=src src DEST" sends nothing (DEST is not even created): the
    rules apply to SRC's own name when SRC has no trailing slash."""
    src = filter_tree(tmp_path / "src")
    result = differential(tmp_path / "w", [src], SETTINGS["p2-f1"], ["-a"] + rules,
                          compare=False)
    exists = [os.path.lexists(d) for d in (result.oracle_dest, result.msrsync_dest)]
    assert exists[0] == exists[1], "DEST exists: rsync %s, msrsync %s (%r)" % (
        exists[0], exists[1], sorted(snapshot(result.msrsync_dest)) if exists[1] else None)
    if exists[0]:
        assert_same_tree(result.oracle_dest, result.msrsync_dest, ignore_root_mtime=True,
                         label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("from0", ["-0", "--from0"])
def test_nul_separated_rule_files_with_from0_match_rsync(tmp_path, from0):
    src = filter_tree(tmp_path / "src")
    exc = tmp_path / "exclude0"
    # with -0 a newline is part of the rule; "sp ace/" keeps its space
    exc.write_bytes(b"*.o\0cache/\0sp ace/\0# comment\0/top.txt\0")
    inc = tmp_path / "include0"
    inc.write_bytes(b"src/build/\0")
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"],
                 ["-a", from0, "--include-from=%s" % inc, "--exclude-from=%s" % exc])


def test_from0_applies_only_to_rule_files_named_after_it_like_rsync(tmp_path):
    """rsync reads a rule file when it parses the option: "--exclude-from=F -0" reads F
    line by line."""
    src = filter_tree(tmp_path / "src")
    exc = tmp_path / "exclude.txt"
    exc.write_bytes(b"*.o\ncache/\n")
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"],
                 ["-a", "--exclude-from=%s" % exc, "-0"])


def _same_as_rsync_reading_stdin(tmp_path, src, msr, opts, rules):
    """rsync OPTS and msrsync MSR --rsync OPTS, each given rules on stdin."""
    dests = [os.fsencode(tmp_path / side / "dest") for side in ("oracle", "msrsync")]
    for dest in dests:
        os.makedirs(os.path.dirname(dest))
    oracle = run_cmd(["rsync"] + opts + contents(src) + [dests[0]], input=rules)
    result = run_msrsync(*(msr + ["--rsync", " ".join(opts)] + contents(src) + [dests[1]]),
                         input=rules)
    assert oracle.returncode == 0, describe(oracle)
    assert result.returncode == 0, describe(result)
    assert_same_tree(dests[0], dests[1], label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("msr", [pytest.param([], id="p1")] + settings("p1-f1", "p2-f1"))
@pytest.mark.parametrize("option,rules", [
    pytest.param("--exclude-from=-", b"*.o\n- top.txt\n+ deep.txt\n# comment\ncache/\n",
                 id="exclude-from"),
    pytest.param("--include-from=-", b"keep/***\r\n*/\n*.c\n- *\n", id="include-from"),
    pytest.param("-0 --exclude-from=-", b"*.o\0sp ace/\0/top.txt\0", id="from0"),
])
def test_rules_read_from_stdin_reach_every_rsync(tmp_path, msr, option, rules):
    """rsync reads --exclude-from=- from its stdin; msrsync reads it once (its scan
    needs the rules) and must hand the rules to every rsync it runs, whose stdin
    holds nothing: before, the whole-run rsync and the workers' subtrees copied
    what the rules exclude."""
    src = filter_tree(tmp_path / "src")
    _same_as_rsync_reading_stdin(tmp_path, src, msr, ["-a"] + option.split(), rules)


def test_rules_from_a_closed_stdin_are_none_like_rsync(tmp_path):
    """With stdin closed rsync reads no rules; msrsync did the same through
    a traceback (sys.stdin is None then)."""
    src = filter_tree(tmp_path / "src")
    dests = [os.fsencode(tmp_path / side) for side in ("oracle", "msrsync")]
    for dest, argv in zip(dests, (["rsync"], [sys.executable, MSRSYNC, "-p", "2", "--rsync"])):
        opts = ["-a", "--exclude-from=-"]
        cp = run_cmd(["sh", "-c", 'exec "$@" <&-', "sh"] + argv +
                     (opts if argv == ["rsync"] else [" ".join(opts)]) + contents(src) + [dest])
        assert cp.returncode == 0 and b"Traceback" not in cp.stderr, describe(cp)
    assert_same_tree(dests[0], dests[1], label_a="rsync", label_b="msrsync")


def test_a_list_from_a_closed_stdin_fails_like_rsync(tmp_path):
    """--files-from=- with stdin closed: rsync cannot read its list (EBADF), exits
    11 and makes nothing; msrsync read an empty list and reported success."""
    src = filter_tree(tmp_path / "src")
    for name, argv in (("rsync", ["rsync", "-a", "--files-from=-"]),
                       ("msrsync", [sys.executable, MSRSYNC, "-p", "2",
                                    "--rsync", "-a --files-from=-"])):
        dest = os.fsencode(tmp_path / name)
        cp = run_cmd(["sh", "-c", 'exec "$@" <&-', "sh"] + argv + [src + b"/", dest])
        assert cp.returncode == 11 and b"Traceback" not in cp.stderr, describe(cp)
        assert not os.path.exists(dest), describe(cp)
    assert text(cp.stderr).splitlines() == [
        "msrsync: error: cannot read --files-from -: stdin is closed"], describe(cp)


@pytest.mark.parametrize("opts, extra", [
    (["-a", "--exclude=*.log", "--exclude=sub/"], {}),
    (["-rlt", "--exclude=*.log", "--exclude=sub/"], {}),
    (["-a", "-F"], {".rsync-filter": "- *\n"}),             # (excludes itself too)
    (["-rlt", "--exclude=*.log", "--exclude=sub/"], {"d.dat": "d\n"}),  # copied into DEST
], ids=["all-excluded", "rlt-all-excluded", "perdir-all-excluded", "one-left"])
@pytest.mark.parametrize("dest_exists", [False, True], ids=["new-dest", "dest-exists"])
@pytest.mark.parametrize("msr", settings("p1-f1", "p2-f7"))
def test_a_src_whose_entries_the_rules_all_exclude_is_one_entry_like_rsync(
        tmp_path, msr, opts, extra, dest_exists):
    """rsync's file list for a lone SRC dir (no slash) whose entries the rules all
    exclude holds the directory alone, so rsync names a missing DEST after it (DEST
    becomes the copy: its mode and mtime), as for an empty directory.  msrsync made
    DEST a container holding SRC; and with -r in the options (not -a) its run of a
    lone empty directory skipped it ("skipping directory") and made no DEST."""
    spec = {"a.log": "a\n", "b.log": "b\n", "sub/": None, "sub/c.log": "c\n"}
    spec.update(extra)
    src = build(tmp_path / "in" / "src", spec)
    os.chmod(src, 0o750)
    age(src)

    def prepare(dest):
        if dest_exists:
            os.makedirs(dest)
            os.utime(dest, (T0, T0))

    # (into an existing DEST, or with an entry left, the copy is DEST/src, and
    # DEST's mtime is the run's)
    differential(tmp_path / "w", [src], msr, rsync_opts=opts, prepare_dest=prepare,
                 ignore_root_mtime=dest_exists or bool(extra and "-F" not in opts))


@pytest.mark.parametrize("opts", [["-a"], ["-rlt"]])
@pytest.mark.parametrize("msr", [["-p", "2"], ["-p", "1", "-f", "1"]], ids=["p2", "p1-f1"])
def test_a_lone_empty_directory_is_dest_itself_like_rsync(tmp_path, opts, msr):
    """With -f 1 its scan also cut a bucket of it (DEST/empty inside DEST); with
    -rlt its rsync ran without -r and skipped it."""
    src = os.fsencode(tmp_path / "in" / "empty")
    os.makedirs(src)
    os.chmod(src, 0o750)
    os.utime(src, (T0, T0))
    differential(tmp_path / "w", [src], msr, rsync_opts=opts, ignore_root_mtime=False)


def test_rules_merged_from_stdin_are_one_rsync_naming_them(tmp_path):
    """rsync reads "merge -" from its stdin, which buckets cannot share: one plain
    rsync of the command reads it, with a note, and leaves DEST as rsync does."""
    src = filter_tree(tmp_path / "src")
    result = run_msrsync("-p", "2", "--rsync", "-a --filter=._-",
                         *(contents(src) + [tmp_path / "d"]), input=b"- *.o\n")
    assert result.returncode == 0, describe(result)
    assert text(result.stderr).splitlines() == [
        "msrsync: note: filter rule '._-': rules merged from stdin cannot be applied to "
        "buckets (--exclude-from=- can): running one plain rsync"], describe(result)
    oracle = run_rsync(*(contents(src) + [tmp_path / "o"]), opts=["-a", "--filter=._-"],
                       input=b"- *.o\n")
    assert oracle.returncode == 0, describe(oracle)
    assert_same_tree(tmp_path / "o", tmp_path / "d")


# ------------------------------------------------------------------ pass-through options

def sized_tree(root):
    spec = {}
    for i, size in enumerate([0, 1, 9, 10, 11, 100, 1023, 1024, 1025, 2047, 2048, 2049,
                              5000, 20000]):
        spec["d%d/s%05d" % (i % 3, size)] = b"z" * size
    return age(build(root, spec))


@pytest.mark.parametrize("opts,msr", [
    pytest.param(["--min-size=10", "--max-size=2K"], SETTINGS["p2-f1"], id="min-max-p2-f1"),
    pytest.param(["--min-size=10", "--max-size=2K"], SETTINGS["p8-s1K"],
                 id="min-max-p8-s1K"),
    pytest.param(["--max-size=1024"], SETTINGS["p2-f7"], id="max-p2-f7"),
    pytest.param(["--min-size=1.5K"], SETTINGS["p8-s1K"], id="min-decimal-p8-s1K"),
])
def test_min_size_and_max_size_select_like_rsync(tmp_path, opts, msr):
    src = sized_tree(tmp_path / "src")
    differential(tmp_path / "w", contents(src), msr, ["-a"] + opts)


def quick_check_src(root):
    spec = {
        "same.txt": "identical\n",
        "same_size_same_mtime.txt": "content AAA\n",
        "same_size_other_mtime.txt": "content BBB\n",
        "dest_newer.txt": "src version\n",
        "window.txt": "window AAA\n",
        "new.txt": "not at DEST\n",
        "newdir/f": "new dir\n",
        "sub/changed": "changed in src, longer\n",
    }
    build(root, spec)
    os.utime(p(root, "window.txt"), (T0 + 1, T0 + 1))
    return age(root)


def quick_check_dest(dest):
    build(dest, {
        "same.txt": "identical\n",
        "same_size_same_mtime.txt": "content xxx\n",
        "same_size_other_mtime.txt": "content yyy\n",
        "dest_newer.txt": "dest version, newer\n",
        "window.txt": "window xxx\n",
        "sub/changed": "old\n",
        "only_dest": "extraneous\n",
    })
    os.utime(p(dest, "same_size_other_mtime.txt"), (T0 - 500, T0 - 500))
    os.utime(p(dest, "dest_newer.txt"), (T0 + 5000, T0 + 5000))
    os.utime(p(dest, "window.txt"), (T0, T0))
    age(dest, T0)


@pytest.mark.parametrize("opts", [
    pytest.param(["--existing"], id="existing"),
    pytest.param(["--existing", "--delete"], id="existing-delete"),
    pytest.param(["--ignore-existing"], id="ignore-existing"),
    pytest.param(["--ignore-existing", "--delete"], id="ignore-existing-delete"),
    pytest.param(["-u"], id="update"),
    pytest.param(["-c"], id="checksum"),
    pytest.param(["--size-only"], id="size-only"),
    pytest.param(["-I"], id="ignore-times"),
    pytest.param(["--modify-window=1"], id="modify-window"),
])
def test_quick_check_and_update_options_match_rsync(tmp_path, opts):
    src = quick_check_src(tmp_path / "src")
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-a"] + opts,
                 prepare_dest=quick_check_dest)


def _backup_setup(tmp_path):
    src = age(build(tmp_path / "src", {"a": "a1\n", "d/b": "b1\n", "d/c": "c1\n",
                                       "gone": "g\n", "d/gone2": "g2\n", "x": "x\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    build(src, {"a": "a2 changed\n", "d/b": "b2 changed too\n"})
    os.unlink(p(src, "gone"))
    os.unlink(p(src, "d/gone2"))
    age(src, T0 + 100)
    return src, work


@pytest.mark.parametrize("extra", [
    pytest.param(["--backup-dir=../bak", "--suffix=.old"], id="backup-dir-outside"),
    pytest.param(["--backup-dir=bak"], id="backup-dir-inside"),
    pytest.param(["--suffix=.old"], id="suffix-in-place"),
])
def test_backup_options_back_up_changed_and_deleted_files_like_rsync(tmp_path, extra):
    src, work = _backup_setup(tmp_path)
    opts = ["-a", "-b", "--delete"] + extra
    result = differential(work, contents(src), SETTINGS["p2-f1"], opts, compare=False)
    sa, sb = mask_run_time_dir_mtimes(snapshot(result.oracle_dest),
                                       snapshot(result.msrsync_dest))
    assert_same_tree(sa, sb, label_a="rsync", label_b="msrsync")
    if extra[0] == "--backup-dir=bak":
        assert {b"bak/gone", b"bak/d/gone2", b"bak/a"} <= set(sb)
    elif extra[0].startswith("--backup-dir=../"):
        baks = [os.path.join(os.path.dirname(d), b"bak") for d in dests(work)]
        assert_same_tree(*mask_run_time_dir_mtimes(snapshot(baks[0]), snapshot(baks[1])),
                         label_a="rsync", label_b="msrsync")
        assert os.path.exists(os.path.join(baks[1], b"gone.old"))
        assert os.path.exists(os.path.join(baks[1], b"d", b"gone2.old"))
    else:
        assert {b"a.old", b"d/b.old", b"gone.old"} <= set(sb)


def _prev_setup(tmp_path):
    src = age(build(tmp_path / "src", {"same": "same\n", "d/same2": "same2\n",
                                       "changed": "v1\n", "d/changed2": "v1\n"}))
    work = tmp_path / "w"
    for dest in dests(work):
        os.makedirs(os.path.dirname(dest))
        prev = os.path.join(os.path.dirname(dest), b"prev")
        cp = run_rsync(src + b"/", prev, opts=["-a"])
        assert cp.returncode == 0, describe(cp)
    build(src, {"changed": "v2 changed\n", "d/changed2": "v2 changed\n"})
    build(src, {"new": "new\n"})
    age(src, T0 + 100)
    return src, work


def _linked_to_prev(dest):
    prev = os.path.join(os.path.dirname(dest), b"prev")
    out = set()
    for rel, entry in snapshot(dest).items():
        if entry["type"] == "file" and os.path.exists(os.path.join(prev, rel)):
            if os.stat(os.path.join(dest, rel)).st_ino == \
                    os.stat(os.path.join(prev, rel)).st_ino:
                out.add(rel)
    return out


@pytest.mark.parametrize("opt", ["--link-dest=../prev", "--compare-dest=../prev",
                                 "--copy-dest=../prev"])
def test_alternate_basis_dirs_relative_to_dest_match_rsync(tmp_path, opt):
    src, work = _prev_setup(tmp_path)
    result = differential(work, contents(src), SETTINGS["p2-f1"], ["-a", opt])
    linked = [_linked_to_prev(d) for d in dests(work)]
    assert linked[0] == linked[1]
    if opt.startswith("--link-dest"):
        assert linked[1] == {b"same", b"d/same2"}
    if opt.startswith("--compare-dest"):
        assert b"same" not in snapshot(result.msrsync_dest)


def _partial_dest(dest):
    build(dest, {"append.txt": "first part\n", "longer.txt": "dest is longer than src\n",
                 "inplace.txt": "old content!\n",
                 ".rsync-partial/big": b"B" * 1000, "sub/.rsync-partial/f": "part"})
    age(dest, T0)


@pytest.mark.parametrize("opts", [
    pytest.param(["--partial"], id="partial"),
    pytest.param(["--partial-dir=.rsync-partial"], id="partial-dir"),
    pytest.param(["--inplace"], id="inplace"),
    pytest.param(["--append"], id="append"),
])
def test_partial_inplace_append_match_rsync(tmp_path, opts):
    src = age(build(tmp_path / "src", {
        "append.txt": "first part\nsecond part\n", "longer.txt": "short\n",
        "inplace.txt": "new content!\n", "big": b"B" * 1000 + b"C" * 3000,
        "sub/f": "part and the rest\n"}))
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-a"] + opts,
                 prepare_dest=_partial_dest)


def test_sparse_files_allocated_like_rsync(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("hole1", "hole2"):
        with open(src / name, "wb") as f:
            f.write(b"head")
            f.seek(4 * 1024 * 1024)
            f.write(b"tail")
    age(src)
    result = differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-aS"])
    for name in (b"hole1", b"hole2"):
        a = os.stat(os.path.join(result.oracle_dest, name)).st_blocks
        b = os.stat(os.path.join(result.msrsync_dest, name)).st_blocks
        assert a == b and b < 1024, (name, a, b)


def _set_xattr(path, name, value):
    try:
        os.setxattr(path, name, value, follow_symlinks=False)
    except OSError as exc:
        pytest.skip("extended attributes unavailable here: %s" % exc)


def test_xattrs_copied_with_X_like_rsync(tmp_path):
    src = build(tmp_path / "src", {"f": "f\n", "d/g": "g\n", "plain": "p\n"})
    _set_xattr(p(src, "f"), b"user.one", b"value \xff")
    _set_xattr(p(src, "f"), b"user.two", b"")
    _set_xattr(p(src, "d"), b"user.dir", b"dir value")
    _set_xattr(p(src, "d/g"), b"user.big", b"x" * 2000)
    age(src)
    result = differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-aX"])
    assert snapshot(result.msrsync_dest)[b"d"].get("xattrs") == (("user.dir", b"dir value"),)


def _acl(entries):
    # Linux POSIX ACL xattr format (version 2): tag, perm, id
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, pm, i)
                                           for t, pm, i in entries)


def test_acls_copied_with_A_like_rsync(tmp_path):
    undefined = 0xFFFFFFFF
    access = _acl([(0x01, 6, undefined), (0x02, 4, 4242), (0x04, 4, undefined),
                   (0x08, 6, 4343), (0x10, 6, undefined), (0x20, 4, undefined)])
    default = _acl([(0x01, 7, undefined), (0x02, 5, 4242), (0x04, 5, undefined),
                    (0x10, 7, undefined), (0x20, 5, undefined)])
    src = build(tmp_path / "src", {"f": "f\n", "d/g": "g\n", "plain": "p\n"})
    _set_xattr(p(src, "f"), b"system.posix_acl_access", access)
    _set_xattr(p(src, "d"), b"system.posix_acl_default", default)
    age(src)
    result = differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-aA"])
    snap = snapshot(result.msrsync_dest)
    assert any(n == "system.posix_acl_access" for n, _ in snap[b"f"].get("xattrs", ()))
    assert any(n == "system.posix_acl_default" for n, _ in snap[b"d"].get("xattrs", ()))


@pytest.mark.skipif(not IS_ROOT, reason="owners other than the runner's need root")
@pytest.mark.parametrize("opts", [
    pytest.param(["-a", "--numeric-ids"], id="numeric-ids"),
    pytest.param(["-a", "--chown=1234:5678"], id="chown"),
    pytest.param(["-a", "--chmod=Dgo-rwx,Fu+x,g-w,o="], id="chmod"),
    pytest.param(["-a", "--chmod=D2775,F640"], id="chmod-octal"),
])
def test_owner_and_mode_options_match_rsync(tmp_path, opts):
    src = build(tmp_path / "src", {"f": "f\n", "d/g": "g\n", "d/e/h": "h\n", "l": (
        "symlink", "f")})
    for rel, (uid, gid) in {"f": (4242, 4343), "d": (1, 2), "d/g": (0, 65534),
                            "d/e": (4444, 4545)}.items():
        os.lchown(p(src, rel), uid, gid)
    os.lchown(p(src, "l"), 4646, 4747)
    os.chmod(p(src, "d/g"), 0o751)
    age(src)
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], opts)


@pytest.mark.parametrize("opts", [
    pytest.param(["-W"], id="whole-file"),
    pytest.param(["-z", "--compress-level=1"], id="compress-level"),
    pytest.param(["--no-W"], id="delta"),
])
def test_transfer_method_options_match_rsync_on_changed_files(tmp_path, opts):
    big = b"".join(b"%06d line of a file\n" % i for i in range(3000))
    src = age(build(tmp_path / "src", {"big": big, "small": "small\n", "d/x": big[:5000]}))

    def older(dest):
        build(dest, {"big": big[:30000] + b"changed" + big[30007:], "d/x": b"old\n"})
        age(dest, T0 - 100)

    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-a"] + opts,
                 prepare_dest=older)


def test_rsync_dry_run_option_changes_nothing(tmp_path):
    src = age(build(tmp_path / "src", {"a": "a\n", "d/b": "b\n", "d/e/c": "c\n"}))
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"xtra": "x\n", "d/xtra": "y\n"}, T0 + 50)
    build(src, {"a": "changed\n"})
    build(src, {"new/f": "new\n"})
    os.chmod(p(src, "d/b"), 0o600)
    age(src, T0 + 100)
    before = [snapshot(d) for d in dests(work)]
    differential(work, contents(src), SETTINGS["p8-f1"], ["-an", "--delete", "-H"])
    assert [snapshot(d) for d in dests(work)] == before


def test_rsync_dry_run_option_does_not_create_dest(tmp_path):
    src = age(build(tmp_path / "src", {"a": "a\n", "d/b": "b\n"}))
    differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-an"], compare=False)
    assert not any(os.path.exists(d) for d in dests(tmp_path / "w"))


def output_tree(root, n=60):
    spec = {}
    for i in range(n):
        spec["dir%d/%s-%03d.dat" % (i % 5, "long-name-" * (i % 13), i)] = "%d\n" % i * i
    spec["link"] = ("symlink", "dir0")
    spec["empty/"] = None
    return age(build(root, spec))


def test_log_file_is_appended_by_every_worker_and_never_truncated(tmp_path):
    src = output_tree(tmp_path / "src")
    log = tmp_path / "rsync.log"
    log.write_bytes(b"MARKER line written before msrsync\n")
    dest = tmp_path / "dest"
    cp = run_msrsync("-p", "8", "-f", "1", "--rsync", "-a --log-file=%s" % log,
                     src + b"/", dest)
    assert cp.returncode == 0, describe(cp)
    lines = log.read_bytes().decode("utf-8", "surrogateescape").splitlines()
    assert lines[0] == "MARKER line written before msrsync"
    assert all(re.match(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\d+\] ", l) for l in lines[1:]), \
        [l for l in lines[1:] if not re.match(r"^\d{4}/\d\d/\d\d ", l)][:5]
    logged = "\n".join(lines)
    for rel, entry in snapshot(src).items():
        if entry["type"] == "file":
            assert " %s" % text(rel) in logged, rel


def test_itemize_lines_match_rsync_on_initial_copy(tmp_path):
    """Every item line once, the same lines as rsync -i (the root's line apart)."""
    src = output_tree(tmp_path / "src")
    result = differential(tmp_path / "w", contents(src), SETTINGS["p8-f1"], ["-ai"])
    ours = [l for l in item_lines(result.msrsync.stdout) if not l.endswith(" ./")]
    theirs = [l for l in item_lines(result.oracle.stdout) if not l.endswith(" ./")]
    assert collections.Counter(ours) == collections.Counter(theirs), describe(result.msrsync)
    assert len(ours) > 60


def test_itemize_line_of_a_new_dest_root_matches_rsync(tmp_path):
    """rsync -i into a new DEST says "cd+++++++++ ./"."""
    src = output_tree(tmp_path / "src", n=10)
    result = differential(tmp_path / "w", contents(src), SETTINGS["p2-f1"], ["-ai"])
    ours = [l for l in item_lines(result.msrsync.stdout) if l.endswith(" ./")]
    theirs = [l for l in item_lines(result.oracle.stdout) if l.endswith(" ./")]
    assert ours == theirs, describe(result.msrsync)


def test_itemize_lines_match_rsync_on_incremental_run_with_delete(tmp_path):
    src = output_tree(tmp_path / "src", n=20)
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    on_both_dests(work, {"xtra": "x\n", "dir1/xtra": "y\n"}, T0 + 50)
    os.unlink(p(src, "dir0/-000.dat"))
    build(src, {"dir2/long-name-long-name--002.dat": "changed\n"})
    age(src, T0 + 100)
    result = differential(work, contents(src), SETTINGS["p2-f1"], ["-ai", "--delete"])
    assert sorted(item_lines(result.msrsync.stdout)) == \
        sorted(item_lines(result.oracle.stdout)), describe(result.msrsync)


def test_a_directory_time_another_bucket_just_changed_is_no_item_line(tmp_path):
    """One rsync compares a directory's mtime before it writes in it.  Here a bucket
    may look at it just after another renamed a file into it, before that one's rsync
    sets the time back.  A wrapper rsync stands for that other bucket: it touches
    DEST's dir2 before every rsync that handles names in dir2.  dir2's time was right
    before the run: no line for it, as from one rsync (a race seen once in CI)."""
    src = output_tree(tmp_path / "src", n=20)
    work = tmp_path / "w"
    differential(work, contents(src), SETTINGS["p2-f1"], ["-a"])
    build(src, {"dir2/long-name-long-name--002.dat": "changed\n"})   # dir2's own time kept
    age(src, T0 + 100)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "rsync"
    wrapper.write_text(
        "#!/bin/sh\n"
        "for arg in \"$@\"; do case $arg in --files-from=*) list=${arg#--files-from=};; esac;"
        " dest=$arg; done\n"
        "if [ -n \"$list\" ] && [ -d \"$dest/dir2\" ] &&"
        " tr '\\0' '\\n' < \"$list\" | grep -q '^dir2'; then touch -m \"$dest/dir2\"; fi\n"
        "exec %s \"$@\"\n" % shutil.which("rsync"))
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    oracle_dest, msrsync_dest = dests(work)
    oracle = run_rsync(contents(src)[0], oracle_dest, opts=["-ai"])
    result = run_msrsync(*(SETTINGS["p2-f1"] + ["--rsync", "-ai"] + contents(src) +
                           [msrsync_dest]), env=env)
    assert result.returncode == 0, describe(result)
    assert sorted(item_lines(result.stdout)) == sorted(item_lines(oracle.stdout)) == \
        [">f.st...... dir2/long-name-long-name--002.dat"], describe(result)
    assert_same_tree(oracle_dest, msrsync_dest)


def test_out_format_lines_are_whole_and_one_per_item(tmp_path):
    src = output_tree(tmp_path / "src", n=150)
    fmt = "<<%n|%l|%o>>"
    result = differential(tmp_path / "w", contents(src), SETTINGS["p8-f1"],
                          ["-a", "--out-format=" + fmt])
    lines = text(result.msrsync.stdout).splitlines()
    broken = [l for l in lines if not re.match(r"^<<.*\|\d+\|\w+>>$", l)]
    assert not broken, broken[:5]
    assert collections.Counter(lines) == collections.Counter(
        text(result.oracle.stdout).splitlines())


def test_verbose_names_match_rsync(tmp_path):
    src = output_tree(tmp_path / "src", n=40)
    result = differential(tmp_path / "w", contents(src), SETTINGS["p8-f1"], ["-av"])
    chatter = re.compile(r"^(sending incremental file list|created directory |sent \d|"
                         r"total size is |$)")
    theirs = [l for l in text(result.oracle.stdout).splitlines() if not chatter.match(l)]
    ours = [l for l in text(result.msrsync.stdout).splitlines() if not chatter.match(l)]
    assert collections.Counter(ours) == collections.Counter(theirs), describe(result.msrsync)


def test_deletions_without_verbose_never_print_nameless_lines(tmp_path):
    """A directory replaced by a file under --delete: no "deleting " line without a name
    (rsync without -v prints nothing at all)."""
    src = age(build(tmp_path / "src", {"x": "now a file\n", "y/s": "s\n"}))

    def dir_in_the_way(dest):
        build(dest, {"x/inner": "in\n", "y/extra": "e\n"})
        age(dest, T0 - 100)

    result = differential(tmp_path / "w", contents(src), ["-p", "2"], ["-a", "--delete"],
                          prepare_dest=dir_in_the_way)
    nameless = [l for l in text(result.msrsync.stdout).splitlines() if l.strip() == "deleting"]
    assert not nameless, describe(result.msrsync)
