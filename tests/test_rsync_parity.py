"""Parity with one rsync where rsync's own test suite, run through msrsync at -p 4 -f 3,
found msrsync's DEST, exit status or output to differ from rsync's.

Each test runs the same command twice: once as plain ``rsync OPTS SRC... DEST`` (the
oracle) and once as ``msrsync -p 4 -f 3 --rsync "OPTS" SRC... DEST``, then compares the
exit codes and the two DESTs entry by entry (mtimes included, but for those both tools
left at the time of the run).  Where rsync refuses something, msrsync must refuse it
too, with rsync's exit code, and leave DEST as rsync leaves it.
"""

import collections
import os
import re
import shutil
import stat
import subprocess

import pytest

from helpers import (IS_ROOT, NOBODY, RECENT_NS, T0, age, assert_same_tree, build, describe,
                     rsync_opts_string, run_msrsync, run_rsync, snapshot, text)

# small buckets and several workers: one tree makes many rsyncs
MSRSYNC_OPTS = ["-p", "4", "-f", "3"]
HAS_SETFACL = shutil.which("setfacl") is not None
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: entries owned by nobody "
                                                    "(65534) are made with lchown")

# Both runs side by side: rsync's and msrsync's CompletedProcess and DEST.
Parity = collections.namedtuple("Parity", "oracle msrsync oracle_dest msrsync_dest")


def _parity(workdir, rsync_opts, srcs, cwd=None, prepare=None, prefix=(), dest_name="B",
            input=None):
    """Run rsync into workdir/rsync/DEST and msrsync into workdir/msrsync/DEST (prepare(dest)
    called for each first); check msrsync exits with rsync's code and says no traceback."""
    workdir = os.fsencode(workdir)
    dests = []
    for side in (b"rsync", b"msrsync"):
        parent = os.path.join(workdir, side)
        os.makedirs(parent, exist_ok=True)
        dest = os.path.join(parent, os.fsencode(dest_name))
        if prepare is not None:
            prepare(dest)
        dests.append(dest)
    oracle = run_rsync(*(list(srcs) + [dests[0]]), opts=rsync_opts, cwd=cwd, prefix=prefix,
                       input=input)
    result = run_msrsync(*(MSRSYNC_OPTS + ["--rsync", rsync_opts_string(rsync_opts)] +
                           list(srcs) + [dests[1]]), cwd=cwd, prefix=prefix, input=input)
    assert b"Traceback" not in result.stderr, describe(result)
    assert result.returncode == oracle.returncode, (
        "msrsync exited %d, rsync %d\n--- rsync ---\n%s\n--- msrsync ---\n%s" % (
            result.returncode, oracle.returncode, describe(oracle), describe(result)))
    return Parity(oracle, result, dests[0], dests[1])


def _mask_run_time_mtimes(a, b):
    """Drop from two snapshots the mtime of entries both tools left at the time of the run
    (newer than RECENT_NS: DEST made without -t, files copied without -t); where only one
    side did, the difference stays."""
    for rel in set(a) & set(b):
        if a[rel].get("mtime_ns", 0) > RECENT_NS and b[rel].get("mtime_ns", 0) > RECENT_NS:
            a[rel].pop("mtime_ns")
            b[rel].pop("mtime_ns")
    return a, b


def _assert_same_dest(run, oracle_root=None, msrsync_root=None):
    """The two DESTs (or the two given roots) exist alike and hold the same entries."""
    __tracebackhide__ = True
    a = oracle_root or run.oracle_dest
    b = msrsync_root or run.msrsync_dest
    assert os.path.lexists(a) == os.path.lexists(b), (
        "DEST exists after rsync: %s, after msrsync: %s" % (os.path.lexists(a),
                                                            os.path.lexists(b)))
    if os.path.lexists(a):
        sa, sb = _mask_run_time_mtimes(snapshot(a), snapshot(b))
        assert_same_tree(sa, sb, label_a="rsync", label_b="msrsync")


def _copy_now(src, base):
    """A copy of src as it is now (rsync -a), and a prepare(dest) for _parity that
    gives each DEST that copy: DESTs made before src changes."""
    cp = run_rsync(str(src) + "/", str(base), opts=["-a"])
    assert cp.returncode == 0, describe(cp)

    def prepare(dest):
        cp = run_rsync(str(base) + "/", dest, opts=["-a"])
        assert cp.returncode == 0, describe(cp)
    return prepare


def _tree(root, files=8):
    """A tree of a few directories, `files` files in each, all aged to T0."""
    spec = {"top": "top\n"}
    for d in ("d", "d/e", "other"):
        for i in range(files):
            spec["%s/f%02d" % (d, i)] = "%s %d\n" % (d, i)
    spec["empty/"] = None
    build(root, spec)
    return age(root)


# ---------------------------------------------------------------- SRCs named twice

@pytest.mark.parametrize("srcs", [["s/", "s/", "s2/"], ["s2/", "s/", "s/"],
                                  ["s/", "s2/", "s/"], ["s/d", "s/d", "s/top"]],
                         ids=lambda srcs: " ".join(srcs))
def test_a_src_named_twice_among_overlapping_srcs_copies_like_rsync(tmp_path, srcs):
    """The same SRC given twice, beside another whose names overlap it in DEST: one
    rsync copies it once (it drops duplicate names, the first SRC's entry wins); msrsync
    must not fail ("write to closed file") and must leave rsync's DEST."""
    _tree(tmp_path / "s")
    build(tmp_path / "s2", {"d/f00": "s2's own f00, longer\n", "d/new": "new\n",
                            "top": "s2's top\n"})
    age(tmp_path / "s2", T0 + 50)
    run = _parity(tmp_path, ["-a"], srcs, cwd=tmp_path)
    assert run.oracle.returncode == 0, describe(run.oracle)
    _assert_same_dest(run)


# ---------------------------------------------------------------- --files-from

@pytest.mark.parametrize("opts", [["-a"], ["-ar"]])
@pytest.mark.parametrize("listed", [b"from/./\n", b"from/./dir/sub/\n",
                                    b"from/./dir/sub\nfrom/./dir/top\nfrom/./\n"],
                         ids=["from-dot", "dir-slash", "mixed"])
def test_files_from_names_cut_at_their_dot_slash_like_rsync(tmp_path, opts, listed):
    """A --files-from name holding "/./" (rsync implies -R with --files-from): the path
    sent starts after the "/./", so "from/./" puts from's entries at DEST's top (no
    DEST/from, no DEST/from/emptydir), and a name ending in "/" sends that directory's
    entries too, as rsync does."""
    build(tmp_path / "base", {"from/dir/sub/file": "file\n", "from/dir/sub/file2": "file2\n",
                              "from/dir/top": "top\n", "from/emptydir/": None,
                              "from/other/x": "x\n", "outside": "outside\n"})
    age(tmp_path / "base")
    (tmp_path / "list").write_bytes(listed)
    run = _parity(tmp_path, opts + ["--files-from=%s" % (tmp_path / "list")],
                  [str(tmp_path / "base") + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert not os.path.lexists(os.path.join(run.oracle_dest, b"from")), \
        "the set-up is not real: rsync made DEST/from"
    _assert_same_dest(run)


# ---------------------------------------------------------------- filters

def test_clear_rule_then_cvs_dir_merge_with_delete_excluded_deletes_listed_names(tmp_path):
    """"-f! -f:C --delete-excluded": the clear rule empties the list, then ":C" reads each
    directory's .cvsignore; DEST's mid/x, which mid/.cvsignore lists, is excluded and so
    deleted by --delete-excluded, as rsync deletes it."""
    src = tmp_path / "s"
    build(src, dict([("mid/x", "x\n"), ("top", "top\n")] +
                    [("mid/f%d" % i, "%d\n" % i) for i in range(6)] +
                    [("mid/deep/g%d" % i, "%d\n" % i) for i in range(6)]))
    age(src)
    prepare = _copy_now(src, tmp_path / "before")
    (src / "mid" / ".cvsignore").write_text("x\n")
    age(src)
    run = _parity(tmp_path, ["-a", "-f!", "-f:C", "--delete-excluded"], [str(src) + "/"],
                  prepare=prepare)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert not os.path.lexists(os.path.join(run.oracle_dest, b"mid/x")), \
        "the set-up is not real: rsync kept mid/x"
    _assert_same_dest(run)


def _xattrs_supported(path):
    try:
        os.setxattr(path, "user.probe", b"1")
        os.removexattr(path, "user.probe")
        return True
    except OSError:
        return False


def test_xattr_name_filter_rule_drops_only_that_xattr(tmp_path):
    """The filter rule modifier x ("-x user.foo" with -X) filters xattr names, not file
    names: the file is copied with user.bar and without user.foo, as rsync copies it."""
    src = tmp_path / "s"
    _tree(src)
    target = src / "d" / "f01"
    if not _xattrs_supported(str(target)):
        pytest.skip("no user xattrs on %s" % tmp_path)
    os.setxattr(str(target), "user.foo", b"foo")
    os.setxattr(str(target), "user.bar", b"bar")
    age(src, everything=True)
    run = _parity(tmp_path, ["-aX", "-f", "-x user.foo"], [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    copied = os.path.join(run.oracle_dest, b"d/f01")
    assert sorted(os.listxattr(copied)) == ["user.bar"], "the set-up is not real"
    _assert_same_dest(run)


# ---------------------------------------------------------------- --delay-updates

@pytest.mark.parametrize("where", ["", "a/b/c/"], ids=["top", "deep"])
def test_delay_updates_removes_a_stale_holding_dir_like_rsync(tmp_path, where):
    """A holding directory (.~tmp~) an interrupted --delay-updates run left in DEST, with
    a stale copy of a file in it: rsync removes the stale file when it handles the file,
    then the empty holding directory; msrsync must leave no .~tmp~ either."""
    src = tmp_path / "s"
    spec = {where + "foo": "1\n"}
    if where:
        spec.update(("f%d" % i, "%d\n" % i) for i in range(5))
    build(src, spec)
    age(src)

    copy = _copy_now(src, tmp_path / "before")

    def prepare(dest):
        copy(dest)
        holding = os.path.join(dest, os.fsencode(where), b".~tmp~")
        os.mkdir(holding)
        with open(os.path.join(holding, b"foo"), "w") as handle:
            handle.write("2\n")
        for path in (os.path.join(holding, b"foo"), os.path.join(dest, os.fsencode(where),
                                                                 b"foo")):
            os.utime(path, (T0 - 100, T0 - 100))

    (src / where / "foo").write_text("3\n")
    age(src)
    run = _parity(tmp_path, ["-ai", "--delay-updates"], [str(src) + "/"], prepare=prepare)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert not os.path.lexists(os.path.join(run.oracle_dest, os.fsencode(where), b".~tmp~")), \
        "the set-up is not real: rsync kept .~tmp~"
    _assert_same_dest(run)


# ---------------------------------------------------------------- the DEST directory itself

@pytest.mark.skipif(not HAS_SETFACL, reason="needs setfacl (Debian package acl)")
def test_dest_made_by_msrsync_takes_its_parents_default_acl(tmp_path):
    """Under umask 077, a DEST msrsync creates in a directory with a default ACL
    (d:u::7,d:g::7,d:o:7) gets the mode rsync's mkdir gives it there (the default ACL,
    not the umask, masks it): not drwx------ when rsync's is wider."""
    src = tmp_path / "s"
    _tree(src / "dir")
    umask = ["sh", "-c", 'umask 077; exec "$@"', "sh"]

    def prepare(dest):
        parent = os.path.dirname(dest)
        cp = subprocess.run(["setfacl", "-m", "d:u::7,d:g::7,d:o:7", parent],
                            stderr=subprocess.PIPE)
        if cp.returncode:
            pytest.skip("setfacl fails here: %s" % text(cp.stderr).strip())

    run = _parity(tmp_path, ["-r"], [str(src / "dir") + "/"], prepare=prepare, prefix=umask)
    assert run.oracle.returncode == 0, describe(run.oracle)
    mode = stat.S_IMODE(os.stat(run.oracle_dest).st_mode)
    assert mode != 0o700, "the set-up is not real: rsync's DEST is 0700 under umask 077"
    assert oct(stat.S_IMODE(os.stat(run.msrsync_dest).st_mode)) == oct(mode)
    _assert_same_dest(run)


def test_relative_dot_slash_src_gives_dest_the_mtime_rsync_gives_it(tmp_path):
    """"cd s; rsync -aR ./down/deep ../B": the "." the implied path starts from is s
    itself, whose mtime rsync gives DEST; msrsync must not leave DEST at the time of the
    run."""
    src = tmp_path / "s"
    build(src, dict([("down/deep/f%d" % i, "%d\n" % i) for i in range(8)] +
                    [("down/deep/x/g%d" % i, "%d\n" % i) for i in range(8)] +
                    [("beside", "not sent\n"), ("other/sub/f", "not sent either\n")]))
    age(src)
    os.utime(str(src), (T0 - 5000, T0 - 5000))
    run = _parity(tmp_path, ["-aR"], ["./down/deep"], cwd=src)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert os.stat(run.oracle_dest).st_mtime == T0 - 5000, "the set-up is not real"
    _assert_same_dest(run)


def test_file_and_two_dir_srcs_sharing_a_name_give_dest_rsyncs_mtime(tmp_path):
    """"rsync -a shallow a/ b/ B/", shallow a file, a/ and b/ directories holding a file of
    one name: DEST gets the mtime rsync gives it (its "." from a/ and b/), not the time of
    the run, and the shared name is the first SRC's."""
    work = tmp_path / "w"
    spec = {"shallow": "shallow\n", "a/same": "a's\n", "b/same": "b's, longer\n"}
    spec.update(("a/f%d" % i, "a%d\n" % i) for i in range(5))
    spec.update(("b/g%d" % i, "b%d\n" % i) for i in range(5))
    build(work, spec)
    age(work)
    os.utime(str(work / "a"), (T0 - 3000, T0 - 3000))
    os.utime(str(work / "b"), (T0 - 7000, T0 - 7000))
    run = _parity(tmp_path, ["-a"], ["shallow", "a/", "b/"], cwd=work)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert os.stat(run.oracle_dest).st_mtime_ns < RECENT_NS, "the set-up is not real"
    _assert_same_dest(run)


# ---------------------------------------------------------------- -M (remote options)

def _fake_super_ids_dropped(snap):
    """A snapshot with the owner field of each --fake-super xattr ("MODE MAJOR,MINOR
    UID:GID") left out: without -o and -g, rsync 3.5.0 stores ids that change from run
    to run (two plain rsyncs of one tree differ there)."""
    for entry in snap.values():
        if "xattrs" in entry:
            entry["xattrs"] = tuple(
                (name, value.rsplit(b" ", 1)[0] if name == "user.rsync.%stat" else value)
                for name, value in entry["xattrs"])
    return snap


def test_remote_option_on_a_local_copy_does_not_break_buckets(tmp_path):
    """"-r -M--fake-super" on a local copy: one rsync takes it (rsync 3.5.0 fails -M only
    together with --files-from: "File-list index ... not in ..."); msrsync must not make
    it the combination that fails, and leaves rsync's DEST with rsync's exit code."""
    src = tmp_path / "s"
    build(src, dict([("d1/f%02d" % i, "%d\n" % i) for i in range(25)] +
                    [("d2/g%02d" % i, "%d\n" % i) for i in range(25)]))
    age(src)
    run = _parity(tmp_path, ["-r", "-M--fake-super"], [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    oracle, ours = _mask_run_time_mtimes(snapshot(run.oracle_dest),
                                         snapshot(run.msrsync_dest))
    assert_same_tree(_fake_super_ids_dropped(oracle), _fake_super_ids_dropped(ours),
                     label_a="rsync", label_b="msrsync")


# ---------------------------------------------------------------- another user's symlinks

@needs_root
def test_per_directory_merge_file_that_is_another_users_symlink_is_not_followed(tmp_path):
    """-C's per-directory sub/.cvsignore is a symlink nobody owns, to a file outside the
    tree that lists "canary": rsync refuses to follow it and copies sub/canary; msrsync
    must not apply the rules it points at."""
    src = tmp_path / "s"
    build(src, dict([("sub/f%d" % i, "%d\n" % i) for i in range(8)] +
                    [("g%d" % i, "%d\n" % i) for i in range(8)] + [("sub/canary", "c\n")]))
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "rules").write_text("canary\n")
    link = src / "sub" / ".cvsignore"
    os.symlink(str(tmp_path / "outside" / "rules"), str(link))
    os.lchown(str(link), NOBODY, NOBODY)
    age(src)
    run = _parity(tmp_path, ["-aC"], [str(src) + "/"])
    assert os.path.lexists(os.path.join(run.oracle_dest, b"sub/canary")), \
        "the set-up is not real: rsync followed nobody's symlink"
    _assert_same_dest(run)


@needs_root
@pytest.mark.parametrize("owner", [0, NOBODY], ids=["root's", "nobody's"])
def test_no_implied_dirs_does_not_write_through_a_dest_symlink(tmp_path, owner):
    """"-aR --no-implied-dirs src/./A/B/file d2/" where d2/A is a symlink to ../o2: rsync
    3.5.0 refuses to go through it (ELOOP, exit 23) and o2 stays empty; msrsync must
    neither make o2/B/file nor exit otherwise."""
    build(tmp_path / "src", {"A/B/file": "file\n"})
    age(tmp_path / "src")

    def prepare(dest):
        side = os.path.dirname(dest)
        os.mkdir(os.path.join(side, b"o2"))
        os.mkdir(dest)
        os.symlink(b"../o2", os.path.join(dest, b"A"))
        os.lchown(os.path.join(dest, b"A"), owner, owner)
        age(side, everything=True)

    run = _parity(tmp_path, ["-aR", "--no-implied-dirs"], ["src/./A/B/file"], cwd=tmp_path,
                  prepare=prepare, dest_name="d2")
    assert run.oracle.returncode == 23, describe(run.oracle)
    assert os.listdir(tmp_path / "msrsync" / "o2") == [], "msrsync wrote through d2/A"
    _assert_same_dest(run, tmp_path / "rsync", tmp_path / "msrsync")


@needs_root
def test_files_from_list_that_is_another_users_symlink_is_refused(tmp_path):
    """--files-from names a symlink nobody owns, to a real list: rsync refuses to open it
    (exit 1, DEST not made); msrsync must not copy what it names."""
    src = tmp_path / "s"
    _tree(src)
    (tmp_path / "real.list").write_text("d/f01\nd/f02\n")
    link = tmp_path / "link.list"
    os.symlink(str(tmp_path / "real.list"), str(link))
    os.lchown(str(link), NOBODY, NOBODY)
    run = _parity(tmp_path, ["-a", "--files-from=%s" % link], [str(src) + "/"])
    assert run.oracle.returncode == 1, describe(run.oracle)
    assert not os.path.lexists(run.msrsync_dest), "msrsync copied what the list names"
    _assert_same_dest(run)


# ---------------------------------------------------------------- what rsync prints

def test_out_format_with_a_literal_percent_i_logs_transfers_only(tmp_path):
    """--out-format="%%i %n" is the text "%i" and a name: rsync prints it for transferred
    items only, never for a file's attribute-only change (a chmod); msrsync prints the
    same lines as rsync, not those of a real %i."""
    src = tmp_path / "s"
    _tree(src)
    prepare = _copy_now(src, tmp_path / "before")
    os.chmod(str(src / "d" / "f03"), 0o600)           # attribute only
    os.utime(str(src / "other"), (T0 - 10, T0 - 10))  # attribute only
    (src / "d" / "e" / "new").write_text("new\n")      # transferred
    os.utime(str(src / "d" / "f05"), (T0 + 10, T0 + 10))  # transferred (quick check)
    age(src)
    run = _parity(tmp_path, ["-a", "--out-format=%%i %n"], [str(src) + "/"],
                  prepare=prepare)
    assert run.oracle.returncode == 0, describe(run.oracle)

    def lines(cp):
        return sorted(set(l for l in text(cp.stdout).splitlines() if l.strip()))

    oracle = lines(run.oracle)
    assert "%i d/e/new" in oracle and "%i d/f05" in oracle and "%i d/f03" not in oracle, \
        "the set-up is not real: %r" % oracle
    assert lines(run.msrsync) == lines(run.oracle)
    _assert_same_dest(run)


# rsync -h: a figure under 1000 as it is, else three digits and a unit ("2.40M")
HUMAN_NUMBER = r"(\d{1,3}|\d{1,3}\.\d\d[KMGTPE])"
HUMAN_STATS_LINES = {
    "Number of files": re.compile(r"^%s( \(.*\))?$" % HUMAN_NUMBER),
    "Number of created files": re.compile(r"^%s( \(.*\))?$" % HUMAN_NUMBER),
    "Number of deleted files": re.compile(r"^%s( \(.*\))?$" % HUMAN_NUMBER),
    "Number of regular files transferred": re.compile(r"^%s$" % HUMAN_NUMBER),
    "Total file size": re.compile(r"^%s bytes$" % HUMAN_NUMBER),
    "Total transferred file size": re.compile(r"^%s bytes$" % HUMAN_NUMBER),
    "Literal data": re.compile(r"^%s bytes$" % HUMAN_NUMBER),
    "Matched data": re.compile(r"^%s bytes$" % HUMAN_NUMBER),
    "Total bytes sent": re.compile(r"^%s$" % HUMAN_NUMBER),
    "Total bytes received": re.compile(r"^%s$" % HUMAN_NUMBER),
}


def _stats_values(output):
    """{label: value text} of the --stats lines rsync -h prints."""
    values = {}
    for line in text(output).splitlines():
        label, sep, value = line.partition(": ")
        if sep and label in HUMAN_STATS_LINES:
            values[label] = value.strip()
    return values


def test_stats_in_the_rsync_options_follow_human_readable(tmp_path):
    """--rsync "-a -h --stats": the --stats figures msrsync prints are in rsync -h's form
    ("2.40M bytes", not "2,400,016 bytes" nor "2400016 bytes"), line by line as rsync
    prints them; the number of files and the sizes of a fresh copy are rsync's own."""
    src = tmp_path / "s"
    spec = dict(("d/f%d" % i, os.urandom(300000)) for i in range(8))
    spec.update(("g%d" % i, "%d\n" % i) for i in range(8))
    build(src, spec)
    age(src)
    run = _parity(tmp_path, ["-a", "-h", "--stats"], [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    oracle, ours = _stats_values(run.oracle.stdout), _stats_values(run.msrsync.stdout)
    assert sorted(oracle) == sorted(HUMAN_STATS_LINES), "rsync -h's stats lines changed"
    for label, form in HUMAN_STATS_LINES.items():
        assert form.match(oracle[label]), "rsync -h prints %s: %r" % (label, oracle[label])
        assert label in ours, "msrsync printed no %r line:\n%s" % (label, describe(run.msrsync))
        assert form.match(ours[label]), "msrsync prints %s: %r, rsync -h %r" % (
            label, ours[label], oracle[label])
    assert oracle["Total file size"] == "2.40M bytes", "the set-up is not real"
    for label in ("Total file size", "Total transferred file size", "Literal data",
                  "Matched data", "Number of regular files transferred"):
        assert ours[label] == oracle[label], label
    assert ours["Number of files"].split()[0] == oracle["Number of files"].split()[0]
    _assert_same_dest(run)


# ---------------------------------------------------------------- what one rsync takes

def _refusal_tree(root):
    """SRCs for the option cases: s (files, a hard link, a fifo, a symlink, per-directory
    rule files), s2 (overlapping s in DEST), a --files-from list and rule files."""
    root = os.fsencode(root)
    s = os.path.join(root, b"s")
    _tree(s)
    build(s, {"d/.pdir": "- f01\n", "d/.wr": "-_f02 -_f03\n", "link": ("symlink", "top"),
              "hard": ("hardlink", "d/f00"), "fifo": ("fifo",), "other.rules": "- f04\n",
              "pruned/only": "only\n", ".rsync-filter": "- only\n"})
    build(os.path.join(root, b"s2"), {"d/f00": "s2's f00, longer\n", "d/new": "new\n"})
    build(root, {"list": "d/f01\nd/e\nother/f02\n", "rules": "- f05\n",
                 "dirmerge.rules": ": .pdir\n"})
    age(root)


# (id, rsync options, SRCs): {root} is the test's directory; what msrsync refused
# with exit 4 ("is not supported", "do not recurse") that one rsync of a local copy takes
OPTION_CASES = [
    ("dirs-without-r", ["-d", "-lt"], ["s/"]),
    ("devices-itemized-without-r", ["-D", "-i"], ["s/"]),
    ("fake-super-without-r", ["--fake-super", "-Di"], ["s/"]),
    ("links-times-without-r", ["-lt"], ["s/"]),
    ("old-dirs", ["--old-dirs", "-lt"], ["s/"]),
    ("filter-slash-modifier", ["-a", "-f", "-/ {root}/s/d/f06"], ["s/"]),
    ("dir-merge-word-split", ["-a", "-f", ":w .wr"], ["s/"]),
    ("dir-merge-slash-modifier", ["-a", "-f", ":/ .pdir"], ["s/"]),
    ("merge-perishable", ["-a", "-f", ".p {root}/rules"], ["s/"]),
    ("dir-merge-inside-merge-file", ["-a", "-f", "merge {root}/dirmerge.rules"], ["s/"]),
    ("dir-merge-relative-name", ["-a", "-f", ": d/.pdir"], ["s/"]),
    ("merge-from-stdin", ["-a", "-f", ". -"], ["s/"]),
    ("prune-with-per-dir-rules", ["-am", "-F"], ["s/"]),
    ("prune-with-files-from", ["-am", "--files-from={root}/list"], ["s/"]),
    ("no-R-with-files-from", ["-a", "--no-R", "--files-from={root}/list"], ["s/"]),
    ("no-d-with-files-from", ["-a", "--no-d", "--files-from={root}/list"], ["s/"]),
    ("per-dir-rules-with-files-from", ["-a", "-F", "--files-from={root}/list"], ["s/"]),
    ("delete-with-files-from", ["-ar", "--delete", "--files-from={root}/list"], ["s/"]),
    ("hard-links-several-srcs", ["-aH"], ["s/", "s2/"]),
    ("delete-overlapping-srcs", ["-a", "--delete"], ["s/", "s2/"]),
    ("force-overlapping-srcs", ["-a", "--force"], ["s/", "s2/"]),
    ("no-implied-dirs-different-paths", ["-aR", "--no-implied-dirs"], ["s/./d/e", "s/./top"]),
    ("no-implied-dirs-files-from", ["-aR", "--no-implied-dirs", "--files-from={root}/list"],
     ["s/"]),
    ("list-only", ["--list-only"], ["s/"]),
    ("write-batch", ["-a", "--write-batch={root}/batch"], ["s/"]),
    ("only-write-batch", ["-a", "--only-write-batch={root}/batch-only"], ["s/"]),
]


@pytest.mark.parametrize("opts, srcs", [case[1:] for case in OPTION_CASES],
                         ids=[case[0] for case in OPTION_CASES])
def test_options_one_rsync_takes_are_not_refused(tmp_path, opts, srcs):
    """What one rsync accepts on a local copy msrsync runs too (split, or as one plain
    rsync): the exit code and DEST are rsync's, not a refusal (exit 4)."""
    _refusal_tree(tmp_path)
    opts = [o.replace("{root}", str(tmp_path)) for o in opts]
    run = _parity(tmp_path, opts, srcs, cwd=tmp_path, input=b"- f07\n")
    assert run.oracle.returncode == 0, describe(run.oracle)
    _assert_same_dest(run)


def test_merge_rule_inside_a_per_directory_file_is_applied_like_rsync(tmp_path):
    """-F with d/.rsync-filter holding "merge other.rules" (a name rsync reads from the
    transfer's top): the merged rules exclude d/f03 below d, as one rsync excludes it."""
    src = tmp_path / "s"
    _tree(src)
    build(src, {"d/.rsync-filter": "merge other.rules\n", "other.rules": "- f03\n"})
    age(src)
    run = _parity(tmp_path, ["-a", "-F"], ["s/"], cwd=tmp_path)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert not os.path.lexists(os.path.join(run.oracle_dest, b"d/f03")), \
        "the set-up is not real: rsync copied d/f03"
    _assert_same_dest(run)


# ---------------------------------------------------------------- merge files read in merge files

@pytest.mark.parametrize("how", ["per-directory", "global"])
def test_a_merge_file_that_merges_itself_stops_at_rsyncs_depth_limit(tmp_path, how):
    """A merge file that names itself: rsync stops at its depth limit with one message
    and exit 11; msrsync too, where it recursed without end (a per-directory file) or
    refused the nesting."""
    src = tmp_path / "s"
    build(src, dict(("f%d" % i, "%d\n" % i) for i in range(6)))
    rules = src / ".merge" if how == "per-directory" else tmp_path / "self.rules"
    rules.write_text(". %s\n" % (".merge" if how == "per-directory" else rules))
    age(src)
    opts = ["-a", "--filter=: .merge" if how == "per-directory" else "--filter=. %s" % rules]
    run = _parity(tmp_path, opts, [str(src) + "/"])
    assert run.oracle.returncode == 11, describe(run.oracle)
    assert b"merge-file include depth limit" in run.oracle.stderr, describe(run.oracle)
    assert b"merge-file include depth limit" in run.msrsync.stderr, describe(run.msrsync)


def test_a_merge_files_lines_are_not_echoed_in_its_error(tmp_path):
    """A line of a merged file that is no rule: the error names the file, never shows
    the line (whoever chooses the file merged would read its lines back), as rsync."""
    src = tmp_path / "s"
    build(src, {"f": "f\n"})
    secret = "TOP-SECRET-PASSWORD-abc123"
    (tmp_path / "rules").write_text(secret + "\n")
    run = _parity(tmp_path, ["-r", "--filter=. %s" % (tmp_path / "rules")], [str(src) + "/"])
    assert run.oracle.returncode != 0 and secret.encode() not in run.oracle.stderr
    assert secret.encode() not in run.msrsync.stderr + run.msrsync.stdout, describe(run.msrsync)
    assert b"rules" in run.msrsync.stderr, describe(run.msrsync)


# ---------------------------------------------------------------- -R SRCs inside one another

def test_relative_srcs_one_inside_the_other_delete_nothing_the_other_sends(tmp_path):
    """-R --del with "down/3/deep" and "extra/./down/3/deep/added": the second SRC's file
    lies inside the first's directory, so the first's deletion must not delete it (rsync's
    one file list holds both); rsync deletes nothing."""
    build(tmp_path / "src", dict(("down/3/deep/f%d" % i, "%d\n" % i) for i in range(6)))
    build(tmp_path / "extra", {"down/3/deep/added": "added\n"})
    age(tmp_path / "src")
    age(tmp_path / "extra")
    srcs = ["down/3/deep", str(tmp_path / "extra") + "/./down/3/deep/added"]
    run = _parity(tmp_path, ["-aiR"], srcs, cwd=tmp_path / "src")
    assert run.oracle.returncode == 0, describe(run.oracle)
    run = _parity(tmp_path, ["-aiR", "--del"], srcs, cwd=tmp_path / "src")
    assert run.oracle.returncode == 0 and b"deleting" not in run.oracle.stdout
    assert b"deleting" not in run.msrsync.stdout, describe(run.msrsync)
    assert os.path.lexists(os.path.join(run.msrsync_dest, b"down/3/deep/added"))
    _assert_same_dest(run)


# ---------------------------------------------------------------- a DEST msrsync makes

def test_a_dest_msrsync_makes_is_itemized_as_rsync_itemizes_it(tmp_path):
    """-ai into a DEST that does not exist: "created directory DEST" names it without the
    trailing slash given, and DEST's own line is "cd+++++++++ ./", as rsync prints them
    (msrsync makes DEST before its rsyncs start, which then saw it as existing)."""
    src = tmp_path / "s"
    _tree(src)
    run = _parity(tmp_path, ["-ai"], [str(src) + "/"], dest_name="B/")
    assert run.oracle.returncode == 0, describe(run.oracle)

    def lines(cp):
        return sorted(l.replace("/msrsync/", "/rsync/") for l in text(cp.stdout).splitlines())
    oracle = lines(run.oracle)
    assert "cd+++++++++ ./" in oracle and any(l.startswith("created directory ") and
                                               not l.endswith("/") for l in oracle), oracle
    assert lines(run.msrsync) == oracle
    _assert_same_dest(run)


# ---------------------------------------------------------------- deletion with other options

def test_delete_with_remove_source_files_keeps_what_it_moved(tmp_path):
    """--del --remove-source-files: rsync moves SRC's files into DEST and deletes only
    what SRC never had; msrsync's deletion pass, after the copies, found the moved files
    gone from SRC and deleted them from DEST too (their only copy)."""
    src = tmp_path / "s"
    build(src, dict([("f%d" % i, "%d\n" % i) for i in range(6)] +
                    [("d/g%d" % i, "%d\n" % i) for i in range(6)]))
    age(src)
    copy = tmp_path / "src-copy"
    assert run_rsync(str(src) + "/", str(copy), opts=["-a"]).returncode == 0

    def prepare(dest):
        build(dest, {"extra": "extra\n"})
        if os.path.lexists(str(src)):
            shutil.rmtree(str(src))
        assert run_rsync(str(copy) + "/", str(src), opts=["-a"]).returncode == 0
    oracle_src = tmp_path / "oracle-src"
    prepare(tmp_path / "rsync" / "B")
    oracle = run_rsync(str(src) + "/", str(tmp_path / "rsync" / "B"),
                       opts=["-a", "--del", "--remove-source-files"])
    os.rename(str(src), str(oracle_src))
    prepare(tmp_path / "msrsync" / "B")
    mine = run_msrsync(*(MSRSYNC_OPTS + ["--rsync", "-a --del --remove-source-files",
                                         str(src) + "/", str(tmp_path / "msrsync" / "B")]))
    assert oracle.returncode == 0 and mine.returncode == 0, describe(mine)
    assert os.path.lexists(str(tmp_path / "rsync" / "B" / "f0")), "the set-up is not real"
    assert_same_tree(tmp_path / "rsync" / "B", tmp_path / "msrsync" / "B",
                     label_a="rsync", label_b="msrsync")
    # (SRC's directories, emptied, have the time of each run)
    assert_same_tree(*_mask_run_time_mtimes(snapshot(oracle_src), snapshot(src)),
                     label_a="rsync's SRC", label_b="msrsync's SRC")


def test_delete_removes_what_a_negated_directory_rule_hides(tmp_path):
    """"-f 'show .filt*' -f 'hide,! */' --del": "! */" matches every non-directory, so
    every file but .filt* is hidden from the sender and deleted at DEST, as rsync does;
    msrsync read the negated directory-only rule as matching nothing."""
    src = tmp_path / "s"
    spec = {}
    for d in ("", "foo/", "bar/baz/"):
        spec.update(("%sf%d" % (d, i), "%d\n" % i) for i in range(4))
        spec[d + ".filt"] = "- nothing\n"
    build(src, spec)
    age(src)
    prepare = _copy_now(src, tmp_path / "before")
    run = _parity(tmp_path, ["-a", "-f", "show .filt*", "-f", "hide,! */", "--del"],
                  [str(src) + "/"], prepare=prepare)
    assert run.oracle.returncode == 0, describe(run.oracle)
    assert not os.path.lexists(os.path.join(run.oracle_dest, b"foo/f0")), "not real"
    _assert_same_dest(run)


# ---------------------------------------------------------------- -v into a new DEST

@pytest.mark.parametrize("opts", [["-av"], ["-avn"], ["-ai"]], ids=lambda o: o[0])
def test_a_new_dests_own_line_comes_first_and_once(tmp_path, opts):
    """-v (-i) into a DEST that does not exist: "created directory DEST", then DEST's own
    line ("./", "cd+++++++++ ./"), once each, first, as rsync prints them; msrsync's
    buckets of a dry run each said they would create DEST, and DEST's line came late or
    not at all."""
    src = tmp_path / "s"
    _tree(src)
    run = _parity(tmp_path, opts, [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)

    def head(cp):
        lines = [l.replace("/msrsync/", "/rsync/") for l in text(cp.stdout).splitlines()
                 if l and not l.startswith(("sending ", "building "))]
        return lines[:2], sum(l.startswith("created directory") for l in lines)
    assert head(run.msrsync) == head(run.oracle)
    assert head(run.oracle)[1] == 1


# ---------------------------------------------------------------- -H beyond regular files

@needs_root
def test_hard_linked_devices_fifos_and_symlinks_stay_linked(tmp_path):
    """-aH: rsync keeps the hard links of devices, fifos and symlinks too (Linux links
    them all); msrsync grouped regular files only, and made the others apart."""
    src = tmp_path / "s"
    build(src, dict(("d/f%d" % i, "%d\n" % i) for i in range(6)))
    os.mknod(str(src / "blk"), stat.S_IFBLK | 0o600, os.makedev(1, 2))
    os.link(str(src / "blk"), str(src / "d" / "blk2"))
    os.mkfifo(str(src / "ff"))
    os.link(str(src / "ff"), str(src / "d" / "ff2"))
    os.symlink("target", str(src / "sl"))
    os.link(str(src / "sl"), str(src / "d" / "sl2"), follow_symlinks=False)
    age(src)
    run = _parity(tmp_path, ["-aH"], [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    for a, b in ((b"blk", b"d/blk2"), (b"ff", b"d/ff2"), (b"sl", b"d/sl2")):
        assert os.lstat(os.path.join(run.oracle_dest, a)).st_ino == \
            os.lstat(os.path.join(run.oracle_dest, b)).st_ino, "the set-up is not real"
        assert os.lstat(os.path.join(run.msrsync_dest, a)).st_ino == \
            os.lstat(os.path.join(run.msrsync_dest, b)).st_ino, (a, b)
    _assert_same_dest(run)


# ---------------------------------------------------------------- -vv

def test_very_verbose_prints_no_heap_statistics_rsync_does_not_print(tmp_path):
    """-avv: one rsync prints its file lines, no heap statistics and no filter line of a
    rule the user did not give; msrsync gave each bucket --stats for its own summary,
    which with -vv is rsync's third stats level, and every rsync (sender, generator,
    receiver of every bucket) printed its heap; its directory pass said "hiding file"
    of every file at the top ("top"), which its own "- *" hides."""
    src = tmp_path / "s"
    _tree(src)
    run = _parity(tmp_path, ["-avv"], [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    for word in (b"heap statistics", b"hiding"):
        assert word not in run.oracle.stdout + run.oracle.stderr, "not real"
        assert word not in run.msrsync.stdout + run.msrsync.stderr, describe(run.msrsync)

    def files(cp):
        return sorted(l for l in text(cp.stdout).splitlines() if l.endswith(" is uptodate")
                      or re.match(r"^[\w.-]+(/[\w.-]+)*/?$", l))
    assert files(run.msrsync) == files(run.oracle)
    _assert_same_dest(run)


def test_info_stats3_asked_for_still_prints_heap_statistics(tmp_path):
    """--info=stats3: rsync prints its heap statistics; msrsync's own --info=stats2,
    given after the user's options, turned them off."""
    src = tmp_path / "s"
    _tree(src)
    run = _parity(tmp_path, ["-r", "--info=stats3"], [str(src) + "/"])
    assert b"heap statistics" in run.oracle.stdout + run.oracle.stderr, "not real"
    assert b"heap statistics" in run.msrsync.stdout + run.msrsync.stderr, describe(run.msrsync)
    _assert_same_dest(run)


# ---------------------------------------------------------------- -vv's filter traces

def _trace_lines(cp):
    return sorted(l for l in text(cp.stdout).splitlines() if l.startswith("[sender] "))


@pytest.mark.parametrize("opts", [["-r", "-vv", "--exclude=*.o", "--exclude=skip/"],
                                  ["-r", "-F", "-vv", "--exclude=*.o"],
                                  ["-r", "--debug=filter", "--include=keep.o", "-f", "- *.o"]],
                         ids=["global", "per-dir", "debug"])
def test_filter_traces_name_each_verdict_once_as_rsync_does(tmp_path, opts):
    """-vv (--debug=filter): rsync's sender says "hiding file X because of pattern P" once
    for each entry a rule excludes ("showing" for an include), a per-directory file's rule
    by where it came from; msrsync's buckets said it only of what their lists held (the
    scanner had left the excluded names out) or once per rsync that walked a subtree."""
    src = tmp_path / "s"
    spec = {"keep.o": "k\n", "skip/x": "x\n", ".rsync-filter": "- secret-[n]ame\n- drop/\n"}
    for d in ("", "a/", "a/b/", "c/"):
        spec.update(("%sf%d" % (d, i), "%d\n" % i) for i in range(4))
        spec[d + "obj.o"] = "o\n"
        spec[d + "secret-name"] = "s\n"
        spec[d + "drop/f"] = "d\n"
    build(src, spec)
    age(src)
    run = _parity(tmp_path, opts, [str(src) + "/"])
    assert run.oracle.returncode == 0, describe(run.oracle)
    oracle = _trace_lines(run.oracle)
    assert len(oracle) >= 4, describe(run.oracle)
    assert _trace_lines(run.msrsync) == oracle, describe(run.msrsync)
    if "-F" in opts:
        assert not any("secret-[n]ame" in l for l in oracle), oracle
    _assert_same_dest(run)


# ---------------------------------------------------------------- rules rsync rejects

def test_a_dir_merge_rule_inside_the_top_per_directory_file_runs_as_rsync_runs(tmp_path):
    """-F with ": ../other" in SRC's own .rsync-filter: a per-directory file named inside
    another, which buckets cannot apply; found before anything runs, it is one plain rsync
    (which here rejects the file it names, exit 1, saying where, not what); msrsync
    refused it with exit 4."""
    src = tmp_path / "s"
    _tree(src)
    (tmp_path / "other").write_text("TOP-SECRET line\n")
    (src / ".rsync-filter").write_text(": ../other\n")
    run = _parity(tmp_path, ["-r", "-F"], [str(src) + "/"])
    assert run.oracle.returncode == 1, describe(run.oracle)
    assert b"TOP-SECRET" not in run.msrsync.stdout + run.msrsync.stderr
    assert b"running one plain rsync" in run.msrsync.stderr, describe(run.msrsync)
    oracle_lines = [l for l in text(run.oracle.stderr).splitlines() if "rule" in l]
    assert oracle_lines and all(l in text(run.msrsync.stderr) for l in oracle_lines)


def test_a_bad_line_of_a_merge_file_is_located_never_echoed(tmp_path):
    """A merge file named by an option whose line 2 rsync cannot parse: exit 1 as rsync,
    one line that says "FILE line 2" and never the line's text; a file named inside that
    file is not named either (its name is the first file's text), but the line that
    named it is.  msrsync echoed no line either, but named neither line nor the file
    the bad line was in."""
    src = tmp_path / "s"
    _tree(src)
    rules, outer, inner = tmp_path / "rules", tmp_path / "outer", tmp_path / "inner-SECRET"
    rules.write_text("- *.tmp\nZbad SECRET-TEXT\n")
    outer.write_text("- *.tmp\n\n. %s\n" % inner)
    inner.write_text("Zbad SECRET-TEXT\n")
    for merge, where in ((rules, b"%s line 2" % os.fsencode(rules)),
                         (outer, b"a file named at %s line 3" % os.fsencode(outer))):
        run = _parity(tmp_path, ["-r", "--filter=. %s" % merge], [str(src) + "/"])
        assert run.oracle.returncode == 1
        lines = run.msrsync.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(b"msrsync: error:"), describe(run.msrsync)
        assert b"SECRET" not in lines[0] and where in lines[0], describe(run.msrsync)
        assert not os.path.lexists(run.msrsync_dest)


def test_an_over_long_rule_is_dropped_with_rsyncs_message(tmp_path):
    """A --filter pattern of 4096 bytes or more: rsync drops it, says so on stderr and
    copies everything (exit 0); msrsync said nothing (only its buckets' logs did)."""
    src = tmp_path / "s"
    _tree(src)
    rule = "- LONG" + "Q" * 4200
    run = _parity(tmp_path, ["-r", "--filter=" + rule], [str(src) + "/"])
    assert run.oracle.returncode == 0
    assert b"discarding over-long filter" in run.oracle.stderr, "not real"
    assert run.msrsync.stderr.count(b"discarding over-long filter") == 1, describe(run.msrsync)
    _assert_same_dest(run)
