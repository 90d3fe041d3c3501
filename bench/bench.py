#!/usr/bin/env python3
"""Benchmark msrsync against plain rsync on a tree of many small files.

Needs Python 3.6+ (standard library only), Linux (/proc, os.wait4) and rsync.
It does not need hyperfine, GNU time or root; as root it also drops the page
cache before every timed run.

What it does, in order:
  1. builds a deterministic tree (seeded): N files of 0-8 KiB spread over
     about N/50 directories on two levels, contents sliced out of one
     pre-generated random block;
  2. runs every tool, interleaved round-robin over the repetitions (the order
     rotates by one at each repetition so no tool always runs first or last):
       initial copy   - into an empty DEST (DEST removed outside the timing)
       up-to-date     - the same command again onto the completed DEST
     and checks after each initial copy that DEST has as many files,
     directories and bytes as SRC (--verify adds `rsync -ain --delete`);
  3. records wall time (time.monotonic), the CPU time (user+sys) of the tool
     and every descendant it waited for, and peak RSS (os.wait4 rusage; the
     tools are started through /bin/sh so that our own RSS is not folded
     into theirs, see Spawner);
  4. prints a markdown table and, with --json, writes every run as JSON.

--memory is a separate mode: msrsync's own peak RSS on 100,000 and 1,000,000
empty files in /dev/shm with -d (scan and cut buckets only), and with a real
copy of 100,000 files, plain rsync alongside for reference.

What it does not do: it never edits SRC once built, never vendors fpsync or
the original msrsync (pass --fpsync / --orig-msrsync to include them), and it
measures only local copies.
"""

import collections
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# the helpers shared with remote.py and suite.py; mirror.py imports build_dataset and
# settle_caches from here
from common import (HWM_SAMPLE_SECONDS, BenchError, Spawner,  # noqa: E402,F401
                    build_dataset, changed_since, command_prefix, compare_copy, count_tree,
                    dataset_layout, file_digest, filesystem_note, filesystem_of,
                    find_slow_runs, first_line_of, fmt_seconds, is_python_script, loadavg,
                    log, make_workdir, measure, median_or_none, mib, note_failure, ok_note,
                    parse_int_list,
                    positive_int, remove_tree, rotation, run_main, script_parser,
                    settle_caches, summary_row, tail, write_json)

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

BENCH_VERSION = "1.0"
DEFAULT_MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")

# The options msrsync passes to rsync by default (SPEC: -r/--rsync default);
# plain rsync gets the same so the two copy the same metadata.
RSYNC_OPTS = ["-aS", "--numeric-ids"]
# fpsync hands rsync --files-from lists and must not get -r: -a minus -r.
FPSYNC_RSYNC_OPTS = "-lptgoDS --numeric-ids"
# `find | parallel -j N rsync`, split by SRC's top-level entries (tool parallel-pN):
# each job copies one of them into DST; DST is made first so that no two jobs race to
# create it.  $1 SRC, $2 N, $3 DST, then rsync and its options.
PARALLEL_SCRIPT = ('cd "$1" && mkdir -p "$3" && dst=$3 && n=$2 && shift 3 && '
                   'find . -mindepth 1 -maxdepth 1 -print0 '
                   '| parallel --will-cite -0 -q -j "$n" "$@" {} "$dst"')

DEFAULT_FILES_FULL = 100000
DEFAULT_FILES_QUICK = 20000
DEFAULT_REPS = 3
DEFAULT_PROCS = (1, 2, 4)
DEFAULT_SEED = 20240601

MEMORY_SIZES = (100000, 1000000)
MEMORY_FILES_PER_DIR = 1000
MEMORY_COPY_PROCS = 4

SCENARIO_INITIAL = "initial copy"
SCENARIO_UPTODATE = "up-to-date re-run"
SCENARIO_RECHECK = "-c re-check"      # --rerun-only with -c in --rsync-opts

OUTLIER_FACTOR = 2.0        # a run slower than this times its median is flagged

# ---------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------

# One tool under test: `label` is what the table shows, `kind` one of
# rsync/msrsync/fpsync/orig-msrsync/parallel, `procs` its parallelism (None for rsync).
Tool = collections.namedtuple("Tool", "label kind procs")


# ---------------------------------------------------------------------------
# Dataset
# ---------------------------------------------------------------------------

def prepare_dataset(workdir, nfiles, seed):
    """Reuse WORKDIR/src when its manifest matches (a --workdir kept from an
    earlier run), else build it.  Returns (src path, TreeCount, seconds)."""
    src = os.path.join(workdir, "src")
    manifest = os.path.join(workdir, "dataset.json")
    wanted = {"bench_version": BENCH_VERSION, "files": nfiles, "seed": seed}
    try:
        with open(manifest) as f:
            saved = json.load(f)
        if {k: saved.get(k) for k in wanted} == wanted and os.path.isdir(src):
            count = count_tree(src)
            if list(count) == saved.get("count"):
                log("reusing dataset %s (%d files, %.1f MiB)"
                    % (src, count.files, count.bytes / 1048576.0))
                return src, count, 0.0
    except (OSError, ValueError):
        pass
    remove_tree(src)
    remove_tree(manifest)
    tops, subs = dataset_layout(nfiles)
    log("building dataset: %d files in %d x %d directories under %s"
        % (nfiles, tops, subs, src))
    t0 = time.monotonic()
    count = build_dataset(src, nfiles, seed)
    elapsed = time.monotonic() - t0
    actual = count_tree(src)
    if actual != count:
        raise BenchError("dataset check failed: built %r, found %r" % (count, actual))
    saved = dict(wanted, count=list(count))
    with open(manifest, "w") as f:
        json.dump(saved, f)
    log("dataset built in %.1fs (%.1f MiB)" % (elapsed, count.bytes / 1048576.0))
    return src, count, elapsed


def build_empty_tree(root, nfiles, per_dir=MEMORY_FILES_PER_DIR):
    """NFILES empty files, PER_DIR per directory, as fast as Python goes."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    os.makedirs(root)
    done = 0
    d = 0
    while done < nfiles:
        sub = os.path.join(root, "d%04d" % d)
        os.mkdir(sub)
        for i in range(min(per_dir, nfiles - done)):
            os.close(os.open(os.path.join(sub, "f%04d" % i), flags, 0o644))
        done += min(per_dir, nfiles - done)
        d += 1


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------

def make_tools(args):
    """The tools to run, in the order of the first repetition."""
    wanted = [t.strip() for t in args.tools.split(",") if t.strip()]
    tools = []
    for name in wanted:
        if name == "rsync":
            tools.append(Tool("rsync", "rsync", None))
            continue
        kind, _, procs = name.partition("-p")
        if kind not in ("msrsync", "fpsync", "orig-msrsync", "parallel") or \
                (procs and not procs.isdigit()):
            raise BenchError("unknown tool %r (rsync, msrsync, msrsync-pN, fpsync, "
                             "fpsync-pN, orig-msrsync, orig-msrsync-pN, parallel, "
                             "parallel-pN)" % name)
        for p in ([int(procs)] if procs else args.procs):
            label = {"msrsync": "msrsync -p", "fpsync": "fpsync -p",
                     "orig-msrsync": "orig msrsync -p", "parallel": "parallel -j"}[kind]
            tools.append(Tool("%s%d" % (label, p), kind, p))
    if args.fpsync and not any(t.kind == "fpsync" for t in tools):
        tools += [Tool("fpsync -p%d" % p, "fpsync", p) for p in args.procs]
    if args.orig_msrsync and not any(t.kind == "orig-msrsync" for t in tools):
        tools += [Tool("orig msrsync -p%d" % p, "orig-msrsync", p) for p in args.procs]
    if not tools:
        raise BenchError("no tool to run")
    for kind, path in (("msrsync", args.msrsync), ("fpsync", args.fpsync),
                       ("orig-msrsync", args.orig_msrsync),
                       ("parallel", shutil.which("parallel") or "parallel")):
        if any(t.kind == kind for t in tools):
            if not path:
                raise BenchError("%s needs --%s PATH" % (kind, kind))
            if not os.access(path, os.X_OK) and not is_python_script(path):
                raise BenchError("%s not found or not executable: %s" % (kind, path))
    return tools


def without_recursion(opts):
    """OPTS (a list) as one string for fpsync's -o: -a spelled out without -r (fpsync
    gives rsync lists of files), -r and --recursive dropped."""
    out = []
    for o in opts:
        if o in ("--archive", "--recursive", "-r"):
            o = "-lptgoD" if o == "--archive" else ""
        elif o.startswith("-") and not o.startswith("--"):
            o = o.replace("a", "lptgoD").replace("r", "")
            o = "" if o == "-" else o
        if o:
            out.append(o)
    return " ".join(shlex.quote(o) for o in out)


def has_checksum(opts):
    """True when the rsync options OPTS (a string) hold -c / --checksum."""
    return any(o == "--checksum" or (o.startswith("-") and not o.startswith("--")
                                     and "c" in o[1:]) for o in shlex.split(opts))


def tool_argv(tool, src, dst, args, workdir):
    """The exact command line of TOOL copying SRC/ into DST/."""
    src_slash = src.rstrip("/") + "/"
    dst_slash = dst.rstrip("/") + "/"
    opts = shlex.split(args.rsync_opts)
    # msrsync's --rsync only when the options are not its default (RSYNC_OPTS)
    msr_rsync = [] if opts == RSYNC_OPTS else ["--rsync", args.rsync_opts]
    if tool.kind == "rsync":
        return [args.rsync] + opts + [src_slash, dst_slash]
    if tool.kind == "msrsync":
        return (command_prefix(args.msrsync) + ["-p", str(tool.procs)]
                + shlex.split(args.msrsync_opts) + msr_rsync + [src_slash, dst_slash])
    if tool.kind == "orig-msrsync":
        return command_prefix(args.orig_msrsync) + ["-p", str(tool.procs)] + msr_rsync + [
            src_slash, dst_slash]
    if tool.kind == "fpsync":
        return [args.fpsync, "-n", str(tool.procs), "-t",
                os.path.join(workdir, "fpsync-tmp"), "-o",
                FPSYNC_RSYNC_OPTS if opts == RSYNC_OPTS else without_recursion(opts),
                src_slash, dst_slash]
    if tool.kind == "parallel":
        return (["/bin/sh", "-c", PARALLEL_SCRIPT, "sh", src_slash, str(tool.procs),
                 dst_slash, args.rsync] + opts)
    raise BenchError("unknown tool kind %r" % tool.kind)


# ---------------------------------------------------------------------------
# The timed runs
# ---------------------------------------------------------------------------

def check_copy(src, dst, expected, args, log_path):
    """Cheap check (counts and bytes), plus `rsync -ain --delete` with
    --verify: rsync then itemizes every difference, including directory
    mtimes and modes, so empty output means DST is what rsync would leave."""
    return compare_copy(src, dst, expected, args.rsync, args.verify, log_path,
                        ["--numeric-ids"])


def run_one(tool, scenario, rep, src, dst, expected, args, workdir, spawner, runs,
            failures):
    """One timed run; appends a record to RUNS and returns it."""
    logs = os.path.join(workdir, "logs")
    log_path = os.path.join(logs, "%s-%s-rep%d.log" % (
        tool.label.replace(" ", "_"), scenario.split()[0], rep))
    t0 = time.monotonic()
    if scenario == SCENARIO_INITIAL:
        remove_tree(dst)
    dropped = settle_caches(not args.no_drop_caches)
    prep = time.monotonic() - t0  # untimed: on a busy disk it can dominate
    argv = tool_argv(tool, src, dst, args, workdir)
    m = measure(argv, log_path, spawner)
    record = {
        "rep": rep, "tool": tool.label, "kind": tool.kind, "procs": tool.procs,
        "scenario": scenario, "argv": argv, "wall_s": m.wall,
        "cpu_user_s": m.user, "cpu_sys_s": m.sys, "cpu_s": m.user + m.sys,
        "self_cpu_s": m.self_cpu, "maxrss_kib": m.maxrss_kib, "self_hwm_kib": m.self_hwm_kib,
        "exit_code": m.exit_code, "cache_dropped": dropped, "untimed_prep_s": prep,
        "loadavg_after": loadavg(), "log": log_path, "check": None,
    }
    problems = []
    if m.exit_code != 0:
        problems.append("exit code %d; last lines of %s:\n%s"
                        % (m.exit_code, log_path, tail(log_path)))
    if scenario == SCENARIO_INITIAL or args.rerun_only:
        check = check_copy(src, dst, expected, args, log_path)
        record["check"] = "ok" if not check else "; ".join(check)
        problems += check
    record["ok"] = not problems
    runs.append(record)
    status = "ok" if not problems else "FAILED"
    log("rep %d  %-18s %-18s %7.2fs  cpu %6.2fs  rss %6.1f MiB  %s  (untimed prep %.1fs)"
        % (rep, tool.label, scenario, m.wall, m.user + m.sys,
           mib(m.maxrss_kib), status, prep))
    note_failure(failures, "%s, %s, rep %d" % (tool.label, scenario, rep), problems)
    return record


def make_uptodate(src, dst, expected, args, workdir):
    """--rerun-only: DEST made complete once, untimed, by plain rsync with
    RSYNC_OPTS; every timed run is then a re-run onto it."""
    log("--rerun-only: making DEST up to date (untimed)")
    remove_tree(dst)
    argv = [args.rsync] + RSYNC_OPTS + [src.rstrip("/") + "/", dst.rstrip("/") + "/"]
    log_path = os.path.join(workdir, "logs", "make-uptodate.log")
    with open(log_path, "ab") as out:
        code = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT)
    problems = check_copy(src, dst, expected, args, log_path) if code == 0 else [
        "exit code %d; last lines of %s:\n%s" % (code, log_path, tail(log_path))]
    if problems:
        raise BenchError("cannot make DEST up to date: %s" % "; ".join(problems))


def rerun_scenario(args):
    return SCENARIO_RECHECK if has_checksum(args.rsync_opts) else SCENARIO_UPTODATE


def run_benchmark(tools, src, expected, args, workdir, spawner):
    """Round-robin: at repetition r the tool order is rotated by r, and each
    tool does its initial copy then its up-to-date re-run back to back (the
    re-run needs the DEST the copy just made).  With --rerun-only, DEST is
    made up to date once and each tool does the re-run only."""
    dst = os.path.join(workdir, "dst")
    runs, failures = [], []
    if args.rerun_only:
        make_uptodate(src, dst, expected, args, workdir)
    for rep in range(1, args.reps + 1):
        order = rotation(tools, rep)
        log("repetition %d/%d: %s" % (rep, args.reps, ", ".join(t.label for t in order)))
        for tool in order:
            if args.rerun_only:
                run_one(tool, rerun_scenario(args), rep, src, dst, expected,
                        args, workdir, spawner, runs, failures)
                continue
            first = run_one(tool, SCENARIO_INITIAL, rep, src, dst, expected,
                            args, workdir, spawner, runs, failures)
            if first["exit_code"] == 0:
                run_one(tool, SCENARIO_UPTODATE, rep, src, dst, expected,
                        args, workdir, spawner, runs, failures)
    remove_tree(dst)
    return runs, failures


# ---------------------------------------------------------------------------
# Summary and output
# ---------------------------------------------------------------------------

def summarize(tools, runs):
    """One row per (scenario, tool): medians over the successful runs."""
    rows = []
    scenarios = []
    for r in runs:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    for scenario in scenarios:
        base = None
        for tool in tools:
            row, good = summary_row([r for r in runs if r["tool"] == tool.label
                                     and r["scenario"] == scenario],
                                    {"scenario": scenario, "tool": tool.label})
            if good:
                row.update({
                    "cpu_median_s": statistics.median(r["cpu_s"] for r in good),
                    "self_cpu_median_s": median_or_none(
                        [r["self_cpu_s"] for r in good if r.get("self_cpu_s") is not None]),
                    "peak_rss_mib": mib(max(r["maxrss_kib"] for r in good)),
                    "self_hwm_mib": mib(max(r["self_hwm_kib"] for r in good)),
                })
                if tool.kind == "rsync" and base is None:
                    base = row["median_s"]
            rows.append(row)
        for row in rows:
            if row["scenario"] == scenario and "median_s" in row:
                row["ratio_to_rsync"] = (row["median_s"] / base) if base else None
    return rows


def find_outliers(runs, rows):
    """Successful runs slower than OUTLIER_FACTOR x their row's median (find_slow_runs)."""
    return find_slow_runs(runs, rows, ("scenario", "tool"),
                          lambda r: "%s, %s" % (r["tool"], r["scenario"]), OUTLIER_FACTOR)


def markdown_table(rows):
    head = ("| scenario | tool | median s | min | max | ratio to rsync "
            "| CPU s | own CPU s | peak RSS MB |")
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "median_s" not in r:
            out.append("| %s | %s | FAILED (%d/%d ok) | | | | | | |"
                       % (r["scenario"], r["tool"], r["ok_runs"], r["runs"]))
            continue
        ratio = "%.2f" % r["ratio_to_rsync"] if r.get("ratio_to_rsync") else "-"
        own = r.get("self_cpu_median_s")
        out.append("| %s | %s%s | %s | %s | %s | %s | %s | %s | %.1f |" % (
            r["scenario"], r["tool"], ok_note(r), fmt_seconds(r["median_s"]),
            fmt_seconds(r["min_s"]), fmt_seconds(r["max_s"]), ratio,
            fmt_seconds(r["cpu_median_s"]), "-" if own is None else fmt_seconds(own),
            r["peak_rss_mib"]))
    return "\n".join(out)


def command_templates(tools, args):
    """One command line per kind of tool, paths shown as SRC/ DST/."""
    seen, out = set(), []
    for tool in tools:
        if tool.kind in seen:
            continue
        seen.add(tool.kind)
        argv = tool_argv(tool._replace(procs="N") if tool.procs else tool,
                         "SRC", "DST", args, "WORKDIR")
        if argv[0] == sys.executable:
            argv = argv[1:]
        argv[0] = os.path.basename(argv[0])
        out.append("`%s`" % " ".join(shlex.quote(a) for a in argv))
    return out


def environment(args, workdir, tools):
    mnt, fstype = filesystem_of(workdir)
    env = {
        "bench_version": BENCH_VERSION,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(), "kernel": platform.release(),
        "cpus": os.cpu_count(), "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "rsync": first_line_of([args.rsync, "--version"]),
        "workdir": workdir, "filesystem": fstype, "mount": mnt,
        "filesystem_note": filesystem_note(workdir),
        "euid": os.geteuid(), "loadavg_start": loadavg(),
    }
    if any(t.kind == "msrsync" for t in tools):
        env["msrsync"] = first_line_of(command_prefix(args.msrsync) + ["--version"],
                                       required=True)
        env["msrsync_path"] = os.path.abspath(args.msrsync)
        env["msrsync_sha256"] = file_digest(args.msrsync)
    if args.fpsync:
        env["fpsync"] = os.path.abspath(args.fpsync)
    if args.orig_msrsync:
        env["orig_msrsync"] = first_line_of(command_prefix(args.orig_msrsync) + ["--version"])
    return env


def rss_floor_line(spawner):
    return ("peak RSS: tools %s; `sleep` started the same way reports %.1f MB "
            "(the floor of that column)" % (spawner.how, mib(spawner.floor_kib or 0)))


def describe_environment(env, extra):
    lines = ["# msrsync benchmark (%s)" % env["date"], ""]
    for key in ("rsync", "msrsync", "python", "cpus", "kernel"):
        if key in env:
            lines.append("- %s: %s" % (key, env[key]))
            if key == "msrsync" and env.get("msrsync_sha256"):
                lines[-1] += " (%s, sha256 %s)" % (env["msrsync_path"],
                                                   env["msrsync_sha256"][:12])
    lines.append("- workdir: %s (%s on %s)" % (env["workdir"], env["filesystem"], env["mount"]))
    if env.get("filesystem_note"):
        lines.append("- NOTE: %s" % env["filesystem_note"])
    lines += ["- %s" % e for e in extra]
    lines.append("- load average at start: %s" % (
        " ".join("%.2f" % x for x in env["loadavg_start"]) if env["loadavg_start"] else "?"))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# --memory mode
# ---------------------------------------------------------------------------

def run_memory(args):
    """Peak RSS against tree size: msrsync -d scans and cuts buckets only,
    so its memory is the scanner + bucketer; a flat figure from 100,000 to
    1,000,000 entries shows nothing is kept per entry.  rsync rows are for
    reference (rsync holds its file list, incremental recursion or not)."""
    base = args.workdir or os.environ.get("SHM") or "/dev/shm"
    if not os.path.exists(args.msrsync):
        raise BenchError("msrsync not found: %s (use --msrsync PATH)" % args.msrsync)
    env = environment(args, base, [Tool("msrsync", "msrsync", 1)])
    workdir = tempfile.mkdtemp(prefix="msrsync-bench-mem-", dir=base)
    env["workdir"] = workdir
    os.makedirs(os.path.join(workdir, "logs"))
    spawner = Spawner()
    spawner.calibrate(os.path.join(workdir, "logs", "floor.log"))
    env["rss_launch"], env["rss_floor_kib"] = spawner.how, spawner.floor_kib
    want = [t for t in args.tools.split(",") if t.strip()] if args.tools_given else \
        ["rsync", "msrsync"]
    with_rsync = "rsync" in want
    sizes = sorted(args.memory_sizes)
    copy_procs = max(args.procs) if args.procs_given else MEMORY_COPY_PROCS
    msr = command_prefix(args.msrsync)
    rows = []

    def one(label, size, argv, mode):
        dst = os.path.join(workdir, "dst")
        remove_tree(dst)
        os.sync()
        logp = os.path.join(workdir, "logs", "%s-%d.log" % (label.replace(" ", "_"), size))
        m = measure(argv, logp, spawner)
        row = {"tool": label, "entries": size, "mode": mode, "argv": argv,
               "wall_s": m.wall, "cpu_s": m.user + m.sys,
               "maxrss_kib": m.maxrss_kib, "self_hwm_kib": m.self_hwm_kib,
               "exit_code": m.exit_code}
        if m.exit_code != 0:
            row["error"] = tail(logp)
        if mode == "copy" and m.exit_code == 0:
            got = count_tree(dst)
            row["check"] = "ok" if got.files == size else \
                "DEST has %d files, expected %d" % (got.files, size)
        rows.append(row)
        log("%-22s %8d entries  %-7s %7.2fs  rss %6.1f MiB  self %6.1f MiB  exit %d"
            % (label, size, mode, m.wall, mib(m.maxrss_kib), mib(m.self_hwm_kib),
               m.exit_code))
        remove_tree(dst)

    try:
        # What msrsync costs before it looks at any tree: interpreter + imports.
        one("msrsync --version", 0, msr + ["--version"], "startup")
        for size in sizes:
            src = os.path.join(workdir, "src%d" % size)
            log("creating %d empty files in %s" % (size, src))
            t0 = time.monotonic()
            build_empty_tree(src, size)
            log("created in %.1fs" % (time.monotonic() - t0))
            s, d = src + "/", os.path.join(workdir, "dst") + "/"
            one("msrsync -d", size, msr + ["-d", s, d], "dry-run")
            if with_rsync:
                one("rsync -n", size, [args.rsync] + RSYNC_OPTS + ["-n", s, d], "dry-run")
            if size == sizes[0]:
                one("msrsync -p%d" % copy_procs, size,
                    msr + ["-p", str(copy_procs), s, d], "copy")
                if with_rsync:
                    one("rsync", size, [args.rsync] + RSYNC_OPTS + [s, d], "copy")
            log("removing %s" % src)
            remove_tree(src)
    finally:
        if not args.keep:
            remove_tree(workdir)

    print(describe_environment(env, [
        "empty files, %d per directory" % MEMORY_FILES_PER_DIR,
        "peak RSS = ru_maxrss from os.wait4 (largest process of the tool's tree); "
        "own HWM = the tool process's VmHWM sampled every %d ms"
        % int(HWM_SAMPLE_SECONDS * 1000),
        rss_floor_line(spawner)]))
    print()
    print("| tool | entries | mode | wall s | CPU s | peak RSS MB | own HWM MB |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        status = "" if r["exit_code"] == 0 else " (exit %d)" % r["exit_code"]
        if r.get("check") not in (None, "ok"):
            status += " (%s)" % r["check"]
        print("| %s%s | %d | %s | %s | %s | %.1f | %.1f |" % (
            r["tool"], status, r["entries"], r["mode"], fmt_seconds(r["wall_s"]),
            fmt_seconds(r["cpu_s"]), mib(r["maxrss_kib"]), mib(r["self_hwm_kib"])))
    changed = file_digest(args.msrsync) != env.get("msrsync_sha256")
    if changed:
        print()
        print("FAILURES:\n- %s changed while the benchmark ran: the figures mix versions"
              % args.msrsync)
    flat = [r for r in rows if r["tool"] == "msrsync -d" and r["exit_code"] == 0]
    if len(flat) >= 2:
        print()
        print("msrsync -d peak RSS: %s" % ", ".join(
            "%.1f MB at %d entries" % (mib(r["maxrss_kib"]), r["entries"]) for r in flat))
    if args.json:
        write_json(args.json, {"mode": "memory", "environment": env, "rows": rows})
    failed = [r for r in rows if r["exit_code"] != 0 or r.get("check") not in (None, "ok")]
    return 1 if failed or changed else 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def parse_args(argv):
    p = script_parser(
        "bench.py", "Benchmark msrsync against plain rsync on many small files.", [
            "python3 bench/bench.py --quick",
            "python3 bench/bench.py --json bench-full.json",
            "python3 bench/bench.py --tools rsync --quick",
            "python3 bench/bench.py --rerun-only --rsync-opts=-ac   # -c re-check",
            "python3 bench/bench.py --memory",
            "python3 bench/suite.py --help   # the other datasets and sections"])
    p.add_argument("--quick", action="store_true",
                   help="small run, under 5 minutes (%d files)" % DEFAULT_FILES_QUICK)
    p.add_argument("--memory", action="store_true",
                   help="measure msrsync's peak RSS on %s empty files in /dev/shm"
                   % " and ".join(format(n, ",") for n in MEMORY_SIZES))
    p.add_argument("--msrsync", default=DEFAULT_MSRSYNC, metavar="PATH",
                   help="msrsync to test [../msrsync next to this script]")
    p.add_argument("--rsync", default="rsync", metavar="PATH", help="rsync binary [rsync]")
    p.add_argument("--fpsync", metavar="PATH", help="also run fpsync (not vendored)")
    p.add_argument("--orig-msrsync", metavar="PATH",
                   help="also run the original msrsync (not vendored)")
    p.add_argument("--tools", metavar="LIST",
                   help="comma-separated: rsync, msrsync, msrsync-pN, fpsync[-pN], "
                        "orig-msrsync[-pN] [rsync,msrsync]")
    p.add_argument("--procs", type=parse_int_list, metavar="N,N",
                   help="-p values for msrsync/fpsync/orig-msrsync [1,2,4]")
    p.add_argument("--msrsync-opts", default="", metavar="OPTS",
                   help="extra msrsync options as one string, e.g. '-f 2000'")
    p.add_argument("--rsync-opts", default=" ".join(RSYNC_OPTS), metavar="OPTS",
                   help="rsync options of every tool, e.g. --rsync-opts=-ac: rsync gets "
                        "them, msrsync gets --rsync OPTS [%s]" % " ".join(RSYNC_OPTS))
    p.add_argument("--rerun-only", action="store_true",
                   help="time only the re-run onto a DEST made up to date once (untimed, "
                        "rsync %s); with -c in --rsync-opts: the -c re-check"
                        % " ".join(RSYNC_OPTS))
    p.add_argument("--workdir", metavar="DIR",
                   help="where src/ dst/ logs/ go; kept (and src reused) when given "
                        "[a temp dir under /var/tmp, removed at the end]")
    p.add_argument("--shm", action="store_true", help="temp dir in /dev/shm instead")
    p.add_argument("--reps", type=positive_int, default=DEFAULT_REPS,
                   help="repetitions [%d]" % DEFAULT_REPS)
    p.add_argument("--files", type=positive_int,
                   help="files in the tree [%d, quick %d]" % (DEFAULT_FILES_FULL,
                                                              DEFAULT_FILES_QUICK))
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="dataset seed")
    p.add_argument("--memory-sizes", type=parse_int_list, default=list(MEMORY_SIZES),
                   metavar="N,N", help="--memory tree sizes [100000,1000000]")
    p.add_argument("--verify", action="store_true",
                   help="after each initial copy also run rsync -ain --delete SRC/ DST/ "
                        "and fail on any output")
    p.add_argument("--no-drop-caches", action="store_true",
                   help="do not drop the page cache before runs (warm-cache figures)")
    p.add_argument("--keep", action="store_true", help="keep the temp workdir")
    p.add_argument("--json", metavar="OUT", help="write runs and summary as JSON ('-' = stdout)")
    args = p.parse_args(argv)
    args.tools_given = args.tools is not None
    args.procs_given = args.procs is not None
    if args.tools is None:
        args.tools = "rsync,msrsync"
    if args.procs is None:
        args.procs = list(DEFAULT_PROCS)
    if args.files is None:
        args.files = DEFAULT_FILES_QUICK if args.quick else DEFAULT_FILES_FULL
    if args.shm and args.workdir:
        p.error("--shm and --workdir exclude each other")
    if args.workdir:
        args.workdir = os.path.abspath(args.workdir)
    return args


def run_copy_benchmark(args):
    """The default mode: dataset, interleaved runs, table.  Returns the exit
    status: 0 all good, 1 a run failed (or msrsync changed under us)."""
    tools = make_tools(args)
    base = os.environ.get("SHM", "/dev/shm") if args.shm else "/var/tmp"
    workdir, owned = make_workdir(args.workdir, "msrsync-bench-", base)
    runs, failures, logs_kept = [], [], False
    try:
        env = environment(args, workdir, tools)
        os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
        spawner = Spawner()
        spawner.calibrate(os.path.join(workdir, "logs", "floor.log"))
        env["rss_launch"], env["rss_floor_kib"] = spawner.how, spawner.floor_kib
        src, expected, build_s = prepare_dataset(workdir, args.files, args.seed)
        t0 = time.monotonic()
        runs, failures = run_benchmark(tools, src, expected, args, workdir, spawner)
        bench_s = time.monotonic() - t0
    finally:
        if owned and not args.keep:
            # Keep only logs/ when there is something to look at in it.
            rows = summarize(tools, runs)
            logs_kept = bool(failures or find_outliers(runs, rows))
            if logs_kept:
                for name in ("src", "dst", "dataset.json", "fpsync-tmp"):
                    remove_tree(os.path.join(workdir, name))
            else:
                remove_tree(workdir)
    env["loadavg_end"] = loadavg()
    if "msrsync_sha256" in env:
        failures += changed_since(args.msrsync, env["msrsync_sha256"])
    rows = summarize(tools, runs)
    outliers = find_outliers(runs, rows)
    dropped = sum(1 for r in runs if r["cache_dropped"])
    tops, subs = dataset_layout(args.files)
    extra = [
        "dataset: %d files, %d dirs (%d x %d), %.1f MiB, seed %d"
        % (expected.files, expected.dirs, tops, subs, expected.bytes / 1048576.0, args.seed),
        "repetitions: %d, interleaved round-robin; page cache dropped before "
        "%d of %d runs" % (args.reps, dropped, len(runs)),
        "commands: %s" % "; ".join(command_templates(tools, args)),
        "check after each %s: file/dir counts and bytes%s"
        % ("run" if args.rerun_only else "initial copy",
           " + rsync -ain --delete" if args.verify else ""),
        rss_floor_line(spawner),
        "benchmark time %.0fs (dataset build %.0fs)" % (bench_s, build_s),
    ]
    print(describe_environment(env, extra))
    print()
    print(markdown_table(rows))
    if outliers:
        print()
        print("OUTLIERS (slower than %g x their median; kept in the figures):" % OUTLIER_FACTOR)
        for o in outliers:
            print("- " + o)
    if failures:
        print()
        print("FAILURES:")
        for f in failures:
            print("- " + f.replace("\n", "\n    "))
    if logs_kept:
        print()
        print("logs kept in %s" % os.path.join(workdir, "logs"))
    if args.json:
        write_json(args.json, {
            "mode": "quick" if args.quick else "full", "environment": env,
            "dataset": dict(expected._asdict(), seed=args.seed, top_dirs=tops,
                            subdirs_per_top=subs),
            "reps": args.reps, "rsync_opts": args.rsync_opts, "rerun_only": args.rerun_only,
            "tools": [t._asdict() for t in tools],
            "summary": rows, "runs": runs, "outliers": outliers, "failures": failures})
    return 1 if failures else 0


def main(argv=None):
    args = parse_args(argv)
    return run_main("bench.py", run_memory if args.memory else run_copy_benchmark, args)


if __name__ == "__main__":
    sys.exit(main())
