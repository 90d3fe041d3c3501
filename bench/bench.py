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

import argparse
import collections
import hashlib
import json
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------

BENCH_VERSION = "1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MSRSYNC = os.path.join(HERE, os.pardir, "msrsync")

# The options msrsync passes to rsync by default (SPEC: -r/--rsync default);
# plain rsync gets the same so the two copy the same metadata.
RSYNC_OPTS = ["-aS", "--numeric-ids"]
# fpsync hands rsync --files-from lists and must not get -r: -a minus -r.
FPSYNC_RSYNC_OPTS = "-lptgoDS --numeric-ids"

DEFAULT_FILES_FULL = 100000
DEFAULT_FILES_QUICK = 20000
DEFAULT_REPS = 3
DEFAULT_PROCS = (1, 2, 4)
DEFAULT_SEED = 20240601
FILES_PER_DIR = 50          # ~N/50 leaf directories
TOP_DIRS = 40               # first level; each holds ~N/50/40 subdirectories
MAX_FILE_SIZE_BITS = 13     # sizes 0..8191 bytes
RANDOM_BLOCK_SIZE = 1 << 20  # contents are slices of this one random block

MEMORY_SIZES = (100000, 1000000)
MEMORY_FILES_PER_DIR = 1000
MEMORY_COPY_PROCS = 4

SCENARIO_INITIAL = "initial copy"
SCENARIO_UPTODATE = "up-to-date re-run"
SCENARIOS = (SCENARIO_INITIAL, SCENARIO_UPTODATE)

DROP_CACHES = "/proc/sys/vm/drop_caches"
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
OUTLIER_FACTOR = 2.0        # a run slower than this times its median is flagged
HWM_SAMPLE_SECONDS = 0.02

# ---------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------

# One tool under test: `label` is what the table shows, `kind` one of
# rsync/msrsync/fpsync/orig-msrsync, `procs` its parallelism (None for rsync).
Tool = collections.namedtuple("Tool", "label kind procs")

# What a finished child cost: wall seconds, CPU seconds of the child and its
# reaped descendants, ru_maxrss of that tree in KiB (the largest single
# process), the child's own VmHWM in KiB sampled from /proc (0 if unseen),
# and its exit status (negative: killed by that signal).
Measure = collections.namedtuple(
    "Measure", "wall user sys maxrss_kib self_hwm_kib exit_code")

# A tree's shape as counted by count_tree().
TreeCount = collections.namedtuple("TreeCount", "files dirs symlinks others bytes")


class BenchError(Exception):
    """A problem that stops the benchmark; main() prints it on one line."""


# ---------------------------------------------------------------------------
# Utilities
# ---------------------------------------------------------------------------

def log(msg):
    """Progress lines go to stderr so stdout holds only the tables."""
    sys.stderr.write("[bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def mib(kib):
    return kib / 1024.0


def fmt_seconds(s):
    return "%.2f" % s if s < 100 else "%.1f" % s


def parse_int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers: %r" % text)
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("values must be >= 1: %r" % text)
    return values


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not an integer: %r" % text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1: %r" % text)
    return value


def is_python_script(path):
    """True when PATH starts with a python shebang: we then run it with this
    interpreter, so every python tool is measured with the same Python and
    without a launcher (pyenv shims cost ~50 ms per start)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def command_prefix(path):
    return [sys.executable, path] if is_python_script(path) else [path]


def file_digest(path):
    """sha256 of PATH: tells which msrsync was measured, and whether it
    changed while the benchmark ran."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def first_line_of(argv, required=False):
    """First line ARGV prints (a --version).  REQUIRED: a failure raises, so
    a broken tool stops the benchmark before the dataset is built."""
    try:
        out = subprocess.check_output(argv, stderr=subprocess.STDOUT,
                                      universal_newlines=True, timeout=30)
    except subprocess.CalledProcessError as exc:
        if required:
            raise BenchError("%s failed (exit %d): %s" % (
                " ".join(argv[-2:]), exc.returncode,
                " | ".join(exc.output.strip().splitlines()[-3:])))
        return "unavailable (exit %d)" % exc.returncode
    except (OSError, subprocess.SubprocessError) as exc:
        if required:
            raise BenchError("cannot run %s: %s" % (" ".join(argv[-2:]), exc))
        return "unavailable (%s)" % exc
    lines = out.strip().splitlines()
    return lines[0].strip() if lines else ""


def filesystem_of(path):
    """(mount point, fs type) of the mount holding PATH, from /proc/mounts."""
    path = os.path.realpath(path)
    best = ("?", "?")
    best_len = -1
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mnt = fields[1].replace("\\040", " ")
                inside = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) > best_len:
                    best, best_len = (mnt, fields[2]), len(mnt)
    except OSError:
        pass
    return best


def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def remove_tree(path):
    """Remove PATH if it exists (never timed)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def settle_caches(drop):
    """Flush dirty data (always) and, when DROP, empty the page cache,
    dentries and inodes so every run starts cold.  Returns True only when
    the kernel accepted the drop (needs root; refused in most containers)."""
    os.sync()
    if not drop:
        return False
    try:
        with open(DROP_CACHES, "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# Dataset
# ---------------------------------------------------------------------------

def dataset_layout(nfiles):
    """(top dirs, subdirs per top dir): about nfiles/50 leaf directories."""
    leaves = max(1, int(round(nfiles / float(FILES_PER_DIR))))
    tops = min(TOP_DIRS, leaves)
    subs = -(-leaves // tops)
    return tops, subs


def build_dataset(src, nfiles, seed):
    """Create SRC with NFILES files; returns its TreeCount.

    File i goes to leaf directory i % leaves, so every leaf holds ~50 files
    and a top directory ~50 * subs entries (above msrsync's default -f 1000
    for the full tree: it has to split top directories into subtrees).
    Sizes and content offsets come from random.Random(seed).getrandbits,
    whose output is stable across Python versions."""
    rng = random.Random(seed)
    block = rng.getrandbits(8 * RANDOM_BLOCK_SIZE).to_bytes(RANDOM_BLOCK_SIZE, "little")
    tops, subs = dataset_layout(nfiles)
    leaves = [os.path.join(src, "d%02d" % t, "s%03d" % s)
              for t in range(tops) for s in range(subs)]
    for leaf in leaves:
        os.makedirs(leaf)
    total = 0
    width = len(str(max(nfiles - 1, 1)))
    for i in range(nfiles):
        size = rng.getrandbits(MAX_FILE_SIZE_BITS)
        offset = rng.getrandbits(20) % (RANDOM_BLOCK_SIZE - size + 1)
        path = os.path.join(leaves[i % len(leaves)], "f%0*d.dat" % (width, i))
        with open(path, "wb") as f:
            f.write(block[offset:offset + size])
        total += size
    return TreeCount(nfiles, 1 + tops + len(leaves), 0, 0, total)


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


def count_tree(root):
    """Count ROOT's entries (root itself included in dirs), never following
    symlinks; bytes is the sum of regular files' sizes."""
    files = dirs = links = others = size = 0
    stack = [root]
    while stack:
        top = stack.pop()
        dirs += 1
        with os.scandir(top) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    files += 1
                    size += entry.stat(follow_symlinks=False).st_size
                elif entry.is_symlink():
                    links += 1
                else:
                    others += 1
    return TreeCount(files, dirs, links, others, size)


# ---------------------------------------------------------------------------
# Measuring one child
# ---------------------------------------------------------------------------

def _sample_hwm(pid, stop, result):
    """Poll /proc/PID/status for VmHWM (the process's own peak RSS) until
    STOP is set.  wait4's ru_maxrss is the largest of the whole tree, so this
    is how we tell msrsync's own memory from that of its rsync children."""
    path = "/proc/%d/status" % pid
    while not stop.is_set():
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        result[0] = max(result[0], int(line.split()[1]))
                        break
        except (OSError, ValueError):
            pass
        stop.wait(HWM_SAMPLE_SECONDS)


class Spawner(object):
    """Starts the measured commands so that ru_maxrss is theirs alone.

    Linux folds the resident size a process had *before* exec into its
    ru_maxrss (fs/exec.c: setmax_mm_hiwater_rss), so every child forked
    straight from this Python process reports at least our own RSS (~20 MB
    with the dataset built), more than rsync itself uses.  GNU time avoids it
    by being tiny; we get the same by launching through /bin/sh: sh starts
    the command in the background (a fork of a ~1.5 MB shell), prints its
    pid and exits, and the command, orphaned, is re-parented to us because
    we made ourselves a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so
    os.wait4 still gives us its rusage.  Without prctl or /bin/sh, children
    are forked directly and `floor_kib` says how much that adds."""

    __slots__ = ("prefix", "floor_kib", "how")

    # fd 3 carries the pid back; the command's stdout and stderr go to the log.
    LAUNCH = 'exec 3>&1 >&2; "$@" 3>&- & echo $! >&3'

    def __init__(self):
        self.prefix = None      # argv prefix of the sh launcher, None = direct fork
        self.floor_kib = None   # ru_maxrss of `sleep` started the same way
        self.how = "forked directly by bench.py"  # one line for the header
        if os.path.exists("/bin/sh") and _become_subreaper():
            self.prefix = ["/bin/sh", "-c", self.LAUNCH, "sh"]
            # An asynchronous command of a non-interactive shell starts with
            # SIGINT and SIGQUIT ignored; env --default-signal (coreutils
            # 8.31+) gives them back their default action.
            if subprocess.call(["env", "--default-signal=INT,QUIT", "true"],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0:
                self.prefix += ["env", "--default-signal=INT,QUIT"]
            self.how = "launched through /bin/sh, bench.py a child subreaper"

    def calibrate(self, log_path):
        """Measure the floor: what a command that uses ~no memory reports."""
        self.floor_kib = measure(["sleep", "0.1"], log_path, self).maxrss_kib
        return self.floor_kib

    def start(self, argv, out):
        """Start ARGV with stdout+stderr to OUT; return its pid."""
        if self.prefix is None:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)
            proc.returncode = 0  # we reap it with os.wait4: keep Popen from waiting
            return proc.pid
        launcher = subprocess.Popen(self.prefix + argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=out)
        line = launcher.stdout.readline()
        launcher.stdout.close()
        launcher.wait()
        try:
            return int(line)
        except ValueError:
            raise BenchError("the /bin/sh launcher gave no pid for %s" % argv[0])


def _become_subreaper():
    """prctl(PR_SET_CHILD_SUBREAPER, 1): orphaned descendants become ours."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        return False


def reap_orphans():
    """Collect any exited descendant re-parented to us (a subreaper must)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def measure(argv, log_path, spawner):
    """Run ARGV (stdout+stderr to LOG_PATH) and return its Measure.

    The wall time spans the start to the reap.  os.waitid(WNOWAIT) waits for
    the exit without reaping, so the /proc sampler stops before the pid can
    be reused; os.wait4 then reaps it and returns the rusage of the command
    plus every descendant it waited for (Linux: CPU summed, ru_maxrss the
    largest single process)."""
    with open(log_path, "ab") as out:
        out.write(("$ %s\n" % " ".join(shlex.quote(a) for a in argv)).encode())
        out.flush()
        t0 = time.monotonic()
        pid = spawner.start(argv, out)
        stop = threading.Event()
        hwm = [0]
        sampler = threading.Thread(target=_sample_hwm, args=(pid, stop, hwm))
        sampler.daemon = True
        sampler.start()
        try:
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            except AttributeError:
                pass
            stop.set()
            sampler.join()
            _, status, ru = os.wait4(pid, 0)
        except ChildProcessError:
            raise BenchError("lost track of %s (pid %d)" % (argv[0], pid))
        except KeyboardInterrupt:
            # Launched in the background, the command may not see the
            # terminal's SIGINT: stop it ourselves.
            stop.set()
            os.kill(pid, signal.SIGTERM)
            os.wait4(pid, 0)
            raise
        wall = time.monotonic() - t0
    reap_orphans()
    if os.WIFSIGNALED(status):
        code = -os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    return Measure(wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, hwm[0], code)


def tail(path, lines=5):
    try:
        with open(path, "rb") as f:
            data = f.read()[-4000:]
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


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
        if kind not in ("msrsync", "fpsync", "orig-msrsync") or \
                (procs and not procs.isdigit()):
            raise BenchError("unknown tool %r (rsync, msrsync, msrsync-pN, "
                             "fpsync, fpsync-pN, orig-msrsync, orig-msrsync-pN)" % name)
        for p in ([int(procs)] if procs else args.procs):
            label = {"msrsync": "msrsync", "fpsync": "fpsync",
                     "orig-msrsync": "orig msrsync"}[kind]
            tools.append(Tool("%s -p%d" % (label, p), kind, p))
    if args.fpsync and not any(t.kind == "fpsync" for t in tools):
        tools += [Tool("fpsync -p%d" % p, "fpsync", p) for p in args.procs]
    if args.orig_msrsync and not any(t.kind == "orig-msrsync" for t in tools):
        tools += [Tool("orig msrsync -p%d" % p, "orig-msrsync", p) for p in args.procs]
    if not tools:
        raise BenchError("no tool to run")
    for kind, path in (("msrsync", args.msrsync), ("fpsync", args.fpsync),
                       ("orig-msrsync", args.orig_msrsync)):
        if any(t.kind == kind for t in tools):
            if not path:
                raise BenchError("%s needs --%s PATH" % (kind, kind))
            if not os.access(path, os.X_OK) and not is_python_script(path):
                raise BenchError("%s not found or not executable: %s" % (kind, path))
    return tools


def tool_argv(tool, src, dst, args, workdir):
    """The exact command line of TOOL copying SRC/ into DST/."""
    src_slash = src.rstrip("/") + "/"
    dst_slash = dst.rstrip("/") + "/"
    if tool.kind == "rsync":
        return [args.rsync] + RSYNC_OPTS + [src_slash, dst_slash]
    if tool.kind == "msrsync":
        return (command_prefix(args.msrsync) + ["-p", str(tool.procs)]
                + shlex.split(args.msrsync_opts) + [src_slash, dst_slash])
    if tool.kind == "orig-msrsync":
        return command_prefix(args.orig_msrsync) + ["-p", str(tool.procs),
                                                     src_slash, dst_slash]
    if tool.kind == "fpsync":
        return [args.fpsync, "-n", str(tool.procs), "-t",
                os.path.join(workdir, "fpsync-tmp"), "-o", FPSYNC_RSYNC_OPTS,
                src_slash, dst_slash]
    raise BenchError("unknown tool kind %r" % tool.kind)


# ---------------------------------------------------------------------------
# The timed runs
# ---------------------------------------------------------------------------

def check_copy(src, dst, expected, args, log_path):
    """Cheap check (counts and bytes), plus `rsync -ain --delete` with
    --verify: rsync then itemizes every difference, including directory
    mtimes and modes, so empty output means DST is what rsync would leave."""
    problems = []
    try:
        got = count_tree(dst)
    except OSError as exc:
        return ["cannot walk DEST: %s" % exc]
    for field in ("files", "dirs", "symlinks", "bytes"):
        if getattr(got, field) != getattr(expected, field):
            problems.append("%s: DEST %d, SRC %d"
                            % (field, getattr(got, field), getattr(expected, field)))
    if args.verify:
        argv = [args.rsync, "-ain", "--delete", "--numeric-ids",
                src.rstrip("/") + "/", dst.rstrip("/") + "/"]
        try:
            out = subprocess.check_output(argv, stderr=subprocess.STDOUT)
        except subprocess.CalledProcessError as exc:
            out = exc.output + ("\n(rsync exited %d)" % exc.returncode).encode()
        if out.strip():
            lines = out.decode("utf-8", "replace").splitlines()
            problems.append("rsync -ain --delete lists %d difference(s), e.g. %s"
                            % (len(lines), "; ".join(lines[:3])))
            with open(log_path, "ab") as f:
                f.write(b"--- verify differences ---\n" + out)
    return problems


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
        "maxrss_kib": m.maxrss_kib, "self_hwm_kib": m.self_hwm_kib,
        "exit_code": m.exit_code, "cache_dropped": dropped, "untimed_prep_s": prep,
        "loadavg_after": loadavg(), "log": log_path, "check": None,
    }
    problems = []
    if m.exit_code != 0:
        problems.append("exit code %d; last lines of %s:\n%s"
                        % (m.exit_code, log_path, tail(log_path)))
    if scenario == SCENARIO_INITIAL:
        check = check_copy(src, dst, expected, args, log_path)
        record["check"] = "ok" if not check else "; ".join(check)
        problems += check
    record["ok"] = not problems
    runs.append(record)
    status = "ok" if not problems else "FAILED"
    log("rep %d  %-18s %-18s %7.2fs  cpu %6.2fs  rss %6.1f MiB  %s  (untimed prep %.1fs)"
        % (rep, tool.label, scenario, m.wall, m.user + m.sys,
           mib(m.maxrss_kib), status, prep))
    if problems:
        failures.append("%s, %s, rep %d: %s" % (tool.label, scenario, rep,
                                                "; ".join(problems)))
        log("  " + "; ".join(problems).replace("\n", "\n  "))
    return record


def run_benchmark(tools, src, expected, args, workdir, spawner):
    """Round-robin: at repetition r the tool order is rotated by r, and each
    tool does its initial copy then its up-to-date re-run back to back (the
    re-run needs the DEST the copy just made)."""
    dst = os.path.join(workdir, "dst")
    runs, failures = [], []
    for rep in range(1, args.reps + 1):
        k = (rep - 1) % len(tools)
        order = tools[k:] + tools[:k]
        log("repetition %d/%d: %s" % (rep, args.reps, ", ".join(t.label for t in order)))
        for tool in order:
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
    for scenario in SCENARIOS:
        base = None
        for tool in tools:
            mine = [r for r in runs if r["tool"] == tool.label
                    and r["scenario"] == scenario]
            good = [r for r in mine if r["ok"]]
            row = {"scenario": scenario, "tool": tool.label, "runs": len(mine),
                   "ok_runs": len(good)}
            if good:
                walls = [r["wall_s"] for r in good]
                row.update({
                    "median_s": statistics.median(walls), "min_s": min(walls),
                    "max_s": max(walls),
                    "cpu_median_s": statistics.median(r["cpu_s"] for r in good),
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
    """Successful runs slower than OUTLIER_FACTOR x their row's median: on a
    shared machine they are usually noise, but a stall inside the tool looks
    the same, so they are listed (with their CPU time) rather than hidden."""
    medians = {(r["scenario"], r["tool"]): r["median_s"] for r in rows if "median_s" in r}
    out = []
    for run in runs:
        median = medians.get((run["scenario"], run["tool"]))
        if run["ok"] and median and run["wall_s"] > OUTLIER_FACTOR * median:
            out.append("%s, %s, rep %d: %.2f s (median %.2f s), CPU %.2f s, log %s"
                       % (run["tool"], run["scenario"], run["rep"], run["wall_s"],
                          median, run["cpu_s"], run["log"]))
    return out


def markdown_table(rows):
    head = ("| scenario | tool | median s | min | max | ratio to rsync "
            "| CPU s | peak RSS MB |")
    out = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "median_s" not in r:
            out.append("| %s | %s | FAILED (%d/%d ok) | | | | | |"
                       % (r["scenario"], r["tool"], r["ok_runs"], r["runs"]))
            continue
        ratio = "%.2f" % r["ratio_to_rsync"] if r.get("ratio_to_rsync") else "-"
        note = "" if r["ok_runs"] == r["runs"] else " (%d/%d ok)" % (r["ok_runs"], r["runs"])
        out.append("| %s | %s%s | %s | %s | %s | %s | %s | %.1f |" % (
            r["scenario"], r["tool"], note, fmt_seconds(r["median_s"]),
            fmt_seconds(r["min_s"]), fmt_seconds(r["max_s"]), ratio,
            fmt_seconds(r["cpu_median_s"]), r["peak_rss_mib"]))
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
    lines += ["- %s" % e for e in extra]
    lines.append("- load average at start: %s" % (
        " ".join("%.2f" % x for x in env["loadavg_start"]) if env["loadavg_start"] else "?"))
    return "\n".join(lines)


def write_json(path, payload):
    if path == "-":
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
        f.write("\n")
    log("JSON written to %s" % path)


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
    p = argparse.ArgumentParser(
        prog="bench.py",
        description="Benchmark msrsync against plain rsync on many small files.",
        epilog="examples:\n"
               "  python3 bench/bench.py --quick\n"
               "  python3 bench/bench.py --json bench-full.json\n"
               "  python3 bench/bench.py --tools rsync --quick\n"
               "  python3 bench/bench.py --memory",
        formatter_class=argparse.RawDescriptionHelpFormatter)
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
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        workdir, owned = args.workdir, False
    else:
        base = os.environ.get("SHM", "/dev/shm") if args.shm else "/var/tmp"
        workdir, owned = tempfile.mkdtemp(prefix="msrsync-bench-", dir=base), True
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
    if "msrsync_sha256" in env and file_digest(args.msrsync) != env["msrsync_sha256"]:
        failures.append("%s changed while the benchmark ran: the figures mix versions"
                        % args.msrsync)
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
        "check after each initial copy: file/dir counts and bytes%s"
        % (" + rsync -ain --delete" if args.verify else ""),
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
            "reps": args.reps, "tools": [t._asdict() for t in tools],
            "summary": rows, "runs": runs, "outliers": outliers, "failures": failures})
    return 1 if failures else 0


def _terminated(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    args = parse_args(argv)
    # SIGTERM cleans up like Ctrl-C: the running tool is stopped and the
    # temporary work directory removed.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return run_memory(args) if args.memory else run_copy_benchmark(args)
    except BenchError as exc:
        sys.stderr.write("bench.py: error: %s\n" % exc)
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("bench.py: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
