#!/usr/bin/env python3
"""--survey: its time against msrsync -d and find on the same tree, and its memory.

Needs Python 3.6+ (standard library only), Linux and rsync.  The tree is bench.py's
seeded small-file dataset (--files, 1,000,000 by default: 0-8 KiB files, about 50 a
directory, d00..d39/sNNN), built once under the work directory (/var/tmp) and kept
with --keep-tree for the next run.  The page cache is warm: an untimed run of each
command reads the tree first.

Timed, each --reps times (3), interleaved (the order rotates at every repetition):

  survey          msrsync --survey SRC/
  survey+DEST     msrsync --survey SRC/ DST/     (DST holds a copy of every 4th top dir)
  survey+rule     msrsync --survey --rsync "-aS --numeric-ids --exclude=/no-such-name" SRC/
  survey+merge    the same with --filter=":_.no-such-file" (a per-directory rule, even one
                  of a file that exists nowhere, walks with the run's scanner)
  -d              msrsync -d SRC/ EMPTY/         (the scan of a first copy: every file stat'ed)
  -d+rule         msrsync -d --rsync "-aS --numeric-ids --exclude=/no-such-name" SRC/ EMPTY/
  -d+merge        the same with --filter=":_.no-such-file"
  find            find SRC/ -printf '%s %y %T@ %n\\n'  (a stat an entry, no more)

Every survey run is checked: its --json figures (files, directories, bytes) equal the
tree's own count, and with DEST the files it says DEST holds equal the copied ones.
The table gives the medians, the ratio to -d's median, the CPU seconds (user and system
of the command and its children: median and least, steadier than wall time on a shared
machine) and each command's peak RSS;
--memory-sizes surveys smaller trees too, so that RSS can be compared across sizes.
--compare OLD (an msrsync file, or a git revision of this repository) times OLD's
surveys and -d scans too, in the same rotation ("old survey", ...), each ratio still to
the new -d's median.

    python3 bench/survey.py                         # 1,000,000 files, 3 reps
    python3 bench/survey.py --files 100000 --reps 5
    python3 bench/survey.py --keep-tree --workdir /var/tmp/survey-bench
    python3 bench/survey.py --files 200000 --compare HEAD~1   # before/after, one session
"""

import json
import os
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Spawner, build_dataset, count_tree, measure, run_main  # noqa: E402
from common import script_parser  # noqa: E402
import longtail  # noqa: E402

MSRSYNC = os.path.join(os.path.dirname(HERE), "msrsync")
RULE = "-aS --numeric-ids --exclude=/no-such-name"
MERGE = RULE + " --filter=:_.no-such-file"


def parse_args(argv):
    p = script_parser("survey.py", __doc__, [
        "python3 bench/survey.py", "python3 bench/survey.py --files 100000 --reps 5"])
    p.add_argument("--files", type=int, default=1000000, help="files in the tree [1000000]")
    p.add_argument("--reps", type=int, default=3, help="repetitions [3]")
    p.add_argument("--workdir", default="/var/tmp/msrsync-survey-bench",
                   help="where the tree is built [/var/tmp/msrsync-survey-bench]")
    p.add_argument("--keep-tree", action="store_true", help="keep the tree for the next run")
    p.add_argument("--memory-sizes", default="",
                   help="also survey trees of these sizes (comma-separated) for peak RSS")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--msrsync", default=MSRSYNC, help="the msrsync to time [this repository's]")
    p.add_argument("--compare", metavar="OLD",
                   help="also time OLD (a file, or a git revision of this repository)")
    return p.parse_args(argv)


def tree(workdir, files, seed):
    """SRC of FILES files under WORKDIR (built unless there), and its count."""
    src = os.path.join(workdir, "src-%d" % files)
    stamp = src + ".count"
    if not os.path.exists(stamp):
        shutil.rmtree(src, ignore_errors=True)
        build_dataset(src, files, seed)
        with open(stamp, "w") as f:
            json.dump(count_tree(src)._asdict(), f)
    with open(stamp) as f:
        return src, json.load(f)


def check_survey(json_path, count, held=None):
    with open(json_path) as f:
        report = json.load(f)
    types = report["types"]
    got = (types["files"], types["directories"], report["bytes"])
    want = (count["files"], count["dirs"], count["bytes"])
    if got != want:
        raise SystemExit("survey.py: the survey says %r, the tree is %r" % (got, want))
    if held is not None and report["dest_held"]["files"] != held:
        raise SystemExit("survey.py: DEST holds %d files, the survey says %d" % (
            held, report["dest_held"]["files"]))


def run(a):
    os.makedirs(a.workdir, exist_ok=True)
    src, count = tree(a.workdir, a.files, a.seed)
    empty = os.path.join(a.workdir, "empty")
    dest = os.path.join(a.workdir, "dest")
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(empty)
    if not os.path.isdir(dest):
        os.makedirs(dest)
        tops = sorted(os.listdir(src))[::4]
        subprocess.check_call(["rsync", "-a"] + [os.path.join(src, t) for t in tops] + [dest])
    held = count_tree(dest).files
    out = os.path.join(a.workdir, "survey.json")
    log = os.path.join(a.workdir, "bench.log")
    versions = [("", a.msrsync)]
    if a.compare:
        old = a.compare if os.path.isfile(a.compare) else longtail.extract_old(
            a.compare, a.workdir)[0]
        versions.append(("old ", old))
        print("new: %s; old: %s (%s)" % (a.msrsync, old, a.compare))
    commands = []
    for label, path in versions:
        py = [sys.executable, path]
        commands += [
            (label + "survey", py + ["--survey", "--json", out, src + "/"], None),
            (label + "survey+DEST", py + ["--survey", "--json", out, src + "/", dest + "/"],
             held),
            (label + "survey+rule", py + ["--survey", "--json", out, "--rsync", RULE,
                                          src + "/"], None),
            (label + "survey+merge", py + ["--survey", "--json", out, "--rsync", MERGE,
                                           src + "/"], None),
            (label + "-d", py + ["-d", src + "/", empty + "/"], False),
            (label + "-d+rule", py + ["-d", "--rsync", RULE, src + "/", empty + "/"], False),
            (label + "-d+merge", py + ["-d", "--rsync", MERGE, src + "/", empty + "/"], False),
        ]
    py = [sys.executable, a.msrsync]
    commands.append(("find", ["find", src + "/", "-printf", "%s %y %T@ %n\\n"], False))
    spawner = Spawner()
    for _, argv, _ in commands:         # warm the cache, untimed
        subprocess.check_call(argv, stdout=subprocess.DEVNULL)
    times = dict((name, []) for name, _, _ in commands)
    cpus = dict((name, []) for name, _, _ in commands)
    rss = dict((name, 0) for name, _, _ in commands)
    for rep in range(a.reps):
        order = commands[rep % len(commands):] + commands[:rep % len(commands)]
        for name, argv, check in order:
            m = measure(argv, log, spawner)
            if m.exit_code != 0:
                raise SystemExit("survey.py: %s exited %d (see %s)" % (name, m.exit_code, log))
            if check is not False:
                check_survey(out, count, check)
            times[name].append(m.wall)
            cpus[name].append(m.user + m.sys)
            rss[name] = max(rss[name], m.maxrss_kib)
    base = statistics.median(times["-d"])
    print("%d files, %d directories, %d bytes; %d reps, medians (warm cache)" % (
        count["files"], count["dirs"], count["bytes"], a.reps))
    print("%-16s %9s %9s %9s %9s %9s" % ("command", "seconds", "/ -d", "CPU s", "CPU min",
                                          "peak RSS"))
    for name, _, _ in commands:
        med = statistics.median(times[name])
        print("%-16s %9.2f %9.2f %9.3f %9.3f %7.1f MB" % (
            name, med, med / base, statistics.median(cpus[name]), min(cpus[name]),
            rss[name] / 1024.0))
    for size in [int(x) for x in a.memory_sizes.split(",") if x]:
        small, small_count = tree(a.workdir, size, a.seed)
        m = measure(py + ["--survey", "--json", out, small + "/"], log, spawner)
        check_survey(out, small_count)
        print("survey of %d files: %.2f s, peak RSS %.1f MB" % (size, m.wall,
                                                               m.maxrss_kib / 1024.0))
    if not a.keep_tree:
        shutil.rmtree(a.workdir, ignore_errors=True)
    return 0


def main(argv=None):
    return run_main("survey.py", run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
