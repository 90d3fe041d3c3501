#!/usr/bin/env python3
"""What one bucket costs on a worker host's path, part by part, on this machine.

A bucket run on a worker host is `sh` started by the host shell, reading
msrsync's host script (host_script) from stdin: its rsync's list travels
in it as printf commands, a watcher answers the keep-alives, and the
worker reads on to rsync's exit.  A bucket run here is rsync alone, its
end seen before its exit (_ProcessWatch: rsync's processes poll each
other with 20 ms sleeps as they end), with the readahead beside it.
This measures each difference on one bucket of --files small files
(0-8 KiB, one directory a hundred), --reps times each, interleaved:

  rsync            plain `rsync -aS --from0 --files-from=LIST SRC/ DEST/`
  rsync, end seen  the same, timed to the end _ProcessWatch sees
  script           the host script run by a local `sh` (no ssh), timed
                   to its exit line
  script, no list  the same with the list read from its file (no printf)
  script, no watch the same without the keep-alive watcher
  + python3        the host script with `python3 -I -S -c pass` started
                   beside it: the least a helper process on the host
                   (to see the transfer's end, or to read ahead) costs

Two scenarios: an up-to-date re-run of the bucket (page cache warm) and a
copy into an empty DEST (page cache dropped before each run when root).
Medians of wall seconds and of CPU seconds (the run's processes, from
rusage); the figures are in bench/README.md ("Worker hosts: a bucket's
path, part by part").

    python3 bench/hostpath.py                       # 1000 files, 15 reps
    python3 bench/hostpath.py --files 2000 --reps 25 --msrsync /path/to/msrsync
"""

import argparse
import importlib.machinery
import importlib.util
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")


def load(path):
    """msrsync as a module (its host_script, _ProcessWatch)."""
    loader = importlib.machinery.SourceFileLoader("msrsync_hostpath", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def make_tree(src, files, seed):
    rng = random.Random(seed)
    names = []
    for n in range(files):
        rel = "d%03d/f%05d" % (n // 100, n)
        os.makedirs(os.path.join(src, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(src, rel), "wb") as handle:
            handle.write(os.urandom(rng.randrange(0, 8192)))
        names.append(rel)
    return names


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_rsync(cmd, watch_class=None):
    """Plain rsync: (wall to its exit, or to the end _ProcessWatch sees)."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    if watch_class is None:
        proc.wait()
        return time.monotonic() - started
    watch = watch_class(proc.pid)
    while proc.poll() is None and not watch.transfer_over():
        time.sleep(0.001)
    seen = time.monotonic() - started
    proc.wait()
    return seen


def run_script(script, exit_mark, beside=None):
    """The host script run by sh here: wall to its exit line."""
    started = time.monotonic()
    side = subprocess.Popen(beside) if beside else None
    proc = subprocess.Popen(["sh"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.stdin.write(script)
    proc.stdin.flush()
    took = None
    for line in proc.stdout:
        if line.startswith(exit_mark):
            took = time.monotonic() - started
            proc.stdin.close()
    proc.wait()
    if side is not None:
        side.wait()
    if took is None:
        raise SystemExit("hostpath: the host script said no exit line")
    return took


def drop_caches():
    if os.geteuid() == 0:
        subprocess.run(["sync"])
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="files in the bucket [1000]")
    parser.add_argument("--reps", type=int, default=15, help="repetitions [15]")
    parser.add_argument("--msrsync", default=MSRSYNC, help="the msrsync whose script to run")
    parser.add_argument("--workdir", default=None,
                        help="where the tree goes [a temporary directory under /var/tmp]")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    msr = load(args.msrsync)
    python = shutil.which("python3")
    work = args.workdir or tempfile.mkdtemp(prefix="msrsync-hostpath-", dir="/var/tmp")
    try:
        src, dest = os.path.join(work, "src"), os.path.join(work, "dest")
        names = make_tree(src, args.files, args.seed)
        listing = os.path.join(work, "list")
        with open(listing, "wb") as handle:
            handle.write(b"".join(os.fsencode(n) + b"\0" for n in names))
        cmd = [b"rsync", b"-aS", b"--from0", b"--files-from=" + os.fsencode(listing),
               os.fsencode(src) + b"/", os.fsencode(dest) + b"/"]
        full = msr.host_script(cmd)
        start = full.index(b"{ printf")
        no_list = (full[:start] + full[full.index(b"| ", start) + 2:]).replace(
            b"--files-from=-", b"--files-from=" + os.fsencode(listing))
        no_watch = re.sub(rb"\(while :.*?&\n", b"", full, flags=re.S)
        mark = msr.HOST_EXIT_MARK
        variants = [
            ("rsync", lambda: run_rsync(cmd)),
            ("rsync, end seen", lambda: run_rsync(cmd, msr._ProcessWatch)),
            ("script", lambda: run_script(full, mark)),
            ("script, no list", lambda: run_script(no_list, mark)),
            ("script, no watch", lambda: run_script(no_watch, mark)),
            ("script + python3", lambda: run_script(full, mark, [python, "-I", "-S", "-c",
                                                                 "pass"])),
        ]
        print("msrsync: %s; %d files in the bucket; %d reps; rsync: %s" % (
            args.msrsync, args.files, args.reps,
            subprocess.run(["rsync", "--version"], stdout=subprocess.PIPE).stdout
            .split(b"\n")[0].decode()))
        print("")
        print("| scenario | run | median wall ms | median CPU ms |")
        print("|---|---|---:|---:|")
        for scenario in ("up-to-date re-run", "copy"):
            walls = dict((name, []) for name, _ in variants)
            cpus = dict((name, []) for name, _ in variants)
            subprocess.run(["rsync", "-a", src + "/", dest + "/"], check=True)
            for _ in range(args.reps):
                for name, run in variants:
                    if scenario == "copy":
                        shutil.rmtree(dest, ignore_errors=True)
                        drop_caches()
                    before = children_cpu()
                    walls[name].append(run())
                    cpus[name].append(children_cpu() - before)
            for name, _ in variants:
                print("| %s | %s | %.1f | %.1f |" % (
                    scenario, name, 1000 * statistics.median(walls[name]),
                    1000 * statistics.median(cpus[name])))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
