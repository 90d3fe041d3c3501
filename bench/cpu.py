#!/usr/bin/env python3
"""msrsync's own CPU per entry, its rsyncs apart: the scan, the copy and the re-run.

On bench.py's tree of --files small files (in --workdir, kept and reused), each msrsync
given (--msrsync PATH, repeatable, and --rev REV for the program at a git revision of
this repository) runs, in turn at each of --reps repetitions:
  scan     msrsync -p P -d SRC/ NEW/   a dry run into a DEST that does not exist: every
                                       entry listed and stat'ed, buckets cut, no rsync run
  copy     msrsync -p P SRC/ DST/      into an empty DEST
  re-run   msrsync -p P SRC/ DST/      DEST up to date
msrsync's own CPU is its process's user + system time, all its threads and none of its
children (rsync, ssh, the readahead helpers), read from /proc/PID/stat once it has exited
and before it is reaped: exact to the clock tick for any version, with nothing added to
the process measured.  Where it goes comes from the run's --json cpu_seconds (its
threads, each counted at its end), for a program that writes them; the readahead
helpers, which are processes of msrsync's own, are a column of their own.  The page
cache is kept warm: the figures are CPU, not disk waits.

    python3 bench/cpu.py --rev HEAD                       # HEAD against the working tree
    python3 bench/cpu.py --files 20000 --reps 1           # a quick look
    python3 bench/cpu.py --shm --rev d13d4b5 --reps 5     # SRC and DEST in /dev/shm
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (BenchError, Spawner, build_dataset, cached_tree,  # noqa: E402
                    command_prefix, file_digest, log, measure, remove_tree, rotation,
                    run_main, use_this_python)
from longtail import extract_old, forget_compiled  # noqa: E402

PROG = "bench/cpu.py"
MSRSYNC = os.path.normpath(os.path.join(HERE, os.pardir, "msrsync"))
SCENARIOS = ("scan", "copy", "re-run")
# the parts of --json's cpu_seconds shown, in this order (see CPU_PARTS in msrsync)
PARTS = ("main", "monitor", "scan", "bucket_lists", "workers", "reaper", "readahead",
         "other")


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("--files", type=int, default=100000, help="small files [100000]")
    p.add_argument("--procs", type=int, default=2, help="msrsync -p [2]")
    p.add_argument("--reps", type=int, default=3, help="repetitions [3]")
    p.add_argument("--msrsync", action="append", default=[],
                   help="an msrsync to measure (repeatable) [the working tree's]")
    p.add_argument("--rev", action="append", default=[],
                   help="also msrsync at this git revision (repeatable)")
    p.add_argument("--shm", action="store_true", help="the tree and DEST in /dev/shm")
    p.add_argument("--workdir", help="where the tree stays between runs [a temporary "
                   "directory, removed at the end]")
    p.add_argument("--seed", type=int, default=20240601, help="bench.py's seed [20240601]")
    p.add_argument("--json", help="every run and the rows as JSON to this file")
    return p.parse_args(argv)


def run_case(version, scenario, src, dst, procs, work, spawner, rep):
    """One run: its Measure and its --json summary (None where the program wrote none)."""
    summary = os.path.join(work, "summary.json")
    if os.path.exists(summary):
        os.unlink(summary)
    argv = command_prefix(version["path"]) + ["-p", str(procs), "--json", summary]
    if scenario == "scan":
        argv += ["-d", src + "/", os.path.join(work, "never-made") + "/"]
    else:
        if scenario == "copy":
            remove_tree(dst)
        argv += [src + "/", dst + "/"]
    log_path = os.path.join(work, "logs", "%s-%s-%d.log" % (version["name"], scenario, rep))
    m = measure(argv, log_path, spawner)
    if m.exit_code != 0:
        raise BenchError("%s exited %d (see %s)" % (" ".join(argv), m.exit_code, log_path))
    try:
        with open(summary) as f:
            found = json.load(f)
    except (OSError, ValueError):
        found = {}
    return m, found.get("cpu_seconds"), found.get("entries_total")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cell(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def main_run(args):
    use_this_python()
    base = "/dev/shm" if args.shm else None
    owned = args.workdir is None
    work = args.workdir or tempfile.mkdtemp(prefix="msrsync-cpu-", dir=base or "/var/tmp")
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    try:
        versions = [{"name": "msrsync" if not i else "msrsync-%d" % i, "path": path}
                    for i, path in enumerate(args.msrsync or [MSRSYNC])]
        for rev in args.rev:
            path, short = extract_old(rev, work)
            forget_compiled(path)
            versions.append({"name": short, "path": path})
        for version in versions:
            version["sha256"] = file_digest(version["path"])[:12]
            # the loader's compiled code kept before any run is measured
            subprocess.run(command_prefix(version["path"]) + ["--version"], check=True,
                           stdout=subprocess.DEVNULL)
        src, count, _ = cached_tree(work, "src", {"files": args.files, "seed": args.seed},
                                    lambda p: build_dataset(p, args.files, args.seed) and None)
        entries = count.files + count.dirs + count.symlinks + count.others
        dst = os.path.join(work, "dst")
        spawner = Spawner()
        runs = []
        for rep in range(1, args.reps + 1):
            for version in rotation(versions, rep):
                for scenario in SCENARIOS:
                    m, parts, seen = run_case(version, scenario, src, dst, args.procs, work,
                                              spawner, rep)
                    runs.append({"version": version["name"], "scenario": scenario,
                                 "rep": rep, "wall_s": m.wall, "own_cpu_s": m.self_cpu,
                                 "tree_cpu_s": m.user + m.sys, "cpu_seconds": parts,
                                 "entries_total": seen})
                    log("rep %d  %-10s %-7s %6.2fs  own CPU %5.2fs  tree %6.2fs" % (
                        rep, version["name"], scenario, m.wall, m.self_cpu or 0,
                        m.user + m.sys))
            remove_tree(dst)
        rows = []
        for scenario in SCENARIOS:
            for version in versions:
                mine = [r for r in runs if r["version"] == version["name"] and
                        r["scenario"] == scenario]
                own = median(r["own_cpu_s"] for r in mine)
                parts = [r["cpu_seconds"]["parts"] for r in mine if r["cpu_seconds"]]
                rows.append({
                    "scenario": scenario, "version": version["name"],
                    "wall_s": median(r["wall_s"] for r in mine), "own_cpu_s": own,
                    "us_per_entry": own * 1e6 / entries if own is not None else None,
                    "tree_cpu_s": median(r["tree_cpu_s"] for r in mine),
                    "parts": dict((k, median(p.get(k) for p in parts)) for k in PARTS)
                    if parts else None})
        print("%d entries (%d files of 0-8 KiB in %d directories) in %s; msrsync -p %d; "
              "%d repetitions, medians" % (entries, count.files, count.dirs, work,
                                           args.procs, args.reps))
        print("versions: %s" % ", ".join("%s = %s (sha256 %s)" % (
            v["name"], v["path"], v["sha256"]) for v in versions))
        print()
        print("| scenario | msrsync | wall s | own CPU s | µs an entry | tree CPU s | %s |" %
              " | ".join(k.replace("_", " ") for k in PARTS))
        print("|---|---|---:|---:|---:|---:|%s" % ("---:|" * len(PARTS)))
        for r in rows:
            parts = r["parts"] or {}
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["scenario"], r["version"], cell(r["wall_s"]), cell(r["own_cpu_s"]),
                cell(r["us_per_entry"], 1), cell(r["tree_cpu_s"]),
                " | ".join(cell(parts.get(k)) for k in PARTS)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"entries": entries, "versions": versions, "runs": runs,
                           "rows": rows}, f, indent=1)
        return 0
    finally:
        if owned:
            shutil.rmtree(work, ignore_errors=True)
        else:
            remove_tree(os.path.join(work, "dst"))
            remove_tree(os.path.join(work, "never-made"))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run_main(PROG, main_run, args)


if __name__ == "__main__":
    sys.exit(main())
