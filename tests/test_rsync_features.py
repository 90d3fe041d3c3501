"""rsync options msrsync implements itself across buckets -- -H (link groups kept in
one bucket), the symlink options, -x, -R with --no-implied-dirs, the user's --files-from
lists, --delay-updates and -y, --remove-source-files -- on the awkward trees of this
harness: names starting with '#', ';' or '-', with newlines and non-UTF-8 bytes,
read-only directories, several SRCs.
test_rsync_semantics.py covers the pass-through options in depth; filter rules are in
test_filters.py, the --delete family in test_delete.py."""

import os
import shlex
import sys

import pytest

from helpers import (MSRSYNC, SETTINGS, age, assert_same_tree, build, contents, describe,
                     differential, extras, filter_tree, hardlink_tree, p, pruning_tree,
                     run_cmd, run_msrsync, run_rsync, snapshot, text)


# ------------------------------------------------------------------ -H

@pytest.mark.parametrize("caps", [["-p", "4", "-f", "1"], ["-p", "2"]], ids=["f1", "default"])
def test_hard_links_kept_across_buckets(tmp_path, caps):
    src = hardlink_tree(os.fsencode(tmp_path / "in" / "src"))
    d = differential(tmp_path, [src + b"/"], caps, rsync_opts=["-aH"])
    groups = set(e.get("hardlinks") for e in snapshot(d.msrsync_dest).values())
    assert len([g for g in groups if g]) == 5


def test_hard_links_without_trailing_slash_and_rerun(tmp_path):
    src = hardlink_tree(os.fsencode(tmp_path / "in" / "src"))
    d = differential(tmp_path, [src], ["-p", "3", "-f", "3"], rsync_opts=["-aH"])
    before = snapshot(d.msrsync_dest)
    cp = run_msrsync("-p", "3", "-f", "3", "--rsync", "-aH", src, d.msrsync_dest)
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(before, d.msrsync_dest)


def test_hard_links_with_delete_and_filters(tmp_path):
    src = hardlink_tree(os.fsencode(tmp_path / "in" / "src"))
    differential(tmp_path, [src + b"/"], ["-p", "3", "-f", "3"],
                 rsync_opts=["-aH", "--delete", "--exclude=far link"], prepare_dest=extras)


# ------------------------------------------------------------------ symlink options

@pytest.mark.parametrize("opts,rc", [
    (["-aL"], 23),                      # "loop" and "link dangling" have no referent
    (["-a", "--copy-unsafe-links"], 0),  # "link abs" (/etc/hostname) becomes a file
    (["-a", "--safe-links"], 0),        # "link abs" is left out
    (["-ak"], 0),                       # "link to dir" becomes a directory
    (["-a", "--copy-unsafe-links", "--safe-links"], 0),
], ids=["L", "copy-unsafe-links", "safe-links", "k", "copy-unsafe-and-safe"])
def test_symlink_options_on_awkward_links(tmp_path, small_src, opts, rc):
    differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "7"], rsync_opts=opts,
                 expect_rc=rc)


def test_keep_dirlinks_follows_a_dest_symlink_to_a_dir(tmp_path, small_src):
    def prepare(dest):
        build(dest, {"elsewhere/": None, "many": ("symlink", "elsewhere")})
        age(dest, 10 ** 9, everything=True)
    d = differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "7"],
                     rsync_opts=["-aK"], prepare_dest=prepare, compare=False)
    # rsync -K leaves the linked directory's mtime at the time of the writes into it
    _assert_same_but_mtimes(d, [b"elsewhere"])


def _assert_same_but_mtimes(d, rels):
    """DESTs equal, except for the mtimes of rels (made at run time by both tools)."""
    snaps = [snapshot(d.oracle_dest), snapshot(d.msrsync_dest)]
    for snap in snaps:
        for rel in rels + [b"."]:
            snap[rel].pop("mtime_ns", None)
    assert_same_tree(snaps[0], snaps[1], label_a="rsync", label_b="msrsync")


def test_one_file_system_on_one_file_system(tmp_path, small_src):
    differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "7"], rsync_opts=["-ax"])


# ------------------------------------------------------------------ -R and --files-from

@pytest.mark.parametrize("form", [b"/./many", b"/./many/", b"/many/./d01", b"/./\xff\xfe-invalid-utf8"])
def test_relative_recreates_the_path_after_dot_dir(tmp_path, small_src, form):
    differential(tmp_path, [small_src + form, small_src + b"/./deep/d01"],
                 ["-p", "3", "-f", "5"], rsync_opts=["-aR"])


def test_relative_with_no_implied_dirs(tmp_path, small_src):
    d = differential(tmp_path, [small_src + b"/./many/d01"], ["-p", "2", "-f", "5"],
                     rsync_opts=["-aR", "--no-implied-dirs"], compare=False)
    # the implied "many" is made with default attributes at run time
    _assert_same_but_mtimes(d, [b"many"])


@pytest.mark.parametrize("from0", [False, True], ids=["lines", "from0"])
def test_users_files_from_list_with_awkward_names(tmp_path, small_src, from0):
    """rsync skips '#' and ';' lines of a --files-from list as comments (with -0 too);
    './#hash' names the file."""
    names = [b"#hash", b"./;semicolon first", b"-rf", b"many/d01", b"deep/d01/d02/",
             b"quote'single", b"\xff\xfe-invalid-utf8", b"dir with space", b"link rel",
             b"read only/r001", b"missing? no: present"[:0] + b"mode600"]
    if from0:
        names.append(b"new\nline")
    sep = b"\0" if from0 else b"\n"
    listing = tmp_path / "list"
    listing.write_bytes(sep.join(names) + sep)
    opts = ["-a", "--files-from=%s" % listing] + (["--from0"] if from0 else [])
    differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "3"], rsync_opts=opts)


@pytest.mark.parametrize("rules", [[], ["--include=*/", "--include=f0*", "--exclude=*"],
                                   ["--exclude=d1/"]], ids=["no-rules", "leaf-rules", "dir-rule"])
@pytest.mark.parametrize("caps", [["-p", "1"], ["-p", "2", "-f", "1"]], ids=["p1", "p2-f1"])
def test_users_list_sends_the_parents_of_what_it_sends_only(tmp_path, rules, caps):
    """rsync -R sends a listed name's parent directories only when it sends the
    name: not for a name the rules exclude, nor for a missing one (exit 23); a rule
    excluding a parent does not apply to them.  msrsync made the parents of every
    listed name."""
    src = build(tmp_path / "in" / "src", dict(
        (rel, rel) for rel in (b"d1/d2/f0.log", b"d1/d3/g.log", b"e1/f0.dat", b"e2/e3/h.dat")))
    age(src, 10 ** 9, everything=True)
    listing = tmp_path / "list"
    listing.write_bytes(b"d1/d2/f0.log\nd1/d3/g.log\ne1/f0.dat\ne2/e3/h.dat\nm1/m2/gone\n")
    # (the list does not name ".": DEST's root is made, not copied)
    differential(tmp_path / "w", [src + b"/"], caps, expect_rc=23, ignore_root_mtime=True,
                 rsync_opts=["-a", "--files-from=%s" % listing] + rules)


@pytest.mark.parametrize("listed", [b"", b"d1/d2/f.log\n"], ids=["empty", "all-excluded"])
def test_users_list_with_nothing_to_send_makes_no_dest_like_rsync(tmp_path, listed):
    src = os.fsencode(tmp_path / "in" / "src")
    os.makedirs(os.path.join(src, b"d1", b"d2"))
    with open(os.path.join(src, b"d1", b"d2", b"f.log"), "wb") as handle:
        handle.write(b"f")
    listing = tmp_path / "list"
    listing.write_bytes(listed)
    opts = ["-a", "--files-from=%s" % listing, "--exclude=*.log"]
    for name, run in (("rsync", lambda d: run_rsync(src + b"/", d, opts=opts)),
                      ("msrsync", lambda d: run_msrsync("-p", "2", "--rsync", " ".join(opts),
                                                        src + b"/", d))):
        dest = os.fsencode(tmp_path / name)
        cp = run(dest)
        assert cp.returncode == 0, describe(cp)
        assert not os.path.exists(dest), "%s made DEST" % name


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


@pytest.mark.parametrize("setting", ["p2-f1", "p8-f7"] if "p8-f7" in SETTINGS else ["p2-f1"])
@pytest.mark.parametrize("rsync_opts", ["-a -R --no-R", "-a --no-d", "-a --no-relative"])
def test_no_relative_and_no_dirs_are_no_ops_like_rsync(tmp_path, setting, rsync_opts):
    """--no-R (after -R) and --no-d change nothing for rsync -r: msrsync keeps
    them from its workers (their --files-from lists need -R and "dir/" entries)."""
    src = tmp_path / "src"
    pruning_tree(src)
    differential(tmp_path, contents(src) + [os.fsencode(p(src, "a"))], SETTINGS[setting],
                 shlex.split(rsync_opts))


# ------------------------------------------------------------------ --delay-updates

@pytest.mark.slow
@pytest.mark.parametrize("partial_dir", [[], ["--partial-dir=.hold"]], ids=["default", "named"])
def test_delay_updates_with_workers_sharing_a_directory(tmp_path, partial_dir):
    """--delay-updates holds each directory's new files in .~tmp~ (or --partial-dir)
    until its rsync ends, which then moves them and removes the directory.  Several
    rsyncs writing into one directory shared it, and one removed it under another
    ("rename ... .~tmp~/f: No such file or directory", exit 23; 2 runs in 6 here).  A
    race, so three runs of 400 changed files in one directory, one file per bucket."""
    src = os.fsencode(tmp_path / "in" / "src")
    os.makedirs(os.path.join(src, b"d"))
    for rep in range(3):
        for i in range(400):
            with open(os.path.join(src, b"d", b"f%03d" % i), "wb") as handle:
                handle.write(os.urandom(3000))
            os.utime(os.path.join(src, b"d", b"f%03d" % i), (10 ** 9 + rep, 10 ** 9 + rep))
        for directory in (os.path.join(src, b"d"), src):
            os.utime(directory, (10 ** 9, 10 ** 9))
        # (each run updates the DEST of the run before: every file changed)
        d = differential(tmp_path / "w", [src + b"/"], ["-p", "4", "-s", "1K"],
                         rsync_opts=["-a", "--delay-updates"] + partial_dir)
        names = os.listdir(os.path.join(d.msrsync_dest, b"d"))
        assert len(names) == 400, "a holding directory was left: %r" % [
            n for n in names if not n.startswith(b"f")]


def test_fuzzy_with_workers_sharing_a_directory(tmp_path):
    """-y lists a DEST directory for a basis of each new file; another worker's
    temporary file there, renamed meanwhile, "has vanished" (exit 24, about 1 run in
    18 of this).  Such a bucket runs again alone; the run ends as rsync's."""
    src = os.fsencode(tmp_path / "in" / "src")
    os.makedirs(os.path.join(src, b"d"))
    for i in range(300):
        with open(os.path.join(src, b"d", b"f%03d" % i), "wb") as handle:
            handle.write(os.urandom(20000))

    def half(dest):
        build(dest, dict((b"d/f%03d" % i, b"old %d\n" % i) for i in range(0, 300, 2)))
        age(dest, 10 ** 9, everything=True)

    age(src, 10 ** 9, everything=True)
    for rep in range(2):
        differential(tmp_path / ("w%d" % rep), [src + b"/"], ["-p", "4", "-f", "2"],
                     rsync_opts=["-a", "-y"], prepare_dest=half)


# ------------------------------------------------------------------ found by a fuzz of
# option dimensions (-R, --no-implied-dirs, a new DEST's mode, --remove-source-files)


@pytest.mark.parametrize("dest", ["new", "parent-missing"])
def test_relative_lone_file_names_a_missing_dest_like_rsync(tmp_path, dest):
    """-R SRC/./file: rsync's list holds the file alone (no implied parent below the
    cut), so a missing DEST is named after it, as without -R; msrsync made DEST/file."""
    src = tmp_path / "src"
    age(build(src, {"f": b"hi\n"}), 10 ** 9, everything=True)
    name = "dest" if dest == "new" else "missing/dest"
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/./f"], ["-p", "2"],
                     rsync_opts=["-a", "-R"], dest_name=name,
                     expect_rc=0 if dest == "new" else 3, compare=dest == "new")
    if dest == "new":
        assert os.path.isfile(d.msrsync_dest)


@pytest.mark.parametrize("mode", [0o711, 0o555, 0o700, 0o2775])
def test_a_new_dest_gets_the_srcs_mode_without_p_like_rsync(tmp_path, mode):
    """Without -p, rsync makes a missing DEST for "SRC/" with SRC's mode less the umask
    (0700 stays 0700); msrsync's own mkdir left 0755. With two SRCs the first "SRC/"
    gives it, even after a SRC named without a slash."""
    srcs = []
    for name, m in (("a", 0o755), ("b", mode)):
        root = tmp_path / name
        age(build(root, {"d/f": b"x\n"}), 10 ** 9, everything=True)
        os.chmod(root, m)
        srcs.append(os.fsencode(root))
    differential(tmp_path / "one", [srcs[1] + b"/"], ["-p", "2", "-f", "1"],
                 rsync_opts=["-rlt"])
    differential(tmp_path / "two", [srcs[0], srcs[1] + b"/"], ["-p", "2", "-f", "1"],
                 rsync_opts=["-rlt"], ignore_root_mtime=True)
    for root in srcs:
        os.chmod(root, 0o755)       # (pytest's cleanup)


def _remove_source_files_like_rsync(tmp_path, make_side, msrsync_args):
    """make_side(src, dest) builds each side; rsync and msrsync then run with -a
    --remove-source-files SRC/ DEST, exit 0 and leave the same DEST. Returns the
    two SRCs (bytes), by side."""
    masters, dests = {}, {}
    for side in ("oracle", "msrsync"):
        masters[side] = os.fsencode(tmp_path / side / "src")
        dests[side] = os.fsencode(tmp_path / side / "dest")
        make_side(masters[side], dests[side])
    opts = ["-a", "--remove-source-files"]
    o = run_rsync(masters["oracle"] + b"/", dests["oracle"], opts=opts)
    cp = run_msrsync(*(list(msrsync_args) + ["--rsync", " ".join(opts),
                                             masters["msrsync"] + b"/", dests["msrsync"]]))
    assert o.returncode == cp.returncode == 0, describe(cp)
    assert_same_tree(dests["oracle"], dests["msrsync"], label_a="rsync", label_b="msrsync")
    return masters


@pytest.mark.parametrize("caps", [["-p", "2", "-f", "1"], ["-p", "3", "-s", "1K"]],
                         ids=["f1", "s1K"])
def test_remove_source_files_keeps_srcs_directory_times_like_rsync(tmp_path, caps):
    """--remove-source-files empties SRC's directories as the buckets go, which gives
    them the time of the run; the directory pass then copied those times to DEST,
    where rsync gives the times its file list read first."""
    def make_side(src, dest):
        spec = {}
        for i in range(6):
            spec["d/f%d" % i] = spec["d/e/g%d" % i] = b"%d\n" % i * 300
        spec["top"] = b"t\n"
        age(build(src, spec), 10 ** 9, everything=True)
    masters = _remove_source_files_like_rsync(tmp_path, make_side, caps)
    # what is left of SRC: its directories, emptied by both at run time
    a, b = snapshot(masters["oracle"]), snapshot(masters["msrsync"])
    assert sorted(a) == sorted(b) == [b".", b"d", b"d/e"]


@pytest.mark.parametrize("caps", [["-p", "1", "-f", "4"], ["-p", "2", "-f", "4"]],
                         ids=["p1", "p2"])
def test_remove_source_files_keeps_times_of_directories_sent_twice(tmp_path, caps):
    """A directory whose subtree fits one bucket is sent by that bucket (rsync sets
    its time from its list) and again by its parent's "dir/" bucket: run after the
    first emptied it, that one copied the time of the run. Only the directories
    split across buckets had their listed times put back."""
    def make_side(src, dest):
        spec = {"top": b"t\n"}
        spec.update(("d%d/f%d" % (d, f), b"%d %d\n" % (d, f)) for d in range(6) for f in range(3))
        age(build(src, spec), 10 ** 9, everything=True)
    _remove_source_files_like_rsync(tmp_path, make_side, caps)


@pytest.mark.parametrize("idle_cut", ["0", "100"], ids=["idle-cut", "rerun"])
def test_remove_source_files_walks_every_directory_it_times(tmp_path, monkeypatch, idle_cut):
    """Without caps the scan hands out subtrees unwalked to workers that wait (at
    once at IDLE_CUT 0, and on a re-run into DEST holding a copy): their
    directories were never listed, so no time of theirs was kept, and the "dir/"
    bucket of their parent copied the time of the run that emptying them gave
    them. Such subtrees are walked instead."""
    monkeypatch.setenv("MSRSYNC_IDLE_CUT", idle_cut)

    def make_side(src, dest):
        spec = {"top": b"t\n", "d/own": b"own\n"}
        spec.update(("d/s%02d/f" % d, b"%d\n" % d) for d in range(12))
        age(build(src, spec), 10 ** 9, everything=True)
        assert run_rsync(src + b"/", dest, opts=["-a"]).returncode == 0
        # changed at both ends of d's list
        build(src, dict(("d/s%02d/f" % d, b"new %d\n" % d) for d in (0, 11)))
        age(src, 2 * 10 ** 9, everything=True)
    _remove_source_files_like_rsync(tmp_path, make_side, ["-p", "2"])


def _assert_same_but_run_time_mtimes(d):
    """DESTs alike, but for the mtimes of directories both tools made or wrote in
    at run time."""
    a, b = snapshot(d.oracle_dest), snapshot(d.msrsync_dest)
    for rel in set(a) | set(b):
        if a.get(rel, {}).get("mtime_ns", 0) > 1700 * 10 ** 15:
            if b.get(rel, {}).get("mtime_ns", 0) > 1700 * 10 ** 15:
                a[rel].pop("mtime_ns"), b[rel].pop("mtime_ns")
    assert_same_tree(a, b, label_a="rsync", label_b="msrsync")


@pytest.mark.parametrize("case", ["dest-link-in-src-tree", "dest-file-in-src-tree",
                                  "modes-without-p", "implied-link-followed"])
def test_relative_no_implied_dirs_in_buckets_like_rsync(tmp_path, case):
    """-R --no-implied-dirs split into buckets: SRC's own directories were implied
    parents of the names below them, so rsync wrote through a DEST symlink in their
    place into another part of DEST, failed on a DEST file there (23), and made new
    ones 0755 without -p. The "/./" cut now moves down to just above SRC's last name,
    and only what lies above it is implied."""
    src = tmp_path / "src"
    top = "x/y/d" if case == "implied-link-followed" else "d"
    spec = dict(("%s/s/f%d" % (top, i), b"%d\n" % i) for i in range(5))
    spec[top + "/t/g"] = b"g\n"
    age(build(src, spec), 10 ** 9, everything=True)
    if case == "modes-without-p":
        os.chmod(os.path.join(os.fsencode(src), os.fsencode(top), b"s"), 0o711)
        os.chmod(os.path.join(os.fsencode(src), os.fsencode(top), b"t"), 0o700)

    def prepare(dest):
        if case == "dest-link-in-src-tree":
            build(dest, {"other/s/f0": b"keep\n", "d": ("symlink", "other")})
        elif case == "dest-file-in-src-tree":
            build(dest, {"d": b"old\n"})
        elif case == "implied-link-followed":
            build(dest, {"real/y/": None, "x": ("symlink", "real"),
                         "real/y/d": ("symlink", "../elsewhere"), "real/elsewhere/": None})
        if os.path.isdir(dest):
            age(dest, 1400000000, everything=True)
    opts = ["-rlt" if case == "modes-without-p" else "-a", "-R", "--no-implied-dirs"]
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/./" + os.fsencode(top)],
                     ["-p", "2", "-f", "2"], rsync_opts=opts, prepare_dest=prepare,
                     compare=False)
    _assert_same_but_run_time_mtimes(d)


@pytest.mark.parametrize("dest_has", ["nothing", "part-of-the-implied-path",
                                      "the-implied-path"])
def test_relative_no_implied_dirs_with_existing_makes_no_implied_dirs_like_rsync(
        tmp_path, dest_has):
    """--existing makes no new directory at DEST, implied ones neither: msrsync made
    the part of the path above SRC's last name (DEST/a/b) and rsync nothing (found by
    a random differential run). Where DEST holds the whole path, the run goes on."""
    src = tmp_path / "src"
    age(build(src, dict(("a/b/d/s/f%d" % i, b"%d\n" % i) for i in range(6))), 10 ** 9,
        everything=True)

    def prepare(dest):
        if dest_has == "part-of-the-implied-path":
            os.makedirs(os.path.join(dest, b"a"))
        elif dest_has == "the-implied-path":
            build(dest, {"a/b/d/s/f1": b"old\n", "a/b/d/s/gone": b"old\n"})
        if os.path.isdir(dest):
            age(dest, 1400000000, everything=True)
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/./a/b/d"], ["-p", "2", "-f", "2"],
                     rsync_opts=["-a", "-R", "--no-implied-dirs", "--existing", "--delete"],
                     prepare_dest=prepare, compare=False)
    a, b = snapshot(d.oracle_dest, True), snapshot(d.msrsync_dest, True)
    assert_same_tree(a, b, label_a="rsync", label_b="msrsync")
    if dest_has == "the-implied-path":
        with open(os.path.join(d.msrsync_dest, b"a", b"b", b"d", b"s", b"f1"), "rb") as f:
            assert f.read() == b"1\n"
    else:
        assert not os.path.lexists(os.path.join(d.msrsync_dest, b"a", b"b"))


@pytest.mark.parametrize("case", ["pruned-whole-new-dest", "pruned-whole-old-dest",
                                  "something-sent"])
def test_relative_no_implied_dirs_makes_no_implied_dirs_for_a_pruned_src_like_rsync(
        tmp_path, case):
    """rsync makes an implied directory only to put an entry below it: with -m and
    no file the rules let through, SRC is pruned whole and DEST gets nothing. msrsync
    made the implied part of the path (DEST/a/b) before the workers ran (found by a
    random differential run); it now removes what it made and stayed empty, and gives
    DEST its time back."""
    src = tmp_path / "src"
    spec = dict(("a/b/d/s/f%d.txt" % i, b"%d\n" % i) for i in range(4))
    if case == "something-sent":
        spec["a/b/d/s/keep.log"] = b"log\n"
    age(build(src, spec), 10 ** 9, everything=True)

    def prepare(dest):
        if case == "pruned-whole-old-dest":
            os.makedirs(dest)
            age(dest, 1400000000, everything=True)
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/./a/b/d"], ["-p", "2", "-f", "1"],
                     rsync_opts=["-a", "-R", "--no-implied-dirs", "-m", "--include=*/",
                                 "--include=*.log", "--exclude=*"],
                     prepare_dest=prepare, compare=False)
    _assert_same_but_run_time_mtimes(d)
    made = os.path.lexists(os.path.join(d.msrsync_dest, b"a", b"b"))
    assert made == (case == "something-sent")


def test_relative_no_implied_dirs_with_different_implied_paths_is_one_rsync(tmp_path):
    src = tmp_path / "src"
    build(src, {"a/d/f": b"x\n", "b/c/e/f": b"x\n"}, mtime=1500000000)
    d = differential(tmp_path / "w", [os.fsencode(src) + b"/./a/d", os.fsencode(src) + b"/./b/c/e"],
                     ["-p", "2", "-f", "1"], rsync_opts=["-a", "-R", "--no-implied-dirs"],
                     compare=False)
    _assert_same_but_run_time_mtimes(d)
    lines = text(d.msrsync.stderr).splitlines()
    assert len(lines) == 1 and "one plain rsync" in lines[0], describe(d.msrsync)
