"""Filter rules: which entries a run sends, selected as rsync's rules select them.

Every way of giving rules: --exclude, --include and --filter (-f) with their
modifiers, --exclude-from/--include-from files (with -0/--from0), rules read from
stdin; per-directory and merged rule files (-F, -FF, -C, dir-merge ":", merge ".");
and -m/--prune-empty-dirs, which leaves out the directories the rules leave empty.
Rules that protect DEST entries from --delete (P, R, -r, --delete-excluded) are in
test_delete.py; the rule files a --delete reads in DEST are here (per-directory
rules, section 6).

The oracle is plain rsync, as everywhere (helpers.differential): ``msrsync -p N -f F
--rsync "OPTS" SRC/ DEST`` must leave DEST exactly as ``rsync OPTS SRC/ DEST`` (every
entry, content, mode, mtime -- directories included) and exit with the same status.
Every source entry gets an mtime in the past (``age``: deepest first, directories
last), since rsync leaves alone a directory mtime that falls in the second of the copy.

The per-directory trees nest 3-5 levels deep with rule files at several levels, so that
a bucket boundary falls between a rule file and the entries it governs; tiny buckets
(-f 1, -f 7, -s 1K) with 1, 2 and 8 workers rotate over the scenarios.

What rsync does with per-directory rules, in short (checked against rsync 3.5.0):
  * a dir-merge file's rules apply in its directory and below, before the rules of
    its parents (the deeper file wins), at the position of the dir-merge rule among
    the global rules; "!" in a file clears the inherited per-directory rules only;
  * anchored rules ("- /build") are anchored at the rule file's directory, while a
    pattern with a slash ("- a/q") matches the tail of the whole path, parts above
    the rule file's directory included;
  * a dir-merge name starting with "/" (-F's "/.rsync-filter") also reads that file
    in every directory above the transfer root, from "/" down; a plain name does not;
  * -C adds ":C" (.cvsignore: word-split, exclude-only, not inherited) and "-C" (the
    default list + ~/.cvsignore + $CVSIGNORE) after all other rules, wherever -C is;
    its default rules are perishable: they do not save entries of a directory that
    --delete removes;
  * with --delete the receiver reads the rule files found in DEST (delete-during: the
    old copy, before the directory is updated; delete-after: the new one), also those
    of extraneous DEST directories it deletes.

-m: rsync leaves out of the transfer every directory with nothing but directories
left empty below it (after filtering), except "." of "SRC/" and directories a
receiver-side rule protects ("P dir/"); with --delete their DEST copies go.  msrsync's
scanner prunes them itself (the workers run with -m; the directory pass, which sends
directories only, without).
"""

import os
import shlex
import shutil
import sys

import pytest

from helpers import (MSRSYNC, SETTINGS, T0, age, assert_same_tree, build, contents, describe,
                     dests, differential, filter_tree, make_tree, mask_run_time_dir_mtimes,
                     on_both_dests, p, pruning_tree, run_cmd, run_msrsync, run_rsync, settings,
                     snapshot, stderr_lines, text)


# ====================================================== global rules
# --exclude, --include, --filter, their -from files, rules read from stdin


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


# -------------------------------------------------- global rules on the awkward trees


FILTERS = [
    ["--exclude=#hash", "--exclude=;*"],
    ["--exclude=\xff*", "--exclude=*\xe9*"],
    ["--exclude=new?line", "--exclude=-*"],
    ["--exclude=*\\*", "--exclude=star\\*?\\[x\\]"],
    ["--exclude=read only/r00[0-4]", "--exclude=quote'*"],
    ["--exclude=link*", "--exclude=fifo", "--exclude=.*"],
    ["--exclude=d0?/", "--exclude=dir *"],
    ["--include=many/", "--include=many/d01/***", "--exclude=*"],
    ["--exclude=empty/", "--exclude=empty2", "--exclude=*/d1[0-5]/"],
]
@pytest.mark.parametrize("rules", FILTERS, ids=[" ".join(r) for r in FILTERS])
def test_filter_rules_select_what_rsync_selects(tmp_path, small_src, rules):
    differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "9"],
                 rsync_opts=["-aS", "--numeric-ids"] + rules)


def test_filter_rules_with_several_srcs(tmp_path, weird_src):
    other = make_tree(tmp_path / "in" / "other", "flat", n=12)
    differential(tmp_path, [weird_src + b"/", other], ["-p", "3", "-f", "7"],
                 rsync_opts=["-a", "--exclude=file00[0-4]", "--exclude=/other/file011",
                             "--exclude=d01/"])


# ====================================================== per-directory and merged rules
# -F, -FF, -C, dir-merge (":"), merge (".")


def setting(name):
    return SETTINGS[name]


def sized(names):
    """{rel: content}, contents of a few bytes to about 1.5K (-s 1K cuts many buckets)."""
    spec = {}
    for i, rel in enumerate(names):
        line = ("%s\n" % rel).encode()
        spec[rel] = line * (1 + (i * 7 + len(rel) * 13) % 60)
    return spec


def names_of(root):
    return set(snapshot(root))


def copy_plain(src, work):
    """Both destinations made by plain ``rsync -a SRC/ DEST`` (every rule file and
    every excluded entry included), as a DEST left by an earlier, unfiltered copy."""
    for dest in dests(work):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        cp = run_rsync(os.fsencode(src) + b"/", dest, opts=["-a"])
        assert cp.returncode == 0, describe(cp)


def env_prefix(**env):
    """``env NAME=VALUE...`` run before rsync and msrsync alike (HOME for ~/.cvsignore)."""
    return ["env"] + ["%s=%s" % (k, v) for k, v in sorted(env.items())]


# --------------------------------------------------------------------------- -F trees

F_FILES = [
    "top.txt", "top.tmp", "e.hid", "r", "notes/r",
    "a/f1", "a/f2.tmp", "a/q", "a/r", "a/build/o1", "a/build/sub/o2", "a/x/build/o3",
    "a/x/y/yy", "a/x/f", "a/x/b/q2",
    "a/b/keep.tmp", "a/b/other.tmp", "a/b/f", "a/b/q2", "a/b/v.hid", "a/b/r",
    "a/b/c/z.tmp", "a/b/c/cache/k", "a/b/c/only-here", "a/b/c/n.hid",
    "a/b/c/d/only-here", "a/b/c/d/w.tmp", "a/b/c/d/x.hid", "a/b/c/d/e/e1", "a/b/c/d/e/e2",
    "b/build/o", "b/f.tmp", "b/cache/c", "b/sub/cache", "b/u.hid", "b/sub/deeper/g",
    "b/sub/deeper/keep.tmp",
    "deep/p/q/r.log", "deep/p/r.log", "deep/r.log", "deep/p/q/keep",
    "x/y/z", "x/z",
]

F_RULES = {
    # unanchored, a pattern with a slash, directory-only, "**", hide, anchored at the
    # root, comments and blank lines
    ".rsync-filter": "# top rules\n- *.tmp\n- x/y\n- cache/\n- deep/**/*.log\n"
                     "H *.hid\n\n- /r\n",
    # anchored at a/ only; slash patterns matching the tail of the whole path
    "a/.rsync-filter": "- /build\n- b/q2\n- a/q\n",
    # deeper rules win over the inherited "- *.tmp" and "H *.hid"
    "a/b/.rsync-filter": "+ keep.tmp\nS *.hid\n; a comment\n",
    # "!" drops every inherited per-directory rule, for c/ and below
    "a/b/c/.rsync-filter": "!\n- /only-here\n",
    "a/b/c/d/e/.rsync-filter": "- e1\n",
}


def f_tree(root):
    spec = sized(F_FILES)
    spec.update(F_RULES)
    return age(build(root, spec))


def assert_f_rules_applied(names, prefix=b""):
    """What rsync -F keeps and drops in f_tree (so a tree that stops exercising the
    rules is noticed), below prefix (b"src/" when SRC had no trailing slash)."""
    kept = [b"a/x/build/o3", b"b/build/o", b"a/b/keep.tmp", b"a/b/v.hid", b"a/b/c/z.tmp",
            b"a/b/c/cache/k", b"a/b/c/n.hid", b"a/b/c/d/only-here", b"a/b/c/d/w.tmp",
            b"b/sub/cache", b"deep/r.log", b"x/z", b"a/r", b"notes/r", b"a/b/r",
            b"a/b/c/d/e/e2"]
    dropped = [b"top.tmp", b"e.hid", b"r", b"a/q", b"a/build", b"a/x/y", b"a/b/other.tmp",
               b"a/b/q2", b"a/b/c/only-here", b"b/f.tmp", b"b/cache", b"b/u.hid",
               b"b/sub/deeper/keep.tmp", b"deep/p/r.log", b"deep/p/q/r.log", b"x/y",
               b"a/b/c/d/e/e1", b"a/x/b/q2"]
    assert {prefix + n for n in kept} <= names, sorted({prefix + n for n in kept} - names)
    assert not {prefix + n for n in dropped} & names, \
        sorted({prefix + n for n in dropped} & names)


# --------------------------------------------------------------------------- 1. -F

@pytest.mark.parametrize("msr,trailing", [
    pytest.param(setting("p1-f1"), True, id="p1-f1"),
    pytest.param(setting("p2-f7"), True, id="p2-f7"),
    pytest.param(setting("p8-s1K"), True, id="p8-s1K"),
    pytest.param(setting("p2-f1"), False, id="p2-f1-SRC-without-slash"),
    pytest.param(setting("p8-f1"), False, id="p8-f1-SRC-without-slash"),
])
def test_F_rule_files_at_every_level_select_like_rsync(tmp_path, msr, trailing):
    """Unanchored, anchored, slash, "**", directory-only, hide/show rules in
    .rsync-filter files at five levels; a deeper include beats an inherited exclude;
    "!" clears what was inherited."""
    src = f_tree(tmp_path / "src")
    srcs = contents(src) if trailing else [src]
    result = differential(tmp_path / "w", srcs, msr, ["-a", "-F"])
    prefix = b"" if trailing else b"src/"
    names = names_of(result.msrsync_dest)
    assert_f_rules_applied(names, prefix)
    assert prefix + b"a/b/c/.rsync-filter" in names


@pytest.mark.parametrize("msr,trailing", [
    pytest.param(setting("p2-f1"), True, id="p2-f1"),
    pytest.param(setting("p8-f1"), False, id="p8-f1-SRC-without-slash"),
])
def test_F_reads_rsync_filter_files_above_src_like_rsync(tmp_path, msr, trailing):
    """-F is "dir-merge /.rsync-filter": the leading "/" makes rsync read the file in
    every directory from "/" down to the transfer root too; an anchored rule there is
    anchored at that directory ("- /src/x" drops SRC's x)."""
    src = f_tree(tmp_path / "src")
    build(src, sized(["top.par", "a/b/deep.par", "a/b/c/d/e/e.par", "x/kept"]))
    age(src)
    build(tmp_path, {".rsync-filter": "- *.par\n- /src/x\n"})
    srcs = contents(src) if trailing else [src]
    result = differential(tmp_path / "w", srcs, msr, ["-a", "-F"])
    names = names_of(result.msrsync_dest)
    prefix = b"" if trailing else b"src/"
    assert not {prefix + b"top.par", prefix + b"a/b/deep.par", prefix + b"x"} & names
    assert prefix + b"a/f1" in names


# --------------------------------------------------------------------------- 2. -FF

@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-FF"], setting("p2-f1"), id="FF-p2-f1"),
    pytest.param(["-a", "-F", "-F"], setting("p8-s1K"), id="F-F-p8-s1K"),
    pytest.param(["-aFF"], setting("p1-f1"), id="aFF-p1-f1"),
])
def test_FF_applies_the_rule_files_but_leaves_them_behind(tmp_path, opts, msr):
    src = f_tree(tmp_path / "src")
    result = differential(tmp_path / "w", contents(src), msr, opts)
    names = names_of(result.msrsync_dest)
    assert not [n for n in names if n.endswith(b".rsync-filter")], sorted(names)
    assert_f_rules_applied(names)


# ------------------------------------------------ 3. per-directory rules vs global rules

GLOBAL_TREE = {
    ".rsync-filter": "- *.tmp\n",
    "sub/.rsync-filter": "+ keep.o\n+ cache/\n",
    "sub/deep/deeper/.rsync-filter": "!\n",
}
GLOBAL_FILES = [
    "x.o", "keep.o", "top.c", "z.tmp", "n.gx", "cache/c1", "cache/sub/c2",
    "sub/keep.o", "sub/y.o", "sub/z.tmp", "sub/cache/c3", "sub/cache/inner/c4",
    "sub/deep/keep.o", "sub/deep/w.o", "sub/deep/cache/c5", "sub/deep/f.c",
    "sub/deep/deeper/keep.o", "sub/deep/deeper/n.gx", "sub/deep/deeper/cache/c7",
    "sub/deep/deeper/z.tmp",
    "other/keep.o", "other/cache/c6", "other/o.c",
]


@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-F", "--exclude=*.o", "--exclude=cache/", "--exclude=*.gx"],
                 setting("p2-f1"), id="F-first-per-dir-wins-p2-f1"),
    pytest.param(["-a", "--exclude=*.o", "--exclude=cache/", "-F"],
                 setting("p8-s1K"), id="F-last-global-wins-p8-s1K"),
    pytest.param(["-a", "--include=z.tmp", "-F", "--exclude=*.o"],
                 setting("p8-f1"), id="global-include-before-F-p8-f1"),
])
def test_per_dir_rules_take_the_place_of_the_dir_merge_rule_among_global_ones(
        tmp_path, opts, msr):
    """"-F --exclude=*.o": "+ keep.o" in sub/.rsync-filter comes first and keeps
    sub/keep.o (and sub/deep/keep.o, inherited), and "+ cache/" re-includes sub's
    cache directories; "--exclude=*.o -F": the global rule wins; "!" in a deep file
    clears per-directory rules only, never the global ones."""
    src = os.fsencode(tmp_path / "src")
    build(src, sized(GLOBAL_FILES))
    build(src, GLOBAL_TREE)
    age(src)
    result = differential(tmp_path / "w", contents(src), msr, opts)
    names = names_of(result.msrsync_dest)
    if opts[1] == "-F":
        assert {b"sub/keep.o", b"sub/deep/keep.o", b"sub/cache/inner/c4",
                b"sub/deep/cache/c5"} <= names
        assert not {b"keep.o", b"other/keep.o", b"cache", b"other/cache",
                    b"sub/deep/deeper/keep.o", b"sub/deep/deeper/cache",
                    b"sub/deep/deeper/n.gx", b"sub/y.o"} & names
        assert b"sub/deep/deeper/z.tmp" in names
    elif opts[1] == "--include=z.tmp":
        assert {b"z.tmp", b"sub/z.tmp", b"sub/keep.o"} <= names
        assert not {b"sub/y.o", b"x.o"} & names
    else:
        assert not {b"sub/keep.o", b"sub/cache"} & names


# --------------------------------------------------------------- 4. dir-merge and merge

# the same leaf names in every directory, rule files of several kinds at several levels
MERGE_LEAVES = ["x.1", "y.2", "+ z", "#c", "r1", "a.bak", "keep.bak", "p.par", "y", "z",
                "w1", "w2", "keep.dat", "o.dat"]
MERGE_DIRS = ["", "a/", "a/b/", "a/b/c/", "n/", "n/m/"]
MERGE_RULES = {
    # ordinary rule files (": .rules", ":e", ":n", "dir-merge /.rules", merge files)
    ".rules": "- *.bak\n- /r1\n",
    "a/.rules": "+ keep.bak\n- y\n",
    "a/b/c/.rules": "!\n- z\n",
    # exclude-only lists, one pattern per line ("+ z" is a pattern, "#c" a comment)
    ".excl": "x.1\n+ z\n#c\n; semicolon comment\n",
    "a/.excl": "y.2\n",
    "a/b/c/.excl": "w1  w2\n",
    # exclude-only word lists ("#c" is a word, not a comment)
    ".words": "x.1 #c\n",
    "a/b/.words": "w1 w2\ty\n",
    # include-only
    ".inc": "keep.dat\n",
    "a/b/.inc": "o.dat\n",
}


def merge_tree(tmp_path):
    src = os.fsencode(tmp_path / "src")
    build(src, sized([d + leaf for d in MERGE_DIRS for leaf in MERGE_LEAVES]))
    build(src, MERGE_RULES)
    age(src)
    # files above SRC that only a "/"-name dir-merge reads
    build(tmp_path, {".rules": "- *.par\n", ".excl": "o.dat\n"})
    # global rule files for merge / "."
    build(tmp_path, {"global.rules": "# global\n- *.par\n+ /a/b/keep.dat\n- /a/b/*.dat\n"
                                     "- a/b/c/y.2\n",
                     "global.list": "*.1\nw?\n"})
    return src


MERGE_CASES = [
    # (id, rsync options, msrsync setting, SRC with trailing slash)
    ("plain-name-no-parent-scan", ["--filter=: .rules"], "p2-f1", True),
    ("dir-merge-word-form", ["--filter=dir-merge .rules"], "p8-s1K", True),
    ("slash-name-scans-parents", ["--filter=dir-merge /.rules"], "p2-f7", True),
    ("exclude-self", ["--filter=:e .rules"], "p8-f1", True),
    ("no-inherit", ["--filter=:n .rules"], "p1-f1", True),
    ("no-inherit-exclude-only", ["--filter=dir-merge,n- .excl"], "p2-f1", True),
    ("exclude-only-words", ["--filter=dir-merge,-w .words"], "p8-s1K", True),
    ("exclude-only-inherited-scans-parents", ["--filter=:- /.excl"], "p2-f7", True),
    ("include-only-before-global-exclude", ["--filter=:+ .inc", "--exclude=*.dat"],
     "p8-f1", True),
    ("two-dir-merges-in-order", ["--filter=:e- .excl", "--filter=: .rules",
                                 "--filter=:-w .words"], "p2-f1", True),
    ("merge-file-then-dir-merge", ["--filter=merge {rules_file}", "--filter=: .rules"],
     "p2-f7", True),
    ("dot-merge-SRC-without-slash", ["--filter=. {rules_file}"], "p8-s1K", False),
    ("merge-exclude-only-list", ["--filter=merge,- {list_file}", "--filter=: .rules"],
     "p1-f1", True),
    ("dir-merge-SRC-without-slash", ["--filter=:e .rules", "--filter=dir-merge,n- .excl"],
     "p8-f1", False),
]


@pytest.mark.parametrize("rules,msr,trailing", [
    pytest.param(r, setting(s), t, id="%s-%s" % (i, s)) for i, r, s, t in MERGE_CASES])
def test_dir_merge_and_merge_rules_select_like_rsync(tmp_path, rules, msr, trailing):
    src = merge_tree(tmp_path)
    rules = [r.format(rules_file=os.fsdecode(p(tmp_path, "global.rules")),
                      list_file=os.fsdecode(p(tmp_path, "global.list"))) for r in rules]
    srcs = contents(src) if trailing else [src]
    result = differential(tmp_path / "w", srcs, msr, ["-a"] + rules)
    rsync_names = names_of(result.oracle_dest)
    plain = names_of(run_plain_copy(tmp_path, srcs))
    assert rsync_names != plain, "the rules select nothing in this tree: %r" % rules


def run_plain_copy(tmp_path, srcs):
    dest = os.path.join(os.fsencode(tmp_path), b"plain")
    cp = run_rsync(*(list(srcs) + [dest]), opts=["-a"])
    assert cp.returncode == 0, describe(cp)
    return dest


def test_dir_merge_details_rsync_shows_in_the_merge_tree(tmp_path):
    """The facts the merge cases rely on, asserted on rsync alone (no msrsync): a plain
    name reads no file above SRC, a "/" name does; "-" lists take "+ z" as a pattern
    and "#c" as a comment, "-w" lists take "#c" as a word; ":n" is not inherited."""
    src = merge_tree(tmp_path)

    def copy(*rules):
        dest = os.path.join(os.fsencode(tmp_path), b"d%d" % copy.n)
        copy.n += 1
        cp = run_rsync(src + b"/", dest, opts=["-a"] + list(rules))
        assert cp.returncode == 0, describe(cp)
        return names_of(dest)
    copy.n = 0

    names = copy("--filter=: .rules")
    assert b"p.par" in names and b"a.bak" not in names and b"a/keep.bak" in names
    assert b"n/m/a.bak" not in names and b"a/b/c/a.bak" in names and b"a/r1" in names
    assert b"p.par" not in copy("--filter=dir-merge /.rules")
    names = copy("--filter=dir-merge,n- .excl")
    assert b"+ z" not in names and b"#c" in names and b"a/x.1" in names
    assert b"a/y.2" not in names and b"a/b/y.2" in names and b"a/b/c/w1" in names
    names = copy("--filter=dir-merge,-w .words")
    assert b"#c" not in names and b"+ z" in names and b"n/m/x.1" not in names
    assert b"a/b/c/w2" not in names and b"a/w2" in names


# ------------------------------------------------------------------------------ 5. -C

CVS_FILES = [
    "keep.c", "x.o", "core", "foo~", "#hash", ".#lock", ",comma", "_$x", "x$", "old.old",
    "a.bak", "b.orig", "tags", "lib.a", "lib.so", ".del-x", "cvslog.1", "h.mine",
    "env.tmp", "envx.y", "junk", "CVS/Entries", "RCS/f,v", ".git/config", ".git/objects/o",
    "sub/.git", "sub/.cvsignore-not", "sub/y.log", "sub/z.dat", "sub/x.o", "sub/keep.c",
    "sub/core", "sub/.svn/entries", "sub/h.mine",
    "sub/deep/y.log", "sub/deep/z.dat", "sub/deep/w.o", "sub/deep/deeper/q.dat",
    "other/keep.c", "other/y.log", "other/z.dat", "other/w.o", "other/q.dat",
    "other/m.mine", "other/w.tmp",
]
CVS_RULES = {
    "sub/.cvsignore": "y.log   *.dat\n",
    "sub/deep/deeper/.cvsignore": "\n",
    # "!" clears the words before it in this file only (not the default list)
    "other/.cvsignore": "*.c y.log ! z.dat\n",
    # read by -F only; plain data for -C alone
    ".rsync-filter": "+ core\n- /keep.c\n",
}


def cvs_tree(tmp_path):
    src = os.fsencode(tmp_path / "src")
    build(src, sized(CVS_FILES))
    build(src, CVS_RULES)
    age(src)
    build(tmp_path, {".cvsignore": "junk\n"})     # above SRC: ":C" does not scan parents
    build(tmp_path / "home", {".cvsignore": "*.mine\n"})
    return src


def cvs_env(tmp_path):
    return env_prefix(HOME=os.fsdecode(p(tmp_path, "home")),
                      CVSIGNORE="*.tmp envx.?")


@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-C"], setting("p2-f1"), id="C-p2-f1"),
    pytest.param(["-a", "--include=*.o", "-C"], setting("p8-s1K"),
                 id="include-before-C-p8-s1K"),
    pytest.param(["-a", "--cvs-exclude", "--include=*.o"], setting("p1-f1"),
                 id="cvs-exclude-before-include-still-last-p1-f1"),
    pytest.param(["-aFC"], setting("p2-f7"), id="aFC-p2-f7"),
    pytest.param(["-a", "--filter=:C", "--include=*.o", "--filter=-C"], setting("p8-f1"),
                 id="explicit-colon-C-and-minus-C-p8-f1"),
])
def test_cvs_exclude_selects_like_rsync(tmp_path, opts, msr):
    """The default CVS list (x.o, core, foo~, .git/ but not a file named .git, CVS/...),
    ~/.cvsignore, $CVSIGNORE, .cvsignore files (not inherited, "!" inside), all after
    the user's own rules wherever -C stands."""
    src = cvs_tree(tmp_path)
    result = differential(tmp_path / "w", contents(src), msr, opts,
                          prefix=cvs_env(tmp_path))
    names = names_of(result.msrsync_dest)
    assert {b"junk", b"sub/.git", b"sub/deep/y.log", b"other/y.log", b"other/keep.c",
            b"sub/deep/deeper/q.dat"} <= names
    assert not {b"foo~", b"CVS", b".git", b"sub/.svn", b"h.mine", b"env.tmp", b"envx.y",
                b"sub/y.log", b"sub/z.dat", b"other/z.dat", b"other/m.mine",
                b"other/w.tmp"} & names
    if "--include=*.o" in opts:
        assert {b"x.o", b"sub/x.o", b"other/w.o", b"sub/deep/w.o"} <= names
    else:
        assert not {b"x.o", b"sub/x.o", b"other/w.o", b"sub/deep/w.o"} & names
    if "-aFC" in opts:
        assert b"core" in names and b"keep.c" not in names and b"sub/core" in names


@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-C", "--delete"], setting("p2-f1"), id="delete-p2-f1"),
    pytest.param(["-a", "-C", "--delete-after", "--filter=P *.keep"], setting("p8-s1K"),
                 id="delete-after-protect-p8-s1K"),
])
def test_cvs_exclude_with_delete_its_perishable_defaults_save_nothing_in_deleted_dirs(
        tmp_path, opts, msr):
    """In a DEST directory that stays, x.o and .cvsignore'd names are protected; in an
    extraneous DEST directory being deleted the (perishable) -C default rules save
    nothing (xd/x.o, xd3/CVS go), unlike an ordinary exclude or a P rule."""
    src = cvs_tree(tmp_path)
    work = tmp_path / "w"
    copy_plain(src, work)
    on_both_dests(work, {"xd/x.o": "o\n", "xd2/plain": "p\n", "xd3/CVS/Entries": "e\n",
                         "xd4/k.keep": "k\n", "sub/extra.o": "o\n", "sub/z.log": "z\n",
                         "sub/new.dat": "d\n", "other/n.mine": "m\n"}, T0 + 50)
    shutil.rmtree(p(src, "sub/deep/deeper"))
    os.unlink(p(src, "keep.c"))
    age(src, T0 + 100)
    result = differential(work, contents(src), msr, opts, prefix=cvs_env(tmp_path))
    names = names_of(result.msrsync_dest)
    assert {b"sub/extra.o", b"sub/new.dat", b"x.o", b"other/n.mine"} <= names
    assert not {b"xd", b"xd2", b"xd3", b"sub/z.log", b"keep.c", b"sub/deep/deeper"} & names
    assert (b"xd4/k.keep" in names) == ("--filter=P *.keep" in opts)


# ------------------------------------------------------------------ 6. deletion and -F

DEL_FILES = ["top", "f.tmp", "gone.txt", "a/f", "a/g.tmp", "a/b/f", "a/b/keep.tmp",
             "a/b/c/f", "a/b/c/s.log", "a/b/c/g", "a/gone/g1", "a/gone/sub/g2",
             "x/y/f", "x/f"]
DEL_RULES = {
    ".rsync-filter": "- *.tmp\nP *.keep\n- *.log\n",
    "a/b/.rsync-filter": "+ keep.tmp\n",
    "a/b/c/.rsync-filter": "- /f\n",
    # for ":s .side" and ":r .side" (a side-specific merge file may hold no P/H/S rule)
    ".side": "- *.tmp\n",
    "a/b/.side": "+ keep.tmp\n- /f\n",
}
DEL_EXTRANEOUS = {
    "xd1/file.keep": "protected: xd1 stays\n",
    "xd2/sub/plain": "nothing protected: xd2 goes\n",
    "a/xd3/n.tmp": "excluded: protected unless --delete-excluded\n",
    "a/b/c/extra": "deleted\n",
    "a/b/extra.tmp": "excluded in a/b\n",
    "a/b/c/e.log": "excluded\n",
    "x/y/top.keep": "protected\n",
    "zz.keep": "protected\n",
    "zz": "deleted\n",
}


@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-F", "--delete"], setting("p2-f1"), id="F-delete-p2-f1"),
    pytest.param(["-a", "-F", "--delete-after"], setting("p8-s1K"),
                 id="F-delete-after-new-rules-p8-s1K"),
    pytest.param(["-a", "-F", "--delete", "--delete-excluded"], setting("p8-f1"),
                 id="F-delete-excluded-p8-f1"),
    pytest.param(["-a", "-FF", "--delete"], setting("p1-f1"), id="FF-delete-p1-f1"),
    pytest.param(["-a", "-FF", "--delete-excluded"], setting("p2-f7"),
                 id="FF-delete-excluded-p2-f7"),
    pytest.param(["-a", "--filter=:s .side", "--delete"], setting("p2-f1"),
                 id="sender-only-dir-merge-p2-f1"),
    pytest.param(["-a", "--filter=:r .side", "--delete"], setting("p8-s1K"),
                 id="receiver-only-dir-merge-p8-s1K"),
])
def test_delete_with_per_dir_rules_matches_rsync(tmp_path, opts, msr):
    """DEST copied unfiltered, extraneous entries added, SRC changed: excluded names
    are protected (unless --delete-excluded), "P *.keep" keeps an extraneous directory
    holding only a .keep file, an extraneous directory without one goes. The rule
    files are the same in SRC and DEST, except for --delete-after, where rsync's
    receiver reads the freshly copied ones."""
    src = age(build(tmp_path / "src", dict(sized(DEL_FILES), **DEL_RULES)))
    work = tmp_path / "w"
    copy_plain(src, work)
    on_both_dests(work, DEL_EXTRANEOUS, T0 + 50)
    os.unlink(p(src, "gone.txt"))
    shutil.rmtree(p(src, "a/gone"))
    build(src, {"a/f": "changed\n", "a/b/new.tmp": "n\n", "a/new": "n\n"})
    if "--delete-after" in opts:
        build(src, {"a/b/c/.rsync-filter": "- /f\nP extra\n"})
    age(src, T0 + 100)
    result = differential(work, contents(src), msr, opts)
    names = names_of(result.msrsync_dest)
    assert not {b"xd2", b"zz", b"gone.txt", b"a/gone"} & names
    if "-F" in opts or "-FF" in opts:
        assert {b"xd1/file.keep", b"x/y/top.keep", b"zz.keep"} <= names
    if "--delete-excluded" in opts:
        assert not {b"a/xd3", b"a/b/c/f", b"a/b/c/e.log", b"a/b/extra.tmp"} & names
    elif "--filter=:s .side" in opts:
        assert not {b"a/b/f", b"f.tmp", b"a/b/extra.tmp"} & names
    else:
        assert {b"a/xd3/n.tmp", b"a/b/c/f", b"a/b/extra.tmp"} <= names
    assert (b"a/b/c/extra" in names) == ("--delete-after" in opts)


def test_F_delete_reads_the_rules_of_an_extraneous_dest_directory(tmp_path):
    """rsync's receiver, deleting an extraneous DEST directory, reads the .rsync-filter
    inside it: what it excludes survives (there and below), the rest goes -- the rule
    file itself too. (The directory whose contents were partly deleted keeps the time
    of the run, on both sides: that mtime is not compared.)"""
    src = age(build(tmp_path / "src", dict(sized(DEL_FILES), **DEL_RULES)))
    work = tmp_path / "w"
    copy_plain(src, work)
    on_both_dests(work, {"xd5/.rsync-filter": "- keepme\n", "xd5/keepme": "k\n",
                         "xd5/inner/keepme": "k\n", "xd5/other": "o\n",
                         "xd5/inner/other": "o\n"}, T0 + 50)
    result = differential(work, contents(src), setting("p2-f1"), ["-a", "-F", "--delete"],
                          compare=False)
    a, b = mask_run_time_dir_mtimes(snapshot(result.oracle_dest),
                                    snapshot(result.msrsync_dest))
    assert_same_tree(a, b, label_a="rsync", label_b="msrsync")
    names = set(b)
    assert {b"xd5/keepme", b"xd5/inner/keepme"} <= names
    assert not {b"xd5/other", b"xd5/inner/other", b"xd5/.rsync-filter"} & names


# ------------------------------------------------------------------ 7. incremental runs

@pytest.mark.parametrize("opts,msr", [
    pytest.param(["-a", "-F"], setting("p2-f7"), id="F-p2-f7"),
    pytest.param(["-a", "-F", "--delete-after"], setting("p8-f1"), id="F-delete-after-p8-f1"),
    pytest.param(["-a", "-FF", "--delete"], setting("p1-f1"), id="FF-delete-p1-f1"),
])
def test_rerun_after_changes_and_an_edited_rule_file_matches_rsync(tmp_path, opts, msr):
    """Second run after files were modified, deleted and added and a nested
    .rsync-filter was edited (a/b/keep.tmp newly excluded, a/b/other.tmp newly
    included): the same DEST as rsync's second run. Without deletion the newly
    excluded file stays; with --delete-after the new rule file protects it; with
    -FF --delete DEST has no rule file, so it is deleted."""
    src = f_tree(tmp_path / "src")
    work = tmp_path / "w"
    differential(work, contents(src), msr, opts)
    on_both_dests(work, {"a/b/xtra": "x\n", "xtra_dir/f": "f\n", "a/b/c/xtra.tmp": "t\n"},
                  T0 + 50)
    build(src, {"a/f1": "modified, longer than before\n" * 3, "x/z": "same size?\n"})
    os.unlink(p(src, "a/b/f"))
    shutil.rmtree(p(src, "b/build"))
    build(src, {"a/b/new.tmp": "excluded\n", "a/b/c/new.tmp": "kept (!)\n",
                "a/new.txt": "new\n", "n/deep/er/f": "new dir\n", "a/build/o3": "excl\n"})
    build(src, {"a/b/.rsync-filter": "- /keep.tmp\n+ other.tmp\nS *.hid\n"})
    age(src, T0 + 1000)
    result = differential(work, contents(src), msr, opts)
    names = names_of(result.msrsync_dest)
    assert {b"a/b/other.tmp", b"a/b/c/new.tmp", b"n/deep/er/f"} <= names
    assert not {b"a/b/new.tmp", b"a/build"} & names
    if "-FF" in opts:
        assert not {b"a/b/keep.tmp", b"a/b/f", b"xtra_dir"} & names
    else:
        assert b"a/b/keep.tmp" in names


# ------------------------------------------------------------- 8. the oracle can fail

@pytest.mark.parametrize("rsync_opts", [pytest.param(["-a", "-F"], id="F"),
                                        pytest.param(["-a", "-C"], id="C")])
def test_these_trees_tell_a_filtered_copy_from_an_unfiltered_one(tmp_path, rsync_opts):
    """msrsync without -F (-C) leaves a different DEST than rsync with it: the
    comparison of these trees can fail."""
    src = f_tree(tmp_path / "src") if "-F" in rsync_opts else cvs_tree(tmp_path)
    oracle, dest = dests(tmp_path / "w")
    os.makedirs(os.path.dirname(oracle))
    os.makedirs(os.path.dirname(dest))
    cp = run_rsync(src + b"/", oracle, opts=rsync_opts)
    assert cp.returncode == 0, describe(cp)
    cp = run_msrsync("-p", "2", "-f", "1", "--rsync", "-a", src + b"/", dest)
    assert cp.returncode == 0, describe(cp)
    with pytest.raises(AssertionError):
        assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")


# -------------------------------------------------- 9. one plain rsync where buckets cannot

@pytest.mark.parametrize("opts,names", [
    pytest.param("-a -F --files-from={list}", ["-F", "files-from"], id="F-with-files-from"),
    # rsync reads a dir-merge rule inside a merge file (a per-directory file inside a
    # global one); buckets cannot, so one plain rsync runs it
    pytest.param("-a --filter='merge {merge_file}'", [": .rules", "dir-merge"],
                 id="dir-merge-inside-merge-file"),
])
def test_what_buckets_cannot_apply_runs_as_one_rsync_naming_it(tmp_path, opts, names):
    """A rule set buckets cannot apply exactly is one plain rsync of the user's
    command: DEST as rsync leaves it, exit 0, and one note naming why."""
    src = f_tree(tmp_path / "src")
    listing = tmp_path / "list"
    listing.write_bytes(b"a/f1\nb/build/o\n")
    merge_file = tmp_path / "global.rules"
    merge_file.write_bytes(b"- *.par\n: .rules\n")
    text_opts = opts.format(list=listing, merge_file=merge_file)
    d = differential(tmp_path / "w", [src + b"/"], ["-p", "2", "-f", "1"],
                     rsync_opts=shlex.split(text_opts),
                     # (a --files-from list does not name DEST's own directory)
                     ignore_root_mtime=True if "files-from" in text_opts else None)
    lines = stderr_lines(d.msrsync)
    assert len(lines) == 1 and lines[0].startswith("msrsync: note: "), describe(d.msrsync)
    assert "one plain rsync" in lines[0], describe(d.msrsync)
    assert any(n in lines[0] for n in names), "%r names none of %r" % (lines[0], names)


def test_the_x_modifier_filters_xattr_names_in_every_bucket(tmp_path):
    """A rule with x matches xattr names only: the scan passes it by, every rsync
    applies it (user.skip is not copied, user.keep is), with buckets."""
    src = f_tree(tmp_path / "src")
    for name in (b"a/f1", b"b/build/o", b"x/z"):
        path = os.path.join(src, name)
        os.setxattr(path, "user.skip", b"1")
        os.setxattr(path, "user.keep", b"2")
    age(src)
    d = differential(tmp_path / "w", [src + b"/"], ["-p", "2", "-f", "1"],
                     rsync_opts=["-aX", "--filter=-x user.skip"])
    assert not stderr_lines(d.msrsync), describe(d.msrsync)
    assert os.listxattr(os.path.join(d.msrsync_dest, b"a/f1")) == ["user.keep"]


# ====================================================== -m/--prune-empty-dirs


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


@pytest.mark.parametrize("name", [b"dir back\\slash", b"dir back\\slash *?", b"plain dir"],
                         ids=["backslash", "backslash-and-wildcards", "control"])
def test_a_pruned_directory_with_a_backslash_in_its_name_stays_out_like_rsync(tmp_path, name):
    """msrsync names a directory the scan pruned (-m) in a filter rule of its
    directory pass. A backslash escapes a wildcard only where the pattern holds one
    (rsync(1)): "dir back\\\\slash", escaped, matched nothing, and the pass made the
    directory rsync had pruned."""
    src = os.path.join(os.fsencode(tmp_path), b"src")
    os.makedirs(os.path.join(src, name))
    os.makedirs(os.path.join(src, b"keep"))
    for path in (os.path.join(src, name, b"x"), os.path.join(src, b"keep", b"a.log"),
                 os.path.join(src, b"b.log")):
        with open(path, "wb") as handle:
            handle.write(b"x\n")
    for directory in (os.path.join(src, name), os.path.join(src, b"keep"), src):
        os.utime(directory, (1500000000, 1500000000))   # (see README: the same second)
    # --chmod: directories may differ from SRC's by more than their mtime, so
    # the directory pass runs
    differential(os.path.join(os.fsencode(tmp_path), b"w"), [src + b"/"],
                 ["-p", "2", "-f", "1"],
                 rsync_opts=["-a", "-m", "--chmod=u+rwX,go-w", "--include=*/",
                             "--include=*.log", "--exclude=*"])
