#!/usr/bin/env python3
"""What the pre-flight of DEST costs: a run with it against one without.

For each DEST (a directory on the work directory's file system and, with --ssh, the
same over the private loopback sshd of tests/remote.py), in one session:
  preflight s   the pre-flight's own seconds, as --json reports them (median)
  first copy    msrsync -p 2 of --files small files into an empty DEST, with
                --preflight refuse (the default) and off, and plain rsync -a
  re-run        the same, DEST up to date
Each command runs in turn --reps times (one after the other, so that a noisy
neighbour weighs on all alike); the table gives medians and ratios to rsync.

    python3 bench/preflight.py                       # local DEST, 2,000 files
    python3 bench/preflight.py --ssh --files 10000 --reps 7
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")
PROG = "bench/preflight.py"
sys.path.insert(0, HERE)
from common import load_servers, run_ok, start_sshd, use_this_python  # noqa: E402


def build(src, files):
    for i in range(files):
        directory = os.path.join(src, "d%03d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(directory)
        with open(os.path.join(directory, "f%05d" % i), "wb") as handle:
            handle.write(b"x" * (i % 4096))


def measure(name, target, local_dest, rsh, src, work, env, reps):
    """The rows of one DEST: (what, tool, median seconds, ratio to rsync)."""
    extra = ["-e", rsh] if rsh else []
    opts = " ".join(["-a"] + (["-e", "'%s'" % rsh] if rsh else []))
    summary = os.path.join(work, "summary.json")
    tools = [("rsync -a", lambda dest: ["rsync", "-a"] + extra + [src + "/", dest]),
             ("msrsync -p 2", lambda dest: [MSRSYNC, "-p", "2", "--json", summary, "--rsync",
                                            opts, src + "/", dest]),
             ("msrsync -p 2 --preflight off",
              lambda dest: [MSRSYNC, "-p", "2", "--preflight", "off", "--rsync", opts,
                            src + "/", dest])]
    copies = [[] for _ in tools]
    reruns = [[] for _ in tools]
    probes = []
    for rep in range(reps):
        for number, (_, argv) in enumerate(tools):
            dest = os.path.join(local_dest, "t%d-%d" % (number, rep))
            os.makedirs(dest)
            there = target(dest) + "/"
            copies[number].append(run_ok(argv(there), env, PROG))
            if number == 1:
                with open(summary) as handle:
                    probes.append(json.load(handle)["preflight"]["seconds"])
            reruns[number].append(run_ok(argv(there), env, PROG))
            if number == 1:
                with open(summary) as handle:
                    probes.append(json.load(handle)["preflight"]["seconds"])
            shutil.rmtree(dest)
    rows = []
    for what, times in (("first copy", copies), ("re-run", reruns)):
        base = statistics.median(times[0])
        for (tool, _), got in zip(tools, times):
            rows.append((name, what, tool, statistics.median(got), statistics.median(got) / base))
    return rows, statistics.median(probes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="files of the tree [2000]")
    parser.add_argument("--reps", type=int, default=5, help="runs of each [5]")
    parser.add_argument("--ssh", action="store_true",
                        help="also DEST over the private loopback sshd")
    parser.add_argument("--workdir", default=None, help="where the trees go [TMPDIR]")
    args = parser.parse_args()
    use_this_python()
    work = tempfile.mkdtemp(prefix="msrsync-preflight-", dir=args.workdir)
    server = None
    try:
        env = dict(os.environ)
        src = os.path.join(work, "src")
        build(src, args.files)
        dests = os.path.join(work, "dests")
        os.makedirs(dests)
        rows, probes = measure("local", lambda p: p, dests, None, src, work, env, args.reps)
        probe_rows = [("local", probes)]
        if args.ssh:
            server = start_sshd(load_servers(), os.path.join(work, "sshd"))
            more, probes = measure("ssh", server.remote, dests, server.rsh, src, work, env,
                                   args.reps)
            rows += more
            probe_rows.append(("ssh", probes))
        print("| DEST | run | tool | median s | ratio to rsync |")
        print("|---|---|---|---:|---:|")
        for name, what, tool, seconds, ratio in rows:
            print("| %s | %s | %s | %.3f | %.2f |" % (name, what, tool, seconds, ratio))
        print()
        print("| DEST | pre-flight s (median, --json) |")
        print("|---|---:|")
        for name, seconds in probe_rows:
            print("| %s | %.3f |" % (name, seconds))
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
