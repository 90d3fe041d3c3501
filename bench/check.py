#!/usr/bin/env python3
"""--check: verifying a copy, msrsync --check -p P against rsync -n -i --delete.

Needs Python 3.6+ (standard library only), Linux and rsync.  The page cache is kept
warm: nothing is dropped, and an untimed reference run of each check reads SRC and DEST
before the timed runs (--cold drops the cache before every run instead, as root).

The tree (seeded, the same on every Python version): --files small files of 0-8 KiB in
bench.py's layout (100,000; about 50 a directory, d00..d39/s000..), plus --big-count
files of --big-size (64 of 16 MiB, random bytes) spread over its leaf directories.  It
is copied once, untimed, with rsync -a to DEST, and DEST is then changed in known ways
(the directories' mtimes put back after each change):

  content   10 files rewritten in place with the same size and mtime (a byte flipped;
            2 of them big files): only a -c check finds them
  time      10 files whose mtime is moved an hour later (2 of them big)
  missing    5 files removed
  extra      5 files added

Timed, each --reps times (3), interleaved (the order rotates at every repetition), on
the disk of the work directory (/var/tmp), with OPTS = --rsync-opts (-a):

  quick check     rsync OPTS -n -i --delete SRC/ DST/
                  msrsync --check -p P --rsync "OPTS" SRC/ DST/       P in --procs (1,2,4)
  content check   the same with OPTS -c

Every run is verified, so that a broken run cannot look fast: rsync exits 0 and msrsync
44; the item lines of its stdout, sorted, equal those of the untimed reference rsync
run (rsync's other lines dropped; msrsync's stdout must hold nothing else), which must
itself find exactly the changes made (the quick check the 20 others than content, -c all
30); msrsync's count line on stderr reads as many identical, differing, missing and
extra entries as expected; and DEST is unchanged: a digest of every entry's path, type,
size, mode and mtime (in ns) after each run equals the one taken before.  The table
gives the medians and the ratio to plain rsync's median for the same check.

    python3 bench/check.py                       # 100,000 files + 64 x 16 MiB, 3 reps
    python3 bench/check.py --quick               # 10,000 files + 8 x 8 MiB, 1 rep
    python3 bench/check.py --checks content --procs 2,4 --reps 5
"""

import argparse
import collections
import os
import random
import re
import shlex
import stat
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import MiB, BenchError, add_quick_option, add_run_options  # noqa: E402
from common import add_tool_options, build_dataset, cached_tree, changed_since  # noqa: E402
from common import command_prefix, dataset_layout, describe_exit, exit_problem  # noqa: E402
from common import file_digest, fill_sizes, find_slow_runs, fmt_ratio  # noqa: E402
from common import fmt_seconds, human_size, log, make_run_dirs, measure  # noqa: E402
from common import median_or_none, mib, msrsync_version, note_failure, ok_note  # noqa: E402
from common import parse_int_list, parse_size, positive_int  # noqa: E402
from common import print_header_start, random_block, read_json, remove_tree  # noqa: E402
from common import report_case, require_msrsync, rotation, run_case_alone  # noqa: E402
from common import run_main, run_paths, run_record, run_rounds, script_parser  # noqa: E402
from common import settle_caches, summary_row, tree_digest, write_slices  # noqa: E402

CHECK_VERSION = "1.0"
REPO = os.path.dirname(HERE)
DEFAULT_MSRSYNC = os.path.join(REPO, "msrsync")
DEFAULT_SEED = 20240601 + 70      # bench.py's seed + 70, as suite.py seeds its section i
RSYNC_OPTS = "-a"
OUTLIER_FACTOR = 2.0
# full and --quick sizes; an option given on the command line wins over both
FULL = {"files": 100000, "big_count": 64, "big_size": "16M", "reps": 3}
QUICK = {"files": 10000, "big_count": 8, "big_size": "8M", "reps": 1}
# the changes made to DEST: how many of each, and how many of those in big files
CHANGES = collections.OrderedDict([("content", 10), ("time", 10), ("missing", 5),
                                   ("extra", 5)])
BIG_CHANGES = 2                   # of the content and of the time changes, when there are
TIME_SHIFT_NS = 3600 * 10 ** 9    # a touched file's mtime, an hour later
CHECKS = collections.OrderedDict([("quick", ""), ("content", "-c")])   # name: added option
# which kinds of change each check must find (a quick check cannot see content)
FINDS = {"quick": ("time", "missing", "extra"),
         "content": ("content", "time", "missing", "extra")}
# the item lines of rsync -i: YXcstpoguax and the name, or *deleting and the name
ITEM_RE = re.compile(r"^([<>ch.][fdLDS][-.+ ?a-zA-Z]{9}|\*deleting  ) (.*)$")
COUNT_RE = re.compile(r"^msrsync: check: (\d+) identical, (\d+) differing, (\d+) missing, "
                      r"(\d+) extra$", re.M)
# the tool's stdout goes to a file of its own (its stderr to the log): exec keeps the
# pid, so the measured process is the tool itself
STDOUT_TO = ["/bin/sh", "-c", 'out=$1; shift; exec "$@" >"$out"', "sh"]

# One timed command: label (the table's), check (quick, content), kind (rsync,
# msrsync), procs (msrsync's -p, None for rsync).
Tool = collections.namedtuple("Tool", "label check kind procs")


# ---------------------------------------------------------------------------
# The tree, DEST and its changes
# ---------------------------------------------------------------------------

def leaf_dirs(files):
    tops, subs = dataset_layout(files)
    return ["d%02d/s%03d" % (t, s) for t in range(tops) for s in range(subs)]


def build_tree(root, files, big_count, big_size, seed):
    """bench.py's FILES small files, then BIG_COUNT files of BIG_SIZE bytes (slices of one
    random 64 MiB block) spread over the leaf directories.  Returns the facts kept with
    it: {"big": [relative path, ...]}."""
    build_dataset(root, files, seed)
    leaves = leaf_dirs(files)
    rng = random.Random(seed + 1)
    block = random_block(rng, 64 * MiB) if big_count else b""
    bigs = []
    for n in range(big_count):
        rel = "%s/big%03d.bin" % (leaves[(n * 7) % len(leaves)], n)
        with open(os.path.join(root, rel), "wb") as f:
            write_slices(f, big_size, rng, block, 1 * MiB, 4 * MiB)
        bigs.append(rel)
    return {"big": bigs}


def manifest(root):
    """sha256 over every entry below ROOT (root itself too, as "."): relative path, type,
    size for files, mode and mtime in ns, sorted by path."""
    return tree_digest(root, ns=True, with_root=True)


def regular_files(root):
    """[(relative path, size)] of ROOT's regular files, sorted by path."""
    out = []
    for dirpath, _, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode):
                out.append((name if rel == "." else rel + "/" + name, st.st_size))
    out.sort()
    return out


class KeepMtime(object):
    """Puts PATH's atime and mtime (ns) back on leaving: a change below a directory must
    not show up as the directory's own difference."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.st = os.stat(self.path)

    def __exit__(self, *exc):
        os.utime(self.path, ns=(self.st.st_atime_ns, self.st.st_mtime_ns))


def change_dest(src, dst, files, bigs, seed):
    """Make CHANGES in DST (a copy of SRC).  Returns {kind: sorted relative paths}."""
    rng = random.Random(seed + 2)
    big_set = set(bigs)
    small = [rel for rel, size in regular_files(src) if size > 0 and rel not in big_set]
    nbig = min(BIG_CHANGES, len(bigs) // 2)
    want = CHANGES["content"] + CHANGES["time"] + CHANGES["missing"] - 2 * nbig
    if len(small) < want:
        raise BenchError("the tree has %d non-empty small files, the changes need %d "
                         "(--files)" % (len(small), want))
    big_pick = rng.sample(sorted(bigs), 2 * nbig)
    small_pick = rng.sample(small, want)
    done = {}
    done["content"] = big_pick[:nbig] + small_pick[:CHANGES["content"] - nbig]
    small_pick = small_pick[CHANGES["content"] - nbig:]
    done["time"] = big_pick[nbig:] + small_pick[:CHANGES["time"] - nbig]
    small_pick = small_pick[CHANGES["time"] - nbig:]
    done["missing"] = small_pick[:CHANGES["missing"]]
    leaves = rng.sample(leaf_dirs(files), min(CHANGES["extra"], len(leaf_dirs(files))))
    done["extra"] = ["%s/extra%d.dat" % (leaves[i % len(leaves)], i)
                     for i in range(CHANGES["extra"])]
    for rel in done["content"]:
        path = os.path.join(dst, rel)
        with KeepMtime(path):
            size = os.path.getsize(path)
            with open(path, "r+b") as f:
                f.seek(rng.randrange(size))
                byte = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([byte[0] ^ 0xFF]))
    for rel in done["time"]:
        path = os.path.join(dst, rel)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + TIME_SHIFT_NS))
    for rel in done["missing"]:
        path = os.path.join(dst, rel)
        with KeepMtime(os.path.dirname(path)):
            os.unlink(path)
    for rel in done["extra"]:
        path = os.path.join(dst, rel)
        with KeepMtime(os.path.dirname(path)):
            with open(path, "wb") as f:
                f.write(random_block(rng, 1 + rng.getrandbits(13)))
    return dict((k, sorted(v)) for k, v in done.items())


def prepare(a, workdir):
    """SRC in WORKDIR/check-src and DEST in WORKDIR/check-dst (both reused from a
    --workdir when built with the same parameters and, for DEST, still the same digest).
    Returns a dict: src, dst, count (SRC's TreeCount), bigs, changes, src_digest,
    dst_digest."""
    params = {"files": a.files, "big_count": a.big_count, "big_size": a.big_size,
              "seed": a.seed, "kind": "check-src", "check_version": CHECK_VERSION}

    def build_src(path):
        return build_tree(path, a.files, a.big_count, a.big_size, a.seed)

    src, count, facts = cached_tree(workdir, "check-src", params, build_src)
    src_digest = manifest(src)
    dparams = {"src": params, "src_digest": src_digest,
               "changes": [[k, v] for k, v in CHANGES.items()], "big_changes": BIG_CHANGES,
               "kind": "check-dst", "check_version": CHECK_VERSION}

    def build_dst(path):
        log("copying SRC to DEST (rsync -a), then changing DEST")
        subprocess.check_call([a.rsync, "-a", src + "/", path + "/"])
        changes = change_dest(src, path, a.files, facts["big"], a.seed)
        return {"changes": changes, "digest": manifest(path)}

    dst, _, dfacts = cached_tree(workdir, "check-dst", dparams, build_dst)
    dst_digest = manifest(dst)
    if dst_digest != dfacts["digest"]:
        log("DEST changed since it was made: made again")
        remove_tree(dst)
        dst, _, dfacts = cached_tree(workdir, "check-dst", dparams, build_dst)
        dst_digest = manifest(dst)
    return {"src": src, "dst": dst, "count": count, "bigs": facts["big"],
            "changes": dfacts["changes"], "src_digest": src_digest,
            "dst_digest": dst_digest}


def describe_tree(a, count):
    small = count.bytes - a.big_count * a.big_size
    bigs = " and %d of %s (random bytes)" % (a.big_count, human_size(a.big_size)) \
        if a.big_count else ""
    return ("%s files of 0-8 KiB (%.0f MiB)%s in %s directories, %s in all" % (
        format(a.files, ","), small / float(MiB), bigs, format(count.dirs, ","),
        human_size(count.bytes)))


def describe_changes(changes, bigs):
    big_set = set(bigs)
    nbig = dict((k, sum(1 for p in v if p in big_set)) for k, v in changes.items())
    return ("DEST: SRC copied once with `rsync -a` (untimed), then changed: %d files "
            "rewritten in place with the same size and mtime, a byte flipped (%d of them "
            "big), %d mtimes moved an hour later (%d big), %d files removed, %d extra "
            "files added; the directories' mtimes put back" % (
                len(changes["content"]), nbig["content"], len(changes["time"]),
                nbig["time"], len(changes["missing"]), len(changes["extra"])))


def space_needed(a):
    """Bytes of SRC and DEST, small files rounded up to 4 KiB blocks, plus a margin."""
    small = a.files * 6 * 1024 + (a.files // 50) * 4096
    return 2 * (small + a.big_count * a.big_size) + 256 * MiB


# ---------------------------------------------------------------------------
# Item lines and what they must be
# ---------------------------------------------------------------------------

def split_items(text):
    """(item lines, other lines) of rsync -i output TEXT."""
    items, others = [], []
    for line in text.splitlines():
        (items if ITEM_RE.match(line) else others).append(line)
    return items, others


def classify(item):
    """Which change an item string stands for: extra, missing, content, time or other."""
    if item.startswith("*deleting"):
        return "extra"
    if item[2:] == "+" * 9:
        return "missing"
    if item[2] == "c":
        return "content"
    if item[4] == "t":
        return "time"
    return "other"


def found_changes(items):
    """{kind: sorted paths} of the item lines ITEMS."""
    out = collections.defaultdict(list)
    for line in items:
        m = ITEM_RE.match(line)
        out[classify(m.group(1))].append(m.group(2))
    return dict((k, sorted(v)) for k, v in out.items())


def expected_changes(check, changes):
    return dict((k, changes[k]) for k in FINDS[check] if changes[k])


def differ(found, expected):
    """What FOUND ({kind: paths}) lacks or has more than EXPECTED, in a line; None when
    they are the same."""
    out = []
    for kind in sorted(set(found) | set(expected)):
        f, e = set(found.get(kind, ())), set(expected.get(kind, ()))
        if f - e:
            out.append("%s: %d unexpected (%s)" % (kind, len(f - e), ", ".join(sorted(f - e)[:3])))
        if e - f:
            out.append("%s: %d not found (%s)" % (kind, len(e - f), ", ".join(sorted(e - f)[:3])))
    return "; ".join(out) or None


def reference(a, check, data):
    """The untimed reference run of CHECK by plain rsync (it also warms the page cache):
    its sorted item lines, which must find exactly the changes made to DEST."""
    argv = rsync_argv(a, check, data["src"], data["dst"])
    log("reference run: %s" % " ".join(shlex.quote(x) for x in argv))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.decode("utf-8", "surrogateescape")
    if proc.returncode != 0:
        raise BenchError("the reference run %s: %s: %s" % (
            " ".join(argv[:-2]), describe_exit(proc.returncode),
            proc.stderr.decode("utf-8", "replace").strip()[-300:]))
    items, _ = split_items(out)
    wrong = differ(found_changes(items), expected_changes(check, data["changes"]))
    if wrong:
        raise BenchError("the reference run %s does not find the changes made to DEST: %s"
                         % (" ".join(argv[:-2]), wrong))
    return sorted(items)


# ---------------------------------------------------------------------------
# The timed runs
# ---------------------------------------------------------------------------

def check_opts(a, check):
    return (a.rsync_opts + " " + CHECKS[check]).strip()


def rsync_argv(a, check, src, dst):
    return [a.rsync] + shlex.split(check_opts(a, check)) + [
        "-n", "-i", "--delete", src.rstrip("/") + "/", dst.rstrip("/") + "/"]


def make_tools(a):
    tools = []
    for check in a.checks:
        tools.append(Tool("rsync", check, "rsync", None))
        for p in a.procs:
            tools.append(Tool("msrsync -p %d" % p, check, "msrsync", p))
    return tools


def tool_argv(tool, a, src, dst, json_path):
    if tool.kind == "rsync":
        return rsync_argv(a, tool.check, src, dst)
    argv = command_prefix(a.msrsync) + ["--check", "-p", str(tool.procs)]
    if json_path:
        argv += ["--json", json_path]
    return argv + ["--rsync", check_opts(a, tool.check), src.rstrip("/") + "/",
                   dst.rstrip("/") + "/"]


def shown_command(tool, a):
    argv = tool_argv(tool, a, "SRC", "DST", None)
    if tool.kind == "msrsync":
        argv = ["msrsync"] + argv[len(command_prefix(a.msrsync)):]
    else:
        argv[0] = os.path.basename(argv[0])
    shown = []
    for i, x in enumerate(argv):
        if i and argv[i - 1] == "--rsync" and not any(c in x for c in "\"$`\\!"):
            shown.append('"%s"' % x)     # as a user writes it
        else:
            shown.append(shlex.quote(x))
    return "`%s`" % " ".join(shown)


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "surrogateescape")
    except OSError:
        return ""


def verify_run(ctx, tool, code, out_path, log_path, json_path):
    """What is wrong with a finished run; [] when it is right.  Also returns the number
    of item lines and of the other lines of its stdout."""
    a, data = ctx["args"], ctx["data"]
    problems = []
    want = 44 if tool.kind == "msrsync" else 0
    if code != want:
        problems.append(exit_problem(code, log_path, want))
    items, others = split_items(read_text(out_path))
    if tool.kind == "msrsync" and others:
        problems.append("%d line(s) of its stdout are no item lines, e.g. %r"
                        % (len(others), others[0]))
    ref = ctx["reference"][tool.check]
    if sorted(items) != ref:
        got, exp = set(items), set(ref)
        problems.append("its item lines differ from the reference rsync's: %d of %d "
                        "missing (%s), %d more (%s)" % (
                            len(exp - got), len(ref), "; ".join(sorted(exp - got)[:3]),
                            len(got - exp), "; ".join(sorted(got - exp)[:3])))
    if tool.kind == "msrsync":
        changes = expected_changes(tool.check, data["changes"])
        differing = len(changes.get("content", ())) + len(changes.get("time", ()))
        missing, extra = len(changes.get("missing", ())), len(changes.get("extra", ()))
        entries = data["count"].files + data["count"].dirs + data["count"].symlinks
        want_counts = (entries - differing - missing, differing, missing, extra)
        m = COUNT_RE.search(read_text(log_path))
        if not m:
            problems.append("no 'msrsync: check: ...' count line on its stderr")
        elif tuple(int(v) for v in m.groups()) != want_counts:
            problems.append("its count line reads %s identical, %s differing, %s missing, "
                            "%s extra; expected %d, %d, %d, %d"
                            % (m.groups() + want_counts))
    digest = manifest(data["dst"])
    if digest != data["dst_digest"]:
        problems.append("DEST changed: its digest of paths, types, sizes, modes and "
                        "mtimes differs from the one taken before")
        data["dst_digest"] = digest     # one failure, not every later run's
    if a.verify and manifest(data["src"]) != data["src_digest"]:
        problems.append("SRC changed: its digest differs from the one taken before")
    return problems, len(items), len(others)


def run_one(ctx, tool, rep, runs, failures):
    a, d, data = ctx["args"], ctx["dir"], ctx["data"]
    log_path, json_path = run_paths(d, "%s-%s" % (tool.check, tool.label), rep,
                                    tool.kind == "msrsync")
    out_path = log_path[:-len(".log")] + ".out"
    for path in (log_path, out_path, json_path):     # a --workdir's earlier ones
        if path:
            remove_tree(path)
    t0 = time.monotonic()
    dropped = settle_caches(a.cold)
    prep = time.monotonic() - t0
    argv = tool_argv(tool, a, data["src"], data["dst"], json_path)
    m = measure(STDOUT_TO + [out_path] + argv, log_path, ctx["spawner"])
    summary = read_json(json_path) if json_path else None
    problems, nitems, nothers = verify_run(ctx, tool, m.exit_code, out_path, log_path,
                                           json_path)
    record = run_record({"rep": rep, "tool": tool.label, "check": tool.check,
                         "kind": tool.kind, "procs": tool.procs},
                        argv, m, dropped, prep, log_path)
    record.update({
        "stdout": out_path, "item_lines": nitems, "other_lines": nothers,
        "buckets": summary.get("buckets_total") if summary else None,
        "rsync_processes": summary.get("rsync_processes") if summary else None,
        "ok": not problems, "problems": problems,
        "check_result": "ok" if not problems else "; ".join(problems),
    })
    runs.append(record)
    log("rep %d  %-8s %-14s %7.2fs  cpu %6.2fs  %d items  buckets %s  %s" % (
        rep, tool.check, tool.label, m.wall, m.user + m.sys, nitems,
        record["buckets"] if record["buckets"] is not None else "-",
        "ok" if not problems else "FAILED"))
    note_failure(failures, "%s check, %s, rep %d" % (tool.check, tool.label, rep),
                 problems)
    return record


def run_tools(ctx, tools):
    """At repetition r, each check's tools rotated by r, and the checks too."""
    checks = ctx["args"].checks
    return run_rounds(ctx, run_one, lambda rep: [
        tool for check in rotation(checks, rep)
        for tool in rotation([t for t in tools if t.check == check], rep)])


# ---------------------------------------------------------------------------
# Summary and table
# ---------------------------------------------------------------------------

def summarize(tools, runs):
    rows = []
    for tool in tools:
        row, good = summary_row(
            [r for r in runs if r["tool"] == tool.label and r["check"] == tool.check],
            {"check": tool.check, "tool": tool.label, "kind": tool.kind,
             "procs": tool.procs})
        if good:
            row.update({
                "cpu_s": statistics.median(r["cpu_s"] for r in good),
                "peak_rss_mib": mib(max(r["maxrss_kib"] for r in good)),
                "buckets": median_or_none(r["buckets"] for r in good),
                "item_lines": good[0]["item_lines"],
            })
        rows.append(row)
    base = dict((r["check"], r["median_s"]) for r in rows
                if r["kind"] == "rsync" and "median_s" in r)
    for row in rows:
        if "median_s" in row:
            b = base.get(row["check"])
            row["ratio_to_rsync"] = row["median_s"] / b if b else None
    return rows


def find_outliers(runs, rows):
    return find_slow_runs(runs, rows, ("check", "tool"),
                          lambda r: "%s check, %s" % (r["check"], r["tool"]),
                          OUTLIER_FACTOR)


def check_name(a, check):
    return "%s (`%s`)" % (check, check_opts(a, check))


def markdown_table(rows, a):
    head = ("| check | tool | median s | min | max | ratio to rsync | CPU s | cores busy | "
            "buckets | peak RSS MB |")
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "median_s" not in r:
            out.append("| %s | %s | FAILED (%d/%d ok) | | | | | | | |" % (
                check_name(a, r["check"]), r["tool"], r["ok_runs"], r["runs"]))
            continue
        out.append("| %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %.1f |" % (
            check_name(a, r["check"]), r["tool"], ok_note(r), fmt_seconds(r["median_s"]),
            fmt_seconds(r["min_s"]), fmt_seconds(r["max_s"]),
            fmt_ratio(r["ratio_to_rsync"]), fmt_seconds(r["cpu_s"]),
            fmt_ratio(r["cpu_s"] / r["median_s"]),
            "%g" % r["buckets"] if r.get("buckets") is not None else "-",
            r["peak_rss_mib"]))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# One case, as suite.py runs it too
# ---------------------------------------------------------------------------

def run_case(a, workdir, spawner):
    """Build (or reuse) SRC and DEST in WORKDIR, run the references and every tool;
    returns a dict: rows, runs, failures, outliers, table, lines (the notes above the
    table), about (the tree in a line), problems (--msrsync changed meanwhile: suite.py
    checks that itself), version and digest."""
    require_msrsync(a.msrsync)
    version = msrsync_version(a.msrsync)
    sha = file_digest(a.msrsync)
    data = prepare(a, workdir)
    d = make_run_dirs(os.path.join(workdir, "runs", "check"))
    refs = {}
    for check in reversed(a.checks):    # -c first: it reads every file of both trees
        refs[check] = reference(a, check, data)
    ctx = {"args": a, "dir": d, "data": data, "reference": refs, "spawner": spawner}
    tools = make_tools(a)
    t0 = time.monotonic()
    runs, failures = run_tools(ctx, tools)
    seconds = time.monotonic() - t0
    problems = changed_since(a.msrsync, sha)
    rows = summarize(tools, runs)
    dropped = sum(1 for r in runs if r["cache_dropped"])
    count = data["count"]
    found = "; ".join(
        "%s check: %d item lines (%s)" % (check, len(refs[check]), ", ".join(
            "%d %s" % (len(v), k) for k, v in sorted(found_changes(refs[check]).items())))
        for check in a.checks)
    if a.cold:
        cache = ("page cache dropped before %d of %d runs (--cold)" % (dropped, len(runs))
                 if dropped else "page cache NOT dropped (--cold needs root): warm")
    else:
        cache = ("page cache kept warm: SRC and DEST (%s together) read by the "
                 "untimed reference runs before the timed ones, never dropped"
                 % human_size(2 * count.bytes))
    lines = [
        "commands: %s" % "; ".join(shown_command(t, a) for t in tools),
        describe_changes(data["changes"], data["bigs"]),
        "found by the reference rsync runs, as made: %s" % found,
        "every run verified: exit 0 (rsync) or 44 (msrsync); its stdout's item lines, "
        "sorted, equal the reference run's (msrsync's stdout holds nothing else); "
        "msrsync's count line on stderr (%s entries in SRC); DEST unchanged (a digest of "
        "every entry's path, type, size, mode and mtime in ns)%s" % (
            format(count.files + count.dirs + count.symlinks, ","),
            "; SRC unchanged (--verify)" if a.verify else ""),
        "%s; msrsync runs also get `--json FILE` (the buckets column), not shown above; "
        "cores busy = CPU s / median s" % cache,
    ]
    return {"rows": rows, "runs": runs, "failures": failures, "problems": problems,
            "outliers": find_outliers(runs, rows), "table": markdown_table(rows, a),
            "lines": lines, "about": describe_tree(a, count), "version": version,
            "msrsync_sha256": sha, "seconds": seconds, "cache_dropped": dropped,
            "reference": refs}


# ---------------------------------------------------------------------------
# Command line and main
# ---------------------------------------------------------------------------

def parse_checks(text):
    out = [v.strip() for v in text.split(",") if v.strip()]
    if not out or any(v not in CHECKS for v in out):
        raise argparse.ArgumentTypeError("a list of %s: %r" % (", ".join(CHECKS), text))
    return [c for c in CHECKS if c in out]


def parse_args(argv):
    p = script_parser("check.py", __doc__, [
        "python3 bench/check.py",
        "python3 bench/check.py --quick",
        "python3 bench/check.py --checks content --procs 2,4 --reps 5",
        "python3 bench/check.py --workdir /var/tmp/ck --json ck.json"])
    add_quick_option(p, QUICK)
    p.add_argument("--files", type=positive_int, metavar="N",
                   help="small files of 0-8 KiB [%d, quick %d]" % (FULL["files"],
                                                                   QUICK["files"]))
    p.add_argument("--big-count", type=int, metavar="K",
                   help="bigger files, spread over the leaf directories [%d, quick %d]"
                   % (FULL["big_count"], QUICK["big_count"]))
    p.add_argument("--big-size", type=parse_size, metavar="SIZE",
                   help="bytes of each bigger file, K/M/G [%s, quick %s]"
                   % (FULL["big_size"], QUICK["big_size"]))
    p.add_argument("--procs", type=parse_int_list, default=[1, 2, 4], metavar="N,N",
                   help="msrsync -p [1,2,4]")
    p.add_argument("--checks", type=parse_checks, default=list(CHECKS), metavar="LIST",
                   help="quick (rsync's size and mtime check), content (-c) [quick,content]")
    add_tool_options(p, DEFAULT_MSRSYNC)
    p.add_argument("--rsync-opts", default=RSYNC_OPTS, metavar="OPTS",
                   help="rsync options of every check (content adds -c); msrsync gets "
                        "--rsync OPTS [%s]" % RSYNC_OPTS)
    p.add_argument("--reps", type=positive_int,
                   help="repetitions [%d, quick %d]" % (FULL["reps"], QUICK["reps"]))
    p.add_argument("--cold", action="store_true",
                   help="drop the page cache before every run (as root) instead of keeping "
                        "it warm")
    add_run_options(p, DEFAULT_SEED, "also check after every run that SRC is unchanged "
                                     "(a digest, as DEST's)")
    args = p.parse_args(argv)
    fill_sizes(args, FULL, QUICK)
    if args.big_count < 0:
        p.error("--big-count must be >= 0")
    return args


def run(a):
    env, res, failed, logs, seconds = run_case_alone(
        a, "check", CHECK_VERSION, space_needed(a), "SRC and DEST", run_case,
        lambda res: {"msrsync": res["version"], "msrsync_sha256": res["msrsync_sha256"]})
    env["total_s"] = seconds
    print_header_start("msrsync benchmark: --check, verifying a copy", env,
                       tree="%s, seed %d" % (res["about"], a.seed))
    print("- %d repetition(s), runs interleaved (each check's order rotated at every "
          "repetition, and the checks'), medians; msrsync -p %s" % (
              a.reps, ",".join(str(p) for p in a.procs)))
    print("- ratio to rsync = median / plain rsync's median for the same check, in the same "
          "run (below 1 is faster); CPU s = user+system of the tool and all its children "
          "(os.wait4); peak RSS = the largest single process of the tool's tree")
    return report_case(a, env, "check", "--check: verifying a copy", res, failed, logs,
                       OUTLIER_FACTOR, "timed runs %.0f s, everything %.0f s" % (
                           res["seconds"], env["total_s"]),
                       {"reference": res["reference"]})


def main(argv=None):
    return run_main("check.py", run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
