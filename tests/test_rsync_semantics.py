"""rsync semantics msrsync keeps: hard links and the pass-through options (--min-size,
--max-size, the quick check, -b, --link-dest and the other basis directories, --partial,
--inplace, --append, -S, -X, -A, owners and modes, the transfer methods, -n, --log-file,
-i, --out-format, -v).  Filter rules are in test_filters.py, deletion in test_delete.py.

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

import pytest

from helpers import (IS_ROOT, SETTINGS, T0, age, assert_same_tree, build, contents, describe,
                     dests, differential, item_lines, mask_run_time_dir_mtimes, on_both_dests,
                     p, run_msrsync, run_rsync, settings, snapshot, text)


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
