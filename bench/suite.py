#!/usr/bin/env python3
"""The benchmark suite: where one rsync is bound, and what msrsync -p N does there.

Standard library only, Python 3.6+, Linux. Sections (--only takes their names or letters):

  a/b copy      initial copy and up-to-date re-run of three trees: small files (bench.py's
                tree), a mixed tree (small files plus files of 5-60 MiB, ~1 GiB) and one
                big file (4 GiB): rsync -aS --numeric-ids against msrsync -p 1/2/4
  c   checksum  -c re-check of an up-to-date DEST: rsync -ac against
                msrsync -p 1/2/4 --rsync "-ac" (small files and the mixed tree)
  d   compress  -z levels 0/1/6/9 pushing 1 GiB of log-like text over ssh to a private
                loopback sshd: rsync -az --zc=zlib --zl=N --stats against msrsync -p 2/4
                with the same options; time, wire bytes ("Total bytes sent"), speedup
  e   ssh       ssh cipher and compression options (-c aes128-ctr -o Compression=no,
                -o Compression=yes, aes128-gcm, chacha20) pushing the same text with
                rsync -a against msrsync -p 2
  f   sshfs     a latency-bound source, a stand-in for NFS: a small-file tree (5,000 files)
                mounted with sshfs (no cache) from the loopback sshd through bench/relay.py,
                which delays each direction by 0.5 ms; rsync against msrsync -p
                1/2/4/8/16 and `find | parallel -j N rsync` (when GNU parallel is there)
  g   scaling   msrsync -p 1/2/4/8/16 against rsync on the small-file tree
  h   longtail  a few big files the scan finds last, behind many small ones (20,000 files
                of 16 KiB, then 3 of 256 MiB), 32 MiB/s a stream: rsync, the biggest file alone, the ideal,
                msrsync -p 4 at git revision --old-rev and the working tree's (longtail.py)
  i   check     --check: a copy of the small-file tree plus 64 files of 16 MiB, with 30 known
                differences: rsync -a [-c] -n -i --delete against msrsync --check -p 1/2/4
                --rsync "-a [-c]", page cache warm (check.py)

Every section interleaves its tools round-robin over the repetitions, reports medians,
ratios to plain rsync from the same run, CPU time and peak RSS (os.wait4 of each run),
checks every run's exit code and that DEST holds what SRC holds, prints a markdown table
as soon as it is done and, with --json, writes every run. The local sections run
bench.py's machinery, the ssh ones remote.py's; bench/README.md describes them all.

    python3 bench/suite.py --quick            # everything, small sizes (make bench)
    python3 bench/suite.py                    # everything, full sizes (make bench-full)
    python3 bench/suite.py --only checksum    # one section: its figure
"""

import argparse
import collections
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import check  # noqa: E402
import longtail  # noqa: E402
import remote  # noqa: E402
from common import (MiB, BenchError, Spawner, add_quick_option, add_run_options,  # noqa: E402
                    build_dataset, cached_tree, changed_since, clean_workdir,
                    dataset_layout, file_digest, filesystem_note, filesystem_of, fill_sizes,
                    first_line_of, fmt_load, fmt_ratio, fmt_seconds, load_servers,
                    load_span, loadavg, log, machine_env, make_workdir, mib,
                    msrsync_version, ok_note, parse_int_list, parse_size, positive_int,
                    print_header_end, print_header_start, print_results, proc_cpu_ticks,
                    random_block, remove_tree, report_end, require_msrsync, run_main,
                    start_sshd, tail, write_slices)

SUITE_VERSION = "1.0"
RELAY_PY = os.path.join(HERE, "relay.py")
GiB = 1 << 30

# name, letter, title
SECTIONS = [
    ("copy", "a/b", "initial copy and up-to-date re-run"),
    ("checksum", "c", "`-c` re-check of an up-to-date DEST"),
    ("compress", "d", "`-z` compression levels over ssh to a loopback sshd"),
    ("ssh", "e", "ssh cipher and compression options"),
    ("sshfs", "f", "latency-bound source: sshfs through a delaying relay (an NFS stand-in)"),
    ("scaling", "g", "`-p` scaling on the small-file tree"),
    ("longtail", "h", "long tail: big files found last"),
    ("check", "i", "`--check`: verifying a copy"),
]
LETTERS = {"a": "copy", "b": "copy", "a/b": "copy", "c": "checksum", "d": "compress",
           "e": "ssh", "f": "sshfs", "g": "scaling", "h": "longtail",
           "i": "check"}

# full and --quick sizes; an option given on the command line wins over both
FULL = {"files": 100000, "mixed_size": "1G", "mixed_files": 20000, "big_size": "4G",
        "text_size": "1G", "sshfs_files": 5000, "reps": 3,
        "longtail_small": longtail.FULL["small"], "longtail_big_size": longtail.FULL["big_size"]}
QUICK = {"files": 5000, "mixed_size": "128M", "mixed_files": 2000, "big_size": "256M",
         "text_size": "64M", "sshfs_files": 300, "reps": 1,
         "longtail_small": longtail.QUICK["small"],
         "longtail_big_size": longtail.QUICK["big_size"]}
DEFAULT_SEED = 20240601          # bench.py's: the same small-file tree
MIXED_MIN, MIXED_MAX = 5 * MiB, 60 * MiB
SSH_VARIANTS = ["-c aes128-ctr -o Compression=no", "-o Compression=yes",
                "-c aes128-gcm@openssh.com -o Compression=no",
                "-c chacha20-poly1305@openssh.com -o Compression=no"]
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server",
                "/usr/lib/ssh/sftp-server", "/usr/libexec/sftp-server")
# sshfs without any cache of its own (cache=no, the seeds' option; dir_cache=no, its
# sshfs 3 name) and with the kernel's FUSE caches of names and attributes off: every
# lookup, stat and read goes over the link
# the share of the uneven sshfs tree's files under its one big top-level directory
UNEVEN_SHARE = 0.8
SSHFS_CACHE_OPTS = ["cache=no", "dir_cache=no", "entry_timeout=0", "attr_timeout=0",
                    "negative_timeout=0"]

# One dataset: name (small, mixed, bigfile, text, sshfs), where it is, its TreeCount and
# one line that describes it.
Data = collections.namedtuple("Data", "name path count about")


class Skip(Exception):
    """A section cannot run on this machine (no sshd, no sshfs): it is reported as
    skipped, with the reason, and the others go on."""


# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------

def build_mixed(root, size, nsmall, seed):
    """NSMALL small files (bench.py's tree, 0-8 KiB, ~50 per directory) and, spread over
    its leaf directories, files of 5-60 MiB (sizes uniform) until the whole is about
    SIZE bytes; contents are slices of one random 64 MiB block.  Returns the number of
    big files."""
    small = build_dataset(root, nsmall, seed)
    tops, subs = dataset_layout(nsmall)
    leaves = [os.path.join(root, "d%02d" % t, "s%03d" % s)
              for t in range(tops) for s in range(subs)]
    rng = random.Random(seed + 1)
    block = random_block(rng, 64 * MiB)
    total, n = small.bytes, 0
    while total < size:
        want = MIXED_MIN + rng.getrandbits(32) % (MIXED_MAX - MIXED_MIN + 1)
        want = min(want, max(MIXED_MIN, size - total))
        leaf = leaves[(n * 7) % len(leaves)]
        with open(os.path.join(leaf, "big%03d.bin" % n), "wb") as f:
            write_slices(f, want, rng, block, 1 * MiB, 4 * MiB)
        total += want
        n += 1
    return n


def build_uneven(root, nfiles, seed):
    """A small-file tree whose top level is uneven: UNEVEN_SHARE of its files
    under one directory, big/ (bench.py's layout there), the others in
    bench.py's layout beside it (about one top directory per 50 files).
    Returns the files under big/."""
    big = int(nfiles * UNEVEN_SHARE)
    build_dataset(os.path.join(root, "big"), big, seed)
    build_dataset(root + ".rest", nfiles - big, seed + 1)
    for name in os.listdir(root + ".rest"):
        os.rename(os.path.join(root + ".rest", name), os.path.join(root, name))
    os.rmdir(root + ".rest")
    return big


def build_bigfile(root, size, seed):
    """One file of SIZE bytes, slices of one random 64 MiB block."""
    os.makedirs(root)
    rng = random.Random(seed)
    block = random_block(rng, 64 * MiB)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        write_slices(f, size, rng, block, 1 * MiB, 4 * MiB)


def human(nbytes):
    """4.00 GiB, 128.0 MiB."""
    if nbytes >= GiB:
        return "%.2f GiB" % (nbytes / float(GiB))
    return "%.1f MiB" % (nbytes / float(MiB))


def describe_small(count):
    return "%s files of 0-8 KiB in %s directories, %.1f MiB" % (
        format(count.files, ","), format(count.dirs, ","), count.bytes / float(MiB))


class Datasets(object):
    """The datasets, built the first time a section asks (or reused from --workdir)."""

    def __init__(self, workdir, args):
        self.workdir, self.args, self.cache = workdir, args, {}

    def get(self, name):
        if name not in self.cache:
            self.cache[name] = self._make(name)
        return self.cache[name]

    def _make(self, name):
        a = self.args
        seed = a.seed
        specs = {
            "small": ({"files": a.files},
                      lambda p: build_dataset(p, a.files, seed) and None),
            "mixed": ({"size": a.mixed_size, "files": a.mixed_files},
                      lambda p: build_mixed(p, a.mixed_size, a.mixed_files, seed + 10)),
            "bigfile": ({"size": a.big_size}, lambda p: build_bigfile(p, a.big_size, seed + 20)),
            "text": ({"size": a.text_size}, lambda p: remote.build_big(p, a.text_size, seed + 30)),
            "sshfs": ({"files": a.sshfs_files},
                      lambda p: build_dataset(p, a.sshfs_files, seed + 40) and None),
            "sshfs-uneven": ({"files": a.sshfs_files},
                             lambda p: build_uneven(p, a.sshfs_files, seed + 50)),
        }
        params, build = specs[name]
        params = dict(params, kind=name, seed=seed, suite_version=SUITE_VERSION)
        path, count, facts = cached_tree(self.workdir, name, params, build)
        if name in ("small", "sshfs"):
            about = describe_small(count)
        elif name == "sshfs-uneven":
            about = "%s; %s of them under one top-level directory, big/, beside %d others" % (
                describe_small(count), format(facts, ","), len(os.listdir(path)) - 1)
        elif name == "mixed":
            about = ("%s small files of 0-8 KiB and %d files of 5-60 MiB in %s directories, "
                     "%.0f MiB" % (format(count.files - facts, ","), facts,
                                   format(count.dirs, ","), count.bytes / float(MiB)))
        elif name == "bigfile":
            about = "one file of %s (random bytes)" % human(count.bytes)
        else:
            about = ("%d files of log-like text in %d directories, %.0f MiB; zlib -6 "
                     "compresses it %.1fx" % (count.files, count.dirs - 1,
                                              count.bytes / float(MiB), facts or 0))
        return Data(name, path, count, about)


def space_needed(args, sections):
    """Bytes the datasets of SECTIONS take, plus the largest DEST and a margin."""
    sizes = {"small": args.files * 6 * 1024, "mixed": args.mixed_size + args.mixed_files * 6144,
             "bigfile": args.big_size, "text": args.text_size,
             "sshfs": args.sshfs_files * 6 * 1024, "sshfs-uneven": args.sshfs_files * 6 * 1024,
             "longtail": args.longtail_small * 16384 + 3 * args.longtail_big_size,
             "check": check.space_needed(check_args(args)) // 2}
    used = set()
    for s in sections:
        used.update({"copy": args.copy_data, "checksum": args.checksum_data,
                     "compress": ["text"], "ssh": ["text"], "sshfs": ["sshfs", "sshfs-uneven"],
                     "scaling": ["small"], "longtail": ["longtail"], "check": ["check"]}[s])
    total = sum(sizes[u] for u in used)
    return total + max([sizes[u] for u in used] or [0]) + 256 * MiB


# ---------------------------------------------------------------------------
# sshfs through the relay
# ---------------------------------------------------------------------------

def sshfs_missing():
    """Why section f cannot run here, or None."""
    if shutil.which("sshfs") is None:
        return "sshfs is not installed (apt-get install -y sshfs; .ci/deps does not install it)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if not fusermount():
        return "neither fusermount3 nor fusermount is installed (fuse3)"
    if not sftp_server():
        return "no sftp-server found (%s)" % ", ".join(SFTP_SERVERS)
    return None


def fusermount():
    return shutil.which("fusermount3") or shutil.which("fusermount")


def sftp_server():
    return next((p for p in SFTP_SERVERS if os.access(p, os.X_OK)), None)


def sshfs_version():
    """"SSHFS version 3.7.3, FUSE library version 3.14.0" (or why not)."""
    if shutil.which("sshfs") is None:
        return "not installed"
    try:
        out = subprocess.run(["sshfs", "--version"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return "unavailable (%s)" % exc
    lines = [l.strip() for l in out.splitlines() if re.match(r"(SSHFS|FUSE library) ", l)]
    return ", ".join(lines) or "?"


def gnu_parallel():
    """GNU parallel's version line, or None (moreutils' parallel is another program)."""
    if shutil.which("parallel") is None:
        return None
    line = first_line_of(["parallel", "--version"])
    return line if "GNU parallel" in line else None


def wait_for(predicate, proc, timeout, what, log_path):
    """Poll PREDICATE until true; BenchError when PROC exits first or on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise BenchError("%s exited with %s:\n%s" % (what, proc.returncode,
                                                         tail(log_path, 10)))
        if time.monotonic() > deadline:
            raise BenchError("%s not ready after %ds:\n%s" % (what, timeout,
                                                             tail(log_path, 10)))
        time.sleep(0.05)


class Relay(object):
    """bench/relay.py in its own process: 127.0.0.1:port -> 127.0.0.1:TARGET, each
    direction delayed by DELAY_MS.  Stopped by its pid; on SIGTERM it writes its
    figures (bytes, chunks, the delay it actually held) to stats.json."""

    def __init__(self, servers, target, delay_ms, directory):
        self.servers, self.target, self.delay_ms = servers, target, delay_ms
        self.dir = directory
        self.log = os.path.join(directory, "relay.log")
        self.port_file = os.path.join(directory, "relay.port")
        self.stats_file = os.path.join(directory, "relay-stats.json")
        self.proc, self.port, self.cpu_s = None, None, None

    def start(self):
        for f in (self.port_file, self.stats_file):
            remove_tree(f)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, RELAY_PY, "--target-port", str(self.target),
                 "--delay-ms", str(self.delay_ms), "--port-file", self.port_file,
                 "--stats-file", self.stats_file],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=self.servers._pdeathsig_and_session)
        wait_for(lambda: os.path.exists(self.port_file), self.proc, 10, "the relay", self.log)
        with open(self.port_file) as f:
            self.port = int(f.read())
        log("relay pid %d: 127.0.0.1:%d -> 127.0.0.1:%d, %.3f ms each way"
            % (self.proc.pid, self.port, self.target, self.delay_ms))

    def stop(self):
        """Stop it; returns its figures (a dict, or None)."""
        if self.proc is None:
            return None
        ticks = proc_cpu_ticks(self.proc.pid) if self.proc.poll() is None else None
        if ticks is not None:
            self.cpu_s = ticks / float(os.sysconf("SC_CLK_TCK"))
        self.servers.stop_process(self.proc)
        self.proc = None
        try:
            with open(self.stats_file) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            return None
        stats["cpu_s"] = self.cpu_s
        return stats


class SshfsMount(object):
    """sshfs -f (in the foreground: our child, stopped by its pid) mounting
    LOGIN:REMOTE_DIR at MOUNTPOINT over ssh to 127.0.0.1:PORT (the relay)."""

    def __init__(self, servers, server, port, remote_dir, mountpoint, log_path):
        self.servers, self.server, self.port = servers, server, port
        self.remote_dir, self.mountpoint, self.log = remote_dir, mountpoint, log_path
        self.proc = None
        rsh = servers.rsh_command(port, server.key)
        self.options = ["ssh_command=" + rsh.replace(" ", "\\ "),
                        "sftp_server=" + sftp_server()] + SSHFS_CACHE_OPTS

    def argv(self):
        return ["sshfs", "-f", "-o", ",".join(self.options),
                self.server.login + ":" + self.remote_dir, self.mountpoint]

    def start(self):
        os.makedirs(self.mountpoint, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT,
                                         preexec_fn=self.servers._pdeathsig_and_session)
        wait_for(lambda: os.path.ismount(self.mountpoint), self.proc, 30, "sshfs", self.log)
        log("sshfs pid %d: %s mounted at %s" % (self.proc.pid, self.remote_dir,
                                                self.mountpoint))

    def stop(self):
        """fusermount -u, then the sshfs process by its pid; a lazy unmount if the
        mount is still there after all that."""
        if self.proc is None:
            return
        tool = fusermount()
        if os.path.ismount(self.mountpoint) and tool:
            subprocess.call([tool, "-u", self.mountpoint], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.servers.stop_process(self.proc)
        if os.path.ismount(self.mountpoint) and tool:
            subprocess.call([tool, "-uz", self.mountpoint], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proc = None
        if not os.path.ismount(self.mountpoint):
            try:
                os.rmdir(self.mountpoint)
            except OSError:
                pass
        log("sshfs unmounted")


# ---------------------------------------------------------------------------
# The suite: shared state, the local and the ssh runners
# ---------------------------------------------------------------------------

class Suite(object):
    """What the sections share: the arguments, the work directory, the datasets, the
    Spawner and the sshd (started by the first section that needs it, stopped by
    close())."""

    def __init__(self, args, workdir):
        self.args, self.workdir = args, workdir
        self.data = Datasets(workdir, args)
        self.spawner = Spawner()
        self.servers = self.server = None

    def close(self):
        if self.server is not None:
            self.server.stop()
            log("sshd stopped")
            self.server = None
        remove_tree(os.path.join(self.workdir, "sshd"))

    def section_dir(self, key):
        d = os.path.join(self.workdir, "runs", key)
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        return d

    def sshd(self):
        """The private loopback sshd, started the first time a section needs it."""
        if self.server is None:
            self.servers = load_servers()
            missing = self.servers.ssh_missing()
            if missing:
                raise Skip("needs openssh (bash .ci/deps installs it): missing %s" % missing)
            d = os.path.join(self.workdir, "sshd")
            log("starting a private sshd on 127.0.0.1 (%s)" % d)
            self.server = start_sshd(self.servers, d)
            log("sshd pid %d port %d" % (self.server.pid, self.server.port))
        return self.server

    def bench_argv(self, fp=False):
        a = self.args
        out = ["--reps", str(a.reps), "--msrsync", a.msrsync, "--rsync", a.rsync]
        out += ["--no-drop-caches"] if a.no_drop_caches else []
        out += ["--verify"] if a.verify else []
        if fp and a.fpsync:
            out += ["--fpsync", a.fpsync]
        if fp and a.orig_msrsync:
            out += ["--orig-msrsync", a.orig_msrsync]
        return out

    def run_local(self, key, data, extra, fp=False):
        """bench.py's interleaved runs of SRC=DATA into a local DEST."""
        bargs = bench.parse_args(self.bench_argv(fp) + extra)
        tools = bench.make_tools(bargs)
        runs, failures = bench.run_benchmark(tools, data.path, data.count, bargs,
                                             self.section_dir(key), self.spawner)
        rows = bench.summarize(tools, runs)
        return {"rows": rows, "runs": runs, "failures": failures,
                "outliers": bench.find_outliers(runs, rows),
                "commands": bench.command_templates(tools, bargs),
                "table": bench.markdown_table(rows)}

    def run_ssh(self, key, data, tools, probe_z):
        """remote.py's interleaved pushes of DATA to the loopback sshd; every tool's -e
        is its own (Tool.rsh) or ssh ... -o Compression=no."""
        server = self.sshd()
        a = self.args
        rargs = remote.parse_args(["--reps", str(a.reps), "--size", str(data.count.bytes),
                                   "--msrsync", a.msrsync, "--rsync", a.rsync]
                                  + (["--no-drop-caches"] if a.no_drop_caches else []))
        d = self.section_dir(key)
        ctx = {"args": rargs, "servers": self.servers, "server": server,
               "rsh": server.rsh + " -o Compression=no", "dst": os.path.join(d, "dst"),
               "logs": os.path.join(d, "logs"), "spawner": self.spawner,
               "clk_tck": os.sysconf("SC_CLK_TCK")}
        probe_args = argparse.Namespace(**dict(vars(rargs), z_opts=probe_z))
        facts = remote.probe(dict(ctx, args=probe_args), d)
        runs = remote.run_section(remote.Dataset(remote.SECTION_BIG, data.path, data.count),
                                  tools, ctx)
        failures = ["%s, rep %d: %s" % (r["tool"], r["rep"], "; ".join(r["problems"]))
                    for r in runs if not r["ok"]]
        return runs, failures, facts, rargs


# ---------------------------------------------------------------------------
# Sections: each one yields a result per table, as soon as the table is done
# ---------------------------------------------------------------------------

def result(key, title, lines, table, rows=(), runs=(), failures=(), outliers=(),
           skipped=None):
    return {"section": key, "title": title, "lines": list(lines), "table": table,
            "rows": list(rows), "runs": list(runs), "failures": list(failures),
            "outliers": list(outliers), "skipped": skipped}


def section_copy(suite):
    a = suite.args
    for name in a.copy_data:
        data = suite.data.get(name)
        r = suite.run_local("copy-" + name, data, ["--procs", join_ints(a.procs)], fp=True)
        yield result("copy", "%s: %s" % (name, data.about), [
            "commands: %s" % "; ".join(r["commands"]),
            "initial copy into an empty DEST (removed untimed), then the same command "
            "again onto the complete DEST; counts and bytes checked after each copy"],
            r["table"], r["rows"], r["runs"], r["failures"], r["outliers"])


def section_checksum(suite):
    a = suite.args
    for name in a.checksum_data:
        data = suite.data.get(name)
        r = suite.run_local("checksum-" + name, data,
                            ["--procs", join_ints(a.procs), "--rerun-only",
                             "--rsync-opts=-ac"], fp=True)
        yield result("checksum", "%s: %s" % (name, data.about), [
            "commands: %s" % "; ".join(r["commands"]),
            "DEST made complete once, untimed (rsync -aS --numeric-ids); every run is a "
            "re-check that transfers nothing but reads and checksums every file on both "
            "sides"], r["table"], r["rows"], r["runs"], r["failures"], r["outliers"])


def section_compress(suite):
    a = suite.args
    data = suite.data.get("text")
    tools = []
    for level in a.levels:
        opts = "-az --zc=zlib --zl=%d --stats" % level
        group = "zlib %d" % level
        tools.append(remote.Tool("rsync [%s]" % group, "rsync", None, opts, None))
        tools += [remote.Tool("msrsync -p %d [%s]" % (p, group), "msrsync", p, opts, None)
                  for p in a.ssh_procs]
    runs, failures, facts, rargs = suite.run_ssh("compress", data, tools, "--zc=zlib")
    for r in runs:
        r["wire_bytes"] = wire_bytes(r["log"]) if r["ok"] else None
    rows = []
    for level in a.levels:
        group = "zlib %d" % level
        mine = [t for t in tools if t.label.endswith("[%s]" % group)]
        rows += ssh_rows(group, mine, runs, data)
    lines = [
        "commands: `rsync -az --zc=zlib --zl=N --stats -e SSH SRC/ HOST:DST/`; `msrsync "
        "-p P %s --rsync \"-az --zc=zlib --zl=N --stats -e 'SSH'\" SRC/ HOST:DST/` for N "
        "in %s, P in %s; SSH = `%s`" % (" ".join(rargs.bucket_opts), join_ints(a.levels),
                                         join_ints(a.ssh_procs), shown_rsh("-o Compression=no")),
        "rsync 3.2 and later negotiate zstd for -z when both ends have it; --zc=zlib "
        "--zl=N makes the levels zlib's, the seeds' (level 0 is zlib's \"off\": the data "
        "goes uncompressed)",
        "ssh: cipher %s, one login %.3f s; sshd on 127.0.0.1, same machine: both ends "
        "share the CPUs" % (facts["ssh_cipher"], facts["ssh_login_s"]),
        "wire MB = \"Total bytes sent\" of rsync --stats (msrsync adds its workers' up); "
        "SRC/wire = SRC bytes / wire bytes; x rsync = rsync's median / this median at the "
        "same level; cores busy = (client + server CPU) / wall",
    ]
    return [result("compress", data.about, lines, ssh_table(rows, "-z", wire=True), rows,
                   runs, failures)]


def section_ssh(suite):
    a = suite.args
    data = suite.data.get("text")
    server = suite.sshd()
    tools = []
    for v in a.ssh_variants:
        rsh = server.rsh + " " + v
        tools.append(remote.Tool("rsync [%s]" % v, "rsync", None, "-a", rsh))
        tools += [remote.Tool("msrsync -p %d [%s]" % (p, v), "msrsync", p, "-a", rsh)
                  for p in a.cipher_procs]
    runs, failures, facts, rargs = suite.run_ssh("ssh", data, tools, "")
    rows = []
    for v in a.ssh_variants:
        mine = [t for t in tools if t.label.endswith("[%s]" % v)]
        rows += ssh_rows(v, mine, runs, data)
    lines = [
        "commands: `rsync -a -e 'SSH OPTIONS' SRC/ HOST:DST/`; `msrsync -p P %s --rsync "
        "\"-a -e 'SSH OPTIONS'\" SRC/ HOST:DST/` for P in %s; SSH = `%s`"
        % (" ".join(rargs.bucket_opts), join_ints(a.cipher_procs), shown_rsh("")),
        "without -c, ssh takes its first cipher (%s here); -o Compression=yes is ssh's "
        "own zlib, on top of rsync without -z" % facts["ssh_cipher"],
        "x rsync = rsync's median / this median with the same ssh options; cores busy = "
        "(client + server CPU) / wall",
    ]
    return [result("ssh", data.about, lines, ssh_table(rows, "ssh options"), rows, runs,
                   failures)]


def section_sshfs(suite):
    a = suite.args
    why = sshfs_missing()
    if why:
        raise Skip(why)
    server = suite.sshd()
    for name in a.sshfs_data:
        yield sshfs_case(suite, server, "sshfs" if name == "even" else "sshfs-" + name)


def sshfs_case(suite, server, key):
    """One tree of the sshfs section (even: bench.py's layout; uneven: most of it
    under one top-level directory) served over sshfs through the relay."""
    a = suite.args
    data = suite.data.get(key)
    d = suite.section_dir(key)
    relay = Relay(suite.servers, server.port, a.delay_ms, d)
    mount = None
    stats = None
    try:
        relay.start()
        mount = SshfsMount(suite.servers, server, relay.port, data.path,
                           os.path.join(d, "mnt"), os.path.join(d, "sshfs.log"))
        mount.start()
        names = ["rsync", "msrsync"]
        par = gnu_parallel()
        if par:
            names += ["parallel-p%d" % j for j in a.parallel_jobs]
        src = Data(key, mount.mountpoint, data.count, data.about)
        r = suite.run_local(key, src, ["--tools", ",".join(names),
                                       "--procs", join_ints(a.sshfs_procs)])
    finally:
        if mount is not None:
            mount.stop()
        stats = relay.stop()
    held = (stats or {}).get("held_ms", {})
    lines = [
        "commands: %s" % "; ".join(r["commands"]),
        "SRC: `sshfs -o %s,%s HOST:TREE MNT` (ssh through the relay, sftp-server as a "
        "command; no sshfs cache and no kernel name/attribute cache: every lookup, stat "
        "and read is a round trip)" % ("ssh_command='ssh -p RELAY ...',sftp_server=" +
                                       sftp_server(), ",".join(SSHFS_CACHE_OPTS)),
        "relay: bench/relay.py, %.3f ms added to each direction; it held data %s; it "
        "carried %s; its CPU %s s" % (
            a.delay_ms,
            ", ".join("%s: median %.3f ms, p99 %.3f ms" % (k, v["median"], v["p99"])
                      for k, v in sorted(held.items())) or "?",
            ", ".join("%s %.1f MB in %d chunks" % (k, stats["bytes"][k] / 1e6,
                                                    stats["chunks"][k])
                      for k in ("up", "down")) if stats else "?",
            "%.1f" % stats["cpu_s"] if stats and stats.get("cpu_s") is not None else "?"),
        "parallel: %s" % (
            "split by SRC's top-level entries, one rsync per entry, DEST's own directory "
            "metadata is not copied (%s)" % par if par else
            "GNU parallel is not installed: its rows are left out (apt-get install -y "
            "parallel)"),
    ]
    return result("sshfs", data.about, lines, r["table"], r["rows"], r["runs"],
                  r["failures"], r["outliers"])


def section_scaling(suite):
    data = suite.data.get("small")
    r = suite.run_local("scaling", data, ["--procs", join_ints(suite.args.scaling_procs)])
    return [result("scaling", data.about, ["commands: %s" % "; ".join(r["commands"]),
                                           "as msrsync --bench, on bench.py's tree"],
                   r["table"], r["rows"], r["runs"], r["failures"], r["outliers"])]


def section_longtail(suite):
    """longtail.py's case, its tree in the suite's work directory."""
    a = suite.args
    largs = longtail.parse_args(
        ["--reps", str(a.reps), "--msrsync", a.msrsync, "--rsync", a.rsync,
         "--small", str(a.longtail_small), "--big-size", str(a.longtail_big_size),
         "--old-rev", a.old_rev, "--seed", str(a.seed + 60)]
        + (["--no-drop-caches"] if a.no_drop_caches else [])
        + (["--verify"] if a.verify else []))
    r = longtail.run_case(largs, suite.workdir, suite.spawner)
    return [result("longtail", r["about"], r["lines"], r["table"], r["rows"], r["runs"],
                   r["failures"], r["outliers"])]


def check_args(a):
    """check.py's arguments for section i: the suite's --files, --reps, seed + 70, and
    check.py's bigger files (full or --quick)."""
    return check.parse_args(
        (["--quick"] if a.quick else [])
        + ["--files", str(a.files), "--reps", str(a.reps), "--msrsync", a.msrsync,
           "--rsync", a.rsync, "--procs", join_ints(a.procs), "--seed", str(a.seed + 70)]
        + (["--verify"] if a.verify else []))


def section_check(suite):
    """check.py's case, its trees in the suite's work directory (page cache kept warm)."""
    r = check.run_case(check_args(suite.args), suite.workdir, suite.spawner)
    return [result("check", r["about"], r["lines"], r["table"], r["rows"], r["runs"],
                   r["failures"], r["outliers"])]


RUNNERS = {"copy": section_copy, "checksum": section_checksum, "compress": section_compress,
           "ssh": section_ssh, "sshfs": section_sshfs, "scaling": section_scaling,
           "longtail": section_longtail, "check": section_check}


# ---------------------------------------------------------------------------
# Figures and tables
# ---------------------------------------------------------------------------

def wire_bytes(log_path):
    """The last "Total bytes sent: N" of a run's log: rsync --stats, or msrsync's sum of
    its workers' blocks."""
    try:
        with open(log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = re.findall(r"^Total bytes sent:\s*([\d,]+)", text, re.M)
    return int(found[-1].replace(",", "")) if found else None


def ssh_rows(group, tools, runs, data):
    """remote.py's rows for one group of tools (ratios to the group's rsync), plus the
    median wire bytes and the peak RSS."""
    labels = set(t.label for t in tools)
    mine = [r for r in runs if r["tool"] in labels]
    rows = remote.summarize(group, tools, mine, data)
    for row in rows:
        good = [r for r in mine if r["tool"] == row["tool"] and r["ok"]]
        wires = [r["wire_bytes"] for r in good if r.get("wire_bytes")]
        row["wire_bytes"] = statistics.median(wires) if wires else None
        row["peak_rss_mib"] = mib(max(r["maxrss_kib"] for r in good)) if good else None
        row["name"] = row["tool"].rsplit(" [", 1)[0]
    return rows


def ssh_table(rows, first, wire=False):
    head = "| %s | tool | median s | min | max | MB/s |" % first
    head += " wire MB | SRC/wire |" if wire else ""
    head += " x rsync | CPU s client | CPU s server | cores busy | peak RSS MB |"
    out = [head, "|---|---|" + "---:|" * (head.count("|") - 3)]
    for r in rows:
        if "median_s" not in r:
            out.append("| %s | %s | FAILED (0/%d ok): %s |%s" % (
                r["section"], r["name"], r["runs"], r["error"], " |" * (head.count("|") - 5)))
            continue
        cells = [r["section"], r["name"] + ok_note(r), fmt_seconds(r["median_s"]),
                 fmt_seconds(r["min_s"]), fmt_seconds(r["max_s"]), "%.1f" % r["mb_s"]]
        if wire:
            w = r.get("wire_bytes")
            cells += ["%.1f" % (w / 1e6) if w else "?",
                      "%.2f" % (r["mb_s"] * 1e6 * r["median_s"] / w) if w else "?"]
        cells += [fmt_ratio(r.get("speedup")), fmt_seconds(r["cpu_client_s"]),
                  fmt_seconds(r["cpu_server_s"]) if r["cpu_server_s"] is not None else "?",
                  fmt_ratio(r.get("cores_busy")),
                  "%.1f" % r["peak_rss_mib"] if r.get("peak_rss_mib") is not None else "?"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def shown_rsh(extra):
    return "ssh -p PORT -i KEY -o StrictHostKeyChecking=no ... -o BatchMode=yes" + (
        " " + extra if extra else "")


def join_ints(values):
    return ",".join(str(v) for v in values)


def print_result(res, letter, title, started, ended, seconds):
    head = "## %s) %s" % (letter, title)
    if res["title"]:
        head += " — " + res["title"]
    print(head)
    print_results(res, bench.OUTLIER_FACTOR, ["%.0f s; %s" % (seconds,
                                                              load_span(started, ended))])



# ---------------------------------------------------------------------------
# Environment and main
# ---------------------------------------------------------------------------

def environment(args, workdir):
    mnt, fstype = filesystem_of(workdir)
    env = machine_env("suite_version", SUITE_VERSION)
    env.update({
        "rsync": first_line_of([args.rsync, "--version"], required=True),
        "msrsync": msrsync_version(args.msrsync),
        "msrsync_path": os.path.abspath(args.msrsync),
        "msrsync_sha256": file_digest(args.msrsync),
        "workdir": workdir, "filesystem": fstype, "mount": mnt, "euid": os.geteuid(),
        "filesystem_note": filesystem_note(workdir),
        "loadavg_start": loadavg(),
    })
    if set(args.only) & {"compress", "ssh", "sshfs"}:
        env["ssh"] = first_line_of(["ssh", "-V"])
    if "sshfs" in args.only:
        env["sshfs"] = sshfs_version()
        env["parallel"] = gnu_parallel() or "GNU parallel not installed"
    return env


def print_header(env, args, sections):
    print_header_start("msrsync benchmark suite", env, [
        "%s: %s" % (key, env[key]) for key in ("ssh", "sshfs", "parallel") if key in env])
    print("- sections: %s; %d repetition(s) each, tools interleaved round-robin, medians; "
          "page cache %s before every run" % (
              ", ".join(sections), args.reps,
              "not dropped (--no-drop-caches)" if args.no_drop_caches else
              "dropped (as root)" if env["euid"] == 0 else "not dropped (not root)"))
    print("- ratio to rsync = median / plain rsync's median in the same table (below 1 "
          "is faster); CPU s = user+system of the tool and all its children (os.wait4); "
          "peak RSS = the largest single process of the tool's tree")
    print_header_end(env)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="suite.py", description=__doc__.split("\n\n")[0],
        epilog="sections (--only, names or letters): " + ", ".join(
            "%s (%s) %s" % (n, l, t.replace("`", "")) for n, l, t in SECTIONS),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_quick_option(p, QUICK)
    p.add_argument("--only", metavar="SECTION[,SECTION]",
                   help="run these sections only [all]: copy, checksum, compress, ssh, "
                        "sshfs, scaling, longtail, check (or a, b, c, d, e, f, g, h, i)")
    p.add_argument("--reps", type=positive_int, help="repetitions [3, quick 1]")
    p.add_argument("--files", type=positive_int,
                   help="small-file tree (copy, checksum, scaling, check) "
                        "[100000, quick 5000]")
    p.add_argument("--mixed-size", type=parse_size, metavar="SIZE",
                   help="mixed tree's bytes, K/M/G [1G, quick 128M]")
    p.add_argument("--mixed-files", type=positive_int,
                   help="mixed tree's small files [20000, quick 2000]")
    p.add_argument("--big-size", type=parse_size, metavar="SIZE",
                   help="the one big file [4G, quick 256M]")
    p.add_argument("--text-size", type=parse_size, metavar="SIZE",
                   help="compressible text for compress and ssh [1G, quick 64M]")
    p.add_argument("--sshfs-files", type=positive_int,
                   help="files of the tree served over sshfs [5000, quick 500]")
    p.add_argument("--copy-data", default="small,mixed,bigfile", metavar="LIST",
                   help="trees of the copy section [small,mixed,bigfile]")
    p.add_argument("--checksum-data", default="small,mixed", metavar="LIST",
                   help="trees of the checksum section [small,mixed]")
    p.add_argument("--procs", type=parse_int_list, default=[1, 2, 4], metavar="N,N",
                   help="msrsync -p in copy, checksum and check [1,2,4]")
    p.add_argument("--ssh-procs", type=parse_int_list, default=[2, 4], metavar="N,N",
                   help="msrsync -p in compress [2,4]")
    p.add_argument("--cipher-procs", type=parse_int_list, default=[2], metavar="N,N",
                   help="msrsync -p in ssh [2]")
    p.add_argument("--sshfs-data", type=lambda t: [x for x in t.split(",") if x],
                   default=["even", "uneven"], metavar="LIST",
                   help="trees of the sshfs section: even (bench.py's layout), uneven "
                   "(%d%%%% of the files under one top-level directory) [even,uneven]"
                   % (UNEVEN_SHARE * 100))
    p.add_argument("--sshfs-procs", type=parse_int_list, default=[1, 2, 4, 8, 16],
                   metavar="N,N", help="msrsync -p in sshfs [1,2,4,8,16]")
    p.add_argument("--parallel-jobs", type=parse_int_list, default=[4, 8, 16],
                   metavar="N,N", help="parallel -j in sshfs [4,8,16]")
    p.add_argument("--scaling-procs", type=parse_int_list, default=[1, 2, 4, 8, 16],
                   metavar="N,N", help="msrsync -p in scaling [1,2,4,8,16]")
    p.add_argument("--longtail-small", type=positive_int, metavar="N",
                   help="longtail: small files before the big ones [%d, quick %d]"
                   % (longtail.FULL["small"], longtail.QUICK["small"]))
    p.add_argument("--longtail-big-size", type=parse_size, metavar="SIZE",
                   help="longtail: each of the 3 big files [%s, quick %s]"
                   % (longtail.FULL["big_size"], longtail.QUICK["big_size"]))
    p.add_argument("--old-rev", default=longtail.DEFAULT_OLD_REV, metavar="REV",
                   help="longtail: git revision of the msrsync compared with --msrsync [%s]"
                   % longtail.DEFAULT_OLD_REV)
    p.add_argument("--levels", type=lambda t: [int(v) for v in t.split(",")],
                   default=[0, 1, 6, 9], metavar="N,N", help="zlib levels [0,1,6,9]")
    p.add_argument("--ssh-options", action="append", metavar="OPTS",
                   help="an ssh option set of the ssh section (repeat it) [%s]"
                   % "; ".join(SSH_VARIANTS))
    p.add_argument("--delay-ms", type=float, default=0.5,
                   help="sshfs: added to each direction by the relay [0.5]")
    p.add_argument("--msrsync", default=os.path.join(os.path.dirname(HERE), "msrsync"),
                   metavar="PATH", help="msrsync to test [../msrsync next to this script]")
    p.add_argument("--rsync", default="rsync", metavar="PATH", help="rsync binary [rsync]")
    p.add_argument("--fpsync", metavar="PATH",
                   help="also run fpsync in copy and checksum (not vendored)")
    p.add_argument("--orig-msrsync", metavar="PATH",
                   help="also run the original msrsync in copy and checksum (not vendored)")
    p.add_argument("--shm", action="store_true", help="temporary directory in /dev/shm")
    add_run_options(p, DEFAULT_SEED,
                    "local sections: also rsync -ain --delete SRC/ DST/ after each copy")
    args = p.parse_args(argv)
    fill_sizes(args, FULL, QUICK)
    names = [s for s, _, _ in SECTIONS]
    if args.only:
        wanted = []
        for w in args.only.split(","):
            w = LETTERS.get(w.strip(), w.strip())
            if w not in names:
                p.error("unknown section %r (%s)" % (w, ", ".join(names)))
            if w not in wanted:
                wanted.append(w)
        args.only = [n for n in names if n in wanted]
    else:
        args.only = names
    for opt in ("copy_data", "checksum_data"):
        value = [v.strip() for v in getattr(args, opt).split(",") if v.strip()]
        allowed = ("small", "mixed", "bigfile") if opt == "copy_data" else ("small", "mixed")
        if not value or any(v not in allowed for v in value):
            p.error("--%s: a list of %s" % (opt.replace("_", "-"), ", ".join(allowed)))
        setattr(args, opt, value)
    if any(level < 0 or level > 9 for level in args.levels):
        p.error("--levels: zlib levels are 0 to 9")
    args.ssh_variants = args.ssh_options or list(SSH_VARIANTS)
    if args.delay_ms < 0:
        p.error("--delay-ms must be >= 0")
    if args.shm and args.workdir:
        p.error("--shm and --workdir exclude each other")
    return args


def run(args):
    require_msrsync(args.msrsync)
    workdir, owned = make_workdir(
        args.workdir, "msrsync-suite-",
        os.environ.get("SHM", "/dev/shm") if args.shm else "/var/tmp",
        None if args.workdir else space_needed(args, args.only))
    env = environment(args, workdir)
    print_header(env, args, args.only)
    suite = Suite(args, workdir)
    results, failed = [], False
    titles = dict((n, (l, t)) for n, l, t in SECTIONS)
    t_all = time.monotonic()
    try:
        for key in args.only:
            letter, title = titles[key]
            log("section %s) %s" % (letter, key))
            t0, la0 = time.monotonic(), loadavg()
            try:
                for res in RUNNERS[key](suite):
                    res["loadavg"] = [la0, loadavg()]
                    res["seconds"] = time.monotonic() - t0
                    print_result(res, letter, title, la0, loadavg(), res["seconds"])
                    results.append(res)
                    failed = failed or bool(res["failures"])
                    t0, la0 = time.monotonic(), loadavg()
            except Skip as why:
                res = result(key, "", [], "", skipped=str(why))
                print_result(res, letter, title, la0, loadavg(), 0)
                results.append(res)
    finally:
        suite.close()
        logs = clean_workdir(workdir, owned, args.keep,
                             failed or any(r["outliers"] for r in results), logs_only=True)
    env["loadavg_end"] = loadavg()
    env["suite_s"] = time.monotonic() - t_all
    problems = changed_since(args.msrsync, env["msrsync_sha256"])
    print("suite time %.0f s; load average at end: %s" % (env["suite_s"],
                                                         fmt_load(env["loadavg_end"])))
    for r in [r for r in results if r["skipped"]]:
        print("skipped: %s: %s" % (r["section"], r["skipped"]))
    report_end(args, env, results, problems, logs)
    return 1 if failed or problems else 0


def main(argv=None):
    args = parse_args(argv)
    return run_main("suite.py", run, args)


if __name__ == "__main__":
    sys.exit(main())
