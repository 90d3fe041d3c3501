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
import json
import os
import platform
import random
import shlex
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (MiB, BenchError, Spawner, add_run_options, cached_tree,  # noqa: E402
                    command_prefix, count_tree, cpu_model, describe_exit, file_digest,
                    filesystem_note, filesystem_of, first_line_of, fmt_load, fmt_seconds,
                    loadavg, log, measure, mem_available, parse_size, positive_int,
                    print_header_end, print_results, print_workdir, random_block,
                    remove_tree, report_end, run_main, settle_caches, tail, write_slices)

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
    and mtime in seconds, sorted by path.  Two trees with the same digest hold the same
    names, types, sizes, permissions and times."""
    lines = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            for entry in it:
                name = rel + "/" + entry.name if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    kind, size = "d", 0
                    stack.append(name)
                elif stat.S_ISREG(st.st_mode):
                    kind, size = "f", st.st_size
                else:
                    kind, size = "o", 0
                lines.append("%s\0%s\0%d\0%o\0%d" % (name, kind, size,
                                                     stat.S_IMODE(st.st_mode),
                                                     int(st.st_mtime)))
    lines.sort()
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


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
                format(a.small, ","), human(a.small_size), a.dirs, names[0], names[-1],
                a.big_count, human(a.big_size), BIG_DIR, count.bytes / float(MiB)))


def human(nbytes):
    """4 KiB, 256 MiB, 1.5 GiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if nbytes >= size:
            if nbytes % size == 0:
                return "%d %s" % (nbytes // size, unit)
            return "%.1f %s" % (nbytes / float(size), unit)
    return "%d bytes" % nbytes


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


def check_dest(dst, kind, src, expected, facts, a, log_path):
    """What differs between DST and what it must hold; [] when it is right."""
    problems = []
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
        path = os.path.join(dst, name)
        if os.path.getsize(path) != size:
            problems.append("%s: %d bytes, SRC %d" % (name, os.path.getsize(path), size))
        elif sha256_of(path) != digest:
            problems.append("%s: sha256 differs from SRC's" % name)
        return problems
    try:
        got = count_tree(dst)
    except OSError as exc:
        return ["cannot walk DEST: %s" % exc]
    for field in ("files", "dirs", "symlinks", "bytes"):
        if getattr(got, field) != getattr(expected, field):
            problems.append("%s: DEST %d, SRC %d" % (field, getattr(got, field),
                                                    getattr(expected, field)))
    if not problems and manifest(dst) != facts["manifest"]:
        problems.append("the paths, types, sizes, modes or mtimes differ from SRC's "
                        "(manifest digest)")
    for rel, size, digest in bigs:
        path = os.path.join(dst, rel)
        try:
            if os.path.getsize(path) != size:
                problems.append("%s: %d bytes, SRC %d" % (rel, os.path.getsize(path), size))
            elif sha256_of(path) != digest:
                problems.append("%s: sha256 differs from SRC's" % rel)
        except OSError as exc:
            problems.append("%s: %s" % (rel, exc))
    if a.verify:
        argv = [a.rsync, "-ain", "--delete", src.rstrip("/") + "/", dst.rstrip("/") + "/"]
        try:
            out = subprocess.check_output(argv, stderr=subprocess.STDOUT)
        except subprocess.CalledProcessError as exc:
            out = exc.output + ("\n(rsync exited %d)" % exc.returncode).encode()
        if out.strip():
            lines = out.decode("utf-8", "replace").splitlines()
            problems.append("rsync -ain --delete lists %d difference(s), e.g. %s"
                            % (len(lines), "; ".join(lines[:3])))
            with open(log_path, "ab") as f:
                f.write(b"--- verify differences ---\n" + out)
    return problems


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_one(ctx, tool, rep, runs, failures):
    a, d = ctx["args"], ctx["dir"]
    slug = "".join(c if c.isalnum() or c in ".-" else "_" for c in tool.label)
    log_path = os.path.join(d, "logs", "%s-rep%d.log" % (slug, rep))
    json_path = os.path.join(d, "json", "%s-rep%d.json" % (slug, rep)) \
        if tool.kind == "msrsync" else None
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
    record = {
        "rep": rep, "tool": tool.label, "kind": tool.kind, "which": tool.which,
        "bucket_size": tool.size, "argv": argv, "wall_s": m.wall, "cpu_user_s": m.user,
        "cpu_sys_s": m.sys, "cpu_s": m.user + m.sys, "maxrss_kib": m.maxrss_kib,
        "exit_code": m.exit_code, "cache_dropped": dropped, "untimed_prep_s": prep,
        "loadavg_after": loadavg(), "log": log_path, "big_started_s": starts,
        "buckets": summary.get("buckets_total") if summary else None,
        "rsync_processes": summary.get("rsync_processes") if summary else None,
        "handed_out_unwalked": summary.get("scan_handed_out_unwalked") if summary else None,
        "check": None,
    }
    problems = []
    if m.exit_code != 0:
        problems.append("%s; last lines of %s:\n%s" % (describe_exit(m.exit_code), log_path,
                                                      tail(log_path)))
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
    if problems:
        failures.append("%s, rep %d: %s" % (tool.label, rep, "; ".join(problems)))
        log("  " + "; ".join(problems).replace("\n", "\n  "))
    return record


def run_tools(ctx, tools):
    """Round robin: at repetition r the order is rotated by r."""
    a = ctx["args"]
    runs, failures = [], []
    for rep in range(1, a.reps + 1):
        k = (rep - 1) % len(tools)
        order = tools[k:] + tools[:k]
        log("repetition %d/%d" % (rep, a.reps))
        for tool in order:
            run_one(ctx, tool, rep, runs, failures)
    remove_tree(os.path.join(ctx["dir"], "dst"))
    return runs, failures


# ---------------------------------------------------------------------------
# Summary and table
# ---------------------------------------------------------------------------

def _median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _first(run):
    seen = [s for s in run["big_started_s"] if s is not None]
    return min(seen) if seen else None


def _last(run):
    seen = [s for s in run["big_started_s"] if s is not None]
    return max(seen) if seen else None


def summarize(tools, runs, procs):
    rows = []
    for tool in tools:
        mine = [r for r in runs if r["tool"] == tool.label]
        good = [r for r in mine if r["ok"]]
        row = {"tool": tool.label, "kind": tool.kind, "which": tool.which,
               "bucket_size": tool.size, "runs": len(mine), "ok_runs": len(good)}
        if good:
            walls = [r["wall_s"] for r in good]
            row.update({
                "median_s": statistics.median(walls), "min_s": min(walls),
                "max_s": max(walls), "cpu_s": statistics.median(r["cpu_s"] for r in good),
                "big_first_s": _median_or_none(_first(r) for r in good),
                "big_last_s": _median_or_none(_last(r) for r in good),
                "buckets": _median_or_none(r["buckets"] for r in good),
                "handed_out_unwalked": _median_or_none(r["handed_out_unwalked"]
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
    medians = dict((r["tool"], r["median_s"]) for r in rows if "median_s" in r)
    out = []
    for run in runs:
        median = medians.get(run["tool"])
        if run["ok"] and median and run["wall_s"] > OUTLIER_FACTOR * median:
            out.append("%s, rep %d: %.2f s (median %.2f s), CPU %.2f s, log %s"
                       % (run["tool"], run["rep"], run["wall_s"], median, run["cpu_s"],
                          run["log"]))
    return out


def markdown_table(rows):
    head = ("| run | median s | min | max | x ideal | ratio to rsync | big files started, "
            "s (first-last) | buckets | CPU s |")
    out = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    f2 = lambda v: "%.2f" % v if v is not None else "-"    # noqa: E731
    for r in rows:
        if r.get("computed"):
            out.append("| %s | %s | | | %s | %s | | | |" % (
                r["tool"], fmt_seconds(r["median_s"]), f2(r["ratio_to_ideal"]),
                f2(r["ratio_to_rsync"])))
            continue
        if "median_s" not in r:
            out.append("| %s | FAILED (%d/%d ok) | | | | | | | |" % (r["tool"], r["ok_runs"],
                                                                      r["runs"]))
            continue
        note = "" if r["ok_runs"] == r["runs"] else " (%d/%d ok)" % (r["ok_runs"], r["runs"])
        started = "-"
        if r.get("big_first_s") is not None:
            started = "%.2f-%.2f" % (r["big_first_s"], r["big_last_s"])
            if r["kind"] == "biggest":
                started = "%.2f" % r["big_first_s"]
        out.append("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["tool"], note, fmt_seconds(r["median_s"]), fmt_seconds(r["min_s"]),
            fmt_seconds(r["max_s"]), f2(r["ratio_to_ideal"]), f2(r["ratio_to_rsync"]),
            started, "%g" % r["buckets"] if r.get("buckets") is not None else "-",
            fmt_seconds(r["cpu_s"])))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# One case, as suite.py runs it too
# ---------------------------------------------------------------------------

def versions_of(paths):
    """Each msrsync's --version, which also caches its compiled code: a broken one stops
    the benchmark before the tree is built."""
    return dict((which, first_line_of(command_prefix(path) + ["--version"], required=True))
                for which, path in paths.items())


def run_case(a, workdir, spawner):
    """Build (or reuse) the tree in WORKDIR, take the old msrsync, run every tool; returns
    a dict: rows, runs, failures, outliers, table, lines (the notes above the table),
    about (the tree in a line), problems (--msrsync changed meanwhile: suite.py checks
    that itself), versions and digests."""
    if not os.path.exists(a.msrsync):
        raise BenchError("msrsync not found: %s (--msrsync PATH)" % a.msrsync)
    old, short = extract_old(a.old_rev, workdir)
    paths = {"old": old, "new": a.msrsync}
    try:
        versions = versions_of(paths)
        src, expected, facts = prepare_tree(a, workdir)
        d = os.path.join(workdir, "runs", "longtail")
        for sub in ("logs", "json"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
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
    problems = []
    if file_digest(a.msrsync) != new_sha:
        problems.append("%s changed while the benchmark ran: the figures mix versions"
                        % a.msrsync)
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
    p = argparse.ArgumentParser(
        prog="longtail.py", description=__doc__.split("\n\n")[0],
        epilog="examples:\n"
               "  python3 bench/longtail.py\n"
               "  python3 bench/longtail.py --quick\n"
               "  python3 bench/longtail.py --old-rev HEAD~3 --bucket-sizes default,128M\n"
               "  python3 bench/longtail.py --workdir /var/tmp/lt --json lt.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes and 1 repetition: %s" % ", ".join(
                       "%s %s" % (k, v) for k, v in sorted(QUICK.items())))
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
    p.add_argument("--msrsync", default=DEFAULT_MSRSYNC, metavar="PATH",
                   help="msrsync to test [../msrsync next to this script]")
    p.add_argument("--rsync", default="rsync", metavar="PATH",
                   help="rsync binary of the plain runs (msrsync runs rsync from PATH) "
                        "[rsync]")
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
    sizes = QUICK if args.quick else FULL
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, parse_size(value) if isinstance(value, str) else value)
    if args.workdir:
        args.workdir = os.path.abspath(args.workdir)
    return args


def environment(a, workdir):
    mnt, fstype = filesystem_of(workdir)
    return {
        "longtail_version": LONGTAIL_VERSION, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "python": sys.version.split()[0],
        "rsync": first_line_of([a.rsync, "--version"], required=True),
        "msrsync_path": os.path.abspath(a.msrsync), "workdir": workdir,
        "filesystem": fstype, "mount": mnt, "filesystem_note": filesystem_note(workdir),
        "euid": os.geteuid(), "mem_available": mem_available(), "loadavg_start": loadavg(),
    }


def run(a):
    if a.workdir:
        os.makedirs(a.workdir, exist_ok=True)
        workdir, owned = a.workdir, False
    else:
        base = "/var/tmp"
        st = os.statvfs(base)
        if st.f_bavail * st.f_frsize < space_needed(a):
            raise BenchError("%s has %.1f GiB free, the tree and a DEST need about %.1f GiB "
                             "(--workdir DIR elsewhere, or smaller sizes)" % (
                                 base, st.f_bavail * st.f_frsize / float(1 << 30),
                                 space_needed(a) / float(1 << 30)))
        workdir, owned = tempfile.mkdtemp(prefix="msrsync-longtail-", dir=base), True
    env = environment(a, workdir)
    spawner = Spawner()
    res, failed = None, True
    try:
        res = run_case(a, workdir, spawner)
        failed = bool(res["failures"])
    finally:
        keep_logs = failed or bool(res and res["outliers"])
        runs_dir = os.path.join(workdir, "runs")
        remove_tree(os.path.join(runs_dir, "longtail", "dst"))
        if owned and not a.keep:
            if keep_logs and os.path.isdir(runs_dir):   # only the logs, to read
                for name in os.listdir(workdir):
                    if name != "runs":
                        remove_tree(os.path.join(workdir, name))
            else:
                remove_tree(workdir)
    env.update({"msrsync": res["versions"]["new"], "msrsync_sha256": res["msrsync_sha256"],
                "old_rev": res["old_rev"], "old_msrsync": res["versions"]["old"],
                "old_sha256": res["old_sha256"], "loadavg_end": loadavg()})
    print("# msrsync benchmark: long tail, big files found last (%s)" % env["date"])
    print()
    print("- machine: %d CPUs (%s), kernel %s, host %s, %.1f GiB of memory available" % (
        env["cpus"], env["cpu_model"], env["kernel"], env["host"],
        env["mem_available"] / float(1 << 30)))
    print("- %s; msrsync %s (%s, sha256 %s); Python %s" % (
        env["rsync"], env["msrsync"].split()[-1], env["msrsync_path"],
        res["msrsync_sha256"][:12], env["python"]))
    print_workdir(env)
    print("- tree: %s, seed %d" % (res["about"], a.seed))
    print("- %d repetition(s), runs interleaved round-robin, medians; -p %d; rsync options "
          "`%s`" % (a.reps, a.procs, a.rsync_opts))
    print("- x ideal = median / the ideal's; ratio to rsync = median / plain rsync's median "
          "for the whole tree, in the same run (below 1 is faster); CPU s = user+system of "
          "the tool and all its children (os.wait4)")
    print_header_end(env)
    print("## Long tail: big files found last — %s" % res["about"])
    print_results({"skipped": None, "lines": res["lines"], "table": res["table"],
                   "outliers": res["outliers"], "failures": res["failures"]},
                  OUTLIER_FACTOR, ["%.0f s; load average at start %s, at end %s" % (
                      res["seconds"], fmt_load(env["loadavg_start"]),
                      fmt_load(env["loadavg_end"]))])
    logs = os.path.join(workdir, "runs") if owned and not a.keep and keep_logs else None
    report_end(a, env, [{"section": "longtail", "title": res["about"], "rows": res["rows"],
                         "runs": res["runs"], "failures": res["failures"],
                         "outliers": res["outliers"]}], res["problems"], logs)
    return 1 if failed or res["problems"] else 0


def main(argv=None):
    return run_main("longtail.py", run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
