#!/usr/bin/env python3
"""Long tail: a few big files that msrsync's scan finds last, behind many small ones.

Needs Python 3.6+ (standard library only), Linux, rsync and git (to take msrsync's
file from an older revision); as root it also drops the page cache before every run.

The tree (seeded, the same on every Python version): --small files of --small-size
bytes (20,000 of 16 KiB) in --dirs directories d000..d099, then --big-count files of
--big-size bytes (3 of 256 MiB, random bytes) in zz/: zz/big1, zz/big2...  msrsync walks
depth first, each directory's subdirectories in bytewise order, and a directory's own
files are found when it is listed; so the big files, in the last subdirectory of the
root, are found after every small file (in the root itself they would be found first).
Each of them is over the bucket caps: a bucket of its own, queued after the small files'.

Each rsync is one stream of --stream-rate bytes a second (32M): plain rsync runs with
--bwlimit=RATE, msrsync -p P with --bwlimit=P*RATE, which msrsync shares out, RATE to
each of its rsyncs.  So the copy is bound by streams, as over a WAN whose TCP streams
each get a share, and not by this machine's cores and disk, which would hide the
schedule (2 cores for 4 rsyncs); --stream-rate 0 measures without a limit.

Timed, each --reps times (3), interleaved round-robin, medians, DEST removed untimed
before each run; every run copies with the same rsync options (--rsync-opts,
"-a --whole-file", plus the stream's --bwlimit), on the disk of the work directory
(/var/tmp):

  rsync               rsync OPTS SRC/ DST/                the whole tree
  biggest alone       rsync OPTS SRC/zz/big1 DST/          the biggest file alone
  ideal               max(biggest alone, whole tree / P)   computed, not run
  msrsync REV         msrsync -p P [-s SIZE] --rsync OPTS SRC/ DST/, msrsync's file at
                      git revision --old-rev (d4a43d5: workers take buckets in scan order)
  msrsync             the same with the working tree's msrsync (--msrsync)

with P = --procs (4) and, for each msrsync, its own bucket caps (no -f/-s) and each
-s SIZE of --bucket-sizes (default,64M).  Each table row gives the median, its ratio
to the ideal and to plain rsync, and when the big files started: the first time their
name (or rsync's temporary .NAME.XXXXXX) appeared in DEST, polled every 10 ms.  Every
DEST is checked against SRC: the number of files and directories, the total bytes, a
digest of every entry's path, type, size, mode and mtime, and the sha256 of each big
file; --verify adds `rsync -ain --delete SRC/ DST/`, which must print nothing.

    python3 bench/longtail.py                    # 20,000 x 16 KiB + 3 x 256 MiB, 3 reps
    python3 bench/longtail.py --quick            # 2,000 x 16 KiB + 3 x 32 MiB, 1 rep
    python3 bench/longtail.py --old-rev HEAD~3 --bucket-sizes default,32M,128M
    python3 bench/longtail.py --big-count 2 --big-size 512M --procs 2
"""

import argparse
import collections
import hashlib
import os
import random
import shlex
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import MiB, BenchError, add_quick_option, add_run_options  # noqa: E402
from common import add_tool_options, cached_tree, changed_since  # noqa: E402
from common import command_prefix, compare_copy, exit_problem, file_digest  # noqa: E402
from common import fill_sizes, find_slow_runs, fmt_ratio, fmt_seconds  # noqa: E402
from common import human_size, log, make_run_dirs, measure, median_or_none  # noqa: E402
from common import msrsync_version, note_failure, ok_note, parse_size  # noqa: E402
from common import positive_int, print_header_start, random_block, read_json  # noqa: E402
from common import remove_tree, report_case, require_msrsync, rotation  # noqa: E402
from common import run_case_alone, run_main, run_paths, run_record, run_rounds  # noqa: E402
from common import script_parser, settle_caches, summary_row, tree_digest  # noqa: E402
from common import write_slices  # noqa: E402

LONGTAIL_VERSION = "1.0"
REPO = os.path.dirname(HERE)
DEFAULT_MSRSYNC = os.path.join(REPO, "msrsync")
DEFAULT_OLD_REV = "d4a43d5"       # the last revision whose workers take buckets in scan order
DEFAULT_SEED = 20240601 + 60      # bench.py's seed + 60, as suite.py seeds its section h
RSYNC_OPTS = "-a --whole-file"
BIG_DIR = "zz"                    # after d000..d999 bytewise: walked last
OUTLIER_FACTOR = 2.0
POLL_SECONDS = 0.01               # how often DEST is looked at for the big files
# full and --quick sizes; an option given on the command line wins over both
FULL = {"small": 20000, "big_size": "256M", "reps": 3, "stream_rate": "32M"}
QUICK = {"small": 2000, "big_size": "32M", "reps": 1, "stream_rate": "32M"}

# One timed command: label (the table's), kind (rsync, biggest, msrsync), which (for
# msrsync: "old" or "new"), size (its -s, None for its own caps).
Tool = collections.namedtuple("Tool", "label kind which size")


# ---------------------------------------------------------------------------
# The tree
# ---------------------------------------------------------------------------

class _HashingWriter(object):
    """A file's write() that also feeds a sha256."""

    def __init__(self, f):
        self.f, self.h = f, hashlib.sha256()

    def write(self, data):
        self.h.update(data)
        self.f.write(data)


def build_tree(root, small, small_size, dirs, big_count, big_size, seed):
    """SMALL files of SMALL_SIZE bytes in DIRS directories d000.., file i in directory
    i % DIRS, then BIG_COUNT files of BIG_SIZE bytes in zz/ (written last, found last).
    Returns the big files as [[relative path, size, sha256], ...], biggest first."""
    rng = random.Random(seed)
    block = random_block(rng, MiB)
    names = dir_names(dirs)
    for name in names:
        os.makedirs(os.path.join(root, name))
    fwidth = len(str(max(small - 1, 1)))
    for i in range(small):
        offset = rng.getrandbits(20) % (len(block) - small_size + 1) if small_size < len(
            block) else 0
        path = os.path.join(root, names[i % dirs], "f%0*d" % (fwidth, i))
        with open(path, "wb") as f:
            data = block[offset:offset + small_size]
            while len(data) < small_size:           # a small file larger than the block
                data += block[:small_size - len(data)]
            f.write(data)
    os.makedirs(os.path.join(root, BIG_DIR))
    big_block = random_block(rng, 64 * MiB)
    bigs = []
    for k in range(1, big_count + 1):
        rel = "%s/big%d" % (BIG_DIR, k)
        with open(os.path.join(root, rel), "wb") as f:
            w = _HashingWriter(f)
            write_slices(w, big_size, rng, big_block, 1 * MiB, 4 * MiB)
        bigs.append([rel, big_size, w.h.hexdigest()])
    bigs.sort(key=lambda b: -b[1])      # stable: big1 when they are the same size
    return {"big": bigs}


def manifest(root):
    """sha256 over every entry below ROOT (root itself left out: a DEST's own directory
    is made by the tool, SRC's by the build): relative path, type, size for files, mode
    and mtime in seconds, sorted by path."""
    return tree_digest(root)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dir_names(dirs):
    """d000..d099: the small files' directories, all before zz/ bytewise."""
    width = max(3, len(str(dirs - 1)))
    return ["d%0*d" % (width, d) for d in range(dirs)]


def describe_tree(a, count):
    names = dir_names(a.dirs)
    return ("%s files of %s in %d directories %s..%s, then %d file(s) of %s in %s/ "
            "(random bytes), %.0f MiB in all" % (
                format(a.small, ","), human_size(a.small_size), a.dirs, names[0],
                names[-1], a.big_count, human_size(a.big_size), BIG_DIR,
                count.bytes / float(MiB)))


def prepare_tree(a, workdir):
    """The tree in WORKDIR/longtail (reused from a --workdir when built with the same
    parameters).  Returns (path, TreeCount, facts)."""
    params = {"small": a.small, "small_size": a.small_size, "dirs": a.dirs,
              "big_count": a.big_count, "big_size": a.big_size, "seed": a.seed,
              "kind": "longtail", "longtail_version": LONGTAIL_VERSION}

    def build(path):
        facts = build_tree(path, a.small, a.small_size, a.dirs, a.big_count, a.big_size,
                           a.seed)
        facts["manifest"] = manifest(path)
        return facts

    path, count, facts = cached_tree(workdir, "longtail", params, build)
    return path, count, facts


def space_needed(a):
    """Bytes of SRC and one DEST, small files rounded up to 4 KiB blocks, plus a margin."""
    small = a.small * max(4096, -(-a.small_size // 4096) * 4096) + a.dirs * 4096
    return 2 * (small + a.big_count * a.big_size) + 256 * MiB


# ---------------------------------------------------------------------------
# msrsync at an older revision
# ---------------------------------------------------------------------------

def extract_old(rev, workdir):
    """msrsync's file at git revision REV, as WORKDIR/msrsync-SHORT (mode 755).  Returns
    (path, short hash)."""
    try:
        short = subprocess.check_output(
            ["git", "-C", REPO, "rev-parse", "--short", rev + "^{commit}"],
            stderr=subprocess.STDOUT, universal_newlines=True).strip()
        data = subprocess.check_output(["git", "-C", REPO, "show", "%s:msrsync" % short],
                                       stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as exc:
        out = getattr(exc, "output", None) or getattr(exc, "stderr", None) or b""
        if isinstance(out, bytes):
            out = out.decode("utf-8", "replace")
        raise BenchError("cannot take msrsync at revision %r from %s: %s" % (
            rev, REPO, (out.strip() or str(exc)).splitlines()[-1]))
    path = os.path.join(workdir, "msrsync-%s" % short)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o755)
    return path, short


def forget_compiled(path):
    """Remove the compiled code msrsync's loader cached for PATH (keyed by its device and
    inode, see the top of msrsync): the extracted copy is a new inode every time."""
    try:
        st = os.stat(path)
    except OSError:
        return
    home = os.environ.get("XDG_CACHE_HOME") or ""
    if not home.startswith("/"):
        home = os.path.join(os.path.expanduser("~"), ".cache")
    cache = os.path.join(home, "msrsync")
    prefix = "%d-%d." % (st.st_dev, st.st_ino)
    try:
        for name in os.listdir(cache):
            if name.startswith(prefix) and name.endswith(".pyc"):
                os.unlink(os.path.join(cache, name))
    except OSError:
        pass


# ---------------------------------------------------------------------------
# The timed runs
# ---------------------------------------------------------------------------

def make_tools(a, old_short):
    tools = [Tool("rsync, whole tree", "rsync", None, None),
             Tool("rsync, biggest file alone", "biggest", None, None)]
    for which, name in (("old", "msrsync %s" % old_short), ("new", "msrsync")):
        for size in a.bucket_sizes:
            label = "%s -p %d%s" % (name, a.procs, " -s %s" % size if size else "")
            tools.append(Tool(label, "msrsync", which, size))
    return tools


def tool_argv(tool, src, dst, a, paths, json_path, biggest):
    """The command line of TOOL.  PATHS: {"old": path, "new": path} of the msrsyncs."""
    opts = shlex.split(a.rsync_opts)
    msrsync_opts = a.rsync_opts
    if a.stream_rate:
        # one stream, one rsync: plain rsync gets the rate, msrsync -p P the rate
        # times P, which it shares out among its P rsyncs (its --bwlimit)
        opts += ["--bwlimit=%dK" % (a.stream_rate // 1024)]
        msrsync_opts += " --bwlimit=%dK" % (a.stream_rate * a.procs // 1024)
    if tool.kind == "rsync":
        return [a.rsync] + opts + [src.rstrip("/") + "/", dst.rstrip("/") + "/"]
    if tool.kind == "biggest":
        return [a.rsync] + opts + [os.path.join(src, biggest), dst.rstrip("/") + "/"]
    argv = command_prefix(paths[tool.which]) + ["-p", str(a.procs)]
    if tool.size:
        argv += ["-s", tool.size]
    if json_path:
        argv += ["--json", json_path]
    return argv + ["--rsync", msrsync_opts, src.rstrip("/") + "/", dst.rstrip("/") + "/"]


def shown_command(tool, a, old_short, biggest):
    paths = {"old": "msrsync-%s" % old_short, "new": "msrsync"}
    argv = tool_argv(tool, "SRC", "DST", a, paths, None, biggest)
    argv[0] = os.path.basename(argv[0])
    return "`%s`" % " ".join(shlex.quote(x) for x in argv)


class BigWatch(object):
    """Polls DIRECTORY every POLL_SECONDS while a run goes on: the first time each big
    file's name, or rsync's temporary .NAME.XXXXXX, is there is when its copy began."""

    def __init__(self, directory, names):
        self.directory, self.names = directory, list(names)
        self.seen = {}
        self.stop = threading.Event()
        self.t0 = None
        self.thread = threading.Thread(target=self._poll)
        self.thread.daemon = True

    def start(self):
        self.t0 = time.monotonic()
        self.thread.start()

    def _poll(self):
        while True:
            done = self.stop.is_set()       # one more look after the run ended
            try:
                present = os.listdir(self.directory)
            except OSError:
                present = []
            now = time.monotonic() - self.t0
            for entry in present:
                for name in self.names:
                    if name not in self.seen and (
                            entry == name or entry.startswith("." + name + ".")):
                        self.seen[name] = now
            if done or len(self.seen) == len(self.names):
                return
            self.stop.wait(POLL_SECONDS)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return [self.seen.get(n) for n in self.names]


def big_problems(dst, bigs):
    """How the big files BIGS ([relative path, size, sha256], ...) differ in DST."""
    problems = []
    for rel, size, digest in bigs:
        path = os.path.join(dst, rel)
        try:
            if os.path.getsize(path) != size:
                problems.append("%s: %d bytes, SRC %d" % (rel, os.path.getsize(path), size))
            elif sha256_of(path) != digest:
                problems.append("%s: sha256 differs from SRC's" % rel)
        except OSError as exc:
            problems.append("%s: %s" % (rel, exc))
    return problems


def check_dest(dst, kind, src, expected, facts, a, log_path):
    """What differs between DST and what it must hold; [] when it is right."""
    bigs = facts["big"]
    if kind == "biggest":
        rel, size, digest = bigs[0]
        name = os.path.basename(rel)
        try:
            present = sorted(os.listdir(dst))
        except OSError as exc:
            return ["cannot list DEST: %s" % exc]
        if present != [name]:
            return ["DEST holds %s, not %s alone" % (present[:5], name)]
        return big_problems(dst, [[name, size, digest]])

    def more(problems):
        out = []
        if not problems and manifest(dst) != facts["manifest"]:
            out.append("the paths, types, sizes, modes or mtimes differ from SRC's "
                       "(manifest digest)")
        return out + big_problems(dst, bigs)

    return compare_copy(src, dst, expected, a.rsync, a.verify, log_path, more=more)


def run_one(ctx, tool, rep, runs, failures):
    a, d = ctx["args"], ctx["dir"]
    log_path, json_path = run_paths(d, tool.label, rep, tool.kind == "msrsync")
    dst = os.path.join(d, "dst")
    t0 = time.monotonic()
    remove_tree(dst)
    if json_path:
        remove_tree(json_path)
    if tool.kind == "biggest":
        os.makedirs(dst)
    dropped = settle_caches(not a.no_drop_caches)
    prep = time.monotonic() - t0
    argv = tool_argv(tool, ctx["src"], dst, a, ctx["paths"], json_path, ctx["biggest"])
    bigs = [os.path.basename(rel) for rel, _, _ in ctx["facts"]["big"]]
    if tool.kind == "biggest":
        watch = BigWatch(dst, bigs[:1])
    else:
        watch = BigWatch(os.path.join(dst, BIG_DIR), bigs)
    watch.start()
    try:
        m = measure(argv, log_path, ctx["spawner"])
    finally:
        starts = watch.finish()
    summary = read_json(json_path) if json_path else None
    record = run_record({"rep": rep, "tool": tool.label, "kind": tool.kind,
                         "which": tool.which, "bucket_size": tool.size},
                        argv, m, dropped, prep, log_path)
    record.update({
        "big_started_s": starts,
        "buckets": summary.get("buckets_total") if summary else None,
        "rsync_processes": summary.get("rsync_processes") if summary else None,
        "handed_out_unwalked": summary.get("scan_handed_out_unwalked") if summary else None,
        "check": None,
    })
    problems = []
    if m.exit_code != 0:
        problems.append(exit_problem(m.exit_code, log_path))
    check = check_dest(dst, tool.kind, ctx["src"], ctx["expected"], ctx["facts"], a, log_path)
    record["check"] = "ok" if not check else "; ".join(check)
    problems += check
    if any(s is None for s in starts) and not check and m.exit_code == 0:
        # the copy was too quick for the poll to see it begin: the run counts
        record["big_started_note"] = "a big file's start was not seen (copied within %g s)" \
            % POLL_SECONDS
    record["ok"] = not problems
    record["problems"] = problems
    runs.append(record)
    seen = [s for s in starts if s is not None]
    log("rep %d  %-34s %7.2fs  cpu %6.2fs  big files started %s  buckets %s  %s  "
        "(prep %.1fs)" % (rep, tool.label, m.wall, m.user + m.sys,
                          "%.2f-%.2fs" % (min(seen), max(seen)) if seen else "?",
                          record["buckets"] if record["buckets"] is not None else "-",
                          "ok" if not problems else "FAILED", prep))
    note_failure(failures, "%s, rep %d" % (tool.label, rep), problems)
    return record


def run_tools(ctx, tools):
    """Round robin: at repetition r the order is rotated by r."""
    runs, failures = run_rounds(ctx, run_one, lambda rep: rotation(tools, rep))
    remove_tree(os.path.join(ctx["dir"], "dst"))
    return runs, failures


# ---------------------------------------------------------------------------
# Summary and table
# ---------------------------------------------------------------------------

def _first(run):
    seen = [s for s in run["big_started_s"] if s is not None]
    return min(seen) if seen else None


def _last(run):
    seen = [s for s in run["big_started_s"] if s is not None]
    return max(seen) if seen else None


def summarize(tools, runs, procs):
    rows = []
    for tool in tools:
        row, good = summary_row([r for r in runs if r["tool"] == tool.label],
                                {"tool": tool.label, "kind": tool.kind, "which": tool.which,
                                 "bucket_size": tool.size})
        if good:
            row.update({
                "cpu_s": statistics.median(r["cpu_s"] for r in good),
                "big_first_s": median_or_none(_first(r) for r in good),
                "big_last_s": median_or_none(_last(r) for r in good),
                "buckets": median_or_none(r["buckets"] for r in good),
                "handed_out_unwalked": median_or_none(r["handed_out_unwalked"]
                                                      for r in good),
            })
        rows.append(row)
    by_kind = dict((r["kind"], r) for r in rows if r["kind"] in ("rsync", "biggest"))
    total, big = by_kind.get("rsync"), by_kind.get("biggest")
    ideal = None
    if total and big and "median_s" in total and "median_s" in big:
        ideal = {"tool": "ideal = max(biggest alone, whole tree / %d)" % procs,
                 "kind": "ideal", "which": None, "bucket_size": None,
                 "median_s": max(big["median_s"], total["median_s"] / procs),
                 "computed": True}
        rows.insert(2, ideal)
    for row in rows:
        if "median_s" not in row:
            continue
        row["ratio_to_ideal"] = row["median_s"] / ideal["median_s"] if ideal else None
        row["ratio_to_rsync"] = (row["median_s"] / total["median_s"]
                                 if total and "median_s" in total else None)
    return rows


def find_outliers(runs, rows):
    return find_slow_runs(runs, rows, ("tool",), lambda r: r["tool"], OUTLIER_FACTOR)


def markdown_table(rows):
    head = ("| run | median s | min | max | x ideal | ratio to rsync | big files started, "
            "s (first-last) | buckets | CPU s |")
    out = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("computed"):
            out.append("| %s | %s | | | %s | %s | | | |" % (
                r["tool"], fmt_seconds(r["median_s"]), fmt_ratio(r["ratio_to_ideal"]),
                fmt_ratio(r["ratio_to_rsync"])))
            continue
        if "median_s" not in r:
            out.append("| %s | FAILED (%d/%d ok) | | | | | | | |" % (r["tool"], r["ok_runs"],
                                                                      r["runs"]))
            continue
        started = "-"
        if r.get("big_first_s") is not None:
            started = "%.2f-%.2f" % (r["big_first_s"], r["big_last_s"])
            if r["kind"] == "biggest":
                started = "%.2f" % r["big_first_s"]
        out.append("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["tool"], ok_note(r), fmt_seconds(r["median_s"]), fmt_seconds(r["min_s"]),
            fmt_seconds(r["max_s"]), fmt_ratio(r["ratio_to_ideal"]),
            fmt_ratio(r["ratio_to_rsync"]),
            started, "%g" % r["buckets"] if r.get("buckets") is not None else "-",
            fmt_seconds(r["cpu_s"])))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# One case, as suite.py runs it too
# ---------------------------------------------------------------------------

def versions_of(paths):
    """Each msrsync's --version (msrsync_version)."""
    return dict((which, msrsync_version(path)) for which, path in paths.items())


def run_case(a, workdir, spawner):
    """Build (or reuse) the tree in WORKDIR, take the old msrsync, run every tool; returns
    a dict: rows, runs, failures, outliers, table, lines (the notes above the table),
    about (the tree in a line), problems (--msrsync changed meanwhile: suite.py checks
    that itself), versions and digests."""
    require_msrsync(a.msrsync)
    old, short = extract_old(a.old_rev, workdir)
    paths = {"old": old, "new": a.msrsync}
    d = os.path.join(workdir, "runs", "longtail")
    try:
        versions = versions_of(paths)
        src, expected, facts = prepare_tree(a, workdir)
        make_run_dirs(d)
        biggest = facts["big"][0][0]
        ctx = {"args": a, "dir": d, "src": src, "expected": expected, "facts": facts,
               "paths": paths, "biggest": biggest, "spawner": spawner}
        tools = make_tools(a, short)
        old_sha, new_sha = file_digest(paths["old"]), file_digest(paths["new"])
        t0 = time.monotonic()
        runs, failures = run_tools(ctx, tools)
        seconds = time.monotonic() - t0
    finally:
        forget_compiled(paths["old"])
        remove_tree(paths["old"])
        remove_tree(os.path.join(d, "dst"))     # a DEST an error left
    problems = changed_since(a.msrsync, new_sha)
    rows = summarize(tools, runs, a.procs)
    cpus = os.cpu_count() or 1
    big = next((r for r in rows if r["kind"] == "biggest" and "median_s" in r), None)
    dropped = sum(1 for r in runs if r["cache_dropped"])
    same = old_sha == new_sha
    lines = [
        "commands: %s" % "; ".join(shown_command(t, a, short, biggest) for t in tools),
        "msrsync-%s: msrsync's file at git revision %s (%s, sha256 %s); msrsync: %s "
        "(sha256 %s)%s" % (short, a.old_rev, versions["old"], old_sha[:12], a.msrsync,
                           new_sha[:12],
                           "; the SAME file: both measure the same code" if same else ""),
        "ideal = max(the biggest file alone, the whole tree's rsync / %d): no schedule of "
        "%d rsyncs can beat it%s" % (
            a.procs, a.procs,
            "; this machine has %d CPUs, fewer than -p %d, and the biggest file's rsync "
            "alone kept %.2f of a CPU busy (CPU s / median s): where that is near 1, the "
            "whole tree / %d is out of reach here" % (
                cpus, a.procs, big["cpu_s"] / big["median_s"], a.procs)
            if cpus < a.procs and big else ""),
        "big files started: when each big file (or rsync's temporary .NAME.XXXXXX) first "
        "appeared in DEST, polled every %g s, medians of the first and of the last" %
        POLL_SECONDS,
        "%s; DEST removed untimed before each run; every DEST checked: counts, bytes, a "
        "digest of every entry's path, type, size, mode and mtime, the sha256 of each big "
        "file%s" % (
            "page cache dropped before %d of %d runs" % (dropped, len(runs)) if dropped else
            "page cache kept (%s): SRC may be read from memory" % (
                "--no-drop-caches" if a.no_drop_caches else "not root, cannot drop it"),
            " and rsync -ain --delete" if a.verify else ""),
    ]
    return {"rows": rows, "runs": runs, "failures": failures, "problems": problems,
            "outliers": find_outliers(runs, rows), "table": markdown_table(rows),
            "lines": lines, "about": describe_tree(a, expected), "old_rev": short,
            "old_sha256": old_sha, "msrsync_sha256": new_sha, "versions": versions,
            "same_code": same, "seconds": seconds, "cache_dropped": dropped}


# ---------------------------------------------------------------------------
# Command line and main
# ---------------------------------------------------------------------------

def parse_bucket_sizes(text):
    out = []
    for v in text.split(","):
        v = v.strip()
        if not v:
            continue
        if v == "default":
            out.append(None)
        else:
            parse_size(v)           # fails early on a typo
            out.append(v)
    if not out:
        raise argparse.ArgumentTypeError("expected default and/or sizes: %r" % text)
    return out


def parse_args(argv):
    p = script_parser("longtail.py", __doc__, [
        "python3 bench/longtail.py",
        "python3 bench/longtail.py --quick",
        "python3 bench/longtail.py --old-rev HEAD~3 --bucket-sizes default,128M",
        "python3 bench/longtail.py --workdir /var/tmp/lt --json lt.json"])
    add_quick_option(p, QUICK)
    p.add_argument("--small", type=positive_int, metavar="N",
                   help="small files [%d, quick %d]" % (FULL["small"], QUICK["small"]))
    p.add_argument("--small-size", type=parse_size, default=16384, metavar="SIZE",
                   help="bytes of each small file, K/M/G [16K]")
    p.add_argument("--dirs", type=positive_int, default=100, metavar="N",
                   help="directories of the small files, d000.. [100]")
    p.add_argument("--big-count", type=positive_int, default=3, metavar="K",
                   help="big files, in %s/ [3]" % BIG_DIR)
    p.add_argument("--big-size", type=parse_size, metavar="SIZE",
                   help="bytes of each big file, K/M/G [%s, quick %s]"
                   % (FULL["big_size"], QUICK["big_size"]))
    p.add_argument("--procs", type=positive_int, default=4, metavar="P",
                   help="msrsync -p, and the ideal's share of the whole tree [4]")
    p.add_argument("--bucket-sizes", type=parse_bucket_sizes, default=[None, "64M"],
                   metavar="LIST", help="the msrsync runs: 'default' (its own caps, no -f "
                                        "or -s) and sizes for -s [default,64M]")
    p.add_argument("--old-rev", default=DEFAULT_OLD_REV, metavar="REV",
                   help="git revision of the msrsync to compare with [%s]" % DEFAULT_OLD_REV)
    add_tool_options(p, DEFAULT_MSRSYNC)
    p.add_argument("--rsync-opts", default=RSYNC_OPTS, metavar="OPTS",
                   help="rsync options of every run; msrsync gets --rsync OPTS [%s]"
                   % RSYNC_OPTS)
    p.add_argument("--stream-rate", type=lambda t: 0 if t.strip() == "0" else parse_size(t),
                   metavar="RATE", help="bytes a second of each rsync (a stream): plain "
                   "rsync runs with --bwlimit=RATE, msrsync -p P with --bwlimit=P*RATE, "
                   "which it shares out, RATE to each of its rsyncs; 0: no limit, where the "
                   "machine's cores and disk, not the schedule, decide [%s, quick %s]"
                   % (FULL["stream_rate"], QUICK["stream_rate"]))
    p.add_argument("--reps", type=positive_int,
                   help="repetitions [%d, quick %d]" % (FULL["reps"], QUICK["reps"]))
    add_run_options(p, DEFAULT_SEED, "also rsync -ain --delete SRC/ DST/ after each run")
    args = p.parse_args(argv)
    fill_sizes(args, FULL, QUICK)
    return args


def run(a):
    env, res, failed, logs, _ = run_case_alone(
        a, "longtail", LONGTAIL_VERSION, space_needed(a), "the tree and a DEST", run_case,
        lambda res: {"msrsync": res["versions"]["new"],
                     "msrsync_sha256": res["msrsync_sha256"], "old_rev": res["old_rev"],
                     "old_msrsync": res["versions"]["old"],
                     "old_sha256": res["old_sha256"]})
    print_header_start("msrsync benchmark: long tail, big files found last", env,
                       tree="%s, seed %d" % (res["about"], a.seed))
    print("- %d repetition(s), runs interleaved round-robin, medians; -p %d; rsync options "
          "`%s`" % (a.reps, a.procs, a.rsync_opts))
    print("- x ideal = median / the ideal's; ratio to rsync = median / plain rsync's median "
          "for the whole tree, in the same run (below 1 is faster); CPU s = user+system of "
          "the tool and all its children (os.wait4)")
    return report_case(a, env, "longtail", "Long tail: big files found last", res, failed,
                       logs, OUTLIER_FACTOR, "%.0f s" % res["seconds"])


def main(argv=None):
    return run_main("longtail.py", run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
