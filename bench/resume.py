#!/usr/bin/env python3
"""--resume's figure: a run interrupted half-way and resumed, against running it again.

Builds a tree of empty files (1,000,000 by default, 1,000 per directory) on
/dev/shm, then measures, each to a fresh DEST:
  full    msrsync -p P -f F SRC/ DEST/
  resume  the same run SIGKILLed once half its buckets are in done.journal,
          then `msrsync --resume DIR`
and checks DEST is complete (rsync -ain shows nothing to do).

    python3 bench/resume.py                 # 1,000,000 entries, -p 8 -f 10000
    python3 bench/resume.py --files 100000  # quicker
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")
sys.path.insert(0, HERE)
from common import command_prefix, use_this_python  # noqa: E402  (same directory)


def build(src, files, per_dir=1000):
    for d in range((files + per_dir - 1) // per_dir):
        path = os.path.join(src, "d%05d" % d)
        os.makedirs(path)
        for f in range(min(per_dir, files - d * per_dir)):
            open(os.path.join(path, "f%04d" % f), "wb").close()


def msrsync(*args, **kw):
    return command_prefix(MSRSYNC) + [str(a) for a in args]


def complete(src, dest):
    out = subprocess.run(["rsync", "-ain", src + "/", dest + "/"], stdout=subprocess.PIPE,
                         check=True).stdout
    return not out.strip()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--files", type=int, default=1000000)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--bucket-files", type=int, default=10000)
    p.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = p.parse_args()
    use_this_python()
    work = tempfile.mkdtemp(prefix="msrsync-bench-resume-", dir=args.workdir)
    try:
        src = os.path.join(work, "src")
        build(src, args.files)
        caps = ["-p", args.procs, "-f", args.bucket_files]
        dry = subprocess.run(msrsync("-d", *caps, "--json", "-", src + "/",
                                     os.path.join(work, "x")),
                             stdout=subprocess.PIPE, check=True).stdout
        total = json.loads(dry.decode())["buckets_total"]

        started = time.monotonic()
        subprocess.run(msrsync(*caps, src + "/", os.path.join(work, "full") + "/"),
                       check=True)
        full = time.monotonic() - started
        assert complete(src, os.path.join(work, "full"))
        shutil.rmtree(os.path.join(work, "full"))

        buckets = os.path.join(work, "b")
        os.mkdir(buckets)
        half = os.path.join(work, "half")
        proc = subprocess.Popen(msrsync(*caps, "-b", buckets, src + "/", half + "/"))
        journal, done = None, 0
        while proc.poll() is None and done < total // 2:
            runs = os.listdir(buckets)
            if runs:
                journal = os.path.join(buckets, runs[0], "done.journal")
                if os.path.exists(journal):
                    with open(journal, "rb") as handle:
                        # a finished bucket is a sha256 line ("U" lines list its subtrees)
                        done = sum(1 for line in handle.read().split(b"\n") if len(line) == 64)
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(2)       # the watchdog stops the orphaned rsyncs
        summary = os.path.join(work, "resume.json")
        started = time.monotonic()
        subprocess.run(msrsync("--resume", os.path.dirname(journal), "--json", summary),
                       check=True)
        resumed = time.monotonic() - started
        s = json.load(open(summary))
        ok = complete(src, half)
        print("| run | seconds |\n|---|---:|")
        print("| full run, %d entries, -p %d -f %d (%d buckets) | %.2f |"
              % (args.files, args.procs, args.bucket_files, total, full))
        print("| --resume after SIGKILL at %d of %d buckets (%d skipped, %d rsync runs) "
              "| %.2f |" % (done, total, s["buckets_skipped"], s["rsync_processes"], resumed))
        print("DEST complete after resume: %s" % ok)
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
