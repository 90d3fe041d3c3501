"""Awkward bytes in the SRC and DEST paths themselves (not only inside the tree)."""

import os

import pytest

from helpers import describe, differential, make_tree, stderr_lines, text

AWKWARD_DIRS = [
    b"non-utf8 \xff\xfe",
    b"new\nline",
    b"-rf leading dash",
    b"quote ' single",
    b'quote " double',
    b"back\\slash $HOME `x` *?",
    u"unicod\u00e9 \u65e5\u672c".encode("utf-8"),
]


@pytest.mark.parametrize("name", AWKWARD_DIRS, ids=lambda n: text(n).encode(
    "ascii", "backslashreplace").decode())
@pytest.mark.parametrize("slash", [b"/", b""], ids=["contents", "dir"])
def test_awkward_src_and_dest_paths(tmp_path, name, slash):
    work = os.path.join(os.fsencode(tmp_path), name)
    src = make_tree(os.path.join(work, b"in", name + b" src"), "tiny", seed=11)
    differential(work, [src + slash], ["-p", "3", "-f", "3"], dest_name=name + b" dest")


def test_all_awkward_bytes_in_one_path(tmp_path):
    name = b"".join(AWKWARD_DIRS)
    work = os.path.join(os.fsencode(tmp_path), b"w")
    src = make_tree(os.path.join(work, b"in", name), "tiny", seed=12)
    differential(work, [src + b"/", src], ["-p", "2", "-f", "3"], dest_name=name)


def test_relative_src_and_dest_starting_with_dash(tmp_path):
    """'./-name' is how both rsync and msrsync are given a path that starts with '-'."""
    work = os.fsencode(tmp_path)
    make_tree(os.path.join(work, b"-rf src"), "tiny", seed=13)
    differential(work, [b"./-rf src/"], ["-p", "2", "-f", "3"], cwd=work,
                 dest_name=b"-dest")


def test_single_file_with_awkward_name_and_awkward_new_name(tmp_path):
    work = os.fsencode(tmp_path)
    f = os.path.join(work, b"in", b"-x 'q' \"d\"\n\xff")
    os.makedirs(os.path.dirname(f))
    with open(f, "wb") as h:
        h.write(b"content\n")
    differential(work, [f], [], dest_name=b"new \xfe\nname 'x'")


def test_awkward_missing_src_is_named_in_the_message(tmp_path):
    work = os.fsencode(tmp_path)
    other = make_tree(os.path.join(work, b"in", b"other"), "flat", n=3)
    missing = os.path.join(work, b"in", b"missing 'q' \xff")
    d = differential(work, [missing, other], [], expect_rc=23)
    lines = [l for l in stderr_lines(d.msrsync) if "link_stat" in l]
    assert len(lines) == 1 and "missing 'q' " in lines[0], describe(d.msrsync)
