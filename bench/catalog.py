#!/usr/bin/env python3
"""A final sync with and without --catalog, against plain rsync and the floor.

    python3 bench/catalog.py [--entries 1000000] [--reps 2] [--procs 2,4]
    python3 bench/catalog.py --relay-entries 20000     # DEST behind sshfs + relay.py too
    python3 bench/catalog.py --quick                   # 20,000 entries, one rep

A tree of ENTRIES files (bench/common.py's dataset, ~50 files a directory) is copied
once to a DEST for each tool; a catalog tool's DEST is written by its own first run,
as a migration that uses --catalog from its first copy has it. Each rep then changes SRC as a migration's last day
does: 0.1% of the files rewritten (new size and mtime), a few deleted and added, and
one directory of 1,000 files (RENAMED) renamed; then every tool brings its own DEST
up to date, page cache dropped before each (where the kernel allows):

  rsync         rsync -a --delete SRC/ DEST/
  msrsync-pN    msrsync -p N --rsync "-a --delete" SRC/ DEST/
  catalog-pN    the same with --catalog FILE (made by an untimed first run, which
                copies SRC whole into an empty DEST)
  floor         find SRC -printf (one stat pass, the work a catalog cannot avoid),
                then one rsync -a --delete-missing-args given exactly the changed
                paths (the bench knows them: it made them)

Every DEST is compared with rsync's (names, types, sizes, modes, mtimes) after each
rep: a difference fails the bench. Figures: the median wall time, its ratio to the
floor, CPU seconds, and the peak RSS of the tool's process tree (os.wait4).

With --relay-entries N, a second tree of N files is served to the tools' DESTs through
sshfs over bench/relay.py (0.5 ms each way, --delay-ms) from a private loopback sshd,
sshfs with sshfs_debug: each SFTP request at DEST is one line of its log, so the bench
counts DEST's operations per tool (and per changed entry). Everything is stopped by
pid; no traffic leaves 127.0.0.1.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (Spawner, build_dataset, command_prefix, load_servers, log,  # noqa: E402
                    measure, settle_caches, start_sshd, use_this_python)
import suite  # noqa: E402

MSRSYNC = os.path.join(os.path.dirname(HERE), "msrsync")
RENAMED = 1000
# SFTP requests that carry file data; every other one is a metadata operation
DATA_REQUESTS = ("READ", "WRITE")
# msrsync marks a file its rsync wrote only once the file's ctime is this much
# older than the run (its CATALOG_SETTLED_NS): the catalogs' first runs wait for it
SETTLED_S = 2.2


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench/catalog.py", description=__doc__.split("\n")[0])
    p.add_argument("--entries", type=int, default=1000000)
    p.add_argument("--relay-entries", type=int, default=0,
                   help="a second tree of this many files, DEST behind sshfs and the relay")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--relay-reps", type=int, default=1)
    p.add_argument("--procs", default="2,4")
    p.add_argument("--delay-ms", type=float, default=0.5)
    p.add_argument("--workdir", default="/tmp/msrsync-bench-catalog")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", help="write the figures as JSON")
    a = p.parse_args(argv)
    if a.quick:
        a.entries, a.reps = 20000, 1
    a.procs = [int(x) for x in a.procs.split(",")]
    return a


def files_of(root):
    out = []
    for top, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.relpath(os.path.join(top, f), root) for f in sorted(files)]
    return out


def mutate(src, rng, rep):
    """A last day's changes; returns the paths (relative to SRC) a perfect list of
    changes would name, parents included."""
    # (the directory renamed below is changed by its rename alone)
    files = [f for f in files_of(src) if not f.startswith("moving-")]
    changed = set()
    count = max(1, len(files) // 1000)
    t = 1800000000 + rep * 1000
    for rel in rng.sample(files, count):
        path = os.path.join(src, rel)
        with open(path, "ab") as f:
            f.write(b"changed %d\n" % rep)
        os.utime(path, (t, t))
        changed.add(rel)
    for rel in rng.sample([f for f in files if f not in changed], max(1, count // 10)):
        os.unlink(os.path.join(src, rel))
        changed.add(rel)
    dirs = sorted(set(os.path.dirname(f) for f in files))
    for i in range(max(1, count // 10)):
        rel = os.path.join(rng.choice(dirs), "new-%d-%d" % (rep, i))
        with open(os.path.join(src, rel), "wb") as f:
            f.write(b"new\n")
        changed.add(rel)
    # one directory of RENAMED files, made at the first rep, renamed at each
    moving = [d for d in os.listdir(src) if d.startswith("moving-")]
    if not moving:
        return changed, None
    old = moving[0]
    new = "moving-%d" % rep
    os.rename(os.path.join(src, old), os.path.join(src, new))
    changed.update([old, new] + [os.path.join(new, f)
                                 for f in os.listdir(os.path.join(src, new))])
    parents = set()
    for rel in changed:
        parent = os.path.dirname(rel)
        while parent:
            parents.add(parent)
            parent = os.path.dirname(parent)
    return changed | parents, (old, new)


def make_moving(src):
    d = os.path.join(src, "moving-0")
    os.makedirs(d)
    for i in range(RENAMED):
        with open(os.path.join(d, "m%04d" % i), "wb") as f:
            f.write(b"m" * (i % 200))


def snapshot(root):
    out = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_mode, 0 if os.path.isdir(path) else st.st_size,
                                                0 if os.path.isdir(path) else st.st_mtime_ns)
    return out


class Tools(object):
    """The commands of one tree: each tool's DEST, the catalog, the floor's list."""

    def __init__(self, a, work, src, dest_of):
        self.a, self.work, self.src = a, work, src
        self.dest_of = dest_of            # tool name -> the DEST it writes (a path)
        self.names = ["rsync"] + ["msrsync-p%d" % n for n in a.procs] + \
            ["catalog-p%d" % n for n in a.procs] + ["floor"]

    def argv(self, name, changes_list):
        dest = self.dest_of[name] + "/"
        src = self.src + "/"
        if name == "rsync":
            return ["rsync", "-a", "--delete", src, dest]
        if name == "floor":
            # (find's own format: "%%" would print a "%" and stat nothing)
            return ["sh", "-c", 'find "$1" -printf "%s %T@ %p\\n" >/dev/null && '
                    'rsync -a --delete-missing-args --force --from0 --files-from="$2" "$1" "$3"',
                    "floor", src, changes_list, dest]
        procs = name.split("-p")[1]
        # (as a program: its code kept compiled, as a user's runs have it)
        argv = command_prefix(MSRSYNC) + ["-p", procs]
        if name.startswith("catalog"):
            argv += ["--catalog", os.path.join(self.work, name + ".catalog")]
        return argv + ["--rsync", "-a --delete", src, dest]


def prepare(a, work, entries, seed, dest_names, dest_root, whole_seconds=False):
    """SRC, and one DEST a tool, each a copy of SRC (the tools' DESTs hard links of one
    copy: no tool changes a file in place), but for the catalog tools, whose first run
    makes theirs; whole_seconds: the copies' mtimes as a copy through sshfs leaves
    them (SFTP carries whole seconds: a tool there can neither see nor set the
    rest)."""
    src = os.path.join(work, "src")
    if os.path.exists(work):
        subprocess.call(["rm", "-rf", work])
    os.makedirs(work)
    log("building %d files in %s" % (entries, src))
    build_dataset(src, entries, seed)
    make_moving(src)
    base = os.path.join(work, "base")
    subprocess.check_call(["cp", "-a", src, base])
    if whole_seconds:
        for top, dirs, files in os.walk(base, topdown=False):
            for name in files + [""]:
                path = os.path.join(top, name) if name else top
                st = os.lstat(path)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns // 10**9 * 10**9),
                         follow_symlinks=False)
    dests = {}
    os.makedirs(dest_root, exist_ok=True)
    for name in dest_names:
        dests[name] = os.path.join(dest_root, name)
        if not name.startswith("catalog"):
            subprocess.check_call(["cp", "-al", base, dests[name]])
    return src, dests


def run_reps(a, tools, log_path, spawner, counter=None, check_dirs=None):
    """The reps: SRC changed, then each tool in turn; returns {tool: [Measure]} and
    DEST's operations {tool: [(ops, metadata ops, changed)]}.  Each DEST is compared
    with rsync's after each rep, at check_dirs (tool -> its path; its DEST's own by
    default: a DEST behind the relay is compared where the server keeps it)."""
    check_dirs = check_dirs or tools.dest_of
    rng = random.Random(a.seed)
    times = {n: [] for n in tools.names}
    ops = {n: [] for n in tools.names}
    # the catalogs, made the full way (untimed), SRC's ctimes settled first
    time.sleep(SETTLED_S)
    for name in tools.names:
        if name.startswith("catalog"):
            m = measure(tools.argv(name, None), log_path, spawner)
            if m.exit_code != 0:
                raise SystemExit("%s's first run failed (%d): see %s" % (name, m.exit_code, log_path))
    for rep in range(1, a.reps + 1):
        changed, _ = mutate(tools.src, rng, rep)
        listed = os.path.join(tools.work, "changes-%d" % rep)
        with open(listed, "wb") as f:
            f.write(b"".join(os.fsencode(c) + b"\0" for c in sorted(changed)))
        for name in tools.names:
            settle_caches(True)
            before = counter.count() if counter else None
            m = measure(tools.argv(name, listed), log_path, spawner)
            if m.exit_code != 0:
                raise SystemExit("%s failed (%d) at rep %d: see %s" % (name, m.exit_code, rep, log_path))
            times[name].append(m)
            if counter:
                total, meta = counter.count()
                ops[name].append((total - before[0], meta - before[1], len(changed)))
            log("rep %d %-12s %7.2f s  cpu %6.2f s  rss %6.1f MB" % (
                rep, name, m.wall, m.user + m.sys, m.maxrss_kib / 1024.0))
        want = snapshot(check_dirs["rsync"])
        for name in tools.names:
            got = snapshot(check_dirs[name])
            if got != want:
                bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
                raise SystemExit("%s's DEST differs from rsync's at rep %d: %s" % (
                    name, rep, bad[:5]))
    return times, ops


class SftpCounter(object):
    """SFTP requests sshfs logged (sshfs_debug): all of them, and the metadata ones."""

    def __init__(self, log_path):
        self.log_path = log_path

    def count(self):
        total = meta = 0
        with open(self.log_path, "rb") as f:
            for line in f:
                if line.startswith(b"[") and b"] " in line[:10]:
                    kind = line.split(b"] ", 1)[1].split()[0].decode("ascii", "replace")
                    total += 1
                    if kind not in DATA_REQUESTS:
                        meta += 1
        return total, meta


def table(times, ops=None):
    floor = statistics.median(m.wall for m in times["floor"])
    lines = ["| tool | median wall | x floor | CPU s | peak RSS |%s" % (
        " DEST ops (metadata) | metadata ops a changed entry |" if ops else ""),
             "|---|---|---|---|---|%s" % ("---|---|" if ops else "")]
    for name, ms in times.items():
        wall = statistics.median(m.wall for m in ms)
        cpu = statistics.median(m.user + m.sys for m in ms)
        rss = max(m.maxrss_kib for m in ms) / 1024.0
        row = "| %s | %.2f s | %.2f | %.2f | %.0f MB |" % (name, wall, wall / floor, cpu, rss)
        if ops:
            o = ops[name]
            total = statistics.median(x[0] for x in o)
            meta = statistics.median(x[1] for x in o)
            per = statistics.median(x[1] / float(x[2]) for x in o)
            row += " %d (%d) | %.2f |" % (total, meta, per)
        lines.append(row)
    return "\n".join(lines)


def main(argv=None):
    a = parse_args(argv)
    use_this_python()
    # the program as it is now, for every run (an edit while the bench runs changes nothing)
    global MSRSYNC
    os.makedirs(a.workdir, exist_ok=True)
    snapshot_path = os.path.join(a.workdir, "msrsync")
    shutil.copy2(MSRSYNC, snapshot_path)
    MSRSYNC = snapshot_path
    spawner = Spawner()
    log_path = os.path.join("/tmp", "bench-catalog.log")
    results = {}
    names = ["rsync"] + ["msrsync-p%d" % n for n in a.procs] + \
        ["catalog-p%d" % n for n in a.procs] + ["floor"]
    local = os.path.join(a.workdir, "local")
    if a.entries:                     # (--entries 0: the relay's section alone)
        src, dests = prepare(a, local, a.entries, a.seed, names, local)
        tools = Tools(a, local, src, dests)
        times, _ = run_reps(a, tools, log_path, spawner)
        results["local"] = table(times)
        print("\n## Local disk: %d files, %d reps, rsync %s\n" % (
            a.entries, a.reps,
            subprocess.check_output(["rsync", "--version"]).split(b"\n")[0].decode()))
        print(results["local"])
        shutil.rmtree(local)
    if a.relay_entries:
        results["relay"] = relay_section(a, names, log_path, spawner)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


def relay_section(a, names, log_path, spawner):
    """The tools' DESTs through sshfs over the relay: their local copies are made
    directly, then reached through the mount."""
    servers = load_servers()
    work = os.path.join(a.workdir, "relay")
    served = os.path.join(work, "served")
    src, local_dests = prepare(a, work, a.relay_entries, a.seed + 1, names, served,
                               whole_seconds=True)
    server = start_sshd(servers, os.path.join(a.workdir, "sshd"))
    relay = suite.Relay(servers, server.port, a.delay_ms, work)
    mount = None
    try:
        relay.start()
        mount = suite.SshfsMount(servers, server, relay.port, served,
                                 os.path.join(work, "mnt"), os.path.join(work, "sshfs.log"))
        mount.options.append("sshfs_debug")
        mount.start()
        dests = {n: os.path.join(mount.mountpoint, n) for n in names}
        tools = Tools(a, work, src, dests)
        times, ops = run_reps(argparse.Namespace(**dict(vars(a), reps=a.relay_reps)), tools,
                              log_path, spawner, SftpCounter(mount.log), local_dests)
    finally:
        if mount is not None:
            mount.stop()
        relay.stop()
        server.stop()
    out = table(times, ops)
    print("\n## DEST behind sshfs and the relay (%.1f ms each way): %d files, %d reps\n" % (
        a.delay_ms, a.relay_entries, a.relay_reps))
    print(out)
    shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
