"""Differential copies: msrsync must leave DEST exactly as plain rsync given the same
arguments leaves it, whatever the bucket cut, the number of workers, or the SRC form."""

import json
import os

import pytest

from helpers import (NOBODY, age, assert_same_tree, build, chown_tree, describe, differential,
                     make_tree, oracle_figures, run_msrsync, run_rsync, snapshot, tree_stats)

BUCKETS = {
    "f1": ["-f", "1"],       # one entry per bucket: directories listed file by file
    "s1": ["-s", "1"],       # one byte: every non-empty file is a bucket of its own
    "f7": ["-f", "7"],
    "s1K": ["-s", "1K"],
    "default": [],           # the whole tree fits one bucket
}


@pytest.mark.parametrize("procs", [1, 2, 4])
@pytest.mark.parametrize("bucket", ["f7", "s1K", "default"])
def test_copy_of_weird_tree_equals_rsync(tmp_path, weird_src, procs, bucket):
    differential(tmp_path, [weird_src + b"/"], ["-p", str(procs)] + BUCKETS[bucket])


@pytest.mark.slow
@pytest.mark.parametrize("procs", [1, 2, 4])
@pytest.mark.parametrize("bucket", ["f1", "s1"])
def test_copy_with_tiny_buckets_equals_rsync(tmp_path, small_src, procs, bucket):
    differential(tmp_path, [small_src + b"/"], ["-p", str(procs)] + BUCKETS[bucket])


@pytest.mark.parametrize("bucket", ["f7", "default"])
def test_src_without_trailing_slash_copies_the_directory_itself(tmp_path, weird_src,
                                                               bucket):
    d = differential(tmp_path, [weird_src], ["-p", "2"] + BUCKETS[bucket])
    assert os.path.isdir(os.path.join(d.msrsync_dest, b"src", b"deep"))


def test_src_trailing_slash_sets_existing_dest_root_attributes(tmp_path, weird_src):
    """rsync SRC/ DEST gives an existing DEST SRC's mode and mtime."""
    def prepare(dest):
        os.mkdir(dest)
        os.chmod(dest, 0o700)
        os.utime(dest, (1, 1))
    differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9"], prepare_dest=prepare)


def test_src_without_slash_keeps_existing_dest_root_mode(tmp_path, weird_src):
    def prepare(dest):
        os.mkdir(dest)
        os.chmod(dest, 0o711)
    differential(tmp_path, [weird_src], ["-p", "3", "-f", "9"], prepare_dest=prepare)


def test_several_srcs_dir_contents_dir_and_file(tmp_path, weird_src):
    other = make_tree(tmp_path / "in" / "other tree", "flat", n=25, seed=5)
    single = os.fsencode(tmp_path / "in" / "single file.txt")
    with open(single, "wb") as f:
        f.write(b"single\n")
    os.utime(single, (10 ** 9, 10 ** 9))
    differential(tmp_path, [weird_src + b"/", other, single], ["-p", "4", "-f", "5"])


def test_several_srcs_contents_merge_into_dest(tmp_path):
    a = make_tree(tmp_path / "in" / "a", "small", seed=2)
    b = make_tree(tmp_path / "in" / "b", "flat", n=30, seed=3)
    differential(tmp_path, [a + b"/", b + b"/"], ["-p", "2", "-f", "11"])


def test_duplicate_names_across_srcs_first_src_wins_like_rsync(tmp_path):
    """rsync removes duplicate names from its file list, keeping the first SRC's entry."""
    for name, content, mtime in ((b"a", b"first SRC, longer\n", 10 ** 9),
                                 (b"b", b"second\n", 2 * 10 ** 9)):
        d = os.path.join(os.fsencode(tmp_path), b"in", name, b"same")
        os.makedirs(d)
        with open(os.path.join(d, b"file"), "wb") as f:
            f.write(content)
        os.utime(os.path.join(d, b"file"), (mtime, mtime))
        os.utime(d, (mtime + 1, mtime + 1))
    base = os.path.join(os.fsencode(tmp_path), b"in")
    differential(tmp_path, [os.path.join(base, b"a", b"same"), os.path.join(base, b"b", b"same")],
                 ["-p", "1"])


def test_single_file_src_into_existing_dir(tmp_path, weird_src):
    differential(tmp_path, [os.path.join(weird_src, b"mode600")], ["-p", "2"],
                 prepare_dest=os.mkdir)


def test_single_file_src_with_new_name_renames_like_rsync(tmp_path, weird_src):
    d = differential(tmp_path, [os.path.join(weird_src, b"mode755")], ["-p", "2"],
                     dest_name=b"new name")
    assert os.path.isfile(d.msrsync_dest)


def test_single_file_src_into_missing_dir_with_trailing_slash(tmp_path, weird_src):
    d = differential(tmp_path, [os.path.join(weird_src, b"new\nline")], [],
                     dest_name=b"newdir/", ignore_root_mtime=True)
    assert os.path.isdir(d.msrsync_dest)


def test_single_file_src_with_weird_name_into_existing_dir(tmp_path, weird_src):
    differential(tmp_path, [os.path.join(weird_src, b"\xff\xfe-invalid-utf8")], [],
                 prepare_dest=os.mkdir)


@pytest.mark.parametrize("link", [b"link rel", b"link dangling", b"link abs"])
def test_symlink_src_is_copied_as_the_link(tmp_path, weird_src, link):
    d = differential(tmp_path, [os.path.join(weird_src, link)], ["-p", "2"],
                     prepare_dest=os.mkdir)
    assert os.path.islink(os.path.join(d.msrsync_dest, link))


def test_symlink_src_with_new_name(tmp_path, weird_src):
    d = differential(tmp_path, [os.path.join(weird_src, b"link to dir")], [],
                     dest_name=b"renamed link")
    assert os.path.islink(d.msrsync_dest)


def test_symlink_to_dir_src_with_trailing_slash_copies_the_dir(tmp_path, weird_src):
    differential(tmp_path, [os.path.join(weird_src, b"link to dir") + b"/"],
                 ["-p", "2", "-f", "4"])


def test_symlink_src_among_several_srcs(tmp_path, weird_src):
    differential(tmp_path, [os.path.join(weird_src, b"link to dir"),
                            os.path.join(weird_src, b"empty2")], ["-p", "2"])


@pytest.mark.parametrize("form", [b"sub/..", b"sub/../", b".", b"./", b"./many",
                                  b"many/.", b"many/./", b"./many/../deep/", b"/", b"many//"])
def test_dot_and_dotdot_components_read_like_rsync(tmp_path, weird_src, form):
    src = weird_src + b"/" + form.replace(b"sub", b"many/d03")
    differential(tmp_path, [src], ["-p", "2", "-f", "13"])


def test_relative_srcs_from_cwd(tmp_path, weird_src):
    cwd = os.path.dirname(weird_src)
    differential(tmp_path, [b"src/many/", b"./src/deep", b"src/mode644"], ["-p", "2",
                                                                          "-f", "6"], cwd=cwd)


def test_dotdot_src_from_subdirectory(tmp_path, weird_src):
    cwd = os.path.join(weird_src, b"many", b"d02")
    differential(tmp_path, [b"../"], ["-p", "2", "-f", "6"], cwd=cwd)
    differential(tmp_path / "2", [b".."], ["-p", "2", "-f", "6"], cwd=cwd)


def test_relative_dest_from_cwd(tmp_path, weird_src):
    os.makedirs(tmp_path / "oracle")
    os.makedirs(tmp_path / "msr")
    o = run_rsync(weird_src + b"/", b"dest", cwd=tmp_path / "oracle")
    m = run_msrsync("-p", "2", "-f", "20", weird_src + b"/", b"dest", cwd=tmp_path / "msr")
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert_same_tree(tmp_path / "oracle" / "dest", tmp_path / "msr" / "dest")


def test_dest_with_trailing_slash(tmp_path, weird_src):
    differential(tmp_path, [weird_src], ["-p", "2", "-f", "20"], dest_name=b"dest/")


def test_dest_not_existing_is_created_like_rsync(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src], ["-p", "2"])
    assert snapshot(d.msrsync_dest)[b"."]["mode"] == snapshot(d.oracle_dest)[b"."]["mode"]


@pytest.mark.parametrize("kind", ["contents", "dir"])
def test_empty_source_directory(tmp_path, kind):
    src = os.fsencode(tmp_path / "in" / "empty src")
    os.makedirs(src)
    os.chmod(src, 0o750)
    os.utime(src, (10 ** 9, 10 ** 9))
    differential(tmp_path, [src + b"/" if kind == "contents" else src], ["-p", "3"])


def test_dest_inside_existing_tree_with_other_files_keeps_them(tmp_path, weird_src):
    """No --delete: files already at DEST and not in SRC stay."""
    def prepare(dest):
        age(build(dest, {"many/d01/extra": b"extra\n", "extra top": b"extra\n"}), 10 ** 9,
            everything=True)
    differential(tmp_path, [weird_src + b"/"], ["-p", "4", "-f", "9"], prepare_dest=prepare)


def test_up_to_date_rerun_changes_nothing_and_exits_0(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9"])
    before = snapshot(d.msrsync_dest)
    json_path = tmp_path / "rerun.json"
    cp = run_msrsync("-p", "3", "-f", "9", "--json", json_path, weird_src + b"/",
                     d.msrsync_dest)
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(before, d.msrsync_dest, label_a="after first run", label_b="after re-run")
    summary = json.loads(json_path.read_text())
    assert summary["rsync_stats"]["regular_files_transferred"] == 0
    assert summary["rsync_stats"]["literal_data"] == 0


def test_modified_file_is_recopied_on_rerun(tmp_path):
    src = make_tree(tmp_path / "in" / "src", "small", seed=7)
    d = differential(tmp_path, [src + b"/"], ["-p", "2", "-f", "5"])
    # same size, new content, and an mtime in the past: rsync's quick check sees it
    target = os.path.join(src, b"many", b"d01", b"f0001.dat")
    size = os.path.getsize(target)
    with open(target, "wb") as f:
        f.write(b"Z" * size)
    os.utime(target, (12345, 12345))
    os.chmod(os.path.join(src, b"mode644"), 0o640)
    with open(os.path.join(src, b"many", b"d02", b"new file"), "wb") as f:
        f.write(b"new\n")
    # rsync compares mtimes to the second (--modify-window 0): give the changed
    # directory an mtime in another second, so that both tools must copy it
    os.utime(os.path.join(src, b"many", b"d02"), (23456, 23456))
    json_path = tmp_path / "rerun.json"
    o = run_rsync(src + b"/", d.oracle_dest)
    m = run_msrsync("-p", "2", "-f", "5", "--json", json_path, src + b"/", d.msrsync_dest)
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert_same_tree(d.oracle_dest, d.msrsync_dest, label_a="rsync", label_b="msrsync")
    with open(os.path.join(d.msrsync_dest, b"many", b"d01", b"f0001.dat"), "rb") as f:
        assert f.read() == b"Z" * size
    summary = json.loads(json_path.read_text())
    assert summary["rsync_stats"]["regular_files_transferred"] == 2


def test_readonly_source_dir_split_over_buckets_is_filled(tmp_path):
    src = make_tree(tmp_path / "in" / "src", "readonly", n=60)
    d = differential(tmp_path, [src + b"/"], ["-f", "3", "-p", "4"])
    assert len(os.listdir(os.path.join(d.msrsync_dest, b"ro dir"))) == 61
    d = differential(tmp_path / "noslash", [src], ["-f", "3", "-p", "4", "-s", "1K"])


@pytest.mark.nonroot
def test_readonly_source_dir_split_over_buckets_is_filled_as_nonroot(nonroot):
    prefix, python, work = nonroot
    src = make_tree(os.path.join(work, b"in", b"src"), "readonly", n=60)
    os.chmod(os.path.join(work, b"in"), 0o755)
    chown_tree(src, NOBODY, NOBODY)
    d = differential(work, [src + b"/"], ["-f", "3", "-p", "4"], prefix=prefix, python=python)
    assert len(os.listdir(os.path.join(d.msrsync_dest, b"ro dir"))) == 61
    assert snapshot(d.msrsync_dest)[b"ro dir"]["mode"] == oct(0o555)
    differential(os.path.join(work, b"2"), [src], ["-f", "3", "-p", "4"], prefix=prefix,
                 python=python)


@pytest.mark.nonroot
def test_weird_tree_copied_as_nonroot_equals_rsync(nonroot):
    prefix, python, work = nonroot
    src = make_tree(os.path.join(work, b"in", b"src"), "small", seed=4)
    os.chmod(os.path.join(work, b"in"), 0o755)
    chown_tree(src, NOBODY, NOBODY)
    differential(work, [src + b"/"], ["-f", "5", "-p", "3"], prefix=prefix, python=python)


def test_bucket_dir_is_removed_after_success(tmp_path, weird_src, private_tmpdir):
    differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "50"])
    assert os.listdir(private_tmpdir) == []


def test_stats_of_copy_match_rsync_stats(tmp_path, weird_src):
    """The aggregated rsync figures of a fresh copy are those of one rsync."""
    json_path = tmp_path / "s.json"
    differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9", "--json", json_path])
    figures = oracle_figures([weird_src + b"/"], tmp_path)
    rs = json.loads(json_path.read_text())["rsync_stats"]
    assert rs["regular_files_transferred"] == figures["Number of regular files transferred"]
    assert rs["total_file_size"] == figures["Total file size"]
    assert rs["transferred_file_size"] == figures["Total transferred file size"]
    assert rs["literal_data"] == figures["Literal data"]
    assert rs["regular_files_transferred"] == tree_stats(weird_src)["files"]


def test_src_dot_from_cwd(tmp_path, weird_src):
    differential(tmp_path, [b"."], ["-p", "2", "-f", "13"], cwd=weird_src)


def test_dest_dot_from_cwd(tmp_path, weird_src):
    for side in ("oracle", "msrsync"):
        os.makedirs(tmp_path / side)
    o = run_rsync(weird_src + b"/", b".", cwd=tmp_path / "oracle")
    m = run_msrsync("-p", "2", "-f", "13", weird_src + b"/", b".", cwd=tmp_path / "msrsync")
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert_same_tree(tmp_path / "oracle", tmp_path / "msrsync")


def test_dest_symlink_to_dir_is_followed_like_rsync(tmp_path, weird_src):
    for side in ("oracle", "msrsync"):
        os.makedirs(tmp_path / side / "real")
        os.symlink("real", tmp_path / side / "dest")
        os.utime(tmp_path / side / "dest", (1, 1), follow_symlinks=False)
        os.utime(tmp_path / side, (1, 1))
    o = run_rsync(weird_src + b"/", tmp_path / "oracle" / "dest")
    m = run_msrsync("-p", "3", "-f", "13", weird_src + b"/", tmp_path / "msrsync" / "dest")
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert os.path.islink(tmp_path / "msrsync" / "dest")
    assert_same_tree(tmp_path / "oracle", tmp_path / "msrsync")


def test_more_workers_than_buckets(tmp_path, small_src):
    differential(tmp_path, [small_src + b"/"], ["-p", "16", "-f", "60"])


def test_sparse_file_stays_sparse_with_S(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "13"])
    for dest in (d.oracle_dest, d.msrsync_dest):
        st = os.stat(os.path.join(dest, b"sparse"))
        assert st.st_blocks * 512 < st.st_size / 2, "sparse file was filled in %r" % dest


def test_xattrs_copied_with_X_by_every_bucket(tmp_path, weird_src):
    snap = snapshot(weird_src)
    if not snap[b"mode644"].get("xattrs"):
        pytest.skip("no user extended attributes on this filesystem")
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "7"],
                     rsync_opts=["-aSX", "--numeric-ids"])
    assert snapshot(d.msrsync_dest)[b"dir700"].get("xattrs")


def test_link_dest_hard_links_unchanged_files(tmp_path, small_src):
    """--link-dest=DIR (relative to DEST) works the same from every bucket."""
    def prepare(dest):
        prev = os.path.join(os.path.dirname(dest), b"prev")
        assert run_rsync(small_src + b"/", prev).returncode == 0
    d = differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "7"],
                     rsync_opts=["-a", "--link-dest=../prev"], prepare_dest=prepare)
    linked = [p for p, e in snapshot(d.msrsync_dest).items() if e.get("hardlinks")]
    assert len(linked) >= tree_stats(small_src)["files"] - 2


@pytest.mark.nonroot
def test_rerun_adds_file_into_readonly_dest_dir_as_nonroot(nonroot):
    """A second run must add a new file into a directory it made 0555 the first time,
    as one rsync does."""
    prefix, python, work = nonroot
    src = make_tree(os.path.join(work, b"in", b"src"), "readonly", n=30)
    chown_tree(src, NOBODY, NOBODY)
    d = differential(work, [src + b"/"], ["-f", "3", "-p", "4"], prefix=prefix, python=python)
    ro = os.path.join(src, b"ro dir")
    os.chmod(ro, 0o755)
    new = os.path.join(ro, b"new file")
    with open(new, "wb") as f:
        f.write(b"new\n")
    os.utime(new, (10 ** 9, 10 ** 9))
    os.lchown(new, NOBODY, NOBODY)
    os.chmod(ro, 0o555)
    os.utime(ro, (2 * 10 ** 9, 2 * 10 ** 9))
    o = run_rsync(src + b"/", d.oracle_dest, prefix=prefix)
    m = run_msrsync("-f", "3", "-p", "4", src + b"/", d.msrsync_dest, prefix=prefix,
                    python=python)
    assert m.returncode == o.returncode, describe(m) + "\n" + describe(o)
    assert_same_tree(d.oracle_dest, d.msrsync_dest, label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("opts", [None, ["-rlt"]], ids=["default", "no-perms"])
def test_umask_applies_like_rsync(tmp_path, weird_src, opts):
    """DEST (and, without -p, every new entry) gets rsync's umask-based modes."""
    old = os.umask(0o027)
    try:
        differential(tmp_path, [weird_src], ["-p", "3", "-f", "13"], rsync_opts=opts,
                     dest_name=b"new/")
    finally:
        os.umask(old)
