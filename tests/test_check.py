"""--check: compare DEST with SRC in parallel buckets, changing nothing at DEST.

The oracle is plain rsync in dry-run: ``rsync -n -i --delete OPTS SRC DEST`` (--delete
added when OPTS has no --delete* option of its own) prints one item line per difference;
``msrsync --check --rsync "OPTS" SRC DEST`` must print the same lines (in any order) on
stdout, one summary line on stderr, the same counts and differences in its --json
summary, exit 0 (identical), 44 (differences) or rsync's own error code, and leave DEST
(and the directory holding it) bit for bit as it was: contents, modes, owners, mtimes and
ctimes of every entry, no entry added or removed, a missing DEST still missing.
"""

import json
import os
import re
import shutil
import sys

import pytest

import netns
from helpers import (DEFAULT_RSYNC_OPTS, IS_ROOT, NOBODY, SETTINGS, T0, age, build,
                     chown_tree, describe, diff_snapshots, hardlink_tree, item_lines, p,
                     rsync_opts_string, run_msrsync, run_rsync, snapshot, stderr_lines,
                     text)
from remote import serve_rsync_daemon, serve_sshd

DIFFERENT = 44
OPTS = ["-a", "--numeric-ids"]
SUMMARY = re.compile(r"^msrsync: check: (\d+) identical, (\d+) differing, (\d+) missing, "
                     r"(\d+) extra$")
# the msrsync settings the comparisons run over: one plain rsync (no -p, -f, -s), one
# entry a bucket with one and two workers, buckets of 7 entries, buckets of 1 KiB
CHECK_SETTINGS = {
    "default": [],
    "p1-f1": SETTINGS["p1-f1"],
    "p2-f1": SETTINGS["p2-f1"],
    "p2-f7": SETTINGS["p2-f7"],
    "p8-s1K": SETTINGS["p8-s1K"],
}


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    """The private sshd on 127.0.0.1 (remote.SshServer)."""
    yield from serve_sshd(tmp_path_factory)


@pytest.fixture(scope="module")
def rsync_daemon(tmp_path_factory):
    """The private rsync daemon on 127.0.0.1 serving pytest's base temporary directory."""
    yield from serve_rsync_daemon(tmp_path_factory)


@pytest.fixture(scope="module")
def make_hosts(tmp_path_factory):
    """Worker hosts in network namespaces (root only; skips otherwise)."""
    yield from netns.serve_hosts(tmp_path_factory)


# --------------------------------------------------------------------------- trees

def mixed_trees(root, owner=IS_ROOT):
    """SRC and DEST (under root) that differ in every way --check must see.

    Every entry of SRC has the mtime T0; DEST starts as rsync -a's copy, then:
      same size.txt     other content, same size and mtime (only -c sees it)
      newer.txt         other content, same size, another mtime
      mtime only.txt    another mtime
      perms.txt         another mode
      owner.txt         another owner and group (when root)
      size.txt          another size
      missing.txt       absent
      missing dir/      absent with its contents (a file, a subdirectory, an empty one)
      extra.txt         not in SRC
      extra dir/        not in SRC, with a file and an empty subdirectory
      kind              a file in SRC, a directory holding a file in DEST
      kind2/            a directory in SRC, a file in DEST
      link              a symlink to another target
      dir mtime/        a directory with another mtime
      perm dir/         a directory with another mode
      ./                DEST's root with another mtime
    and many identical entries (keep/...), so that small buckets are many.
    Returns (src, dest) as bytes."""
    root = os.fsencode(root)
    spec = {
        "same size.txt": "hello world\n",
        "newer.txt": "content one\n",
        "mtime only.txt": "mtime\n",
        "perms.txt": ("file", "perms\n", 0o644),
        "owner.txt": "owner\n",
        "size.txt": "short\n",
        "missing.txt": "missing\n",
        "missing dir/x": "x\n", "missing dir/sub/y": "y\n", "missing dir/empty/": None,
        "link": ("symlink", "same size.txt"),
        "dir mtime/f": "f\n",
        "perm dir/": 0o755, "perm dir/f": "pf\n",
        "kind": "a file in SRC\n",
        "kind2/f": "a file in a directory in SRC\n",
        "keep/link": ("symlink", "a0"),
        "keep/empty/": None,
    }
    for i in range(24):
        spec["keep/d%d/f%02d" % (i % 4, i)] = "identical %d\n" % i * (i * 37 % 300)
    src = build(os.path.join(root, b"src"), spec)
    age(src, T0, everything=True)
    dest = os.path.join(root, b"w", b"dest")
    os.makedirs(os.path.dirname(dest))
    cp = run_rsync(src + b"/", dest, opts=OPTS)
    assert cp.returncode == 0, describe(cp)

    def write(rel, data):
        with open(p(dest, rel), "wb") as f:
            f.write(data)

    write("same size.txt", b"HELLO WORLD\n")
    write("newer.txt", b"content two\n")
    write("size.txt", b"much longer\n")
    os.chmod(p(dest, "perms.txt"), 0o600)
    if owner:
        os.lchown(p(dest, "owner.txt"), 4242, 4343)
    os.unlink(p(dest, "missing.txt"))
    shutil.rmtree(p(dest, "missing dir"))
    os.unlink(p(dest, "kind"))
    shutil.rmtree(p(dest, "kind2"))
    os.unlink(p(dest, "link"))
    build(dest, {"extra.txt": "extra\n", "extra dir/z": "z\n", "extra dir/sub/": None,
                 "kind/inner": "inner\n", "kind2": "a file in DEST\n",
                 "link": ("symlink", "newer.txt")})
    os.chmod(p(dest, "perm dir"), 0o700)
    age(dest, T0)       # what the changes touched gets SRC's time back
    for rel, when in (("newer.txt", T0 + 77), ("mtime only.txt", T0 + 1000),
                      ("dir mtime", T0 + 5000), ("", T0 + 9)):
        os.utime(p(dest, rel) if rel else dest, (when, when), follow_symlinks=False)
    return src, dest


# lines of the mixed trees that must be there whatever the settings (a check of the
# trees as much as of msrsync: the oracle itself must print them)
MIXED_ALWAYS = {
    ">f+++++++++ missing.txt", "cd+++++++++ missing dir/", ">f+++++++++ missing dir/x",
    "cd+++++++++ missing dir/sub/", "cd+++++++++ missing dir/empty/",
    ">f+++++++++ missing dir/sub/y", "*deleting   extra.txt", "*deleting   extra dir/",
    "*deleting   extra dir/z", "*deleting   extra dir/sub/", ".f...p..... perms.txt",
    ".d..t...... dir mtime/", ".d...p..... perm dir/", ".d..t...... ./",
    "cLc........ link -> same size.txt", ">f+++++++++ kind", "*deleting   kind/inner",
    "cd+++++++++ kind2/", ">f+++++++++ kind2/f",
}
MIXED_QUICK = {">f..t...... newer.txt", ">f..t...... mtime only.txt",
               ">f.s....... size.txt"}
MIXED_CHECKSUM = {">fc.t...... newer.txt", ".f..t...... mtime only.txt",
                  ">fcs....... size.txt", ">fc........ same size.txt"}


# --------------------------------------------------------------------------- the oracle

def fingerprint(root):
    """snapshot(root) with each entry's ctime and inode too: anything written, chmod'ed,
    touched, renamed, made or removed under root (root included) changes it. None when
    root does not exist."""
    root = os.fsencode(root)
    if not os.path.lexists(root):
        return None
    snap = snapshot(root)
    for rel, entry in snap.items():
        st = os.lstat(root if rel == b"." else os.path.join(root, rel))
        entry["ctime_ns"] = st.st_ctime_ns
        entry["ino"] = st.st_ino
        entry["nlink"] = st.st_nlink
    return snap


def assert_untouched(before, after, what):
    __tracebackhide__ = True
    if before is None or after is None:
        assert before is None and after is None, "%s: %s" % (
            what, "made by the check" if before is None else "removed by the check")
        return
    diffs = diff_snapshots(before, after, "before", "after")
    assert not diffs, "%s changed by the check:\n  %s" % (what, "\n  ".join(diffs[:30]))


def kind_of(line):
    """missing, extra or differing: how the summary counts an item line."""
    if line.startswith("*deleting"):
        return "extra"
    if set(line[2:11]) == {"+"}:
        return "missing"
    return "differing"


def item_and_path(line):
    """(item, path) of an item line, as the --json differences give them: the itemize
    string less its trailing spaces, the name as rsync prints it less a symlink's
    " -> target" (or a hard link's " => name")."""
    item, name = line[:11].rstrip(), line[12:]
    if not item.startswith("*"):
        if item[1] == "L":
            name = name.split(" -> ", 1)[0]
        elif item[0] == "h":
            name = name.split(" => ", 1)[0]
    return item, json_text(name)


def json_text(name):
    """A name as the JSON holds it: the bytes that are not UTF-8 (surrogates here,
    from text()) written as rsync escapes them, \\#ooo."""
    return "".join("\\#%03o" % (ord(c) - 0xDC00) if 0xDC80 <= ord(c) <= 0xDCFF else c
                   for c in name)


def counts_of(lines):
    counts = {"differing": 0, "missing": 0, "extra": 0}
    for line in lines:
        counts[kind_of(line)] += 1
    return counts


def stdout_lines(cp):
    out = text(cp.stdout)
    assert out == "" or out.endswith("\n"), describe(cp)
    return out.split("\n")[:-1]


def quiet_in(opts):
    return any(o in ("-q", "--quiet") or re.match(r"^-[a-zA-Z]*q", o) and
               not o.startswith("--") for o in opts)


def oracle_opts(opts):
    """-n -i [--delete] OPTS less -q: the oracle's options."""
    opts = [o for o in opts if o not in ("-q", "--quiet")]
    extra = [] if any(o.startswith("--del") for o in opts) else ["--delete"]
    return ["-n", "-i"] + extra + opts


class Check(object):
    """One --check run beside its oracle: cp (msrsync), oracle (rsync -n -i), lines
    (msrsync's difference lines), expected (rsync's item lines), summary (--json)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


_serial = [0]


def run_check(srcs, dest, rsync_opts=None, msrsync_opts=(), watch=None, json_dir=None,
              prefix=(), python=sys.executable, cwd=None, env=None, expect_rc=None,
              expect_identical=None, oracle_dest=None, more_stdout=False, progress=False,
              timeout=120):
    """``msrsync --check --json J MSRSYNC_OPTS [--rsync OPTS] SRCS DEST`` against
    ``rsync -n -i [--delete] OPTS SRCS DEST``; asserts every promise of --check:

    - watch (a local directory: DEST's parent by default, so DEST itself, its siblings
      and the parent's own mtime are covered) is bit for bit as before, ctimes included;
    - stdout holds exactly rsync's item lines, in any order (nothing at all with -q);
      with more_stdout (msrsync's --stats), other lines may follow them;
    - stderr is the one summary line (none with -q) when no error occurred, besides
      rsync's own lines that are not item lines ("cannot delete non-empty directory")
      and, with progress (-P), progress lines; its counts are rsync's lines counted,
      identical being entries_total less differing and missing (and expect_identical,
      when given);
    - the --json "check" object has the same counts and the differences as (item, path);
    - the exit status is expect_rc, by default rsync's own when it failed, else 44 when
      it printed item lines, else 0.
    rsync_opts None: msrsync's defaults, no --rsync. oracle_dest: DEST as the oracle
    names it (default: dest). Returns a Check."""
    srcs = [os.fsencode(s) if not isinstance(s, bytes) else s for s in srcs]
    dest = os.fsencode(dest) if not isinstance(dest, bytes) else dest
    if watch is None:
        watch = os.path.dirname(dest.rstrip(b"/"))
    opts = list(DEFAULT_RSYNC_OPTS if rsync_opts is None else rsync_opts)
    quiet = quiet_in(opts)
    _serial[0] += 1
    json_path = os.path.join(os.fsencode(json_dir or os.environ["TMPDIR"]),
                             b"check-%d.json" % _serial[0])
    args = ["--check", "--json", json_path] + list(msrsync_opts)
    if rsync_opts is not None:
        args += ["--rsync", rsync_opts_string(rsync_opts)]
    before = fingerprint(watch)
    cp = run_msrsync(*(args + srcs + [dest]), prefix=prefix, python=python, cwd=cwd,
                     env=env, timeout=timeout)
    after = fingerprint(watch)
    assert b"Traceback" not in cp.stderr, describe(cp)
    assert_untouched(before, after, os.fsdecode(watch))
    oracle = run_rsync(*(srcs + [oracle_dest or dest]), opts=oracle_opts(opts),
                       prefix=prefix, cwd=cwd, env=env, timeout=timeout)
    assert_untouched(after, fingerprint(watch), "(the oracle) " + os.fsdecode(watch))
    expected = item_lines(oracle.stdout)
    if expect_rc is None:
        expect_rc = oracle.returncode or (DIFFERENT if expected else 0)
    assert cp.returncode == expect_rc, "exit %d, not %d:\n%s\n--- oracle ---\n%s" % (
        cp.returncode, expect_rc, describe(cp), describe(oracle))
    lines = stdout_lines(cp)
    if more_stdout:
        lines = item_lines(cp.stdout)
    if quiet:
        assert lines == [], describe(cp)
    else:
        assert sorted(lines) == sorted(expected), (
            "msrsync's lines are not rsync's:\n  only msrsync: %r\n  only rsync:   %r\n%s"
            % (sorted(set(lines) - set(expected)), sorted(set(expected) - set(lines)),
               describe(cp)))
    with open(json_path) as f:
        summary = json.load(f)
    assert summary["exit_code"] == expect_rc, summary
    check = summary.get("check")
    assert isinstance(check, dict), summary
    counts = counts_of(expected)
    counts["identical"] = summary["entries_total"] - counts["differing"] - counts["missing"]
    if expect_identical is not None:
        assert counts["identical"] == expect_identical, (counts, summary["entries_total"])
    assert {k: check.get(k) for k in counts} == counts, (check, counts)
    got = sorted((d["item"], d["path"]) for d in check["differences"])
    want = sorted(item_and_path(l) for l in expected)
    assert got == want, "--json differences:\n  only msrsync: %r\n  only rsync: %r" % (
        sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    summary_lines = [l for l in stderr_lines(cp) if l.startswith("msrsync: check:")]
    if quiet:
        assert summary_lines == [], describe(cp)
        if expect_rc in (0, DIFFERENT):
            assert cp.stderr == b"", describe(cp)
    else:
        line = "msrsync: check: %(identical)d identical, %(differing)d differing, " \
               "%(missing)d missing, %(extra)d extra" % counts
        assert summary_lines == [line], describe(cp)
        assert SUMMARY.match(line)
        if expect_rc in (0, DIFFERENT):
            rsyncs = set(text(oracle.stdout + oracle.stderr).splitlines()) - set(expected)
            others = [l for l in stderr_lines(cp) if l != line and l not in rsyncs and
                      not (progress and re.match(r"^\[\d+/\d+\+? entries\]", l))]
            assert others == [], describe(cp)
    return Check(cp=cp, oracle=oracle, lines=lines, expected=expected, summary=summary,
                 counts=counts, json_path=json_path)


def entries(root):
    """Entries of a local tree, root included (what msrsync scans of SRC/)."""
    return len(snapshot(root))


def slash(path):
    return os.fsencode(path) + b"/"


# --------------------------------------------------------------------------- identical

@pytest.mark.parametrize("setting,opts", [
    ("default", None),
    ("p2-f1", None),
    ("p2-f7", ["-aSH", "--numeric-ids"]),
    ("p8-s1K", ["-aS", "--numeric-ids", "-c"]),
])
def test_identical_trees_print_nothing_and_exit_0(tmp_path, small_src, setting, opts):
    """rsync's copy of the small tree (awkward names, links, modes, owners, a FIFO, a
    sparse file, times before the epoch) is identical: no line, every entry identical."""
    dest = os.fsencode(tmp_path / "w" / "dest")
    os.makedirs(os.path.dirname(dest))
    cp = run_rsync(slash(small_src), dest, opts=["-aSH", "--numeric-ids"])
    assert cp.returncode == 0, describe(cp)
    n = entries(small_src)
    c = run_check([slash(small_src)], dest, opts, CHECK_SETTINGS[setting],
                  expect_rc=0, expect_identical=n)
    assert c.cp.stdout == b"", describe(c.cp)
    assert stderr_lines(c.cp) == ["msrsync: check: %d identical, 0 differing, 0 missing, "
                                  "0 extra" % n], describe(c.cp)
    assert c.summary["check"]["differences"] == []
    assert c.summary["status"] != "DIFFERENT", c.summary


# --------------------------------------------------------------------------- differences

@pytest.mark.parametrize("checksum", [False, True], ids=["quick", "checksum"])
@pytest.mark.parametrize("setting", sorted(CHECK_SETTINGS))
def test_mixed_differences_are_rsyncs_lines(tmp_path, setting, checksum):
    """Every kind of difference, in buckets of every size: the lines are rsync -n -i's.
    The quick check misses a change of content that keeps size and mtime; -c finds it."""
    src, dest = mixed_trees(tmp_path)
    opts = OPTS + (["-c"] if checksum else [])
    c = run_check([slash(src)], dest, opts, CHECK_SETTINGS[setting], expect_rc=DIFFERENT)
    lines = set(c.lines)
    assert MIXED_ALWAYS <= lines, sorted(MIXED_ALWAYS - lines)
    if checksum:
        assert MIXED_CHECKSUM <= lines, sorted(MIXED_CHECKSUM - lines)
    else:
        assert MIXED_QUICK <= lines, sorted(MIXED_QUICK - lines)
        assert not [l for l in lines if "same size.txt" in l.replace(" -> same size", "")], \
            sorted(lines)
    if IS_ROOT:
        assert ".f....og... owner.txt" in lines, sorted(lines)
    # nothing identical is listed: keep/ is not named
    assert not [l for l in lines if " keep" in l], sorted(lines)
    n = entries(src)
    assert c.counts["identical"] == n - c.counts["differing"] - c.counts["missing"]
    assert c.summary["status"] == "DIFFERENT", c.summary


def test_dest_is_left_bit_for_bit_and_a_second_check_says_the_same(tmp_path):
    """Many small buckets, -c, progress and stats: DEST and the directory holding it keep
    every byte, mode, owner, mtime and ctime (run_check's fingerprint); the next check of
    the same trees prints the same lines, so nothing was "repaired"."""
    src, dest = mixed_trees(tmp_path)
    first = run_check([slash(src)], dest, OPTS + ["-c"],
                      ["-p", "8", "-f", "1", "-P", "--stats"], more_stdout=True,
                      progress=True)
    second = run_check([slash(src)], dest, OPTS + ["-c"], ["-p", "3", "-s", "1K"])
    assert sorted(first.lines) == sorted(second.lines)
    assert first.counts == second.counts


@pytest.mark.parametrize("setting", ["default", "p2-f1", "p2-f7"])
def test_missing_dest_is_all_missing_and_stays_missing(tmp_path, small_src, setting):
    dest = os.fsencode(tmp_path / "w" / "dest")
    os.makedirs(os.path.dirname(dest))
    n = entries(small_src)
    c = run_check([slash(small_src)], dest, None, CHECK_SETTINGS[setting],
                  expect_rc=DIFFERENT, expect_identical=0)
    assert not os.path.lexists(dest)
    assert os.listdir(os.path.dirname(dest)) == []
    assert c.counts == {"identical": 0, "differing": 0, "missing": n, "extra": 0}, c.counts
    assert "cd+++++++++ ./" in c.lines
    assert not [l for l in c.lines if "created directory" in l], c.lines


def test_missing_dest_under_a_missing_parent_is_all_missing_too(tmp_path):
    """rsync -n reports everything missing (and exits 0) where DEST's parent does not
    exist either; nothing is made on the way."""
    src, _ = mixed_trees(tmp_path)
    dest = os.fsencode(tmp_path / "w2" / "not" / "there" / "dest")
    os.makedirs(tmp_path / "w2")
    c = run_check([slash(src)], dest, OPTS, ["-p", "2", "-f", "3"], expect_rc=DIFFERENT,
                  watch=tmp_path / "w2", expect_identical=0)
    assert os.listdir(tmp_path / "w2") == []
    assert c.counts["missing"] == entries(src), c.counts


# --------------------------------------------------------------------------- rsync options

def filter_trees(root):
    src = build(os.path.join(os.fsencode(root), b"src"), {
        "a.tmp": "excluded in SRC\n", "b": "b\n", "d/c": "c\n", "d/e.tmp": "tmp\n",
        "d/sub/f": "f\n"})
    age(src, T0, everything=True)
    dest = os.path.join(os.fsencode(root), b"w", b"dest")
    os.makedirs(os.path.dirname(dest))
    cp = run_rsync(src + b"/", dest, opts=OPTS)
    assert cp.returncode == 0, describe(cp)
    build(dest, {"a.tmp": "another excluded content\n", "x.tmp": "extra, excluded\n",
                 "y": "extra\n", "d/old.tmp": "extra, excluded\n", "d/old": "extra\n",
                 "d/sub/z.keep": "extra, protected\n", "gone/q.tmp": "q\n"})
    age(dest, T0)
    return src, dest


@pytest.mark.parametrize("opts,extra,not_extra", [
    # excluded DEST entries are not extra, nor an excluded file that differs, nor a
    # directory holding only excluded entries (rsync: "cannot delete non-empty directory")
    (["--exclude=*.tmp"], {"y", "d/old", "d/sub/z.keep"},
     {"x.tmp", "d/old.tmp", "a.tmp", "gone/q.tmp", "d/e.tmp", "gone/"}),
    (["--delete", "--exclude=*.tmp"], {"y", "d/old", "d/sub/z.keep"},
     {"x.tmp", "d/old.tmp", "a.tmp", "gone/q.tmp", "gone/"}),
    (["--delete-after", "--exclude=*.tmp", "--filter=P *.keep"], {"y", "d/old"},
     {"x.tmp", "d/old.tmp", "d/sub/z.keep", "gone/q.tmp", "gone/"}),
    # ... unless --delete-excluded
    (["--delete-excluded", "--exclude=*.tmp"],
     {"y", "d/old", "x.tmp", "d/old.tmp", "a.tmp", "d/e.tmp", "gone/", "gone/q.tmp",
      "d/sub/z.keep"}, set()),
], ids=["exclude", "delete-exclude", "delete-after-protect", "delete-excluded"])
def test_filters_decide_what_is_extra_like_rsync(tmp_path, opts, extra, not_extra):
    src, dest = filter_trees(tmp_path)
    c = run_check([slash(src)], dest, OPTS + opts, ["-p", "2", "-f", "1"])
    deleted = {l[12:] for l in c.lines if l.startswith("*deleting")}
    assert extra <= deleted, (sorted(extra - deleted), c.lines)
    assert not deleted & not_extra, (sorted(deleted & not_extra), c.lines)


def test_hard_links_like_rsync(tmp_path):
    """-H: a DEST lacking some members of link groups, with a group split into separate
    files, and a DEST lacking everything: rsync's hf lines (leaders and followers)."""
    src = hardlink_tree(tmp_path / "src")
    dest = os.fsencode(tmp_path / "w" / "dest")
    os.makedirs(os.path.dirname(dest))
    opts = ["-aH", "--numeric-ids"]
    c = run_check([slash(src)], dest, opts, ["-p", "2", "-f", "5"], expect_rc=DIFFERENT)
    assert [l for l in c.lines if l.startswith("hf")], c.lines
    cp = run_rsync(slash(src), dest, opts=opts)
    assert cp.returncode == 0, describe(cp)
    os.unlink(p(dest, "many/d02/three 2"))               # one of three gone
    os.unlink(p(dest, "deep/d01/d02/d03/far link"))      # a far member gone
    split = p(dest, "many/d00/same dir link")            # a pair made two files
    with open(split, "rb") as f:
        data = f.read()
    st = os.lstat(split)
    os.unlink(split)
    with open(split, "wb") as f:
        f.write(data)
    os.utime(split, ns=(st.st_atime_ns, st.st_mtime_ns))
    for d in ("many/d02", "deep/d01/d02/d03", "many/d00"):
        t = os.lstat(p(src, d)).st_mtime_ns
        os.utime(p(dest, d), ns=(t, t))
    for setting in (["-p", "2", "-f", "5"], ["-p", "8", "-f", "1"], []):
        c = run_check([slash(src)], dest, opts, setting, expect_rc=DIFFERENT)
        hard = sorted(l for l in c.lines if l.startswith("hf"))
        assert len(hard) == 3, c.lines
        assert any(l.endswith("same dir link => many/d00/f0000.dat") or
                   l.endswith("f0000.dat => many/d00/same dir link") for l in hard), hard


def test_items_without_changed_attributes_are_differences_when_rsync_would_act(tmp_path):
    """rsync -n -i prints a line only for what rsync would do, even where no attribute
    letter shows: -I (--ignore-times) sends every file again (">f........."), -H links
    a file that is a separate copy at DEST again ("hf          b => a")."""
    src = build(tmp_path / "src", {"a": "a\n", "d/b": "b\n", "d/c": "c\n"})
    os.link(p(src, "a"), p(src, "d/a link"))
    age(src, T0, everything=True)
    dest = os.fsencode(tmp_path / "w" / "dest")
    os.makedirs(os.path.dirname(dest))
    assert run_rsync(slash(src), dest, opts=OPTS).returncode == 0   # no -H: two files
    c = run_check([slash(src)], dest, OPTS + ["-I"], ["-p", "2", "-f", "1"],
                  expect_rc=DIFFERENT)
    assert len([l for l in c.lines if l.startswith(">f")]) == 4, c.lines
    c = run_check([slash(src)], dest, OPTS + ["-H"], ["-p", "2", "-f", "7"],
                  expect_rc=DIFFERENT)
    assert [l[:2] for l in c.lines] == ["hf"], c.lines


def awkward_dest(src, dest):
    """rsync's copy of the small tree, then: awkward names changed, removed, added."""
    cp = run_rsync(slash(src), dest)
    assert cp.returncode == 0, describe(cp)
    for name in (b"new\nline", b"\xff\xfe-invalid-utf8", b"tab\tname", b"back\\slash",
                 b"-rf", u"unicode \u00e9\u00fc \u65e5\u672c\u8a9e \U0001f389".encode()):
        with open(p(dest, name), "ab") as f:
            f.write(b"longer now\n")
    for name in (b"quote'single", b"percent%s%n", b"bad\xe9dir/\xc3\x28"):
        os.unlink(p(dest, name))
    os.unlink(p(dest, b"link\nweird"))
    os.symlink(b"other\ntarget \xff", p(dest, b"link\nweird"))
    build(dest, {b"extra\nnewline \xff": b"x\n", b"extra \\#101 not an escape": b"y\n",
                 u"extra \u00e9".encode(): b"z\n", b"dir with space/\xfe extra": b"w\n"})
    # directories keep SRC's times: only the names above differ
    for dirpath, dirnames, _ in os.walk(src):
        for d in [dirpath] + [os.path.join(dirpath, n) for n in dirnames]:
            rel = os.path.relpath(d, src)
            there = os.path.join(dest, rel)
            if os.path.isdir(there) and not os.path.islink(d) and os.path.isdir(d):
                t = os.lstat(d).st_mtime_ns
                os.utime(there, ns=(t, t), follow_symlinks=False)


@pytest.mark.parametrize("eight", [False, True], ids=["escaped", "8-bit"])
def test_awkward_names_and_their_json_escaping(tmp_path, small_src, eight):
    """Newlines, tabs, invalid UTF-8, backslashes, a name that looks like an escape: the
    lines are rsync's bytes for bytes (rsync prints \\#ooo for what it does not print;
    with -8 it leaves the bytes above 127 alone), and the --json file is valid UTF-8 JSON
    whose paths give the bytes that are not UTF-8 as \\#ooo."""
    dest = os.fsencode(tmp_path / "w" / "dest")
    os.makedirs(os.path.dirname(dest))
    awkward_dest(small_src, dest)
    opts = list(DEFAULT_RSYNC_OPTS) + (["-8"] if eight else [])
    c = run_check([slash(small_src)], dest, opts, ["-p", "2", "-f", "7"],
                  expect_rc=DIFFERENT)
    raw = c.cp.stdout
    assert b"new\\#012line" in raw, raw
    assert (b"\xff" in raw) == eight, raw
    paths = {d["path"] for d in c.summary["check"]["differences"]}
    assert "new\\#012line" in paths, sorted(paths)
    assert "\\#377\\#376-invalid-utf8" in paths, sorted(paths)
    assert "extra \\#134#101 not an escape" in paths, sorted(paths)
    assert "link\\#012weird" in paths, sorted(paths)
    assert u"extra \u00e9" in paths, sorted(paths)
    with open(c.json_path, "rb") as f:
        f.read().decode("utf-8")        # strictly valid UTF-8


def test_json_counts_are_the_printed_lines(tmp_path):
    """The --json "check" object, the stdout lines and the summary line tell one story;
    with --stats the summary line is still there, once."""
    src, dest = mixed_trees(tmp_path)
    c = run_check([slash(src)], dest, OPTS, ["-p", "2", "-f", "3", "--stats"],
                  more_stdout=True)
    check = c.summary["check"]
    assert sorted(check) == ["differences", "differing", "extra", "identical", "missing"]
    assert len(check["differences"]) == len(c.lines) == \
        check["differing"] + check["missing"] + check["extra"]
    assert check["identical"] + check["differing"] + check["missing"] == \
        c.summary["entries_total"] == entries(src)
    for d in check["differences"]:
        assert sorted(d) == ["item", "path"], d
        assert d["item"] == d["item"].rstrip() and len(d["item"]) in (9, 11), d
    assert {"item": "*deleting", "path": "extra dir/"} in check["differences"]
    assert {"item": "cLc........", "path": "link"} in check["differences"]
    assert {"item": ".d..t......", "path": "./"} in check["differences"]


def test_quiet_prints_nothing_but_exits_44_with_the_json(tmp_path):
    src, dest = mixed_trees(tmp_path)
    c = run_check([slash(src)], dest, OPTS + ["-q"], ["-p", "2", "-f", "1"],
                  expect_rc=DIFFERENT)
    assert c.cp.stdout == b"" and c.cp.stderr == b"", describe(c.cp)
    assert c.summary["check"]["missing"] > 0 and c.summary["check"]["extra"] > 0
    assert len(c.summary["check"]["differences"]) == len(c.expected)
    # identical trees, -q: exit 0, still silent
    empty = build(tmp_path / "e1", {"a": "a\n"})
    age(empty, T0, everything=True)
    same = os.fsencode(tmp_path / "w1" / "dest")
    os.makedirs(os.path.dirname(same))
    assert run_rsync(slash(empty), same, opts=OPTS).returncode == 0
    c = run_check([slash(empty)], same, OPTS + ["-q"], ["-p", "2", "-f", "1"], expect_rc=0)
    assert c.cp.stdout == b"" and c.cp.stderr == b"", describe(c.cp)


# --------------------------------------------------------------------------- errors

def _nobody_trees(work):
    src = build(os.path.join(work, b"src"), {
        "d/a": "same size a\n", "locked/x": "x\n", "locked/sub/y": "y\n", "top": "t\n",
        "secret": "secret\n", "z/q": "q\n"})
    age(src, T0, everything=True)
    dest = os.path.join(work, b"w", b"dest")
    os.makedirs(os.path.dirname(dest))
    assert run_rsync(src + b"/", dest, opts=OPTS).returncode == 0
    with open(p(src, "d/a"), "wb") as f:
        f.write(b"longer content of a\n")
    os.unlink(p(dest, "top"))
    age(src, T0)
    age(dest, T0)
    chown_tree(src, NOBODY, NOBODY)
    chown_tree(dest, NOBODY, NOBODY)
    os.chmod(os.path.dirname(dest), 0o777)
    return src, dest


@pytest.mark.nonroot
@pytest.mark.parametrize("unreadable", ["dir", "file"])
def test_an_error_exit_wins_over_44_as_nonroot(nonroot, unreadable):
    """As nobody: an unreadable SRC directory makes rsync -n exit 23, and msrsync too,
    though differences were found (they are still printed and counted). An unreadable
    SRC file is no error in a dry run (nothing is read): rsync -n exits 0, msrsync 44."""
    prefix, python, work = nonroot
    src, dest = _nobody_trees(work)
    os.chmod(p(src, "locked" if unreadable == "dir" else "secret"), 0)
    try:
        c = run_check([slash(src)], dest, OPTS, ["-p", "2", "-f", "1"], prefix=prefix,
                      python=python, json_dir=work,
                      expect_rc=23 if unreadable == "dir" else DIFFERENT)
    finally:
        os.chmod(p(src, "locked"), 0o755)
        os.chmod(p(src, "secret"), 0o644)
    assert c.oracle.returncode == (23 if unreadable == "dir" else 0), describe(c.oracle)
    assert ">f.s....... d/a" in c.lines and ">f+++++++++ top" in c.lines, c.lines
    if unreadable == "dir":
        assert "Permission denied" in text(c.cp.stderr), describe(c.cp)


def test_check_with_dry_run_is_refused(tmp_path):
    src, dest = mixed_trees(tmp_path)
    before = fingerprint(os.path.dirname(dest))
    for flag in ("-d", "--dry-run"):
        cp = run_msrsync("--check", flag, "-p", "2", slash(src), dest)
        assert cp.returncode == 1, describe(cp)
        lines = stderr_lines(cp)
        assert len(lines) == 1 and lines[0].startswith("msrsync: error: "), describe(cp)
        assert "check" in lines[0], lines
        assert cp.stdout == b"", describe(cp)
    assert_untouched(before, fingerprint(os.path.dirname(dest)), "DEST")


def test_a_check_run_is_not_resumed(tmp_path):
    """A check run's bucket directory (kept with -k) cannot be --resume'd: exit 1, one
    line, DEST as it was."""
    src, dest = mixed_trees(tmp_path)
    buckets = tmp_path / "buckets"
    os.mkdir(buckets)
    c = run_check([slash(src)], dest, OPTS, ["-p", "2", "-f", "3", "-k", "-b", buckets])
    assert c.cp.returncode == DIFFERENT
    runs = os.listdir(buckets)
    assert len(runs) == 1, runs
    before = fingerprint(os.path.dirname(dest))
    cp = run_msrsync("--resume", os.path.join(str(buckets), runs[0]))
    assert cp.returncode == 1, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1 and lines[0].startswith("msrsync: error: "), describe(cp)
    assert cp.stdout == b"", describe(cp)
    assert_untouched(before, fingerprint(os.path.dirname(dest)), "DEST")


def test_resume_of_a_copy_run_with_check_is_refused(tmp_path):
    """--check given with --resume DIR of a copy run is refused too (a check skipping
    the buckets a copy's journal says are done would miss differences); DEST is left
    as the copy left it."""
    src, dest = mixed_trees(tmp_path)
    buckets = tmp_path / "buckets"
    os.mkdir(buckets)
    cp = run_msrsync("-p", "2", "-f", "3", "-k", "-b", buckets, "--rsync", "-a",
                     slash(src), tmp_path / "copy")
    assert cp.returncode == 0, describe(cp)
    (run_dir,) = os.listdir(buckets)
    before = fingerprint(tmp_path / "w")
    before_copy = fingerprint(tmp_path / "copy")
    cp = run_msrsync("--check", "--resume", os.path.join(str(buckets), run_dir))
    assert cp.returncode == 1, describe(cp)
    assert len(stderr_lines(cp)) == 1, describe(cp)
    assert_untouched(before, fingerprint(tmp_path / "w"), "DEST")
    assert_untouched(before_copy, fingerprint(tmp_path / "copy"), "the copy")


# --------------------------------------------------------------------------- remote

def pushed(lines):
    """rsync's item lines of a push: a file sent to the other end is "<f", not ">f"."""
    return set(b"<" + l[1:] if l.startswith(b">") else l for l in lines) if \
        lines and isinstance(next(iter(lines)), bytes) else \
        set("<" + l[1:] if l.startswith(">") else l for l in lines)


def test_remote_dest_over_ssh_like_rsync(tmp_path, sshd_server):
    src, dest = mixed_trees(tmp_path)
    opts = OPTS + ["-e", sshd_server.rsh]
    c = run_check([slash(src)], sshd_server.remote(dest), opts, ["-p", "2", "-f", "3"],
                  watch=os.path.dirname(dest), expect_rc=DIFFERENT)
    assert pushed(MIXED_ALWAYS) <= set(c.lines), sorted(pushed(MIXED_ALWAYS) - set(c.lines))
    assert c.counts["identical"] == entries(src) - c.counts["differing"] - \
        c.counts["missing"]
    # a remote DEST that does not exist stays so
    missing = os.path.join(os.path.dirname(dest), b"not here")
    c = run_check([slash(src)], sshd_server.remote(missing), opts, ["-p", "2", "-f", "5"],
                  watch=os.path.dirname(dest), expect_rc=DIFFERENT, expect_identical=0)
    assert not os.path.lexists(missing)
    assert c.counts["missing"] == entries(src), c.counts


def test_remote_src_over_ssh_like_rsync(tmp_path, sshd_server):
    src, dest = mixed_trees(tmp_path)
    opts = OPTS + ["-c", "-e", sshd_server.rsh]
    before_src = fingerprint(src)
    c = run_check([sshd_server.remote(slash(src))], dest, opts, ["-p", "2", "-f", "4"],
                  expect_rc=DIFFERENT)
    assert MIXED_ALWAYS | MIXED_CHECKSUM <= set(c.lines), \
        sorted((MIXED_ALWAYS | MIXED_CHECKSUM) - set(c.lines))
    assert_untouched(before_src, fingerprint(src), "SRC")


def test_rsync_daemon_dest_like_rsync(tmp_path, rsync_daemon):
    src, dest = mixed_trees(tmp_path)
    c = run_check([slash(src)], rsync_daemon.url(dest), OPTS, ["-p", "2", "-f", "3"],
                  watch=os.path.dirname(dest), expect_rc=DIFFERENT)
    assert pushed(MIXED_ALWAYS) <= set(c.lines), sorted(pushed(MIXED_ALWAYS) - set(c.lines))


# --------------------------------------------------------------------------- worker hosts

def test_two_worker_hosts_check_like_rsync(tmp_path, make_hosts):
    """--hosts h1,h2 (network namespaces sharing this file system): the hosts run the
    buckets' dry runs; the lines are rsync's; DEST, its directory and a missing DEST are
    left as they were (no witness file, no DEST made)."""
    hs = make_hosts(2)
    src, dest = mixed_trees(tmp_path)
    host_opts = ["--hosts", "h1,h2", "--host-shell", hs.shell]
    needle = os.fsdecode(tmp_path)
    before = {h.alias: len(h.copies(needle)) for h in hs}
    c = run_check([slash(src)], dest, OPTS, ["-p", "2", "-f", "3"] + host_opts,
                  expect_rc=DIFFERENT)
    assert MIXED_ALWAYS <= set(c.lines), sorted(MIXED_ALWAYS - set(c.lines))
    after = {h.alias: len(h.copies(needle)) for h in hs}
    assert all(after[a] > before[a] for a in after), (before, after)
    for h in hs:
        for args in h.copies(needle)[before[h.alias]:]:
            assert re.search(r"(^| )(--dry-run|-[a-zA-Z]*n[a-zA-Z]*)( |$)", args), args
    missing = os.path.join(os.path.dirname(dest), b"not here")
    c = run_check([slash(src)], missing, OPTS, ["-p", "2", "-f", "5"] + host_opts,
                  expect_rc=DIFFERENT, expect_identical=0)
    assert not os.path.lexists(missing)


# --------------------------------------------------------------------------- several SRC

def test_several_sources_like_rsync(tmp_path):
    """SRC... as directories (no trailing slash) and a file: rsync's deletions reach the
    directories sent, not DEST's other entries (an extra at DEST's top is not extra)."""
    src, _ = mixed_trees(tmp_path)
    dest = os.fsencode(tmp_path / "w2" / "dest")
    os.makedirs(dest)
    srcs = [p(src, "keep"), p(src, "missing dir"), p(src, "size.txt")]
    cp = run_rsync(*(srcs[:2] + [dest]), opts=OPTS)
    assert cp.returncode == 0, describe(cp)
    build(dest, {"top extra": "not sent, not extra\n", "keep/d1/extra": "extra\n"})
    with open(p(dest, "missing dir/x"), "ab") as f:
        f.write(b"more\n")
    age(dest, T0)
    for setting in (["-p", "2", "-f", "1"], ["-p", "2", "-f", "7"]):
        c = run_check(srcs, dest, OPTS, setting, expect_rc=DIFFERENT)
        assert {"*deleting   keep/d1/extra", ">f+++++++++ size.txt",
                ">f.s....... missing dir/x"} <= set(c.lines), c.lines
        assert not [l for l in c.lines if "top extra" in l], c.lines
