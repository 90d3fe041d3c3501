"""Every row of msrsync's option table, end to end against the real executable."""

import json
import math
import os
import re

import pytest

from helpers import (age, assert_same_tree, build, describe, differential, make_tree,
                     oracle_figures, rsync_processes_mentioning, rsync_stats_figures,
                     run_msrsync, run_rsync, snapshot, start_msrsync, text, tree_stats,
                     wait_for)

SPEC_JSON_KEYS = {
    "version", "status", "exit_code", "exit_meaning", "command_line", "working_directory",
    "sources", "destination", "dry_run", "workers", "entries_total", "bytes_total",
    "entries_done", "buckets_total", "buckets_done", "buckets_failed",
    "mean_entries_per_bucket", "mean_bytes_per_bucket", "entries_per_second",
    "bytes_per_second", "rsync_processes", "rsync_cumulative_seconds", "crawl_seconds",
    "crawl_share", "total_seconds", "scan_vanished", "scan_errors", "buckets_dir",
    "buckets_dir_kept", "rsync_stats", "failures",
}
SPEC_RSYNC_STATS_KEYS = {
    "files_seen", "files_created", "files_deleted", "regular_files_transferred",
    "total_file_size", "transferred_file_size", "literal_data", "matched_data",
    "bytes_sent", "bytes_received",
}
SPEC_STATS_LABELS = [
    "Status", "Working directory", "Command line", "Total size", "Total entries",
    "Buckets number", "Mean entries per bucket", "Mean size per bucket", "Entries per second",
    "Speed", "Rsync workers", "Total rsync's processes", "Crawl time", "Total time",
    "Files seen by rsync", "Files created", "Regular files transferred", "Total file size",
    "Transferred file size", "Literal data", "Matched data", "Bytes sent", "Bytes received",
]
BUCKET_DIR_LINE = re.compile(r"^buckets dir is (.+)$", re.M)


def _json_run(tmp_path, src, *opts, dest=None):
    """Run msrsync with --json FILE; return (CompletedProcess, summary dict, dest)."""
    dest = dest or os.fsencode(tmp_path / "dest")
    path = tmp_path / ("summary-%d.json" % len(os.listdir(tmp_path)))
    cp = run_msrsync(*(list(opts) + ["--json", path, src, dest]))
    assert path.exists(), describe(cp)
    return cp, json.loads(path.read_text()), dest


def _check_success_summary(summary, figures, workers):
    """Figures of a successful fresh copy agree with each other and with one rsync's."""
    assert set(summary) >= SPEC_JSON_KEYS, SPEC_JSON_KEYS - set(summary)
    assert set(summary["rsync_stats"]) >= SPEC_RSYNC_STATS_KEYS
    s = summary
    assert s["version"] == "1.0.0"
    assert s["status"] == "SUCCESS"
    assert s["exit_code"] == 0
    assert s["exit_meaning"] == "success"
    assert s["dry_run"] is False
    assert s["workers"] == workers
    assert s["entries_total"] == figures["Number of files"]
    assert s["entries_done"] == s["entries_total"]
    assert s["bytes_total"] == figures["Total file size"]
    assert s["buckets_failed"] == 0
    assert s["failures"] == []
    assert s["buckets_total"] >= 1
    assert s["buckets_done"] == s["buckets_total"], "a successful run did not do every bucket"
    assert s["mean_entries_per_bucket"] == pytest.approx(s["entries_total"] / s["buckets_total"])
    assert s["mean_bytes_per_bucket"] == pytest.approx(s["bytes_total"] / s["buckets_total"])
    assert s["rsync_processes"] >= s["buckets_done"]
    assert 0 <= s["crawl_seconds"] <= s["total_seconds"] + 0.001
    assert 0 <= s["crawl_share"] <= 1
    assert s["total_seconds"] > 0
    assert s["entries_per_second"] == pytest.approx(s["entries_total"] / s["total_seconds"],
                                                    rel=0.05)
    assert s["bytes_per_second"] == pytest.approx(s["bytes_total"] / s["total_seconds"],
                                                  rel=0.05)
    assert s["rsync_cumulative_seconds"] > 0
    assert s["scan_vanished"] == 0 and s["scan_errors"] == 0
    assert s["buckets_dir_kept"] is False
    assert not os.path.exists(s["buckets_dir"])
    rs = s["rsync_stats"]
    assert all(isinstance(v, int) for v in rs.values()), rs
    assert rs["regular_files_transferred"] == figures["Number of regular files transferred"]
    assert rs["total_file_size"] == figures["Total file size"]
    assert rs["literal_data"] == figures["Literal data"]
    assert rs["files_deleted"] == 0


# ---------------------------------------------------------------- -p/--processes

@pytest.mark.parametrize("flag", ["-p", "--processes"])
def test_processes_sets_the_number_of_workers(tmp_path, weird_src, flag):
    json_path = tmp_path / "p.json"
    differential(tmp_path, [weird_src + b"/"], [flag, "3", "-f", "40", "--json", json_path])
    summary = json.loads(json_path.read_text())
    assert summary["workers"] == 3


@pytest.mark.slow
def test_processes_run_rsyncs_at_the_same_time(tmp_path):
    """-p 3 really runs three rsyncs at once (each throttled, so they overlap)."""
    src = make_tree(tmp_path / "src", "big", count=6, size=300 * 1024)
    proc = start_msrsync("-p", "3", "-s", "100K", "--rsync", "-a --bwlimit=200",
                         src + b"/", tmp_path / "dest")
    try:
        def three_leaders():
            leaders = set()
            for pid, _ in rsync_processes_mentioning(os.fsencode(tmp_path)):
                try:
                    if os.getpgid(pid) == pid:
                        leaders.add(pid)
                except OSError:
                    pass
            return len(leaders) >= 3
        assert wait_for(three_leaders, 10), "never saw three rsync process groups at once"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


# ---------------------------------------------------------------- -f / -s

@pytest.mark.parametrize("cap", [2, 7, 50])
def test_files_caps_entries_per_bucket(tmp_path, weird_src, cap):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-f", str(cap))
    assert cp.returncode == 0, describe(cp)
    assert s["mean_entries_per_bucket"] <= cap
    assert s["buckets_total"] >= math.ceil(s["entries_total"] / cap)


def test_files_long_form(tmp_path, weird_src):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "--files", "7")
    cp2, s2, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-f", "7")
    assert cp.returncode == cp2.returncode == 0
    assert s["buckets_total"] == s2["buckets_total"]


def test_default_caps_put_a_small_tree_in_one_bucket(tmp_path, weird_src):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d")
    assert cp.returncode == 0, describe(cp)
    assert s["buckets_total"] == 1


def _wide_tree(root, dirs=300, files=60):
    """dirs x files empty files (18,000 + directories): many buckets at -f 1000."""
    build(root, {b"g%02d/d%03d/f%02d" % (d // 30, d, f): b""
                 for d in range(dirs) for f in range(files)})


@pytest.mark.parametrize("procs", ["1", "2"])
def test_default_caps_grow_with_the_tree(tmp_path, procs):
    """Without -f/-s the caps start at 1000 entries and grow with what was scanned
    (a quarter of a worker's share; all of it at -p 1): far fewer buckets than a
    fixed -f 1000, yet more than one per worker at -p 2; -f keeps them fixed."""
    src = tmp_path / "src"
    _wide_tree(src)
    cp, grown, _ = _json_run(tmp_path, os.fsencode(src) + b"/", "-d", "-p", procs)
    cp2, fixed, _ = _json_run(tmp_path, os.fsencode(src) + b"/", "-d", "-p", procs,
                              "-f", "1000")
    assert cp.returncode == cp2.returncode == 0, describe(cp) + describe(cp2)
    assert grown["entries_total"] == fixed["entries_total"] > 18000
    assert fixed["buckets_total"] >= 18
    if procs == "1":
        assert grown["buckets_total"] * 2 < fixed["buckets_total"], (grown, fixed)
    else:
        assert 4 <= grown["buckets_total"] < fixed["buckets_total"], (grown, fixed)


def test_a_dry_run_cuts_by_the_caps_alone_whatever_the_timing(tmp_path):
    """-d runs nothing, so no worker waits: the buckets it shows are the caps' cuts,
    the same whether a waiting worker would be served at once (MSRSYNC_IDLE_CUT=0)
    or never (before, its always-idle workers made the cuts follow the scan's pace:
    23 buckets on a loaded machine where an idle one cut 18)."""
    src = tmp_path / "src"
    _wide_tree(src)
    counts = []
    for idle in ("0", "1000"):
        path = tmp_path / ("idle-%s.json" % idle)
        env = dict(os.environ, MSRSYNC_IDLE_CUT=idle)
        cp = run_msrsync("-d", "-p", "2", "--json", path, os.fsencode(src) + b"/",
                         tmp_path / "dest", env=env)
        assert cp.returncode == 0, describe(cp)
        counts.append(json.loads(path.read_text())["buckets_total"])
    assert counts[0] == counts[1], counts


def test_default_caps_copy_a_wide_tree_like_rsync(tmp_path):
    src = tmp_path / "src"
    _wide_tree(src, dirs=120, files=40)
    age(src)
    differential(tmp_path, [os.fsencode(src) + b"/"], ["-p", "2"], None)


def test_size_one_byte_gives_each_nonempty_file_its_own_bucket(tmp_path, weird_src):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-s", "1")
    assert cp.returncode == 0, describe(cp)
    bigger = sum(1 for size in tree_stats(weird_src)["sizes"] if size > 1)
    assert s["buckets_total"] >= bigger


def test_size_caps_bytes_per_bucket(tmp_path, weird_src):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-s", "1K")
    assert cp.returncode == 0, describe(cp)
    sizes = tree_stats(weird_src)["sizes"]
    big = sum(1 for x in sizes if x > 1024)
    small = sum(x for x in sizes if x <= 1024)
    assert s["buckets_total"] >= big + math.ceil(small / 1024.0)


EQUIVALENT_SIZES = [
    ["2048", "2K", "2k", "2KB", "2kb", "2KiB", "2kib", "2.0K", "2.0000k"],
    ["1536", "1.5K", "1.5k", "1.5KiB", "1.5kB"],
    ["1048576", "1M", "1m", "1MB", "1MiB", "1024K", "0.5M", "512k"],
]


@pytest.mark.parametrize("spellings", EQUIVALENT_SIZES, ids=lambda s: s[0])
def test_size_spellings_cut_the_same_buckets(tmp_path, spellings):
    """Suffixes are case-insensitive, B/iB optional, decimals allowed; 1024-based."""
    src = make_tree(tmp_path / "src", "flat", n=24, size=1000)
    counts = {}
    for spelling in spellings:
        cp, s, _ = _json_run(tmp_path, src + b"/", "-d", "-s", spelling)
        assert cp.returncode == 0, describe(cp)
        counts[spelling] = s["buckets_total"]
    assert len(set(counts.values())) == 1, counts
    # 24 files of 1000 bytes: a cap of 1.5K holds one file, 2K two, 1M all
    expected = {"2048": 12, "1536": 24, "1048576": 1}[spellings[0]]
    assert abs(list(counts.values())[0] - expected) <= 1, counts


@pytest.mark.parametrize("value", ["1g", "1.5G", "1t", "1P", "1e", "1EiB", "3GB", ".5K",
                                   "9999999999"])
def test_size_accepts_every_suffix(tmp_path, weird_src, value):
    cp = run_msrsync("-d", "-s", value, weird_src + b"/", tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    assert cp.stderr == b""


def test_size_long_form(tmp_path, weird_src):
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "--size", "1K")
    cp2, s2, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-s", "1024")
    assert cp.returncode == cp2.returncode == 0
    assert s["buckets_total"] == s2["buckets_total"] > 1


# ---------------------------------------------------------------- -b / -k / -j

def _bucket_dir(cp):
    m = BUCKET_DIR_LINE.search(text(cp.stdout))
    assert m, "no 'buckets dir is PATH' line on stdout:\n" + describe(cp)
    return m.group(1)


@pytest.mark.parametrize("flag", ["-j", "--show"])
def test_show_prints_bucket_dir_on_stdout(tmp_path, weird_src, private_tmpdir, flag):
    cp = run_msrsync(flag, "-f", "30", weird_src + b"/", tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    path = _bucket_dir(cp)
    assert os.path.dirname(os.path.abspath(path)) == str(private_tmpdir)
    assert b"buckets dir is" not in cp.stderr


@pytest.mark.parametrize("flag", ["-b", "--buckets"])
def test_buckets_dir_holds_lists_and_is_removed_at_end(tmp_path, weird_src, flag):
    parent = tmp_path / "my buckets"
    parent.mkdir()
    cp = run_msrsync(flag, parent, "-j", "-f", "30", weird_src + b"/", tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    path = _bucket_dir(cp)
    assert os.path.dirname(os.path.abspath(path)) == str(parent)
    assert not os.path.exists(path)
    assert os.listdir(parent) == []


@pytest.mark.parametrize("flag", ["-k", "--keep"])
def test_keep_keeps_bucket_lists_and_logs(tmp_path, weird_src, flag):
    parent = tmp_path / "my buckets"
    parent.mkdir()
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-b", parent, flag, "-j", "-f", "30")
    assert cp.returncode == 0, describe(cp)
    path = _bucket_dir(cp)
    assert os.path.dirname(os.path.abspath(path)) == str(parent)
    assert os.path.isdir(path)
    assert s["buckets_dir_kept"] is True
    assert os.path.abspath(s["buckets_dir"]) == os.path.abspath(path)
    names = os.listdir(path)
    lists = [n for n in names if n.endswith(".list")]
    assert len(lists) >= s["buckets_done"] > 1, names
    # the lists are NUL-separated names relative to SRC, and name every entry
    listed = set()
    for n in lists:
        with open(os.path.join(path, n), "rb") as f:
            listed.update(x for x in f.read().split(b"\0") if x)
    assert listed, "bucket lists are empty"
    # names relative to SRC/ ("./" protects names that start with '#' or ';')
    for name in listed:
        rel = name[2:] if name.startswith(b"./") else name
        assert os.path.lexists(os.path.join(weird_src, rel.rstrip(b"/") or b".")), name
    assert stat_mode(path) & 0o077 == 0, "bucket dir readable by others"


def stat_mode(path):
    return os.stat(path).st_mode & 0o777


def test_keep_without_buckets_dir_keeps_it_in_tmpdir(tmp_path, weird_src, private_tmpdir):
    cp = run_msrsync("-k", "-f", "30", weird_src + b"/", tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    kept = os.listdir(private_tmpdir)
    assert len(kept) == 1 and os.listdir(os.path.join(private_tmpdir, kept[0]))


# ---------------------------------------------------------------- -P / --stats / --json

@pytest.mark.parametrize("flag", ["-P", "--progress"])
def test_progress_on_stderr_plain_lines_when_not_a_tty(tmp_path, weird_src, flag):
    d = differential(tmp_path, [weird_src + b"/"], [flag, "-p", "2", "-f", "40"])
    err = d.msrsync.stderr
    assert err.strip(), "no progress at all on stderr"
    assert b"\r" not in err and b"\x1b" not in err, "terminal control codes on a pipe"
    assert err.endswith(b"\n")
    last = text(err).splitlines()[-1]
    total = oracle_figures([weird_src + b"/"], tmp_path)["Number of files"]
    assert "%d/%d" % (total, total) in last, last
    assert b"entries" not in d.msrsync.stdout


def test_no_progress_no_output_by_default(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "40"])
    assert d.msrsync.stdout == b""
    assert d.msrsync.stderr == b""


def test_stats_block_reports_success_and_entry_count(tmp_path, weird_src):
    json_path = tmp_path / "s.json"
    d = differential(tmp_path, [weird_src + b"/"],
                     ["--stats", "-p", "2", "-f", "40", "--json", json_path])
    out = text(d.msrsync.stdout)
    lines = out.splitlines()
    for label in SPEC_STATS_LABELS:
        assert any(l.startswith(label) for l in lines), "no %r line in:\n%s" % (label, out)
    assert "Status: SUCCESS" in lines
    figures = oracle_figures([weird_src + b"/"], tmp_path)
    assert "Total entries: %d" % figures["Number of files"] in lines
    assert "Rsync workers: 2" in lines
    summary = json.loads(json_path.read_text())
    assert "Buckets number: %d" % summary["buckets_total"] in lines
    assert "Regular files transferred: %d" % figures["Number of regular files transferred"] \
        in lines
    assert d.msrsync.stderr == b""


def test_stats_without_trailing_slash_counts_the_directory(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src], ["--stats", "-f", "40"])
    figures = oracle_figures([weird_src], tmp_path)
    assert "Total entries: %d" % figures["Number of files"] in text(d.msrsync.stdout)


def test_json_file_summary_is_consistent(tmp_path, weird_src):
    json_path = tmp_path / "out.json"
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "25", "--json",
                                                    json_path])
    summary = json.loads(json_path.read_text())
    figures = oracle_figures([weird_src + b"/"], tmp_path)
    _check_success_summary(summary, figures, 3)
    assert summary["sources"] == [text(weird_src + b"/")]
    assert summary["destination"] == text(d.msrsync_dest)
    assert summary["command_line"][-2:] == [text(weird_src + b"/"), text(d.msrsync_dest)]
    assert summary["command_line"][1:5] == ["-p", "3", "-f", "25"]
    assert summary["working_directory"] == os.getcwd()
    assert summary["buckets_total"] > 1
    assert d.msrsync.stdout == b""


def test_json_to_stdout_is_the_only_stdout(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "25", "--json", "-"])
    summary = json.loads(d.msrsync.stdout.decode("utf-8"))
    _check_success_summary(summary, oracle_figures([weird_src + b"/"], tmp_path), 2)


def test_json_with_one_bucket_and_no_directory_pass(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["--json", "-"])
    summary = json.loads(d.msrsync.stdout.decode("utf-8"))
    _check_success_summary(summary, oracle_figures([weird_src + b"/"], tmp_path), 1)
    assert summary["buckets_total"] == 1


def test_json_names_non_utf8_paths_without_failing(tmp_path):
    src = make_tree(os.path.join(os.fsencode(tmp_path), b"in", b"\xff\xfe src"), "flat", n=5)
    d = differential(tmp_path, [src + b"/"], ["--json", "-"])
    summary = json.loads(d.msrsync.stdout.decode("utf-8"))
    assert summary["status"] == "SUCCESS"
    assert len(summary["sources"]) == 1


# ---------------------------------------------------------------- -d / -v / -h

@pytest.mark.parametrize("flag", ["-d", "--dry-run"])
def test_dry_run_creates_nothing_at_dest(tmp_path, weird_src, flag):
    dest = tmp_path / "dest"
    cp = run_msrsync(flag, "-p", "2", "-f", "20", "--stats", weird_src + b"/", dest)
    assert cp.returncode == 0, describe(cp)
    assert not os.path.lexists(dest)
    assert "Status: DRY RUN" in text(cp.stdout).splitlines()


def test_dry_run_leaves_existing_dest_untouched(tmp_path, weird_src):
    dest = os.fsencode(tmp_path / "dest")
    make_tree(dest, "flat", n=3)
    before = snapshot(dest)
    cp, s, _ = _json_run(tmp_path, weird_src + b"/", "-d", "-f", "20", dest=dest)
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(before, dest)
    assert s["dry_run"] is True
    assert s["status"] == "DRY RUN"
    assert s["rsync_processes"] == 0


@pytest.mark.parametrize("flag", ["-v", "--version"])
def test_version_prints_name_and_version(flag):
    cp = run_msrsync(flag)
    assert cp.returncode == 0
    assert cp.stdout == b"msrsync 1.0.0\n"
    assert cp.stderr == b""


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_lists_every_option_and_exits_0(flag):
    cp = run_msrsync(flag)
    assert cp.returncode == 0
    out = text(cp.stdout)
    for opt in ["-p", "--processes", "-f", "--files", "-s", "--size", "-b", "--buckets",
                "-k", "--keep", "-j", "--show", "-P", "--progress", "--stats", "--json",
                "-d", "--dry-run", "-v", "--version", "-h", "--help", "-r", "--rsync",
                "-t", "--selftest", "-e", "--bench", "-g", "--benchshm", "--bench-entries"]:
        assert re.search(r"(^|[\s,])%s\b" % re.escape(opt), out, re.M), opt
    for code in (0, 1, 3, 4, 11, 20, 23, 24, 40, 41, 42, 43):
        assert re.search(r"^\s*%d\s+\S" % code, out, re.M), "exit code %d not in --help" % code


# ---------------------------------------------------------------- -r / --rsync

@pytest.mark.parametrize("form", ["-r", "--rsync", "--rsync="])
def test_rsync_option_forms(tmp_path, weird_src, form):
    """-r OPTS, --rsync OPTS and --rsync=OPTS all replace the default options."""
    if form.endswith("="):
        args = ["-p", "2", "-f", "30", form + "-a"]
    else:
        args = ["-p", "2", "-f", "30", form, "-a"]
    o = run_rsync(weird_src + b"/", tmp_path / "oracle", opts=["-a"])
    m = run_msrsync(*(args + [weird_src + b"/", tmp_path / "msrsync"]))
    assert o.returncode == 0 and m.returncode == 0, describe(m)
    assert_same_tree(tmp_path / "oracle", tmp_path / "msrsync")


@pytest.mark.parametrize("opts", [["-a"], ["-rlpt"], ["-a", "--inplace"], ["-ac"],
                                  ["-aS", "--numeric-ids", "-q"], ["-ah"], ["-a", "--no-p"],
                                  ["-r", "-l", "-t", "-D"], ["-a", "--chmod=Fo-r,Dg+s"]])
def test_rsync_options_are_passed_to_every_worker(tmp_path, small_src, opts):
    differential(tmp_path, [small_src + b"/"], ["-p", "3", "-f", "25"], rsync_opts=opts)


def test_rsync_options_without_trailing_slash(tmp_path, weird_src):
    differential(tmp_path, [weird_src], ["-p", "3", "-f", "25"], rsync_opts=["-rlt"])


def _entry_lines(output):
    """rsync -v per-entry lines (header, summary and blank lines dropped)."""
    skip = ("sending incremental file list", "building file list", "created directory ",
            "sent ", "total size is ", "total: ")
    return [l for l in text(output).splitlines() if l and not l.startswith(skip)]


def test_rsync_verbose_prints_each_name_on_its_own_line(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "4", "-f", "9"],
                     rsync_opts=["-a", "-v"])
    oracle = _entry_lines(d.oracle.stdout)
    mine = _entry_lines(d.msrsync.stdout)
    # every non-directory entry exactly once, unbroken (a newline in a name is \#012)
    files = sorted(l for l in oracle if not l.endswith("/"))
    assert sorted(l for l in mine if not l.endswith("/")) == files
    assert set(l for l in mine if l.endswith("/")) <= set(l for l in oracle if l.endswith("/"))
    assert "new\\#012line" in files


def test_rsync_itemize_prints_itemized_lines(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9"],
                     rsync_opts=["-a", "-i"])
    oracle = sorted(l for l in _entry_lines(d.oracle.stdout) if l.startswith((">f", "cL", "cS")))
    mine = sorted(l for l in _entry_lines(d.msrsync.stdout) if l.startswith((">f", "cL", "cS")))
    assert mine == oracle
    assert len(mine) >= tree_stats(weird_src)["files"]


def test_rsync_out_format_is_honoured(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9"],
                     rsync_opts=["-a", "--out-format=F:%n"])
    oracle = sorted(l for l in text(d.oracle.stdout).splitlines() if l.startswith("F:")
                    and not l.endswith("/"))
    mine = sorted(l for l in text(d.msrsync.stdout).splitlines() if l.startswith("F:")
                  and not l.endswith("/"))
    assert mine == oracle and mine


def test_rsync_quiet_prints_nothing(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "9"],
                     rsync_opts=["-a", "-v", "-q"])
    assert d.msrsync.stdout == b""


def test_rsync_dry_run_creates_nothing(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "9"],
                     rsync_opts=["-a", "-n"], compare=False)
    assert not os.path.lexists(d.oracle_dest)
    assert not os.path.lexists(d.msrsync_dest)


def test_rsync_mkpath_creates_missing_parents(tmp_path, weird_src):
    differential(tmp_path, [weird_src + b"/"], ["-p", "2", "-f", "30"],
                 rsync_opts=["-a", "--mkpath"], dest_name=b"missing/parents/dest")


def test_rsync_stats_prints_aggregated_rsync_figures(tmp_path, weird_src):
    d = differential(tmp_path, [weird_src + b"/"], ["-p", "3", "-f", "25"],
                     rsync_opts=["-a", "--stats"])
    mine = rsync_stats_figures(d.msrsync.stdout)
    theirs = rsync_stats_figures(d.oracle.stdout)
    for label in ("Number of regular files transferred", "Total file size", "Literal data"):
        assert mine.get(label) == theirs[label], label


# ---------------------------------------------------------------- -t / -e

# (-t itself: test_install.py runs the program's --selftest, as a user runs it)


@pytest.mark.slow
def test_bench_with_few_entries_exits_0(private_tmpdir, page_cache_lock):
    # (page_cache_lock: as root the bench drops the page cache, which a test
    # run at the same time may need: test_readahead)
    cp = run_msrsync("-e", "--bench-entries", "2000", "--bench-reps", "2", timeout=240)
    assert cp.returncode == 0, describe(cp)
    assert b"Traceback" not in cp.stderr
    lines = text(cp.stdout).splitlines()
    took = [l for l in lines if " took " in l]
    # each configuration: its median, spread, speed-up and what bound it
    assert len(took) == 6 and all(re.search(r" took [\d.]+ s \(median; [\d.]+-[\d.]+ s\), "
                                            r"x[\d.]+ of rsync, [\d.]+ cores busy", l)
                                  for l in took), lines
    assert "each run 2 times, interleaved" in lines[0], lines
    assert sum(l.startswith("fastest: msrsync --processes ") for l in lines) == 1, lines
    assert os.listdir(private_tmpdir) == [], "the benchmark left its tree behind"


@pytest.mark.slow
def test_progress_on_a_terminal_redraws_one_line_at_most_10_times_a_second(tmp_path):
    import pty
    import time
    src = make_tree(tmp_path / "src", "big", count=2, size=150 * 1024)
    master, slave = pty.openpty()
    started = time.monotonic()
    proc = start_msrsync("-P", "-p", "2", "-s", "100K", "--rsync", "-a --bwlimit=100",
                         src + b"/", tmp_path / "dest", stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=60)
    took = time.monotonic() - started
    err = b"".join(chunks)
    assert proc.returncode == 0, err
    assert took > 1
    redraws = err.count(b"\r")
    assert redraws >= 2, err
    assert redraws <= 12 * took + 2, "%d redraws in %.1f s" % (redraws, took)
    assert err.rstrip(b"\r\n").count(b"\n") == 0, "progress used several lines: %r" % err[-300:]
    assert err.endswith(b"\n")


@pytest.mark.slow
def test_closed_stdout_is_not_an_internal_error(tmp_path):
    """'msrsync --rsync "-a -v" ... | head -1': a reader that goes away is not a bug in
    msrsync (exit 42); plain rsync finishes the copy and exits 0."""
    src = make_tree(tmp_path / "src", "flat", n=1500, size=1)
    fmt = "--out-format=" + " ".join(["%n"] * 10)
    proc = start_msrsync("-p", "2", "-f", "100", "--rsync", "-a '%s'" % fmt, src + b"/",
                         tmp_path / "dest")
    first = proc.stdout.readline()
    proc.stdout.close()          # far more output follows than a pipe holds
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first
    assert proc.returncode != 42, text(err)
    assert b"internal error" not in err and b"Traceback" not in err, text(err)
