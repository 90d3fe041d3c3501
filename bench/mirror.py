#!/usr/bin/env python3
"""Mirror benchmark: `rsync -a --delete` against `msrsync -p N --rsync "-a --delete"`.

The scene of the --delete issue: a tree of small files (bench.py's dataset)
was mirrored once; since then 1% of its files were deleted and 1% changed.
Each timed run starts from that same stale mirror (reset, untimed, by a plain
`rsync -a --delete` from a saved copy), tools interleaved round-robin over the
repetitions, and each result is checked with `rsync -ain --delete SRC/ DST/`
(which must print nothing).  Medians and ratios to plain rsync, one run.

    python3 bench/mirror.py [--files 100000] [--reps 3] [--procs 1,2,4]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import build_dataset, settle_caches  # noqa: E402  (same directory)
from common import command_prefix, use_this_python  # noqa: E402


def mutate(src, fraction, seed):
    """Delete `fraction` of the files and rewrite another `fraction`."""
    files = []
    for dirpath, _, names in os.walk(src):
        files += [os.path.join(dirpath, n) for n in names]
    files.sort()
    rng = random.Random(seed)
    rng.shuffle(files)
    n = max(1, int(len(files) * fraction))
    for path in files[:n]:
        os.unlink(path)
    for path in files[n:2 * n]:
        with open(path, "ab") as handle:
            handle.write(b"changed\n")
    return n


def run(argv):
    started = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - started, proc.returncode, proc.stderr.decode("utf-8", "replace")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--procs", default="2")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--msrsync", default=os.path.join(HERE, "..", "msrsync"))
    args = parser.parse_args()
    use_this_python()
    work = tempfile.mkdtemp(prefix="msrsync-mirror-", dir=args.workdir or "/var/tmp")
    try:
        src, stale, dst = (os.path.join(work, d) for d in ("src", "stale", "dst"))
        os.mkdir(src)
        build_dataset(src, args.files, 42)
        subprocess.check_call(["rsync", "-a", src + "/", stale + "/"])
        n = mutate(src, 0.01, 7)
        print("%d files; %d deleted and %d changed since the mirror" % (args.files, n, n))
        tools = [("rsync -a --delete", ["rsync", "-a", "--delete", src + "/", dst + "/"])]
        for p in args.procs.split(","):
            tools.append(("msrsync -p %s" % p, command_prefix(args.msrsync) + [
                "-p", p, "--rsync", "-a --delete", src + "/", dst + "/"]))
        times = dict((label, []) for label, _ in tools)
        for rep in range(args.reps):
            order = tools[rep % len(tools):] + tools[:rep % len(tools)]
            for label, argv in order:
                subprocess.check_call(["rsync", "-a", "--delete", stale + "/", dst + "/"])
                settle_caches(True)
                took, code, err = run(argv)
                check = subprocess.run(["rsync", "-ain", "--delete", src + "/", dst + "/"],
                                       stdout=subprocess.PIPE).stdout
                ok = code == 0 and not check.strip()
                print("rep %d %-20s %6.2f s exit %d %s" % (rep + 1, label, took, code,
                                                          "ok" if ok else "DIFFERS"))
                sys.stdout.flush()
                if not ok:
                    print(err[:2000] + check.decode("utf-8", "replace")[:2000])
                    return 1
                times[label].append(took)
        base = statistics.median(times[tools[0][0]])
        print("\n| tool | median s | min | max | ratio to rsync |\n|---|---:|---:|---:|---:|")
        for label, _ in tools:
            t = times[label]
            print("| %s | %.2f | %.2f | %.2f | %.2f |" % (label, statistics.median(t), min(t),
                                                       max(t), statistics.median(t) / base))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
