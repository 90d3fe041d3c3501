"""The harness itself: the comparator must be able to fail, and plain rsync (the oracle)
must reproduce the source trees, or every differential test would prove nothing."""

import os
import stat

import pytest

from helpers import (assert_same_tree, build, diff_snapshots, make_tree, run_rsync, snapshot,
                     tree_stats, IS_ROOT)


def _keep_parent_mtime(path):
    """Context: mutate path without changing its parent directory's mtime."""
    class Keep(object):
        def __enter__(self):
            self.parent = os.path.dirname(path)
            self.st = os.lstat(self.parent)

        def __exit__(self, *exc):
            os.utime(self.parent, ns=(self.st.st_atime_ns, self.st.st_mtime_ns))
    return Keep()


def _change_content(root):
    p = os.path.join(root, b"file a")
    st = os.lstat(p)
    with _keep_parent_mtime(p):
        with open(p, "r+b") as f:
            f.write(b"X")  # same size, first byte differs
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    return b"file a", {"sha256"}


def _change_mode(root):
    os.chmod(os.path.join(root, b"file a"), 0o640)
    return b"file a", {"mode"}


def _change_dir_mtime(root):
    os.utime(os.path.join(root, b"sub"), ns=(10 ** 18, 10 ** 18))
    return b"sub", {"mtime_ns"}


def _change_symlink_target(root):
    p = os.path.join(root, b"sub", b"link")
    st = os.lstat(p)
    with _keep_parent_mtime(p):
        os.unlink(p)
        os.symlink(b"../file-b", p)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    return os.path.join(b"sub", b"link"), {"target"}


def _change_hardlink_group(root):
    # "twin 1" and "twin 2" have equal content, mode and mtime: making them one inode
    # changes nothing but the hard-link group.
    a, b = os.path.join(root, b"twin 1"), os.path.join(root, b"twin 2")
    with _keep_parent_mtime(b):
        os.unlink(b)
        os.link(a, b)
    return None, {"hardlinks"}


def _change_owner(root):
    os.lchown(os.path.join(root, b"file a"), 1234, 5678)
    return b"file a", {"uid", "gid"}


def _change_symlink_mtime(root):
    os.utime(os.path.join(root, b"sub", b"link"), ns=(1, 1), follow_symlinks=False)
    return os.path.join(b"sub", b"link"), {"mtime_ns"}


def _change_xattr(root):
    os.setxattr(os.path.join(root, b"file-b"), "user.x", b"1")
    return b"file-b", {"xattrs"}


MUTATIONS = {
    "xattr": _change_xattr,
    "content": _change_content,
    "mode": _change_mode,
    "dir-mtime": _change_dir_mtime,
    "symlink-target": _change_symlink_target,
    "hardlink-group": _change_hardlink_group,
    "owner": _change_owner,
    "symlink-mtime": _change_symlink_mtime,
}


def _user_xattrs(path):
    probe = os.path.join(os.fsencode(path), b"xattr-probe")
    open(probe, "wb").close()
    try:
        os.setxattr(probe, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        os.unlink(probe)


def _base_tree(root):
    build(root, {"file a": b"content of a\n", "file-b": b"content of b\n"})
    build(root, {"twin 1": b"twins\n", "twin 2": b"twins\n"}, mtime=10 ** 9)
    build(root, {"sub/": None, "sub/link": ("symlink", "../file a")}, mtime=10 ** 8)
    os.utime(root, ns=(10 ** 17, 10 ** 17))


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_comparator_detects_each_single_difference(tmp_path, mutation):
    if mutation == "owner" and not IS_ROOT:
        pytest.skip("changing a file's owner needs root")
    if mutation == "xattr" and not _user_xattrs(tmp_path):
        pytest.skip("no user extended attributes on this filesystem")
    a = os.fsencode(tmp_path / "a")
    b = os.fsencode(tmp_path / "b")
    _base_tree(a)
    cp = run_rsync(a + b"/", b)
    assert cp.returncode == 0, cp.stderr
    assert_same_tree(a, b)  # identical before the mutation
    path, keys = MUTATIONS[mutation](b)
    diffs = diff_snapshots(snapshot(a), snapshot(b))
    assert diffs, "the mutation %s went unnoticed" % mutation
    # only the intended attribute differs (so the test does not pass by accident)
    for d in diffs:
        assert any(" %s differs" % k in d for k in keys), diffs
        if path is not None:
            assert d.startswith(repr(path)), diffs
    with pytest.raises(AssertionError) as info:
        assert_same_tree(a, b)
    assert "trees differ" in str(info.value)
    # ignoring the root's mtime ignores nothing else
    with pytest.raises(AssertionError):
        assert_same_tree(a, b, ignore_root_mtime=True)


def test_comparator_detects_missing_extra_and_type_change(tmp_path):
    a = os.fsencode(tmp_path / "a")
    b = os.fsencode(tmp_path / "b")
    _base_tree(a)
    assert run_rsync(a + b"/", b).returncode == 0
    os.unlink(os.path.join(b, b"file-b"))
    os.mkfifo(os.path.join(b, b"extra fifo"))
    os.unlink(os.path.join(b, b"file a"))
    os.mkdir(os.path.join(b, b"file a"))
    diffs = "\n".join(diff_snapshots(snapshot(a), snapshot(b), "A", "B"))
    assert "b'file-b': only in A" in diffs
    assert "b'extra fifo': only in B" in diffs
    assert "b'file a': type differs: A='file' B='dir'" in diffs
    with pytest.raises(AssertionError):
        assert_same_tree(a, b)


def test_comparator_root_mtime_is_ignored_only_on_request(tmp_path):
    a = os.fsencode(tmp_path / "a")
    b = os.fsencode(tmp_path / "b")
    _base_tree(a)
    assert run_rsync(a + b"/", b).returncode == 0
    os.utime(b, ns=(5, 5))
    with pytest.raises(AssertionError):
        assert_same_tree(a, b)
    assert_same_tree(a, b, ignore_root_mtime=True)


@pytest.mark.parametrize("kind", ["weird", "small", "tiny", "readonly", "flat", "big"])
def test_oracle_rsync_reproduces_source_tree(tmp_path, kind):
    """Plain rsync -aS --numeric-ids copies every attribute the snapshot records (hard
    links excepted: they need -H, which msrsync refuses)."""
    src = make_tree(tmp_path / "src", kind)
    dest = os.fsencode(tmp_path / "dest")
    cp = run_rsync(src + b"/", dest, opts=["-aSX", "--numeric-ids"])
    assert cp.returncode == 0, cp.stderr
    expected = snapshot(src)
    for entry in expected.values():
        entry.pop("hardlinks", None)
    assert_same_tree(expected, dest, label_a="source", label_b="rsync copy")


def test_weird_tree_has_every_awkward_case(weird_src):
    snap = snapshot(weird_src)
    names = set(os.path.basename(p) for p in snap)
    types = set(e["type"] for e in snap.values())
    assert {"file", "dir", "symlink", "fifo"} <= types
    for name in (b"new\nline", b"-rf", b"\xff\xfe-invalid-utf8", b"quote'single",
                 b'quote"double', b"back\\slash", b"n" * 200):
        assert name in names
    assert any(p.count(b"/") >= 30 for p in snap), "no 30-deep path"
    assert snap[b"read only"]["mode"] == oct(0o555)
    assert sum(1 for p in snap if p.startswith(b"read only/")) >= 50
    targets = [e["target"] for e in snap.values() if e["type"] == "symlink"]
    assert any(t.startswith(b"/") for t in targets)
    assert not os.path.exists(os.path.join(weird_src, b"link dangling"))
    assert any(e.get("hardlinks") for e in snap.values())
    assert {oct(0o600), oct(0o755), oct(0o644)} <= set(e["mode"] for e in snap.values())
    assert len(set(e["mtime_ns"] for e in snap.values())) > len(snap) * 0.9
    assert any(e["type"] == "dir" and not os.listdir(os.path.join(weird_src, p))
               for p, e in snap.items() if p != b".")
    st = tree_stats(weird_src)
    assert 300 <= st["files"] <= 600
    if IS_ROOT:
        assert any(e["uid"] == 4242 for e in snap.values())
    assert stat.S_ISLNK(os.lstat(os.path.join(weird_src, b"link to dir")).st_mode)
    assert b"m" * 255 in names
    assert snap[b"mode600"]["mtime_ns"] < 0
    assert snap[b"loop"]["target"] == b"loop"
