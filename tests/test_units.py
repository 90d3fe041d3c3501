"""Unit tests of msrsync's pure helpers, loaded from the script with SourceFileLoader."""

import argparse
import collections
import os
import subprocess
import threading
import time

import pytest

from helpers import (RECENT_NS, age, assert_same_tree, build, load_msrsync, make_tree,
                     rsync_stats_figures, run_cmd, run_rsync, snapshot, wait_for)

m = load_msrsync()
BAD_VALUE = (argparse.ArgumentTypeError, ValueError)

K, M, G, T, P, E = (1024 ** n for n in range(1, 7))


@pytest.mark.parametrize("value,expected", [
    ("1", 1), ("1024", 1024), ("9999999999", 9999999999),
    ("1K", K), ("1k", K), ("1KB", K), ("1kb", K), ("1KiB", K), ("1kib", K), ("1KIB", K),
    ("2M", 2 * M), ("2m", 2 * M), ("2MiB", 2 * M),
    ("1G", G), ("1g", G), ("1.5G", int(1.5 * G)), ("1.5GiB", int(1.5 * G)),
    ("1T", T), ("1t", T), ("1P", P), ("1p", P), ("1E", E), ("1e", E), ("1EiB", E),
    ("0.5K", 512), (".5K", 512), ("1.25M", int(1.25 * M)), ("3.0", 3),
])
def test_parse_size_accepts(value, expected):
    assert m.parse_size(value) == expected


@pytest.mark.parametrize("value", ["12Q", "0", "0K", "0.0G", "-1", "-1K", "", "K", "iB",
                                   "1.2.3", "1KK", "1Z", "1Y", "abc", "1 G B x", "5iB",
                                   "0.0001"])
def test_parse_size_rejects(value):
    with pytest.raises(BAD_VALUE):
        m.parse_size(value)


def test_parse_size_error_names_the_value():
    with pytest.raises(BAD_VALUE) as info:
        m.parse_size("12Q")
    assert "12Q" in str(info.value)


@pytest.mark.parametrize("value,expected", [("1", 1), ("4", 4), ("128", 128)])
def test_positive_int_accepts(value, expected):
    assert m.positive_int(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "", "1e3"])
def test_positive_int_rejects(value):
    with pytest.raises(BAD_VALUE):
        m.positive_int(value)


@pytest.mark.parametrize("codes,expected", [
    ([], 0), ([0, 0], 0), ([24], 24), ([24, 24], 24), ([0, 24], 24),
    ([24, 23], 23), ([23, 24, 24], 23), ([23, 11], 11), ([24, 12], 12), ([23, 20], 20),
    ([41, 23, 24], 41), ([23], 23), ([30, 23], 30),
])
def test_worst_exit_code_ranks_like_the_spec(codes, expected):
    """24 only when every failure was 24; 23 outranks 24; any other code outranks 23."""
    assert m.worst_exit_code(codes) == expected


def test_worst_exit_code_any_other_code_outranks_23():
    assert m.worst_exit_code([23, 25]) == 25
    assert m.worst_exit_code([24, 25]) == 25


@pytest.mark.parametrize("arg,kind,user,host,port,path", [
    (b"host:path", "shell", None, b"host", None, b"path"),
    (b"user@host:/x", "shell", b"user", b"host", None, b"/x"),
    (b"host:", "shell", None, b"host", None, b""),
    (b"[::1]:dir/", "shell", None, b"::1", None, b"dir/"),
    (b"u@[fe80::1]:/d", "shell", b"u", b"fe80::1", None, b"/d"),
    (b"rsync://host/module", "daemon", None, b"host", None, b"module"),
    (b"rsync://u@host:8730/mod/sub/", "daemon", b"u", b"host", 8730, b"mod/sub/"),
    (b"RSYNC://host/mod", "daemon", None, b"host", None, b"mod"),
    (b"host::mod/p", "daemon", None, b"host", None, b"mod/p"),
    (b"u@host::mod", "daemon", b"u", b"host", None, b"mod"),
    (b"/abs/a:b", "local", None, None, None, b"/abs/a:b"),
    (b"./a:b", "local", None, None, None, b"./a:b"),
    (b"dir/a:b", "local", None, None, None, b"dir/a:b"),
    (b"plain", "local", None, None, None, b"plain"),
    (b"/", "local", None, None, None, b"/"),
    (b":x", "local", None, None, None, b":x"),
])
def test_parse_endpoint_reads_args_as_rsync(arg, kind, user, host, port, path):
    end = m.parse_endpoint(arg)
    assert (end.kind, end.user, end.host, end.port, end.path) == (kind, user, host, port, path)
    assert end.prefix + end.path == arg or kind == "local"


@pytest.mark.parametrize("name,listed", [
    (b"#hash", b"./#hash"), (b";semi", b"./;semi"), (b"a#b", b"a#b"), (b"plain", b"plain"),
    (b"#dir/sub", b"./#dir/sub"),
])
def test_list_name_protects_comment_like_names(name, listed):
    assert m.list_name(name) == listed


def test_exit_meaning():
    assert m.exit_meaning(0) == "success"
    assert m.exit_meaning(23) == "partial transfer due to error"
    assert m.exit_meaning(40).startswith("rsync not found")
    assert m.exit_meaning(99)


@pytest.mark.parametrize("value,expected", [(0, "0"), (1023, "1023"), (1024, "1.0 K"),
                                            (1536, "1.5 K"), (int(1.5 * G), "1.5 G")])
def test_human_size(value, expected):
    assert m.human_size(value) == expected


def test_show_path_never_fails_on_bytes():
    assert m.show_path(b"\xff\xfe x") == "\\#377\\#376 x"
    assert m.show_path(u"\u00e9".encode("utf-8")) == u"\u00e9"


def test_show_path_escapes_every_control_byte_as_rsync_writes_it():
    """C0 but tab, DEL, C1 (as UTF-8), bytes not UTF-8 and a backslash that would read
    as an escape: \\#ooo of each byte; text passes as it is."""
    for byte in list(range(1, 9)) + list(range(10, 32)) + [127]:
        assert m.show_path(b"a" + bytes([byte]) + b"b") == "a\\#%03ob" % byte
    for byte in range(0x80, 0xa0):
        assert m.show_path(b"\xc2" + bytes([byte])) == "\\#302\\#%03o" % byte
    assert m.show_path("\x1b[2J") == "\\#033[2J"
    assert m.show_path(b"a\tb \\#123 \\x") == "a\tb \\#134#123 \\x"
    assert m.path_text(b"\xff\x1b") == "\\xff\x1b"


# ------------------------------------------------------------------ rsync options

def options(text):
    return m.RsyncOptions(text)


def error_code(text):
    with pytest.raises(m.MsrsyncError) as info:
        options(text)
    return info.value.code


@pytest.mark.parametrize("text", ["-aS --numeric-ids", "-a", "-r", "-rlptgoD", "-a -v",
                                  "-a --bwlimit 100", "-a --bwlimit=100", "-a -e ssh",
                                  "-a -T /tmp", "-a -z --compress-level=1", "-avz",
                                  "-a --chmod=Fo-r", "-a --inplace -c", "-a --mkpath",
                                  "-a --delete", "-aH", "-a --exclude x", "-a -f '- x'",
                                  "-a --del --max-delete=3", "-aL", "-a -x", "-aR", "-ak",
                                  "-aK", "-a --safe-links", "-a --copy-unsafe-links",
                                  "-a -F", "-aF", "-a -FF", "-a -C", "-a --cvs-exclude",
                                  "-a -f ': .rules'", "-a --filter='dir-merge,n- .excl'",
                                  "-a -m", "-a --delete-missing-args", "-a --no-relative",
                                  "-aR --no-R", "-a --no-d"])
def test_rsync_options_accepted_mean_to_rsync_what_the_users_text_means(text, accepted_src,
                                                                          tmp_path):
    """An option text msrsync takes is one whose plain rsync of the whole transfer,
    as msrsync builds it from its reading of the text, does what the user's own words
    do: same exit, same DEST (a value cut from its option, a rule lost or an option
    dropped shows here).  SRC is given as SRC/./, so that -R sends no implied
    directory (whose times no rsync keeps)."""
    import shlex
    src = accepted_src + "/./"
    theirs = run_rsync(src, tmp_path / "user", opts=shlex.split(text))
    commands, _ = _commands(text, source=m.Source(os.fsencode(src), os.fsencode(accepted_src),
                                                  b".", True),
                            dest=os.fsencode(str(tmp_path / "msrsync")), whole=True)
    whole = commands.command(m.Bucket(1, None, m.Kind.WHOLE, 0, 0, None, b"/b/whole.log"), 0)
    ours = run_cmd([os.fsdecode(a) for a in whole])
    assert ours.returncode == theirs.returncode == 0, (whole, ours.stderr)
    a, b = snapshot(tmp_path / "user"), snapshot(tmp_path / "msrsync")
    for rel in set(a) & set(b):
        if min(a[rel]["mtime_ns"], b[rel]["mtime_ns"]) > RECENT_NS:
            del a[rel]["mtime_ns"], b[rel]["mtime_ns"]     # neither rsync kept its time
    assert_same_tree(a, b)


@pytest.fixture(scope="module")
def accepted_src(tmp_path_factory):
    """A tree the accepted options each change something of: a file named x (the
    rules), a symlink out of the tree and one in it, a nested directory, a merge file."""
    root = tmp_path_factory.mktemp("accepted") / "src"
    build(root, {"x": "x\n", "d/y": "y\n", "d/e/z": "z" * 5000, "d/.excl": "- z\n",
                 ".rules": "- y\n", "in": ("symlink", "d/y"), "out": ("symlink", "/etc/hostname"),
                 "empty/": None})
    # (aged: a directory made in the second rsync makes its copy keeps the copy's time)
    return os.fsdecode(age(root))


@pytest.mark.parametrize("text", ["-a -m -F", "-a --list-only", "-a --no-R --files-from=x",
                                  "-a --old-dirs",
                                  "-a -m --files-from=x", "-a -F --files-from=x"])
def test_rsync_options_refused_with_code_4(text):
    assert error_code(text) == 4


@pytest.mark.parametrize("text,recursive", [
    ("-a", True), ("-r", True), ("-rlpt", True), ("-lpt", False), ("-a --no-r", False),
    ("-a --no-recursive", False), ("-lptd", False), ("--no-r -r", True)])
def test_rsync_options_know_whether_they_recurse(text, recursive):
    """(a non-recursive set is refused later, unless --files-from names the entries)"""
    assert options(text).recursive is recursive


@pytest.mark.parametrize("text", ["-a '", "-a some/path"])
def test_rsync_options_unusable_with_code_1(text):
    assert error_code(text) == 1


def test_rsync_options_flags():
    o = options("-a -q")
    assert o.quiet
    assert options("-a -n").dry_run
    assert options("-a --dry-run").dry_run
    assert options("-a --mkpath").mkpath
    assert options("-a -v").item_format() is not None
    assert options("-a -i").item_format() is not None
    assert options("-a").item_format() is None
    assert options("-a -v -q").item_format() is None


# ------------------------------------------------------------------ command line

def test_parse_args_takes_the_rsync_string_whole():
    args = m.parse_args(["-p", "2", "--rsync", "-a -v", "src", "dst"])
    assert args.processes == 2
    assert args.rsync == "-a -v"
    assert args.paths == [b"src", b"dst"]


@pytest.mark.parametrize("argv", [["--rsync=-a -v", "s", "d"], ["-r", "-a -v", "s", "d"]])
def test_parse_args_rsync_forms(argv):
    args = m.parse_args(argv)
    assert args.rsync == "-a -v"
    assert args.paths == [b"s", b"d"]


def test_parse_args_defaults():
    args = m.parse_args(["s", "d"])
    assert args.processes == 1
    # without -f and -s the caps start at 1000 entries and 32M and grow
    assert args.files == 1000 and args.size == 32 << 20 and args.adaptive
    assert args.rsync == "-aS --numeric-ids"
    args = m.parse_args(["-f", "7", "s", "d"])
    assert (args.files, args.size, args.adaptive) == (7, G, False)
    args = m.parse_args(["-s", "5M", "s", "d"])
    assert (args.files, args.size, args.adaptive) == (1000, 5 << 20, False)
    assert m.parse_args(["s", "d"]).retries == 2
    assert not args.keep and not args.show and not args.scan_only


def test_parse_args_paths_after_rsync_may_start_with_dash():
    args = m.parse_args(["--rsync", "-a", "-weird", "dst"])
    assert args.paths == [b"-weird", b"dst"]


@pytest.mark.parametrize("argv", [["-p", "0", "s", "d"], ["-s", "12Q", "s", "d"],
                                  ["--nope", "s", "d"], ["-f", "0", "s", "d"]])
def test_parse_args_errors_are_msrsync_errors_with_code_1(argv):
    with pytest.raises(m.MsrsyncError) as info:
        m.parse_args(argv)
    assert info.value.code == 1


# ------------------------------------------------------------------ sources

def test_resolve_source_reads_src_like_rsync(tmp_path):
    root = os.fsencode(tmp_path)
    d = os.path.join(root, b"dir")
    os.makedirs(os.path.join(d, b"sub"))
    open(os.path.join(d, b"file"), "wb").close()
    os.symlink(b"dir", os.path.join(root, b"link"))
    contents = [d + b"/", d + b"/.", os.path.join(d, b"sub", b".."), os.path.join(root,
                                                                                  b"link/")]
    for arg in contents:
        s = m.resolve_source(arg)
        assert s.top == b"." and s.is_dir, arg
    s = m.resolve_source(d)
    assert (s.base, s.top, s.is_dir) == (root, b"dir", True)
    s = m.resolve_source(os.path.join(d, b"file"))
    assert (s.base, s.top, s.is_dir) == (d, b"file", False)
    s = m.resolve_source(os.path.join(root, b"link"))
    assert (s.top, s.is_dir) == (b"link", False)
    with pytest.raises(OSError):
        m.resolve_source(os.path.join(root, b"missing"))
    with pytest.raises(OSError):
        m.resolve_source(os.path.join(d, b"file") + b"/")


def test_rsync_stats_parser_reads_a_real_stats_block(tmp_path):
    src = make_tree(tmp_path / "src", "flat", n=12)
    cp = run_rsync("--stats", "--no-h", src + b"/", tmp_path / "dest")
    assert cp.returncode == 0
    stats = m.RsyncStats()
    for line in cp.stdout.splitlines(True):
        stats.parse_line(line)
    assert stats.complete
    want = rsync_stats_figures(cp.stdout)
    got = stats.as_dict()
    assert got["files_seen"] == want["Number of files"]
    assert got["regular_files_transferred"] == want["Number of regular files transferred"] == 12
    assert got["total_file_size"] == want["Total file size"]
    assert got["literal_data"] == want["Literal data"]
    assert got["bytes_sent"] == want["Total bytes sent"]
    assert got["bytes_received"] == want["Total bytes received"]


# ---------------------------------------------------------------------------
# The bucketer's hand-outs on a slow scan (growing caps)
# ---------------------------------------------------------------------------

def _bucketer(workers, waiting, cap=100):
    """A Bucketer whose buckets are recorded as lists of names."""
    made = []
    b = m.Bucketer(m.Caps(cap, 1 << 40), lambda source, kind, names, *rest:
                   made.append(list(names)), m.HandOut(lambda: waiting[0], workers))
    return b, made


def _add_trees(b, count, entries=10, first=0):
    for i in range(first, first + count):
        b.add("src", m.UNIT_TREE, b"t%02d" % i, entries, 0, None, (entries - 1, 0))


def test_a_waiting_worker_gets_a_share_of_the_open_bucket_not_all_of_it(monkeypatch):
    """While every worker was busy 8 subtrees piled up; the first worker free gets
    1/(4p) of what is open (at least one name), the next one the next share."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    waiting = [False]
    b, made = _bucketer(2, waiting)
    _add_trees(b, 8)
    assert made == []                     # under the cap of 100 entries, nobody waits
    waiting[0] = True
    _add_trees(b, 1, first=8)             # 90 entries open: a share of 90/8 -> 2 names
    assert made == [[b"t00", b"t01"]]
    b.hand_out(("src", m.Kind.TREES))
    assert made[1] == [b"t02"]            # 70 left: a share of 9 -> 1 name
    waiting[0] = False
    b.flush_all()                         # the rest, cut in pieces per worker (slow: 4p)
    rest = [n for piece in made[2:] for n in piece]
    assert rest == [b"t%02d" % i for i in range(3, 9)]
    assert all(len(piece) == 1 for piece in made[2:])


def test_a_patient_bucketer_holds_what_nobody_waits_for_up_to_four_buckets(monkeypatch):
    """On a latency-bound SRC buckets are cut when a worker asks: nothing goes out
    at the cap while all are busy, a bucket's worth once four are held."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    waiting = [False]
    b, made = _bucketer(4, waiting)
    b.handing_out.begin_source(on_demand=True)
    _add_trees(b, 39)                     # 390 entries: under 4 caps
    assert made == []
    _add_trees(b, 1, first=39)            # 400: one cap's worth goes out
    assert made == [[b"t%02d" % i for i in range(10)]]
    waiting[0] = True
    _add_trees(b, 1, first=40)            # 310 open: a worker's share, 310/16 -> 2 names
    assert made[1] == [b"t10", b"t11"]


def test_without_patience_the_caps_cut_as_before(monkeypatch):
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    b, made = _bucketer(4, [False])
    _add_trees(b, 25)
    assert made == [[b"t%02d" % i for i in range(j, j + 10)] for j in (0, 10)]
    b.flush_all()
    assert [n for piece in made[2:] for n in piece] == [b"t%02d" % i for i in range(20, 25)]


def test_a_hand_out_keeps_a_hard_link_group_whole(monkeypatch):
    """A group's weight sits on its last name: no cut falls inside it."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    b, made = _bucketer(2, [False])
    b.add_group("src", [b"a", b"b", b"c"], 30, 0)
    b.add_group("src", [b"d", b"e"], 20, 0)
    b.flush_all()
    assert made == [[b"a", b"b", b"c"], [b"d", b"e"]]


def test_a_sampled_listing_stats_a_few_files_and_gives_the_rest_their_mean(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "sub").mkdir()
    for i in range(10):
        (d / ("f%d" % i)).write_bytes(b"x" * 100)
    os.symlink("f0", str(d / "link"))
    listing = m.sampled_listing(os.fsencode(d))
    # the ones not stat'ed are names alone, for the scanner to count in bulk
    assert len(listing.entries) == 1 + m.SAMPLE_FILES
    assert len(listing.files) + len(listing.links) == 11 - m.SAMPLE_FILES
    assert listing.size == 100
    by_name = {e.name: e for e in listing.expanded().entries}
    assert sorted(by_name) == sorted([b"sub", b"link"] + [b"f%d" % i for i in range(10)])
    assert by_name[b"sub"].is_dir(follow_symlinks=False)
    sizes = sorted(e.stat(follow_symlinks=False).st_size for n, e in by_name.items()
                   if n != b"sub")
    # 4 stat'ed (sizes 100, or 2 for the link), 7 with their mean
    real = [e for n, e in by_name.items() if n != b"sub" and e.stat(False).st_ino]
    assert len(real) == m.SAMPLE_FILES
    assert all(s in (2, 100) or 2 <= s <= 100 for s in sizes)
    assert m.stat.S_ISLNK(by_name[b"link"].stat(follow_symlinks=False).st_mode)


def test_a_sampled_listing_gives_up_when_its_sample_holds_a_big_file(tmp_path):
    """A big file in the sample: the whole directory is stat'ed instead (None)."""
    d = tmp_path / "d"
    d.mkdir()
    with open(str(d / "big"), "wb") as f:
        f.truncate(m.SAMPLE_BIG)
    (d / "small").write_bytes(b"s")
    assert m.sampled_listing(os.fsencode(d)) is None
    os.unlink(str(d / "big"))
    assert len(m.sampled_listing(os.fsencode(d)).expanded().entries) == 1


def _settings(max_entries, dest=None):
    """A Scanner's settings: these caps, no option of rsync's."""
    return m.ScanSettings(
        caps=m.Caps(max_entries, 1 << 40), filters=None, follow=None, copy_unsafe=False,
        one_file_system=0, prune=False, dest=dest, remote_dest=False, delete_after=False,
        list_all_dirs=False, links=False, dir_times=False, dir_seen=False,
        skip_units=None, skip_dir=None, observe=None, traces=False, redact_traces=False)


class _Sink(m.ScanSink):
    """What a scanner hands on, recorded: units (as `unit` makes them),
    directories, extraneous directories; waiting() answers from `waiting`."""

    def __init__(self, unit, waiting=()):
        self.units, self.dirs, self.shares = [], [], []
        self.unit = unit
        self.answers = iter(waiting)

    def on_unit(self, source, unit, rel, n, size, rule=None, counts=None):
        self.units.append(self.unit(unit, rel, n, size))

    def on_dir(self, source, rel, rule=None):
        self.dirs.append(rel)

    def on_extraneous(self, source, rel, rules=None, rule=None):
        self.units.append(("x", rel))

    def waiting(self):
        return next(self.answers, 0)

    def hand_out_unwalked(self, source):
        self.shares.append(len(self.units))


def _unwalking_scanner(waiting):
    """A Scanner as Run sets it up with growing caps and a local SRC, whose
    subtrees may go out unwalked; `waiting` lists what successive waiting()
    calls answer (then 0)."""
    sink = _Sink(lambda unit, rel, n, size: (unit, rel, n), waiting)
    early = m.HandOut(sink.waiting, 1, subtrees=True)
    early.begin_source(unwalked=True)
    scanner = m.Scanner(_settings(1000), sink, threading.Event(), early)
    return scanner, sink.units, sink.dirs, sink.shares


def test_workers_waiting_at_once_get_an_unwalked_subtree_each(tmp_path, monkeypatch):
    """Three workers wait when the scan has listed the root: three subtrees go out
    unwalked in one go (one every IDLE_CUT left the eighth rsync of -p 8 starting
    0.2 s after the first over sshfs), from the end of the root's list; the rest
    is walked from its front (so the subtree the walk enters next, which may hold
    most of the tree, is measured, not sent whole); the root holds directories
    alone, so it gets no "./" entry of its own (an rsync listing every
    subdirectory) but goes to the directory pass."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    src = tmp_path / "src"
    for i in range(6):
        (src / ("d%d" % i)).mkdir(parents=True)
        (src / ("d%d" % i) / "f").write_bytes(b"x")
    scanner, units, dirs, shares = _unwalking_scanner([3])
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True))
    assert scanner.unwalked.count == 3
    assert [u[:2] for u in units] == [(m.UNIT_TREE, b"d%d" % i) for i in (5, 4, 3, 0, 1, 2)]
    assert shares == [1, 2, 3]                # each handed to the bucketer at once
    # unwalked: 1 entry each, the first carrying the root's; walked: d and f
    assert [u[2] for u in units] == [2, 1, 1, 2, 2, 2]
    assert scanner.entries == sum(u[2] for u in units)
    assert dirs == [b"."]


def test_the_subdirectory_the_walk_enters_next_never_goes_out_unwalked(tmp_path,
                                                                        monkeypatch):
    """More workers wait than the root has subdirectories: all go out unwalked but
    the first, which the walk enters next (on an uneven tree the one holding most
    of it, measured and split rather than given whole to one rsync)."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    src = tmp_path / "src"
    for i in range(3):
        (src / ("d%d" % i)).mkdir(parents=True)
        (src / ("d%d" % i) / "f").write_bytes(b"x")
    scanner, units, dirs, shares = _unwalking_scanner([8, 8, 8, 8])
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True))
    assert [u[:2] for u in units] == [(m.UNIT_TREE, b"d%d" % i) for i in (2, 1, 0)]
    assert scanner.unwalked.count == 2
    assert [u[2] for u in units] == [2, 1, 2]     # d0 walked: itself and f


@pytest.mark.parametrize("at_once", [True, False], ids=["network-fs", "local"])
def test_on_a_network_file_system_workers_waiting_at_the_start_get_subtrees_at_once(
        tmp_path, monkeypatch, at_once):
    """SRC on a network file system (at_once): while every worker waits and nothing
    went out yet, one subtree a worker goes out unwalked without waiting IDLE_CUT
    (there the scan's first idle time is the workers'); elsewhere the scan first
    has IDLE_CUT to measure what would go out blind, here all of it."""
    monkeypatch.setattr(m, "IDLE_CUT", 3600.0)
    src = tmp_path / "src"
    for i in range(6):
        (src / ("d%d" % i)).mkdir(parents=True)
        (src / ("d%d" % i) / "f").write_bytes(b"x")
    sink = _Sink(lambda unit, rel, n, size: (unit, rel, n), [2, 2, 2, 2, 2, 2, 2, 2])
    early = m.HandOut(sink.waiting, 2, subtrees=True)
    early.begin_source(unwalked=True, on_demand=True, at_once=at_once)
    scanner = m.Scanner(_settings(1000), sink, threading.Event(), early)
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True))
    handed = [(m.UNIT_TREE, b"d5", 2), (m.UNIT_TREE, b"d4", 1)] if at_once else []
    assert sink.units[:len(handed)] == handed
    assert scanner.unwalked.count == len(handed)
    # once something went out, the rest waits for IDLE_CUT as before: walked
    assert sorted(u[1] for u in sink.units[len(handed):]) == \
        ([b"d%d" % i for i in range(4)] if at_once else [b"."])


@pytest.mark.parametrize("at_once", [True, False], ids=["network-fs", "local"])
def test_on_a_network_file_system_a_directory_of_directories_goes_out_as_them(
        tmp_path, monkeypatch, at_once):
    """SRC on a network file system, where rsync opens each file by a walk from the
    subtree it was named, a round trip a component: a directory that holds
    subdirectories alone (at any depth) goes out as its subdirectories, one level
    deeper, and to the directory pass; one holding a file goes out whole.  Elsewhere
    the root, fitting, goes out whole as before."""
    monkeypatch.setattr(m, "IDLE_CUT", 3600.0)
    src = tmp_path / "src"
    for path in ("a/b/c/f", "a/b/d/f", "x/y/f", "x/z/f", "w/f", "w/v/f"):
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(b"x")
    sink = _Sink(lambda unit, rel, n, size: (unit, rel, n))
    early = m.HandOut(sink.waiting, 2, subtrees=True)
    early.begin_source(unwalked=True, on_demand=True, at_once=at_once)
    scanner = m.Scanner(_settings(1000), sink, threading.Event(), early)
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True))
    if at_once:
        assert [u[:2] for u in sink.units] == [(m.UNIT_TREE, rel) for rel in (
            b"a/b/c", b"a/b/d", b"w", b"x/y", b"x/z")]
        assert sorted(sink.dirs) == [b".", b"a", b"a/b", b"x"]
    else:
        assert [u[:2] for u in sink.units] == [(m.UNIT_TREE, b".")]
    # every entry counted once: 6 files, 9 directories and the root
    assert sum(u[2] for u in sink.units) == scanner.entries == 16


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_stat_beneath_gives_each_path_its_lstat_in_order(tmp_path, threads):
    """The stats the directory pass's trim and the catalog's sample take several at
    once: each path's own lstat (a symlink named is not followed, one among its
    directories is), None where missing, in the order asked, however many threads."""
    root = tmp_path / "r"
    for path in ("a/b/f", "a/c/g", "d/h", "e"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"x" * len(path))
    os.symlink("a", str(root / "via"))
    os.symlink("nowhere", str(root / "dangling"))
    rels = [b"e", b"a/c/g", b"missing/x", b"via/b/f", b"a", b"dangling", b"a/b/f",
            b"a/nope", b"d/h", b".", b"e/under-a-file"]
    open_before = len(os.listdir("/proc/self/fd"))
    got = m.stat_beneath(os.fsencode(root), rels, threads)
    assert len(os.listdir("/proc/self/fd")) == open_before     # every directory closed
    want = []
    for rel in rels:
        try:
            want.append(os.lstat(os.path.join(os.fsencode(root), rel)))
        except OSError:
            want.append(None)
    assert [None if st is None else (st.st_ino, st.st_mode, st.st_size) for st in got] == \
        [None if st is None else (st.st_ino, st.st_mode, st.st_size) for st in want]
    assert got[2] is None and got[5] is not None and got[-1] is None
    assert m.stat_beneath(os.fsencode(tmp_path / "absent"), [b"e"], threads) == [None]


@pytest.mark.parametrize("at_once", [True, False], ids=["network-fs", "local"])
def test_a_subtree_handed_out_at_once_that_holds_one_directory_goes_out_as_it(
        tmp_path, monkeypatch, at_once):
    """SRC on a network file system, workers waiting at the start: of the subtrees
    handed out at once (listed beside each other by the read-ahead), one that holds
    a subdirectory alone goes out as it, one level deeper (a round trip a file fewer
    for rsync), and to the directory pass; one holding a file too goes out whole;
    every entry is counted once.  Elsewhere the scan waits IDLE_CUT first, as before."""
    monkeypatch.setattr(m, "IDLE_CUT", 3600.0)
    src = tmp_path / "src"
    for path in ("a/f", "b/s/f1", "b/s/f2", "c/f", "c/u/f"):
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(b"x")
    sink = _Sink(lambda unit, rel, n, size: (unit, rel, n), [2])
    early = m.HandOut(sink.waiting, 2, subtrees=True)
    early.begin_source(unwalked=True, on_demand=True, at_once=at_once)
    scanner = m.Scanner(_settings(1000), sink, threading.Event(), early)
    fs = m.PrefetchFS(2, False, dir_stats=False)
    try:
        scanner.scan(m.Source(b"src", os.fsencode(src), b".", True), view=fs)
    finally:
        fs.close()
    if at_once:
        assert [u[1] for u in sink.units if u[0] == m.UNIT_TREE][:2] == [b"c", b"b/s"], \
            sink.units
        assert b"b" in sink.dirs and scanner.unwalked.count == 2, sink.dirs
    else:
        # the scan's first IDLE_CUT: nothing goes out blind, the root fits
        assert [u[:2] for u in sink.units] == [(m.UNIT_TREE, b".")]
        assert b"b" not in sink.dirs
    assert sum(u[2] for u in sink.units) == scanner.entries


def test_a_subtree_handed_out_unwalked_is_read_ahead_no_further(tmp_path, monkeypatch):
    """What the read-ahead threads hold of a subtree that went out unwalked (rsync -r
    walks it) is given up: its subdirectory queued behind another listing is never
    read; the other listing still is."""
    for name in ("a/s", "b"):
        (tmp_path / name).mkdir(parents=True)
    a, b = os.fsencode(tmp_path / "a"), os.fsencode(tmp_path / "b")
    gate, reads = threading.Event(), collections.Counter()
    plain_read = m.PrefetchFS._read

    def gated(fs, path):
        if path == b:
            assert gate.wait(10)
        reads[path] += 1
        return plain_read(fs, path)
    monkeypatch.setattr(m.PrefetchFS, "_read", gated)
    fs = m.PrefetchFS(1, False, dir_stats=False)
    try:
        fs.hint([a, b])
        # the one thread lists a (queueing a/s), then waits on b's gate
        assert wait_for(lambda: reads[a] == 1 and os.path.join(a, b"s") in fs.futures, 10)
        fs.forget(a)
        assert not [p for p in list(fs.futures) + list(fs.queued) if p.startswith(a)]
        gate.set()
        assert fs.scandir(b, b"b").entries == []
    finally:
        gate.set()
        fs.close()
    assert reads == {a: 1, b: 1}


def test_the_read_ahead_times_its_first_stats_on_a_sample_not_on_every_directory(
        tmp_path, monkeypatch):
    """SRC where a stat is a round trip (stats slowed here): while the first stats are
    timed, the other read-ahead threads wait for the verdict rather than stat every
    file of the directory each lists; once it says round trips, they stat a sample.
    Every listing still holds every entry."""
    monkeypatch.setattr(m, "STAT_ROUND_TRIP", 1e-9)
    for d in range(10):
        for f in range(50):
            (tmp_path / ("d%d" % d) / ("f%02d" % f)).parent.mkdir(exist_ok=True)
            (tmp_path / ("d%d" % d) / ("f%02d" % f)).write_bytes(b"x" * f)
    plain_stat, files_stated = os.stat, collections.Counter()

    def slow_stat(path, *args, **kwargs):
        if kwargs.get("dir_fd") is not None and os.fsdecode(path).startswith("f"):
            time.sleep(0.002)
            files_stated[path] += 1
        return plain_stat(path, *args, **kwargs)
    monkeypatch.setattr(m.os, "stat", slow_stat)
    dirs = [os.fsencode(tmp_path / ("d%d" % d)) for d in range(10)]
    fs = m.PrefetchFS(8, False, names_only=True, dir_stats=False)
    try:
        fs.hint(dirs)
        listings = [fs.scandir(d, os.path.basename(d)) for d in dirs]
    finally:
        fs.close()
    assert fs.names_only
    # the sample's directories in full, then 4 files a directory
    assert sum(files_stated.values()) <= 2 * 50 + 10 * m.SAMPLE_FILES, files_stated
    for listing in listings:
        assert len(listing.entries) + len(listing.files) + len(listing.links) == 50


def test_a_rerun_reads_ahead_no_subdirectory_before_its_copy_in_dest_is_weighed(
        tmp_path, monkeypatch):
    """A re-run over a latency-bound SRC: a subdirectory with a copy in DEST is not
    listed ahead as soon as its parent is (the copy may count it, and then nothing
    walks it: the listing would be a round trip for nothing); one without a copy is.
    The scan's own hint, once the copies are weighed, still reads it ahead."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    for name in ("a", "b", "c"):
        (src / name / "s").mkdir(parents=True)
    for name in ("a", "b"):
        (dest / name).mkdir(parents=True)
    reads = collections.Counter()
    plain_read = m.PrefetchFS._read

    def counted(fs, path):
        reads[os.path.relpath(path, os.fsencode(src))] += 1
        return plain_read(fs, path)
    monkeypatch.setattr(m.PrefetchFS, "_read", counted)
    fs = m.PrefetchFS(2, False, copies=(os.fsencode(src), os.fsencode(dest)), dir_stats=False,
                      dir_times=True)
    try:
        root = fs.scandir(os.fsencode(src), b".")
        assert sorted(e.name for e in root.entries) == [b"a", b"b", b"c"]
        assert wait_for(lambda: reads[b"c"] == 1 and reads[b"c/s"] == 1, 10)
        fs.hint([os.fsencode(src / "b")])
        assert wait_for(lambda: reads[b"b"] == 1, 10)
    finally:
        fs.close()
    assert reads[b"a"] == 0 and reads[b"a/s"] == 0, reads


def test_waiting_workers_get_no_subtree_whose_small_copy_in_dest_counts_it(tmp_path,
                                                                            monkeypatch):
    """A re-run over a latency-bound SRC: workers wait, but every subdirectory has a
    small copy in DEST, which counts it as soon as the walk reaches it (no round
    trip to SRC): none goes out alone to a waiting worker; the root, fitting,
    goes out whole, with the counts of DEST's copies."""
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    src, dest = tmp_path / "src", tmp_path / "dest"
    for i in range(6):
        (src / ("d%d" % i)).mkdir(parents=True)
        (src / ("d%d" % i) / "f").write_bytes(b"x")
    assert subprocess.run(["rsync", "-a", "%s/" % src, "%s/" % dest]).returncode == 0
    scanner, units, dirs, shares = _unwalking_scanner([3, 3, 3, 3, 3, 3, 3])
    fs = m.PrefetchFS(2, False, copies=(os.fsencode(src), os.fsencode(dest)), dir_stats=False,
                      dir_times=True)
    try:
        scanner.scan(m.Source(b"src", os.fsencode(src), b".", True), view=fs)
    finally:
        fs.close()
    assert [u[:3] for u in units] == [(m.UNIT_TREE, b".", 13)]
    assert shares == []
    assert scanner.unwalked.count == 6


def test_a_src_read_ahead_beside_the_preflight_is_the_listing_its_scan_takes(tmp_path,
                                                                              monkeypatch):
    """Beside the pre-flight, a SRC read ahead by threads (--scan-threads) has its root
    listed early (SourceLister.warm); its scan then takes that listing, reading no
    directory twice, and cuts the same units as a scan started cold.  What no scan
    takes (the pre-flight refused) is given up, its threads ended."""
    src = tmp_path / "src"
    for i in range(5):
        (src / ("d%d" % i) / "s").mkdir(parents=True)
        (src / ("d%d" % i) / "s" / "f").write_bytes(b"x" * i)
    reads = collections.Counter()
    plain_read = m.PrefetchFS._read

    def counted(fs, path):
        reads[path] += 1
        return plain_read(fs, path)
    monkeypatch.setattr(m.PrefetchFS, "_read", counted)
    settings = m.ListSettings(options=m.RsyncOptions("-a"), remote=(), dest=None,
                              scan_threads=2, rsync="rsync", log_path=b"/dev/null", workers=2,
                              observed=False, every_entry=False, own_walk=None)
    source = m.Source(b"src", os.fsencode(src), b".", True)

    def scan(early):
        reads.clear()
        scanner, units, dirs, _ = _unwalking_scanner([])
        lister = m.SourceLister(settings, scanner, lambda path: "nfs")
        if early:
            lister.warm(source)
            assert lister.early is not None and lister.early[0] is source
            assert wait_for(lambda: reads[os.fsencode(src)] == 1, 10), reads
        lister.list(source)
        assert lister.early is None
        assert set(reads.values()) == {1}, reads
        return units, dirs

    assert scan(True) == scan(False)
    scanner, _, _, _ = _unwalking_scanner([])
    lister = m.SourceLister(settings, scanner, lambda path: "nfs")
    lister.warm(source)
    fs = lister.early[1]
    lister.drop_early()
    assert lister.early is None and fs.closed
    assert not [t for pool in (fs.pool, fs.stat_pool) for t in pool._threads if t.is_alive()]


def test_a_directory_with_files_still_gets_its_own_entry_when_split(tmp_path, monkeypatch):
    monkeypatch.setattr(m, "IDLE_CUT", 0.0)
    src = tmp_path / "src"
    for i in range(3):
        (src / ("d%d" % i)).mkdir(parents=True)
    (src / "top.txt").write_bytes(b"x")
    scanner, units, dirs, shares = _unwalking_scanner([1])
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True))
    assert (m.UNIT_DIR, b".", 2) in units     # itself and top.txt, by rsync -d


def _scan_units(src, fs, max_entries, dest=None):
    """The units (unit, name, entries, size) a Scanner with `fs` cuts from src,
    and the scanner."""
    sink = _Sink(lambda unit, rel, n, size: (unit, rel, n, size))
    scanner = m.Scanner(_settings(max_entries, dest), sink, threading.Event())
    scanner.scan(m.Source(b"src", os.fsencode(src), b".", True), view=fs)
    return sink.units, scanner


def _entries_by_directory(units):
    counts = collections.Counter()
    for unit in units:
        if unit[0] != "x":
            counts[os.path.dirname(unit[1]) if unit[0] == m.UNIT_ENTRY else unit[1]] += unit[2]
    return counts


@pytest.mark.parametrize("cap", [1000, 8], ids=["fits", "listed-name-by-name"])
def test_a_sampled_scan_counts_the_files_it_does_not_stat_as_a_full_one_does(tmp_path, cap):
    """The files a sampled listing did not stat are counted in bulk: the same
    units, entries and names as a scan that stats each (sizes aside); a directory
    over the cap still lists each of them, and deletions still see their names."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    for d in ("a", "b"):
        (src / d).mkdir(parents=True)
        (dest / d).mkdir(parents=True)
        for i in range(12):
            (src / d / ("f%02d" % i)).write_bytes(b"x" * 10)
            (dest / d / ("f%02d" % i)).write_bytes(b"x" * 10)
        os.symlink("f00", str(src / d / "link"))
        os.symlink("f00", str(dest / d / "link"))
    (dest / "b" / "extra").write_bytes(b"x")     # only b has one to delete
    full, full_scanner = _scan_units(src, m.LocalFS, cap, os.fsencode(dest))
    sampled, sampled_scanner = _scan_units(src, m.SampledFS, cap, os.fsencode(dest))
    assert sorted(u[:2] for u in sampled) == sorted(u[:2] for u in full)
    # and as many entries a directory: the first of its units carries the
    # directory itself, and which is first follows the listing's order
    # (tmpfs lists newest first; the sample goes before the other files)
    assert _entries_by_directory(sampled) == _entries_by_directory(full)
    assert sampled_scanner.entries == full_scanner.entries == 1 + 2 * 14
    assert ("x", b"b") in sampled and ("x", b"a") not in sampled
    if cap == 8:
        names = [u[1] for u in sampled if u[0] == m.UNIT_ENTRY]
        assert b"a/f11" in names and b"b/link" in names and len(names) == 26


@pytest.mark.parametrize("vanished, retried", [
    ([b"DEST/d/.f12.Ab3xYz"], True),                        # another worker's temp file
    ([b"DEST/.mode444.4Y3N4d", b"DEST/x/.a b.q1W2e3"], True),
    ([b"SRC/d/f12"], False),                                 # a source file: rsync's 24
    ([b"DEST/d/f12"], False),                                # not a temporary name
    ([b"DEST/d/.f12.Ab3xYz", b"SRC/d/g"], False),
    ([], False),
])
def test_a_vanished_neighbours_temp_file_is_told_from_a_vanished_source(
        tmp_path, vanished, retried):
    """-y lists DEST's directories for a basis; another worker's temporary file
    renamed meanwhile "has vanished" (exit 24): that bucket runs again alone (see
    Outcomes.judge).  A vanished file of SRC, or any other name, stays rsync's 24."""
    dest = os.fsencode(tmp_path / "dest")
    log = tmp_path / "bucket.log"
    log.write_bytes(b"".join(
        b'file has vanished: "%s"\n' % name.replace(b"DEST", dest).replace(
            b"SRC", os.fsencode(tmp_path / "src"))
        for name in vanished) + b"rsync warning: some files vanished before they could be "
                                b"transferred (code 24) at main.c(1394) [sender=3.5.0]\n")
    assert m.saw_a_neighbours_file(m.log_head(os.fsencode(log)), dest) is retried


def _commands(rsync_text, processes=4, slot_options=lambda slot: [], source=None,
              dest=b"/dst/", whole=False):
    """A BucketCommands from settings made by hand, as a unit test can."""
    options = m.RsyncOptions(rsync_text)
    source = source or m.Source(b"/src/", b"/src", b".", True)
    settings = m.RunSettings(
        plan=None, options=options, rsync=b"rsync", rsync_binary="rsync",
        remote={}, remote_dest=False, missing=(), sources=[source], single=False,
        whole=whole, dest=dest, created=False, created_dest=False, bucket_dir=b"/b",
        processes=processes, scan_only=False, fix_dir_perms=False,
        item_format=options.item_format(), out_format="%i", overlap=False,
        filter_traces=False, adaptive=False, scan_threads=None, retries=2,
        summary_on_stdout=False, items_read=False, item_names=False, verify=False,
        progress=False, keep=False, stats=False, json=None, live_reports=False,
        host_shell=None, readahead=None)
    return m.BucketCommands(settings, slot_options), source


def test_a_flat_bucket_command_is_its_list_from_the_base_into_dest():
    """A bucket's command is a function of the settings, the bucket and the worker
    slot: the rsync, the user's options, this worker's share of --bwlimit, its own
    --partial-dir (--delay-updates), the slot's options, then --files-from."""
    commands, source = _commands("-a --bwlimit=1M --delay-updates",
                                 slot_options=lambda slot: [b"--rsh=ssh-%d" % slot])
    bucket = m.Bucket(7, source, m.Kind.FLAT, 3, 30, b"/b/000007.list", b"/b/000007.log")
    cmd = commands.command(bucket, slot=2)
    assert cmd[0] == b"rsync" and b"-a" in cmd and b"--no-r" in cmd
    assert b"--bwlimit=262144b" in cmd          # 1 MiB/s shared by 4 rsyncs
    assert b"--partial-dir=.~tmp~.2" in cmd and b"--rsh=ssh-2" in cmd
    assert cmd[cmd.index(b"--from0"):cmd.index(b"--from0") + 2] == [
        b"--from0", b"--files-from=/b/000007.list"]
    assert cmd[-2:] == [b"/src/", b"/dst/"]
    assert commands.command(bucket, slot=3) != cmd          # another worker's own dir


def test_a_deletion_bucket_command_spends_what_is_left_of_max_delete():
    """--max-delete is one limit for the run: a deletion bucket's rsync gets what the
    earlier ones left, and deletes only (--existing --ignore-existing)."""
    commands, source = _commands("-a --delete --max-delete=10")
    bucket = m.Bucket(1, source, m.Kind.DELETE, 0, 0, b"/b/delete-000001.list",
                      b"/b/delete-000001.log")
    cmd = commands.command(bucket, slot=0, delete_budget=3)
    assert b"--max-delete=3" in cmd and b"--max-delete=10" not in cmd
    assert b"--existing" in cmd and b"--ignore-existing" in cmd
    assert b"--max-delete=0" in commands.command(bucket, slot=0, delete_budget=-2)


# ---------------------------------------------------------------- running again

def _bucket(number):
    bucket = m.Bucket(number, None, m.Kind.TREES, 1, 1, b"/b/%06d.list" % number,
                      b"/b/%06d.log" % number)
    bucket.started = 1000.0 + number
    return bucket


def test_every_reason_to_run_again_goes_through_one_queue_and_one_log_scheme():
    """Lost with its host, raced, failed in a way that may pass: one queue, one record
    of the runs (Bucket.tries) and one log name per run (BUCKET.runN.log, N the run's
    number, whatever the reasons before it); --retries counts only its own."""
    again = m.RunsAgain()
    lost, raced, flaky = _bucket(1), _bucket(2), _bucket(3)
    again.add(lost, m.Retry.LOST)
    lost.started = 2000.0
    again.take_due()
    again.add(lost, m.Retry.TRANSIENT)
    again.add(raced, m.Retry.RACED)
    again.add(flaky, m.Retry.TRANSIENT)
    assert lost.log_path == b"/b/000001.run3.log" and raced.log_path == b"/b/000002.run2.log"
    assert [a.why for a in lost.tries] == [m.Retry.LOST, m.Retry.TRANSIENT]
    assert lost.lost_since() == 1001.0 and raced.lost_since() is None
    assert (lost.attempt(), raced.attempt(), flaky.attempt()) == (2, 1, 2)
    assert lost.tried(m.Retry.LOST) == 1 and raced.tried(m.Retry.RACED) == 1


def test_rounds_after_the_workers_take_the_reasons_in_the_rules_order():
    """take_round: every bucket of one reason at a time, lost ones first (they were
    handed out already), then raced ones (alone), then the --retries ones (after a
    back-off that doubles); amid the run a worker takes only a lost bucket that is
    due."""
    again = m.RunsAgain()
    flaky, raced, lost, later = _bucket(1), _bucket(2), _bucket(3), _bucket(4)
    again.add(flaky, m.Retry.TRANSIENT)
    again.add(raced, m.Retry.RACED)
    again.add(later, m.Retry.LOST, not_before=m.time.monotonic() + 3600)
    again.add(lost, m.Retry.LOST)
    assert again.take_due() is lost
    assert again.take_due() is None               # later is not due; the others wait
    assert again.take_round() == (m.Retry.LOST, [later])
    assert again.take_round() == (m.Retry.RACED, [raced])
    assert again.take_round() == (m.Retry.TRANSIENT, [flaky])
    assert again.take_round() == (None, [])
    rules = m.RETRY_RULES
    assert list(rules) == [m.Retry.LOST, m.Retry.RACED, m.Retry.TRANSIENT]
    assert rules[m.Retry.RACED].alone and not rules[m.Retry.TRANSIENT].alone
    assert [rules[m.Retry.TRANSIENT].pause(k) for k in range(3)] == [1.0, 2.0, 4.0]
    assert rules[m.Retry.LOST].counted and not rules[m.Retry.TRANSIENT].counted


def test_a_bucket_passed_on_by_a_host_that_takes_no_more_is_no_run_again():
    """A worker of a host that is gone passes its next bucket on: another worker
    takes it at once, with no run recorded and its log name unchanged."""
    again = m.RunsAgain()
    bucket = _bucket(5)
    again.pass_on(bucket)
    assert again.take_due() is bucket
    assert bucket.tries == [] and bucket.log_path == b"/b/000005.log"
