#!/usr/bin/env python3
"""What msrsync's checks of what it trusts cost: start-up and a small re-run.

For each program given (this checkout's msrsync by default; pass an older
one too, e.g. `git show REV:msrsync > /tmp/msrsync.old`), copied into a work
directory on /dev/shm so that its compiled-code cache is its own:
  startup   `msrsync --version` run as a program (the sh loader, its cache
            found and checked), median of --reps, the cache warm
  re-run    an up-to-date re-run of --files empty files (100 a directory)
            with `-p 2 --json FILE --status-file FILE`, median of --reps,
            and its ratio to `rsync -a` in the same run
Both write what the checks guard: the cache, the bucket directory (its
parent checked), the --json and --status-file files (their paths walked).

    python3 bench/trust.py                                   # this msrsync
    python3 bench/trust.py --msrsync ./msrsync /tmp/msrsync.old --reps 25
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")
PROG = "bench/trust.py"
sys.path.insert(0, HERE)
from common import run_ok, use_this_python  # noqa: E402  (same directory)


def medians(commands, env, reps):
    """The median wall seconds of each command, run in turn reps times: one
    after the other, so that a noisy neighbour weighs on all of them alike."""
    times = [[] for _ in commands]
    for _ in range(reps):
        for argv, got in zip(commands, times):
            got.append(run_ok(argv, env, PROG))
    return [statistics.median(got) for got in times]


def build(src, files):
    for i in range(files):
        directory = os.path.join(src, "d%03d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(directory)
        open(os.path.join(directory, "f%05d" % i), "wb").close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--msrsync", nargs="+", default=[MSRSYNC],
                        help="the msrsync programs to measure [this checkout's]")
    parser.add_argument("--reps", type=int, default=25, help="runs of each [25]")
    parser.add_argument("--files", type=int, default=10000, help="files of the re-run [10000]")
    args = parser.parse_args()
    use_this_python()
    work = tempfile.mkdtemp(prefix="msrsync-trust-", dir="/dev/shm")
    try:
        env = dict(os.environ)
        env["XDG_CACHE_HOME"] = os.path.join(work, "cache")
        src, dest = os.path.join(work, "src"), os.path.join(work, "dest")
        build(src, args.files)
        subprocess.run(["rsync", "-a", src + "/", dest + "/"], check=True)
        copies = []
        for number, program in enumerate(args.msrsync):
            copies.append(os.path.join(work, "msrsync-%d" % number))
            shutil.copy(program, copies[-1])
            os.chmod(copies[-1], 0o755)
            run_ok([copies[-1], "--version"], env, PROG)          # (the cache filled)
        startups = medians([[copy, "--version"] for copy in copies], env, args.reps)
        reruns = medians([["rsync", "-a", src + "/", dest + "/"]] +
                         [[copy, "-p", "2", "--json", os.path.join(work, "summary.json"),
                           "--status-file", os.path.join(work, "status.json"),
                           src + "/", dest + "/"] for copy in copies], env, args.reps)
        print("| msrsync | startup ms | re-run s | ratio to rsync |")
        print("|---|---:|---:|---:|")
        for program, startup, rerun in zip(args.msrsync, startups, reruns[1:]):
            print("| %s | %.1f | %.3f | %.2f |" % (program, startup * 1000, rerun,
                                                  rerun / reruns[0]))
        print("| rsync -a | | %.3f | 1.00 |" % reruns[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
