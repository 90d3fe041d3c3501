"""Every user-facing error: its exit code, its one-line message, and that it leaves
nothing behind; and the failures of sources, destinations and workers."""

import json
import os
import shlex
import re
import signal
import subprocess
import sys

import pytest

from helpers import (NOBODY, assert_same_tree, build, chown_tree, describe, differential,
                     make_tree, rsync_processes_mentioning, run_msrsync, run_rsync, snapshot,
                     start_msrsync, stderr_lines, text, wait_for)


def _whole_dir(path):
    """Snapshot of a whole directory (to prove that nothing was created anywhere)."""
    return snapshot(path)


def assert_one_error_line(cp, code, *needles):
    """Exit code, stderr is exactly one 'msrsync: error: ...' line, no traceback."""
    __tracebackhide__ = True
    assert cp.returncode == code, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, "expected one stderr line:\n" + describe(cp)
    assert lines[0].startswith("msrsync: error: "), describe(cp)
    assert "Traceback" not in text(cp.stderr)
    for needle in needles:
        assert needle in lines[0], "%r not in %r" % (needle, lines[0])
    return lines[0]


@pytest.fixture
def small_tree(tmp_path):
    return make_tree(tmp_path / "src", "flat", n=5)


USAGE_ERRORS = {
    "p-zero": (["-p", "0"], ["0"]),
    "p-letters": (["-p", "abc"], ["abc"]),
    "p-negative": (["-p", "-1"], []),
    "p-decimal": (["-p", "1.5"], ["1.5"]),
    "f-zero": (["-f", "0"], ["0"]),
    "f-letters": (["--files", "x"], ["x"]),
    "s-bad-suffix": (["-s", "12Q"], ["12Q"]),
    "s-zero": (["-s", "0"], ["0"]),
    "s-zero-with-suffix": (["-s", "0K"], ["0K"]),
    "s-negative": (["-s", "-5"], []),
    "s-empty": (["-s", ""], []),
    "s-only-suffix": (["-s", "K"], []),
    "s-iB-without-multiplier": (["-s", "5iB"], []),
    "unknown-long-option": (["--bogus"], ["--bogus"]),
    "unknown-short-option": (["-z"], ["-z"]),
    "bench-entries-zero": (["--bench-entries", "0"], []),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_bad_option_value_exits_1_with_one_line(tmp_path, small_tree, case):
    args, needles = USAGE_ERRORS[case]
    before = _whole_dir(tmp_path)
    cp = run_msrsync(*(args + [small_tree + b"/", tmp_path / "dest"]))
    assert_one_error_line(cp, 1, *needles)
    assert_same_tree(before, tmp_path, label_a="before", label_b="after")


@pytest.mark.parametrize("args", [[], ["-p", "2"], ["--stats", "-f", "3"]],
                         ids=["nothing", "options-only", "options-only-2"])
def test_no_src_and_no_dest_exits_1(tmp_path, args):
    before = _whole_dir(tmp_path)
    cp = run_msrsync(*args)
    assert_one_error_line(cp, 1)
    assert_same_tree(before, tmp_path)


def test_only_one_path_is_missing_dest_exits_1(tmp_path, small_tree):
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", small_tree + b"/")
    assert_one_error_line(cp, 1, "DEST")
    assert_same_tree(before, tmp_path)


def test_rsync_option_without_value_exits_1(tmp_path, small_tree):
    before = _whole_dir(tmp_path)
    cp = run_msrsync("--rsync")
    assert_one_error_line(cp, 1)
    assert_same_tree(before, tmp_path)


def _empty_path_env(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = dict(os.environ)
    env["PATH"] = str(empty)
    return env, empty


def test_rsync_missing_from_path_exits_40(tmp_path, small_tree):
    env, _ = _empty_path_env(tmp_path)
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", small_tree + b"/", tmp_path / "dest", env=env,
                     python=os.path.realpath(sys.executable))
    assert_one_error_line(cp, 40, "rsync")
    assert_same_tree(before, tmp_path)


@pytest.mark.parametrize("script,needle", [
    ('echo "rsync  version 3.0.9  protocol version 30"', "3.0.9"),
    ("exit 1", "rsync"),
    ('echo "something else entirely"', "rsync"),
], ids=["too-old", "fails", "no-version"])
def test_unusable_rsync_exits_40(tmp_path, small_tree, script, needle):
    env, bindir = _empty_path_env(tmp_path)
    fake = bindir / "rsync"
    fake.write_text("#!/bin/sh\n%s\n" % script)
    fake.chmod(0o755)
    before = _whole_dir(tmp_path)
    cp = run_msrsync(small_tree + b"/", tmp_path / "dest", env=env)
    assert_one_error_line(cp, 40, needle)
    assert_same_tree(before, tmp_path)


@pytest.mark.parametrize("opts", ["--bogus", "-a --no-such-thing", "-a --bwlimit=abc",
                                  "-a '"], ids=["bogus", "unknown-long", "bad-value",
                                               "unbalanced-quote"])
def test_bad_rsync_option_exits_1(tmp_path, small_tree, opts):
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", "--rsync", opts, small_tree + b"/", tmp_path / "dest")
    assert_one_error_line(cp, 1)
    assert_same_tree(before, tmp_path)


# SPEC.md also lists --delete*, --exclude/--include/--filter, -H, -x, -R,
# --no-implied-dirs, -L, -k, -K, --copy-unsafe-links, --safe-links and --files-from as
# refused "until later issues implement them"; they are implemented now (see
# test_filters.py, test_delete.py, test_rsync_features.py and test_rsync_semantics.py).
REFUSED = [
    # (the --rsync string, the names the message may use for the refused option):
    # options of rsync's own processes, never a copy's
    ("-a --daemon", ["--daemon"]),
    ("-a --sender", ["--sender"]),
    ("-a --server", ["--server"]),
]


@pytest.mark.parametrize("opts,names", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_rsync_option_exits_4_naming_it(tmp_path, small_tree, opts, names):
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", "--rsync", opts, small_tree + b"/", tmp_path / "dest")
    line = assert_one_error_line(cp, 4)
    assert any(n in line for n in names), "%r names none of %r" % (line, names)
    assert_same_tree(before, tmp_path)


# What one rsync does and buckets cannot (SPEC.md once listed them as refused): msrsync
# runs one plain rsync of the command, with a note naming why.
ONE_RSYNC = [
    ("-a -m -F", ["-m"]), ("-a -m --files-from=x", ["-m"]),
    ("-a --no-dirs --files-from=x", ["--no-dirs", "--no-d"]), ("-a --old-dirs", ["--old-dirs"]),
    ("-a --only-write-batch=x", ["--only-write-batch", "batch"]), ("-a --help", ["--help"]),
    ("-a --no-relative --files-from=x", ["--no-relative", "--no-R"]),
    ("-a --write-batch=x", ["--write-batch", "batch"]),
    ("-a --read-batch=x", ["--read-batch", "batch"]), ("-a --list-only", ["--list-only"]),
    ("-a --version", ["--version"]), ("-lpt", ["-r", "recurs"]),
    ("-a --no-r", ["--no-r", "recurs"]), ("-a --no-recursive", ["--no-recursive", "recurs"]),
    ("-lptd", ["-d", "-r", "recurs"]),
]


@pytest.mark.parametrize("opts,names", ONE_RSYNC, ids=[r[0] for r in ONE_RSYNC])
def test_what_buckets_cannot_do_runs_as_one_plain_rsync(tmp_path, small_tree, opts, names):
    """The exit code, stdout and DEST are those of one plain rsync of the same command
    (run in a directory of its own, which holds the list "x"), and stderr starts with
    one note naming the option."""
    runs = {}
    for side in ("rsync", "msrsync"):
        cwd = tmp_path / side
        cwd.mkdir()
        (cwd / "x").write_bytes(b"a\n")
        argv = shlex.split(opts) + [small_tree + b"/", "dest"]
        runs[side] = (run_msrsync("-p", "2", "--rsync", opts, *argv[-2:], cwd=cwd)
                      if side == "msrsync" else run_rsync(*argv, opts=[], cwd=cwd))
    oracle, cp = runs["rsync"], runs["msrsync"]
    assert cp.returncode == oracle.returncode, describe(cp) + describe(oracle)
    lines = stderr_lines(cp)
    assert lines and lines[0].startswith("msrsync: note: "), describe(cp)
    assert "one plain rsync" in lines[0] and any(n in lines[0] for n in names), lines[0]
    assert cp.stdout.replace(b"/msrsync/", b"/rsync/") == oracle.stdout, describe(cp)
    for name in ("dest", "x", "x.sh"):
        mine, theirs = tmp_path / "msrsync" / name, tmp_path / "rsync" / name
        assert os.path.lexists(mine) == os.path.lexists(theirs), name
        if name == "dest" and os.path.lexists(theirs):
            assert_same_tree(theirs, mine, ignore_root_mtime=True)


@pytest.mark.parametrize("where,code", [("both-remote", 1), ("mixed-srcs", 1),
                                        ("daemon-both", 1)])
def test_remote_path_combinations_rsync_refuses(tmp_path, small_tree, where, code):
    """Remote ends work (tests/test_remote.py, which also runs several remote SRCs as
    one rsync); what rsync itself refuses (both ends remote, local and remote SRCs
    mixed: exit 1) fails with one line, before any connection."""
    src, dest = [small_tree + b"/"], os.fsencode(tmp_path / "dest")
    if where == "both-remote":
        src, dest = [b"somehost:/tmp/x/"], b"otherhost:/tmp/y"
    elif where == "mixed-srcs":
        src = [small_tree + b"/", b"somehost:/tmp/x/"]
    else:
        src, dest = [b"rsync://somehost/module/"], b"somehost::module/x"
    before = _whole_dir(tmp_path)
    cp = run_msrsync(*(src + [dest]))
    assert_one_error_line(cp, code)
    assert_same_tree(before, tmp_path)


# ------------------------------------------------------------------ SRC and DEST problems

def test_missing_src_among_others_exits_23_and_copies_the_rest(tmp_path, weird_src):
    missing = os.fsencode(tmp_path / "no such src")
    other = make_tree(tmp_path / "in" / "other", "flat", n=7)
    d = differential(tmp_path, [weird_src + b"/", missing, other], ["-p", "3", "-f", "20"],
                     expect_rc=23)
    lines = stderr_lines(d.msrsync)
    want = 'msrsync: error: link_stat "%s" failed: No such file or directory (2)' % text(missing)
    assert want in lines, describe(d.msrsync)
    assert "Traceback" not in text(d.msrsync.stderr)


def test_missing_relative_src_message_names_it(tmp_path, weird_src):
    other = make_tree(tmp_path / "in" / "other", "flat", n=3)
    d = differential(tmp_path, [b"nope", other], ["-p", "2"], expect_rc=23,
                     cwd=tmp_path / "in")
    line = [l for l in stderr_lines(d.msrsync) if "link_stat" in l]
    assert line, describe(d.msrsync)
    assert re.match(r'^msrsync: error: link_stat "(%s|nope)" failed: No such file or '
                    r'directory \(2\)$' % re.escape(str(tmp_path / "in" / "nope")), line[0])


def test_only_missing_srcs_exit_23_and_create_nothing(tmp_path):
    before = _whole_dir(tmp_path)
    cp = run_msrsync(tmp_path / "nope1", tmp_path / "nope2", tmp_path / "dest")
    assert cp.returncode == 23, describe(cp)
    assert rsync_exit(tmp_path / "nope1", tmp_path / "nope2", tmp_path / "dest2") == 23
    assert not os.path.lexists(tmp_path / "dest")
    assert "Traceback" not in text(cp.stderr)
    assert_same_tree(before, tmp_path)


def rsync_exit(*args):
    return run_rsync(*args).returncode


@pytest.mark.parametrize("tail", [["-p", "2", "SRC", "DEST"], ["SRC", "DEST", "--stats"],
                                  ["--delete", "SRC", "DEST"], ["SRC", "--json", "x", "DEST"]],
                         ids=["msrsync-option", "option-last", "rsync-option", "json"])
def test_an_option_after_the_rsync_string_is_refused_before_anything_is_written(
        tmp_path, small_tree, tail):
    """After --rsync "OPTS" every argument is a path: an option put there would be
    a SRC that does not exist (rsync's 23 after copying the others) or, last, a
    DEST of that name.  It is refused in one line, and nothing is created."""
    before = _whole_dir(tmp_path)
    names = {"SRC": small_tree + b"/", "DEST": os.fsencode(tmp_path / "dest")}
    cp = run_msrsync(*(["--rsync", "-a"] + [names.get(a, a) for a in tail]), cwd=tmp_path)
    option = next(a for a in tail if a.startswith("-"))
    assert_one_error_line(cp, 1, option + ' comes after --rsync "OPTS"',
                          "put -- before the paths")
    assert_same_tree(before, tmp_path)


@pytest.mark.parametrize("rsync_opts", [["-a"], ["-aR"], ["-a", "--delete"]],
                         ids=["a", "R", "delete"])
@pytest.mark.parametrize("src", ["-x", "-x/", "-x/sub"])
def test_paths_that_start_with_a_dash_after_double_dash_copy_like_rsync(
        tmp_path, rsync_opts, src):
    """After "--" a path may start with a dash (rsync reads it so too): every
    rsync gets it as ./-x, never as an option (-x alone is rsync's
    --one-file-system), as SRC and as DEST."""
    work = tmp_path / "w"
    make_tree(work / "-x" / "sub", "flat", n=4)
    make_tree(work / "-x" / "other", "flat", n=3)
    # a time of the past: rsync leaves a directory it made in the same second
    # as its source's mtime with its own time
    os.utime(work / "-x", (1500000000, 1500000000))
    # DEST's root is made at run time unless it receives -x's contents
    container = not src.endswith("/") or "-aR" in rsync_opts
    d = differential(tmp_path, ["--", src], ["-p", "2", "-f", "2"], rsync_opts,
                     cwd=work, ignore_root_mtime=container)
    assert b"Traceback" not in d.msrsync.stderr
    # a DEST that starts with a dash, relative to the working directory
    cp = run_msrsync("-p", "2", "-f", "2", "--rsync", " ".join(rsync_opts), "--", src, "-d",
                     cwd=work)
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(d.oracle_dest, work / "-d", ignore_root_mtime=container)


def test_missing_src_and_a_single_file_rename_like_rsync(tmp_path):
    """rsync's file list then holds one file: DEST is its new name, as with one SRC."""
    f = os.fsencode(tmp_path / "in" / "file")
    os.makedirs(os.path.dirname(f))
    with open(f, "wb") as h:
        h.write(b"data\n")
    differential(tmp_path, [os.fsencode(tmp_path / "in" / "missing"), f], [], expect_rc=23)


def test_dest_parent_missing_exits_11(tmp_path, weird_src):
    dest = os.fsencode(tmp_path / "no parent" / "dest")
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", weird_src + b"/", dest)
    assert cp.returncode == 11, describe(cp)
    assert rsync_exit(weird_src + b"/", dest) == 11
    assert stderr_lines(cp) == ['msrsync: error: mkdir "%s" failed: No such file or '
                                'directory (2)' % text(dest)], describe(cp)
    assert_same_tree(before, tmp_path)


def test_dest_with_a_slash_that_is_a_file_exits_3(tmp_path, weird_src):
    """"file/": rsync cannot stat it (ENOTDIR, exit 3); msrsync tried mkdir (11)."""
    paths = [os.fsencode(tmp_path / name) for name in ("dest file", "oracle file")]
    for path in paths:
        with open(path, "wb") as f:
            f.write(b"keep me\n")
    assert rsync_exit(weird_src + b"/", paths[1] + b"/") == 3
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-p", "2", weird_src + b"/", paths[0] + b"/")
    assert cp.returncode == 3, describe(cp)
    assert stderr_lines(cp) == ['msrsync: error: cannot stat destination "%s/": Not a '
                                'directory (20)' % text(paths[0])], describe(cp)
    assert_same_tree(before, tmp_path)


@pytest.mark.parametrize("srcs", ["dir/", "dir", "two"])
def test_dest_is_a_file_exits_3(tmp_path, weird_src, srcs):
    dest = os.fsencode(tmp_path / "dest file")
    with open(dest, "wb") as f:
        f.write(b"keep me\n")
    args = {"dir/": [weird_src + b"/"], "dir": [weird_src],
            "two": [os.path.join(weird_src, b"mode600"), os.path.join(weird_src, b"mode755")]}
    args = args[srcs]
    oracle = os.fsencode(tmp_path / "oracle file")
    with open(oracle, "wb") as f:
        f.write(b"keep me\n")
    assert rsync_exit(*(args + [oracle])) == 3
    os.unlink(oracle)
    before = _whole_dir(tmp_path)
    cp = run_msrsync(*(["-p", "2"] + args + [dest]))
    assert cp.returncode == 3, describe(cp)
    assert stderr_lines(cp) == ["msrsync: error: destination must be a directory when "
                                "copying more than 1 file"], describe(cp)
    assert_same_tree(before, tmp_path)


def test_bucket_dir_that_cannot_be_created_exits_11(tmp_path, weird_src):
    not_a_dir = tmp_path / "a file"
    not_a_dir.write_text("x")
    before = _whole_dir(tmp_path)
    cp = run_msrsync("-b", not_a_dir, weird_src + b"/", tmp_path / "dest")
    assert cp.returncode == 11, describe(cp)
    assert "Traceback" not in text(cp.stderr)
    lines = stderr_lines(cp)
    assert len(lines) == 1 and lines[0].startswith("msrsync: error: "), describe(cp)
    assert_same_tree(before, tmp_path)


# ------------------------------------------------------------------ worker failures

FAILED_BUCKET = re.compile(r"^msrsync: bucket (\S+) failed: rsync exited with code (\d+) "
                           r"\((.+)\)$")
LIST_LOG = re.compile(r"^msrsync:   list: (.+)  log: (.+)$")


def _check_failure_report(cp, code, summary, error_fragment):
    """The failed bucket is named with its code and meaning, up to 5 of rsync's error lines
    follow, indented, then its list and log, which are kept."""
    lines = stderr_lines(cp)
    starts = [i for i, l in enumerate(lines) if FAILED_BUCKET.match(l)]
    assert starts, "no 'bucket N failed' line:\n" + describe(cp)
    i = starts[0]
    m = FAILED_BUCKET.match(lines[i])
    assert int(m.group(2)) == code
    assert m.group(3) == "partial transfer due to error"
    j = i + 1
    while j < len(lines) and not LIST_LOG.match(lines[j]):
        assert lines[j].startswith("msrsync:   "), lines[j]
        j += 1
    assert j < len(lines), "no list/log line:\n" + describe(cp)
    assert 1 <= j - i - 1 <= 5, "expected 1 to 5 error lines:\n" + describe(cp)
    assert any(error_fragment in l for l in lines[i + 1:j]), describe(cp)
    list_path, log_path = LIST_LOG.match(lines[j]).groups()
    assert os.path.isfile(list_path) and os.path.isfile(log_path)
    with open(log_path, "rb") as f:
        assert error_fragment.encode() in f.read()
    # the summary says the same
    assert summary["status"] == "FAILURE"
    assert summary["exit_code"] == code
    assert summary["buckets_failed"] >= 1
    assert summary["buckets_dir_kept"] is True
    assert os.path.isdir(summary["buckets_dir"])
    failure = summary["failures"][0]
    assert set(failure) >= {"bucket", "exit_code", "meaning", "list", "log", "errors"}
    assert str(failure["bucket"]) == m.group(1)
    assert failure["exit_code"] == code
    assert failure["list"] == list_path and failure["log"] == log_path
    assert any(error_fragment in e for e in failure["errors"])
    assert "Traceback" not in text(cp.stderr)


def test_worker_failure_exits_with_rsync_code_and_names_bucket(tmp_path, private_tmpdir):
    """A non-empty directory at DEST where SRC has a file: rsync cannot make way (23)."""
    src = make_tree(tmp_path / "in" / "src", "small", seed=3)

    def prepare(dest):
        os.makedirs(os.path.join(dest, b"many", b"d01", b"f0001.dat", b"in the way"))
        with open(os.path.join(dest, b"many", b"d01", b"f0001.dat", b"in the way", b"x"),
                  "wb") as f:
            f.write(b"x")
        for rel in (b"many/d01/f0001.dat/in the way/x", b"many/d01/f0001.dat/in the way",
                    b"many/d01/f0001.dat", b"many/d01",
                    b"many", b""):
            os.utime(os.path.join(dest, rel), (10 ** 9, 10 ** 9))
    json_path = tmp_path / "fail.json"
    d = differential(tmp_path, [src + b"/"], ["-p", "3", "-f", "6", "--json", json_path],
                     expect_rc=23, prepare_dest=prepare)
    summary = json.loads(json_path.read_text())
    _check_failure_report(d.msrsync, 23, summary, "could not make way for new regular file")
    assert len(summary["failures"]) == 1


@pytest.mark.nonroot
def test_unreadable_source_file_fails_its_bucket_as_nonroot(nonroot):
    prefix, python, work = nonroot
    src = make_tree(os.path.join(work, b"in", b"src"), "small", seed=8)
    chown_tree(src, NOBODY, NOBODY)
    os.chmod(os.path.join(src, b"many", b"d02", b"f0002.dat"), 0)
    json_path = os.path.join(work, b"fail.json")
    d = differential(work, [src + b"/"], ["-p", "3", "-f", "6", "--json", json_path],
                     expect_rc=23, prefix=prefix, python=python)
    with open(json_path) as f:
        summary = json.load(f)
    _check_failure_report(d.msrsync, 23, summary, "Permission denied (13)")


@pytest.mark.nonroot
def test_unreadable_source_directory_exits_23_as_nonroot(nonroot):
    prefix, python, work = nonroot
    src = make_tree(os.path.join(work, b"in", b"src"), "small", seed=9)
    chown_tree(src, NOBODY, NOBODY)
    os.chmod(os.path.join(src, b"many", b"d01"), 0)
    try:
        d = differential(work, [src + b"/"], ["-p", "3", "-f", "6"], expect_rc=23,
                         prefix=prefix, python=python)
    finally:
        os.chmod(os.path.join(src, b"many", b"d01"), 0o755)
    assert "Traceback" not in text(d.msrsync.stderr)
    assert "Permission denied" in text(d.msrsync.stderr)


def test_worker_killed_by_foreign_signal_exits_41(tmp_path):
    """(With --retries 0: by default such a bucket runs again, see test_signals.py.)"""
    src = make_tree(tmp_path / "src", "big", count=2, size=1 << 20)
    proc = start_msrsync("--retries", "0", "--rsync", "-a --bwlimit=100", src + b"/",
                         tmp_path / "dest")
    try:
        def leader():
            for pid, _ in rsync_processes_mentioning(os.fsencode(tmp_path)):
                try:
                    if os.getpgid(pid) == pid:
                        return pid
                except OSError:
                    pass
        pid = wait_for(leader, 10)
        assert pid, "rsync never started"
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid, _ in rsync_processes_mentioning(os.fsencode(tmp_path)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert proc.returncode == 41, (proc.returncode, err)
    assert b"Traceback" not in err


@pytest.mark.parametrize("option,code", [("--files-from", 1), ("--exclude-from", 11)])
def test_unreadable_list_file_exits_like_rsync_and_creates_nothing(tmp_path, option, code):
    """rsync: a --files-from it cannot open is a usage error (1), an
    --exclude-from one a file I/O error (11); msrsync says so in one line."""
    src = tmp_path / "src"
    os.makedirs(str(src / "a"))
    missing = str(tmp_path / "no-such-list")
    opts = "-a %s=%s" % (option, missing)
    o = run_rsync(os.fsencode(str(src)) + b"/", tmp_path / "oracle", opts=opts.split())
    m = run_msrsync("--rsync", opts, os.fsencode(str(src)) + b"/", tmp_path / "dest")
    assert o.returncode == code, describe(o)
    assert m.returncode == code, describe(m)
    lines = m.stderr.decode("utf-8", "replace").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("msrsync: error:"), describe(m)
    assert not os.path.exists(str(tmp_path / "dest"))


@pytest.mark.parametrize("extra", [[], ["present"]], ids=["only-missing", "with-present"])
def test_ignore_missing_args_skips_missing_srcs_like_rsync(tmp_path, extra):
    """--ignore-missing-args: a missing SRC is no error (exit 0), the others copy."""
    (tmp_path / "present" / "sub").mkdir(parents=True)
    (tmp_path / "present" / "sub" / "f").write_bytes(b"f\n")
    for p in (tmp_path / "present" / "sub" / "f", tmp_path / "present" / "sub",
              tmp_path / "present"):
        os.utime(str(p), (10 ** 9, 10 ** 9))
    srcs = [str(tmp_path / "missing")] + [str(tmp_path / e) for e in extra]
    o = run_rsync(*(srcs + [tmp_path / "oracle"]), opts=["-a", "--ignore-missing-args"])
    m = run_msrsync(*(["--rsync", "-a --ignore-missing-args"] + srcs + [tmp_path / "dest"]))
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert os.path.exists(str(tmp_path / "oracle")) == os.path.exists(str(tmp_path / "dest"))
    if extra:
        assert_same_tree(tmp_path / "oracle", tmp_path / "dest", ignore_root_mtime=True)


# ---------------------------------------------------------------- output files proven writable

def _unwritable_place(kind, tmp_path):
    """A FILE that cannot be written, of one kind; (path, undo)."""
    if kind == "proc":
        return "/proc/msrsync-test.out", lambda: None
    if kind == "missing-dir":
        return str(tmp_path / "no-such-dir" / "out"), lambda: None
    if kind == "under-a-file":
        (tmp_path / "plain").write_text("x\n")
        return str(tmp_path / "plain" / "out"), lambda: None
    if kind == "a-directory":
        (tmp_path / "adir").mkdir()
        return str(tmp_path / "adir"), lambda: None
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    if subprocess.call(["chattr", "+i", str(frozen)], stderr=subprocess.DEVNULL) != 0:
        pytest.skip("chattr +i does not work here")
    return str(frozen / "out"), lambda: subprocess.call(["chattr", "-i", str(frozen)])


@pytest.mark.skipif(os.geteuid() != 0, reason="root: /proc and chattr +i refuse root too")
@pytest.mark.parametrize("option", ["--json", "--status-file", "--metrics", "--html",
                                    "--survey --json"])
@pytest.mark.parametrize("kind", ["proc", "immutable-dir", "missing-dir", "under-a-file",
                                  "a-directory"])
def test_an_output_file_that_cannot_be_written_is_exit_11_before_anything_is_copied(
        tmp_path, option, kind):
    """Each report file, the survey's too: one error line, status 11, nothing copied,
    DEST not made, even as root, whom the permission bits let write /proc or an
    immutable directory (msrsync asked access(2), copied everything and only warned at
    the end; the survey walked the whole tree first)."""
    src = tmp_path / "src"
    build(src, {"a/f": "f\n", "g": "g\n"})
    dest = tmp_path / "dest"
    path, undo = _unwritable_place(kind, tmp_path)
    try:
        extra = ["--survey"] if option == "--html" else ["-p", "2"]
        extra, option = (extra + option.split())[:-1], option.split()[-1]
        cp = run_msrsync(*(extra + [option, path, str(src) + "/", str(dest)]))
    finally:
        undo()
    assert cp.returncode == 11, describe(cp)
    lines = cp.stderr.decode("utf-8", "replace").strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("msrsync: error: %s " % option), describe(cp)
    assert not os.path.lexists(str(dest)), describe(cp)
    assert not os.path.lexists("/proc/msrsync-test.out")
