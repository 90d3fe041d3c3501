"""Deletion: the --delete family (--del, --delete-before, -during, -delay, -after,
--delete-excluded), --force, --max-delete, --ignore-errors, --delete-missing-args, the
rules that shield DEST entries from deletion (P, R, -r), and -n with deletions.

msrsync deletes across buckets itself (a deletion pass after the copies); the rule
under test: ``msrsync -p N -f F --rsync "OPTS" SRC DEST`` leaves DEST exactly as
``rsync OPTS SRC DEST`` (entries, types, modes, owners, sizes, contents, mtimes of
files and directories, symlink targets, hard-link groups) and exits with the same
status.  Plain rsync is the oracle of every test (helpers.differential); incremental
scenarios sync both destinations, mutate SRC (and put the same extraneous entries in
both destinations), then sync again.  Every source entry gets an mtime in the past
(``age``: deepest first, directories last), since rsync leaves alone a directory
mtime that falls in the second of the copy.

--delete-missing-args: a missing SRC, or a missing name of the user's --files-from
list, deletes its DEST path (a non-empty directory only with --force or --delete);
the missing SRC is an entry of the file list, so "SRC1 missing DEST" makes DEST a
directory even when SRC1 is a single file.

Elsewhere: --delete with per-directory rule files (-F, -C) and with -m in
test_filters.py; deletion at a remote DEST in test_remote.py; --check's own use of
--delete in test_check.py; what rsync's own test suite found in test_rsync_parity.py.
"""

import json
import os
import re
import shlex
import shutil

import pytest

from helpers import (NOBODY, SETTINGS, T0, age, assert_same_tree, build, chown_tree, contents,
                     describe, dests, differential, extras, make_tree, on_both_dests, p,
                     rsync_stats_figures, run_msrsync, run_rsync, settings, snapshot, text)


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


# ----------------------------------------------------------- deletion's output lines


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


# ------------------------------------------------------------- outside DEST, never


@pytest.mark.parametrize("shape", ["dest-is-a-link", "a-parent-is-a-link"])
def test_delete_through_a_symlinked_dest_stays_inside_it(tmp_path, shape):
    """--delete with DEST (or a directory above it) a symlink: like rsync, the
    link is followed and only what lies under DEST is deleted; the link itself,
    its neighbours and everything beside the real directory stay."""
    src = os.fsencode(tmp_path / "src")
    build(src, {"keep": "k\n", "d/": "dir/", "d/f": "f\n"})
    age(src)
    dests = {}
    for side in ("oracle", "msrsync"):
        top = os.fsencode(tmp_path / side)
        build(top, {"real/": "dir/", "real/xtra": "x\n", "real/d/": "dir/",
                    "real/d/xtra": "x\n", "real/keep": "old\n", "beside/": "dir/",
                    "beside/f": "b\n", "beside/d/": "dir/", "beside/d/f": "b\n"})
        if shape == "dest-is-a-link":
            os.symlink(b"real", os.path.join(top, b"dest"))
            dests[side] = os.path.join(top, b"dest")
        else:
            os.symlink(b"real", os.path.join(top, b"via"))
            dests[side] = os.path.join(top, b"via", b"d")
        age(top)
    oracle = run_rsync(src + b"/", dests["oracle"], opts=["-a", "--delete"])
    cp = run_msrsync("-p", "3", "-f", "1", "--rsync", "-a --delete", src + b"/",
                     dests["msrsync"])
    assert oracle.returncode == 0, oracle.stderr
    assert cp.returncode == 0, cp.stderr
    assert os.path.islink(os.path.join(os.fsencode(tmp_path / "msrsync"),
                                       b"dest" if shape == "dest-is-a-link" else b"via"))
    assert os.path.exists(os.path.join(os.fsencode(tmp_path / "msrsync"), b"beside/d/f"))
    assert_same_tree(os.fsencode(tmp_path / "oracle"), os.fsencode(tmp_path / "msrsync"),
                     label_a="rsync", label_b="msrsync")


# ---------------------------------------------------------- the awkward trees


@pytest.mark.parametrize("opts", [["--delete"], ["--delete-after", "-v"],
                                  ["--delete", "--exclude=#*", "--exclude=extra*"]],
                         ids=["delete", "delete-after-v", "delete-exclude"])
def test_delete_in_the_weird_tree(tmp_path, weird_src, opts):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "7"],
                     rsync_opts=["-aS", "--numeric-ids"] + opts, prepare_dest=extras)
    if "-v" in opts:
        want = sorted(l for l in text(d.oracle.stdout).splitlines() if l.startswith("deleting"))
        got = sorted(l for l in text(d.msrsync.stdout).splitlines() if l.startswith("deleting"))
        assert got == want and got


def test_delete_without_trailing_slash_keeps_dest_root_extras(tmp_path, weird_src):
    def prepare(dest):
        os.makedirs(dest)
        extras(dest, b"src")
        extras(dest)
    differential(tmp_path, [weird_src], ["-p", "3", "-f", "7"],
                 rsync_opts=["-a", "--delete"], prepare_dest=prepare)


def test_delete_with_several_contents_srcs_shares_dest_root(tmp_path):
    a = make_tree(tmp_path / "in" / "a", "small", seed=21)
    b = age(build(tmp_path / "in" / "b", {"only in b/f": b"b\n", "b top": b"b\n"}), 10 ** 9,
            everything=True)

    def prepare(dest):
        os.makedirs(dest)
        extras(dest)
        build(dest, {"only in b/extra": b"x"})
        age(dest, 10 ** 9, everything=True)
    differential(tmp_path, [a + b"/", b + b"/"], ["-p", "3", "-f", "7"],
                 rsync_opts=["-a", "--delete"], prepare_dest=prepare)


def test_delete_with_missing_src_deletes_nothing_like_rsync(tmp_path, weird_src):
    differential(tmp_path, [weird_src + b"/", os.fsencode(tmp_path / "missing")],
                 ["-p", "3", "-f", "7"], rsync_opts=["-a", "--delete"],
                 prepare_dest=extras, expect_rc=23)


def test_delete_counts_deleted_files_like_rsync(tmp_path, weird_src):
    json_path = tmp_path / "del.json"
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "7", "--json", json_path],
                     rsync_opts=["-a", "--delete", "--stats"], prepare_dest=extras)
    figures = rsync_stats_figures(d.oracle.stdout)
    summary = json.loads(json_path.read_text())
    assert summary["rsync_stats"]["files_deleted"] == figures["Number of deleted files"] > 0


def test_delete_with_overlapping_srcs_is_refused_or_matches_rsync(tmp_path):
    a = make_tree(tmp_path / "in" / "a", "flat", n=4, seed=1)
    b = make_tree(tmp_path / "in" / "b", "flat", n=6, seed=2)
    dest = tmp_path / "dest"
    cp = run_msrsync("--rsync", "-a --delete", a + b"/", b + b"/", dest)
    if cp.returncode == 4:
        assert len(text(cp.stderr).splitlines()) == 1 and not os.path.exists(dest)
    else:
        o = run_rsync(a + b"/", b + b"/", tmp_path / "oracle", opts=["-a", "--delete"])
        assert cp.returncode == o.returncode, describe(cp)
        assert_same_tree(tmp_path / "oracle", dest, ignore_root_mtime=True)


# ------------------------------------ a file where DEST has a directory: --force, -b
# (found by a fuzz of option dimensions, as the conflicting --delete-WHEN options)


def _file_where_dest_has_a_directory(tmp_path, rel, opts):
    """SRC has the file rel (and g), DEST the directory rel holding "inner": both tools
    must exit 23. Returns rsync's and msrsync's DEST snapshots and msrsync's DEST."""
    src = tmp_path / "src"
    age(build(src, {rel: b"new\n", "g": b"other\n"}), 10 ** 9, everything=True)

    def prepare(dest):
        age(build(dest, {rel + "/inner": b"old\n"}), 1400000000, everything=True)
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/"], ["-p", "2", "-f", "1"],
                     rsync_opts=opts, prepare_dest=prepare, expect_rc=23, compare=False)
    return snapshot(d.oracle_dest), snapshot(d.msrsync_dest), d.msrsync_dest


@pytest.mark.parametrize("opts", [["-a", "-b", "--delete"], ["-a", "-b", "--force"]],
                         ids=["delete", "force"])
def test_backups_of_a_directory_a_file_replaces_are_kept_like_rsync(tmp_path, opts):
    """DEST has a directory where SRC has a file: rsync -b renames its contents to
    backups, cannot remove it ("cannot delete non-empty directory") and exits 23.
    msrsync took the failure for a race between workers and ran the bucket again,
    whose rsync deleted the directory with the backups in it: exit 0, no backup."""
    # (the root and f, where both wrote, keep the times of the run: rsync's failure
    # leaves them so)
    a, b, dest = _file_where_dest_has_a_directory(tmp_path, "f", opts)
    for rel in (b".", b"f"):
        assert (a[rel].pop("mtime_ns") > 1700 * 10 ** 15 and
                b[rel].pop("mtime_ns") > 1700 * 10 ** 15)
    assert_same_tree(a, b, label_a="rsync", label_b="msrsync")
    assert os.path.exists(os.path.join(dest, b"f", b"inner~"))


@pytest.mark.parametrize("kind,opts", [("file", ["-a", "--delete"]),
                                       ("symlink", ["-a", "--delete"]),
                                       ("file", ["-a", "--delete-excluded", "--exclude=*.o"]),
                                       ("file", ["-rlt", "--delete-after"])],
                         ids=["file", "symlink", "delete-excluded", "rlt"])
def test_a_lone_src_replaces_a_nonempty_directory_with_delete_like_rsync(tmp_path, kind,
                                                                         opts):
    """A SRC that is a file or a symlink (no trailing slash), where DEST holds a
    non-empty directory of its name: rsync's deletion lets it give way (exit 0), and
    with --delete-excluded the excluded files in it too. msrsync's run of that lone
    entry had neither the deletion options nor the copies' --force: "cannot delete
    non-empty directory", exit 23."""
    top = tmp_path / "top"
    build(top, {"target/f": b"t\n",
                "lone": b"lone\n" if kind == "file" else ("symlink", "target")})
    age(top, 10 ** 9, everything=True)

    def prepare(dest):
        build(dest, {"lone/inner/x": b"old\n", "lone/inner/y.o": b"excluded\n"})
        age(dest, 1400000000, everything=True)
    differential(tmp_path / "w", [os.fsencode(top / "lone")], ["-p", "2"],
                 rsync_opts=opts, prepare_dest=prepare)


def test_force_with_overlapping_srcs_is_one_rsync(tmp_path):
    """--force with SRCs that share a name in DEST: the SRCs are copied last first, and
    a later SRC's file x deleted the DEST directory x (and what only DEST had in it)
    that rsync keeps from the first SRC. So one plain rsync runs it, with a note."""
    opts = ["-a", "--force"]
    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    build(s1, {"x/f": b"1\n"})
    build(s2, {"x": b"2\n"})
    srcs = [os.fsencode(s1) + b"/", os.fsencode(s2) + b"/"]
    for dest in (tmp_path / "d", tmp_path / "o"):
        build(dest, {"x/extra": b"mine\n"})
    for tree in (s1, s2, tmp_path / "d", tmp_path / "o"):
        age(tree, 10 ** 9, everything=True)
    cp = run_msrsync("-p", "2", "-f", "1", "--rsync", " ".join(opts), *(srcs + [tmp_path / "d"]))
    assert cp.returncode == 0, describe(cp)
    lines = text(cp.stderr).splitlines()
    assert len(lines) == 1 and "--force" in lines[0] and "one plain rsync" in lines[0], describe(cp)
    o = run_rsync(*(srcs + [tmp_path / "o"]), opts=opts)
    assert o.returncode == 0, describe(o)
    assert_same_tree(tmp_path / "o", tmp_path / "d")
    assert os.path.exists(tmp_path / "d" / "x" / "extra")
    # one rsync of the whole run is what rsync does
    o = run_rsync(*(srcs + [tmp_path / "o"]), opts=opts)
    cp = run_msrsync("-p", "1", "--rsync", " ".join(opts), *(srcs + [tmp_path / "d"]))
    assert cp.returncode == o.returncode, describe(cp)
    assert_same_tree(tmp_path / "o", tmp_path / "d")


def test_conflicting_delete_when_options_are_a_usage_error_like_rsync(tmp_path):
    """rsync refuses two different --delete-WHEN options (exit 1) before anything;
    msrsync's probe (rsync OPTS --version) skips that check: it copied and exited 0."""
    src = tmp_path / "src"
    build(src, {"d/f": b"x\n"}, mtime=1500000000)
    for opts in (["-a", "--delete-before", "--delete-delay"], ["-a", "--del", "--delete-after"]):
        o = run_rsync(os.fsencode(src) + b"/", tmp_path / "o", opts=opts)
        cp = run_msrsync("-p", "2", "--rsync", " ".join(opts), os.fsencode(src) + b"/",
                         tmp_path / "d")
        assert o.returncode == cp.returncode == 1, describe(cp)
        assert len(text(cp.stderr).splitlines()) == 1, describe(cp)
        assert not os.path.exists(tmp_path / "d") and not os.path.exists(tmp_path / "o")
    # the same option twice, and --delete with a WHEN, are fine
    for opts in (["-a", "--del", "--delete-during"], ["-a", "--delete", "--delete-after"]):
        cp = run_msrsync("-p", "2", "--rsync", " ".join(opts), os.fsencode(src) + b"/",
                         tmp_path / "d")
        assert cp.returncode == 0, describe(cp)


@pytest.mark.parametrize("extra", [[], ["--force"]], ids=["delete", "delete-force"])
def test_max_delete_holds_for_a_directory_a_file_replaces_like_rsync(tmp_path, extra):
    """rsync counts what it deletes to put a file where DEST has a directory against
    --max-delete: at 0 it keeps the directory and exits 23. msrsync's copies ran with
    --force and no limit: they deleted it and the run exited 0."""
    a, b, dest = _file_where_dest_has_a_directory(
        tmp_path, "d/f", ["-a", "--delete", "--max-delete=0"] + extra)
    for rel in (b".", b"d"):          # (written in by both, at run time)
        a[rel].pop("mtime_ns"), b[rel].pop("mtime_ns")
    assert_same_tree(a, b, label_a="rsync", label_b="msrsync")
    assert os.path.isfile(os.path.join(dest, b"d", b"f", b"inner"))


# ------------------------------------------------------------------ --delete-missing-args

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
