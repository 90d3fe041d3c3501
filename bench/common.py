"""Helpers shared by the benchmark scripts of bench/ (bench.py, remote.py, suite.py,
hosts.py, longtail.py, check.py).

Standard library only, Python 3.6+, Linux (/proc, os.wait4, prctl).  What lives here:
running one command and measuring it (wall, CPU of its whole tree, peak RSS: Spawner and
measure), counting, digesting and removing trees, the seeded small-file dataset, the
private loopback sshd of tests/remote.py, a script's frame (its options, work directory,
environment and header), what every run records and checks, the rows, outliers and
tables built from the runs, and small parsing and formatting helpers.
"""

import argparse
import collections
import hashlib
import importlib.util
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SERVERS_PY = os.path.join(REPO, "tests", "remote.py")
MiB = 1 << 20
FILES_PER_DIR = 50          # ~N/50 leaf directories
TOP_DIRS = 40               # first level; each holds ~N/50/40 subdirectories
MAX_FILE_SIZE_BITS = 13     # sizes 0..8191 bytes
RANDOM_BLOCK_SIZE = 1 << 20  # contents are slices of this one random block

DROP_CACHES = "/proc/sys/vm/drop_caches"
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
HWM_SAMPLE_SECONDS = 0.02

# rsync's exit codes (msrsync uses the same, then its own 40-43).
EXIT_MEANINGS = {
    1: "syntax or usage error", 2: "protocol incompatibility",
    3: "errors selecting input/output files, dirs", 4: "requested action not supported",
    5: "error starting client-server protocol", 10: "error in socket I/O",
    11: "error in file I/O", 12: "error in rsync protocol data stream",
    20: "received SIGINT, SIGTERM or SIGHUP", 23: "partial transfer due to error",
    24: "partial transfer due to vanished source files", 30: "timeout in data send/receive",
    40: "rsync not found, not runnable, or too old", 41: "a worker rsync was killed",
    42: "internal error in msrsync", 255: "ssh failed",
}

# What a finished child cost: wall seconds, CPU seconds of the child and its
# reaped descendants, ru_maxrss of that tree in KiB (the largest single
# process), the child's own VmHWM in KiB sampled from /proc (0 if unseen),
# its exit status (negative: killed by that signal), and the CPU seconds of
# the child's own process alone, all its threads, none of its children
# (None if unseen).
Measure = collections.namedtuple(
    "Measure", "wall user sys maxrss_kib self_hwm_kib exit_code self_cpu")

# A tree's shape as counted by count_tree().
TreeCount = collections.namedtuple("TreeCount", "files dirs symlinks others bytes")


class BenchError(Exception):
    """A problem that stops the benchmark; main() prints it on one line."""


# ---------------------------------------------------------------------------
# Utilities
# ---------------------------------------------------------------------------

def log(msg):
    """Progress lines go to stderr, so stdout holds only the tables; they are tagged
    with the script's name (bench, remote, suite)."""
    name = os.path.splitext(os.path.basename(sys.argv[0] or "bench"))[0]
    sys.stderr.write("[%s %s] %s\n" % (name, time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def mib(kib):
    return kib / 1024.0


def fmt_seconds(s):
    return "%.2f" % s if s < 100 else "%.1f" % s


def fmt_ratio(value):
    """A ratio in a table cell: two decimals, or - where there is none."""
    return "%.2f" % value if value is not None else "-"


def human_size(nbytes):
    """4 KiB, 256 MiB, 1.5 GiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1024)):
        if nbytes >= size:
            if nbytes % size == 0:
                return "%d %s" % (nbytes // size, unit)
            return "%.1f %s" % (nbytes / float(size), unit)
    return "%d bytes" % nbytes


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


def parse_size(text, minimum=1):
    """1G, 50M, 1.5G, 4096 (powers of 1024) -> bytes, at least MINIMUM."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError("not a size: %r (e.g. 1G, 50M)" % text)
    value = float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")
    if value < minimum:
        raise argparse.ArgumentTypeError("size too small: %r" % text)
    return int(value)


def fill_sizes(args, full, quick):
    """Each size a script has a full and a --quick value of (FULL, QUICK: {option's dest:
    value}) and that the command line left unset takes the one ARGS.quick picks; a value
    written as a string is a size (parse_size)."""
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, parse_size(value) if isinstance(value, str) else value)


def script_parser(prog, description, examples):
    """A script's ArgumentParser: the first paragraph of DESCRIPTION (its docstring)
    above the options, the command lines EXAMPLES below them."""
    return argparse.ArgumentParser(
        prog=prog, description=description.split("\n\n")[0],
        epilog="examples:\n" + "\n".join("  " + e for e in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter)


def add_quick_option(parser, quick):
    """--quick, its help listing QUICK's sizes (see fill_sizes)."""
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 1 repetition: %s" % ", ".join(
                            "%s %s" % (k, v) for k, v in sorted(quick.items())))


def add_tool_options(parser, default_msrsync):
    """--msrsync and --rsync of a script whose plain rsync runs are the reference."""
    parser.add_argument("--msrsync", default=default_msrsync, metavar="PATH",
                        help="msrsync to test [../msrsync next to this script]")
    parser.add_argument("--rsync", default="rsync", metavar="PATH",
                        help="rsync binary of the plain runs (msrsync runs rsync from "
                             "PATH) [rsync]")


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


def use_this_python():
    """msrsync is started as a program: its sh lines start the python3 in
    PATH on it through importlib's loader, which keeps its compiled code
    (70 ms of every start otherwise).  This interpreter's directory goes
    first in PATH, so that python3 is this one, as where python3 is the
    system's (a pyenv shim costs ~50 ms a start); and the code may be kept
    as on a default box (PYTHONDONTWRITEBYTECODE unset)."""
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


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


def _mount_of(path):
    """(mount point, fs type, source device) of the mount holding PATH, from
    /proc/mounts: the longest mount point that holds it."""
    path = os.path.realpath(path)
    best = ("?", "?", None)
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
                    best, best_len = (mnt, fields[2], fields[0]), len(mnt)
    except OSError:
        pass
    return best


def filesystem_of(path):
    """(mount point, fs type) of the mount holding PATH."""
    return _mount_of(path)[:2]


def filesystem_note(path):
    """A line for the header where PATH's file system skews the figures, else None.

    An ext4 without a journal (as many VM images' root file systems are) checks,
    for each inode it allocates, whether that inode was freed in the last 30 s
    (find_inode_bit, recently_deleted), a lookup in the block device's cache that
    parallel writers contend for: on a 2-core VM, two plain rsyncs copying
    100,000 small files took 1.3-1.4x one rsync's time and 1.6x its system CPU,
    where on a journaled ext4 they took 0.9x."""
    _, fstype, source = _mount_of(path)
    if fstype != "ext4" or not source or not source.startswith("/dev/"):
        return None
    name = os.path.basename(os.path.realpath(source))
    try:
        with open("/sys/fs/ext4/%s/journal_task" % name) as f:
            journal = f.read().strip()
    except OSError:
        return None
    if journal != "<none>":
        return None
    return ("%s is ext4 without a journal: parallel file creation contends in the kernel "
            "there (inode allocation), so initial copies at -p 2 and up gain less than on "
            "a journaled ext4; see bench/README.md" % source)


def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def pick_base(need):
    """/dev/shm when it (and the RAM behind it) has room, else /tmp, else /var/tmp."""
    for base in ("/dev/shm", "/tmp", "/var/tmp"):
        if not (os.path.isdir(base) and os.access(base, os.W_OK)):
            continue
        st = os.statvfs(base)
        free = st.f_bavail * st.f_frsize
        if filesystem_of(base)[1] in ("tmpfs", "ramfs"):
            free = min(free, mem_available() - 1024 * MiB)   # its pages are RAM
        if free >= need * 1.2:
            return base
    raise BenchError("no room for %d MiB under /dev/shm, /tmp or /var/tmp (--workdir DIR)"
                     % (need // MiB))


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


def tail(path, lines=5):
    try:
        with open(path, "rb") as f:
            data = f.read()[-4000:]
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def output_tail(log_path, lines=3):
    """The last LINES lines the tool printed (the log's first line is its command)."""
    out = [l for l in tail(log_path, lines + 1).splitlines() if not l.startswith("$ ")]
    return "\n".join(out[-lines:]) or "(no output)"


def describe_exit(code):
    if code < 0:
        return "killed by signal %d" % -code
    return "exit %d%s" % (code, " (%s)" % EXIT_MEANINGS[code] if code in EXIT_MEANINGS else "")


def show_arg(arg):
    """ARG quoted for a shell, in double quotes when it holds single quotes (the
    --rsync "-az -e 'ssh ...'" of msrsync) and nothing double quotes would expand."""
    if "'" in arg and not re.search(r'["$`\\!]', arg):
        return '"%s"' % arg
    return shlex.quote(arg)


def write_json(path, payload):
    if path == "-":
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
        f.write("\n")
    log("JSON written to %s" % path)


def read_json(path):
    """PATH's JSON (an msrsync --json summary), None when it is missing or broken."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _terminated(signum, frame):
    raise KeyboardInterrupt


def run_main(prog, run, args):
    """A script's main: RUN(ARGS) with SIGTERM turned into KeyboardInterrupt, so that it
    cleans up like Ctrl-C (the finally blocks stop, by their pids, what was started and
    remove the temporary work directory).  A BenchError is one line and exit 2, an
    interrupt exit 130."""
    signal.signal(signal.SIGTERM, _terminated)
    use_this_python()
    try:
        return run(args)
    except BenchError as exc:
        sys.stderr.write("%s: error: %s\n" % (prog, exc))
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % prog)
        return 130


# ---------------------------------------------------------------------------
# Trees and the small-file dataset
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


def tree_digest(root, ns=False, with_root=False):
    """sha256 over every entry below ROOT: relative path, type, size for files, mode and
    mtime (in whole seconds, or NS: in ns), sorted by path; WITH_ROOT adds ROOT itself,
    as ".".  Two trees with the same digest hold the same names, types, sizes,
    permissions and times."""
    lines = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            for entry in it:
                name = rel + "/" + entry.name if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    kind, size = "d", 0
                    stack.append(name)
                elif stat.S_ISREG(st.st_mode):
                    kind, size = "f", st.st_size
                else:
                    kind, size = "o", 0
                lines.append("%s\0%s\0%d\0%o\0%d" % (
                    name, kind, size, stat.S_IMODE(st.st_mode),
                    st.st_mtime_ns if ns else int(st.st_mtime)))
    if with_root:
        st = os.stat(root)
        lines.append(".\0d\0\0%o\0%d" % (stat.S_IMODE(st.st_mode),
                                           st.st_mtime_ns if ns else int(st.st_mtime)))
    lines.sort()
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()



def random_block(rng, nbytes):
    """NBYTES random bytes from RNG (random.Random): getrandbits is the same on every
    Python version, so the bytes are too."""
    return rng.getrandbits(8 * nbytes).to_bytes(nbytes, "little")


def write_slices(f, nbytes, rng, source, min_slice, max_slice):
    """Write NBYTES to F as slices of SOURCE (bytes) taken at random places, each
    MIN_SLICE to MAX_SLICE bytes long (the last one shorter)."""
    span = max_slice - min_slice + 1
    bits = max(1, (span - 1).bit_length())
    while nbytes > 0:
        n = min(nbytes, min_slice + rng.getrandbits(bits) % span)
        off = rng.getrandbits(32) % (len(source) - n + 1)
        f.write(source[off:off + n])
        nbytes -= n


def cached_tree(workdir, name, params, build):
    """The dataset WORKDIR/NAME: built by BUILD(path), or reused when WORKDIR/datasets.json
    says it was built with the same PARAMS (a dict) and it still counts the same (a
    --workdir kept from an earlier run).  BUILD returns facts to keep with it (JSON, or
    None).  Returns (path, TreeCount, facts)."""
    manifest = os.path.join(workdir, "datasets.json")
    path = os.path.join(workdir, name)
    try:
        with open(manifest) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        saved = {}
    old = saved.get(name, {})
    if old.get("params") == params and "facts" in old and os.path.isdir(path):
        count = count_tree(path)
        if list(count) == old.get("count"):
            log("reusing dataset %s (%d files, %.1f MiB)"
                % (path, count.files, count.bytes / float(MiB)))
            return path, count, old.get("facts")
    remove_tree(path)
    log("building dataset %s" % path)
    t0 = time.monotonic()
    facts = build(path)
    count = count_tree(path)
    log("built in %.1fs: %d files, %.1f MiB" % (time.monotonic() - t0, count.files,
                                                count.bytes / float(MiB)))
    saved[name] = {"params": params, "count": list(count), "facts": facts}
    with open(manifest, "w") as f:
        json.dump(saved, f)
    return path, count, facts


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


def run_ok(argv, env, prog):
    """Wall seconds of one run of argv, which must exit 0 (else PROG exits,
    with the command's words)."""
    start = time.monotonic()
    cp = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE)
    seconds = time.monotonic() - start
    if cp.returncode != 0:
        sys.exit("%s: %s exited %d: %s" % (
            prog, " ".join(argv), cp.returncode, cp.stderr.decode(errors="replace").strip()))
    return seconds


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
            self_cpu = None
            try:
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                self_cpu = own_cpu_of_exited(pid)
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
    return Measure(wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, hwm[0], code, self_cpu)


def own_cpu_of_exited(pid):
    """The CPU seconds (user + system) of PID's own process, every thread of
    it and none of its children, read from /proc/PID/stat once it has
    exited and before it is reaped (os.waitid with WNOWAIT): exact to the
    clock tick, with nothing added to the process measured.  None if
    unreadable."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        return None


# ---------------------------------------------------------------------------
# The private loopback sshd (tests/remote.py)
# ---------------------------------------------------------------------------

def load_servers():
    """tests/remote.py as a module of its own name (this file is also called remote.py).
    It imports pytest, but uses it only in its fixtures: without pytest, a stub does."""
    if not os.path.exists(SERVERS_PY):
        raise BenchError("%s not found: it starts the private sshd" % SERVERS_PY)
    if "pytest" not in sys.modules and importlib.util.find_spec("pytest") is None:
        sys.modules["pytest"] = types.ModuleType("pytest")
    spec = importlib.util.spec_from_file_location("msrsync_test_servers", SERVERS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def proc_cpu_ticks(pid):
    """utime+stime+cutime+cstime of PID in clock ticks: the sshd's own CPU plus that of
    every child it has reaped (its sessions, which include the remote rsyncs)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(v) for v in fields[11:15])


def wait_idle(servers, pid, timeout=60):
    """Wait until the sshd has no session left (untimed); False on timeout."""
    deadline = time.monotonic() + timeout
    while servers.descendants(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def start_sshd(servers, directory):
    """A private sshd (SERVERS: tests/remote.py, from load_servers()) on 127.0.0.1,
    with its keys, config and log in DIRECTORY; returns the running SshServer.  The
    caller stops it by its pid with .stop(), in a finally."""
    missing = servers.ssh_missing()
    if missing:
        raise BenchError("needs openssh: missing %s" % missing)
    remove_tree(directory)
    server = servers.SshServer(directory)
    try:
        server.prepare()
        server.start()
    except (servers.ServerStartError, subprocess.SubprocessError, OSError) as exc:
        server.stop()
        raise BenchError("cannot start the private sshd: %s" % exc)
    except BaseException:
        server.stop()
        raise
    return server


def fmt_load(la):
    """A load average triple as the headers print it."""
    return " ".join("%.2f" % x for x in la) if la else "?"


def load_span(start, end):
    """The load average at the start and at the end of a table's runs, in a note."""
    return "load average at start %s, at end %s" % (fmt_load(start), fmt_load(end))


def print_workdir(env):
    """The header's work directory line, and its file system's note."""
    print("- workdir: %s (%s on %s)" % (env["workdir"], env["filesystem"], env["mount"]))
    if env.get("filesystem_note"):
        print("- NOTE: %s" % env["filesystem_note"])


def print_header_end(env):
    """The header's last line (the load at start) and a blank line, flushed."""
    print("- load average at start: %s" % fmt_load(env["loadavg_start"]))
    print()
    sys.stdout.flush()


def _absolute(path):
    """--workdir's type: an absolute path (an empty one stays empty: no --workdir)."""
    return os.path.abspath(path) if path else path


def add_run_options(parser, default_seed, verify_help):
    """The options every benchmark script has: the dataset seed, where it
    works, a check after each copy, the page cache, what it keeps, JSON."""
    parser.add_argument("--seed", type=int, default=default_seed, help="dataset seed")
    parser.add_argument("--workdir", metavar="DIR", type=_absolute,
                        help="datasets and logs go here and stay (reused by the next run) "
                             "[a temporary directory under /var/tmp, removed at the end]")
    parser.add_argument("--verify", action="store_true", help=verify_help)
    parser.add_argument("--no-drop-caches", action="store_true",
                        help="do not drop the page cache before runs")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workdir")
    parser.add_argument("--json", metavar="OUT",
                        help="write everything as JSON ('-' = stdout)")


def report_end(args, env, results, problems, logs=None):
    """The end of a benchmark's report: its failures, where its logs stay,
    its JSON (--json); the exit code."""
    for problem in problems:
        print("FAILURE: " + problem)
    if logs:
        print("logs kept in %s" % logs)
    if args.json:
        write_json(args.json, {"environment": env, "args": vars(args), "results": results,
                               "problems": problems})


def print_results(res, outlier_factor, more_lines=()):
    """A section's notes (its lines, then more_lines), its table, then its
    outliers and failures, if any; or why it was skipped."""
    print()
    if res["skipped"]:
        print("skipped: %s" % res["skipped"])
        print()
        sys.stdout.flush()
        return
    for line in list(res["lines"]) + list(more_lines):
        print("- " + line)
    print()
    print(res["table"])
    if res["outliers"]:
        print()
        print("OUTLIERS (slower than %g x their median; kept in the figures):"
              % outlier_factor)
        for o in res["outliers"]:
            print("- " + o)
    if res["failures"]:
        print()
        print("FAILURES:")
        for f in res["failures"]:
            print("- " + f.replace("\n", "\n    "))
    print()
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# A script's frame: msrsync, the work directory, the environment, the header
# ---------------------------------------------------------------------------

def require_msrsync(path):
    if not os.path.exists(path):
        raise BenchError("msrsync not found: %s (--msrsync PATH)" % path)


def msrsync_version(path):
    """PATH's --version, which also caches its compiled code: a broken msrsync stops the
    benchmark before its datasets are built."""
    return first_line_of(command_prefix(path) + ["--version"], required=True)


def changed_since(path, sha):
    """[a problem] when PATH's sha256 is no longer SHA (it changed while the benchmark
    ran), else []."""
    if file_digest(path) == sha:
        return []
    return ["%s changed while the benchmark ran: the figures mix versions" % path]


def make_workdir(workdir, prefix, base="/var/tmp", need=None, what="the datasets"):
    """(work directory, owned): WORKDIR (--workdir, made if missing, kept), or a new
    temporary directory PREFIX... under BASE (None: pick_base(NEED)), which the script
    removes at the end (owned); NEED bytes must be free there for WHAT (unchecked when
    None)."""
    if workdir:
        os.makedirs(workdir, exist_ok=True)
        return workdir, False
    if base is None:
        base = pick_base(need)
    elif need is not None:
        st = os.statvfs(base)
        if st.f_bavail * st.f_frsize < need:
            raise BenchError("%s has %.1f GiB free, %s need about %.1f GiB "
                             "(--workdir DIR elsewhere, or smaller sizes)" % (
                                 base, st.f_bavail * st.f_frsize / float(1 << 30), what,
                                 need / float(1 << 30)))
    return tempfile.mkdtemp(prefix=prefix, dir=base), True


def clean_workdir(workdir, owned, keep, keep_logs, logs_only=False):
    """The end of a script: its temporary work directory (OWNED, without --keep) is
    removed, or, when KEEP_LOGS (a failure, an outlier), all of it but runs/ (LOGS_ONLY:
    but runs/*/logs), for the logs to be read.  Returns where those logs stay, else
    None."""
    runs_dir = os.path.join(workdir, "runs")
    if not owned or keep:
        return None
    if keep_logs and os.path.isdir(runs_dir):
        for name in os.listdir(workdir):
            if name != "runs":
                remove_tree(os.path.join(workdir, name))
        for sec in os.listdir(runs_dir) if logs_only else ():
            for name in os.listdir(os.path.join(runs_dir, sec)):
                if name != "logs":
                    remove_tree(os.path.join(runs_dir, sec, name))
    else:
        remove_tree(workdir)
    return runs_dir if keep_logs else None


def machine_env(version_key, version):
    """The environment's first facts: the script's version (VERSION_KEY: VERSION), the
    date, the machine and Python; the script adds its own after them."""
    return {
        version_key: version, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "cpu_model": cpu_model(), "python": sys.version.split()[0],
    }


def case_environment(version_key, version, args, workdir):
    """The environment of a script that runs one case (check.py, longtail.py): the
    machine, ARGS.rsync's version, ARGS.msrsync's path, WORKDIR and its file system, the
    memory available and the load."""
    mnt, fstype = filesystem_of(workdir)
    env = machine_env(version_key, version)
    env.update({
        "rsync": first_line_of([args.rsync, "--version"], required=True),
        "msrsync_path": os.path.abspath(args.msrsync), "workdir": workdir,
        "filesystem": fstype, "mount": mnt, "filesystem_note": filesystem_note(workdir),
        "euid": os.geteuid(), "mem_available": mem_available(), "loadavg_start": loadavg(),
    })
    return env


def print_header_start(title, env, more=(), tree=None):
    """A header's first lines: TITLE and the date, the machine (and its memory, where env
    has it), rsync's, msrsync's and Python's versions, the lines MORE, the work
    directory, the TREE the runs copy (when one)."""
    print("# %s (%s)" % (title, env["date"]))
    print()
    print("- machine: %d CPUs (%s), kernel %s, host %s%s" % (
        env["cpus"], env["cpu_model"], env["kernel"], env["host"],
        ", %.1f GiB of memory available" % (env["mem_available"] / float(1 << 30))
        if "mem_available" in env else ""))
    print("- %s; msrsync %s (%s, sha256 %s); Python %s" % (
        env["rsync"], env["msrsync"].split()[-1], env["msrsync_path"],
        (env["msrsync_sha256"] or "?")[:12], env["python"]))
    for line in more:
        print("- " + line)
    print_workdir(env)
    if tree is not None:
        print("- tree: %s" % tree)


def run_case_alone(args, case, version, need, what, run_case, facts):
    """RUN_CASE(ARGS, workdir, spawner), the case of check.py or longtail.py (which
    suite.py runs as one of its sections), run by the script itself: in --workdir or a
    temporary msrsync-CASE-... (NEED bytes free for WHAT, see make_workdir), cleaned
    after it, on an error too (clean_workdir).  Returns (the environment: the machine's
    (case_environment, CASE_version: VERSION), then FACTS(the case's result), then the
    load at the end; the case's result; whether a run failed; where the logs stay or
    None; the seconds it all took)."""
    workdir, owned = make_workdir(args.workdir, "msrsync-%s-" % case, need=need, what=what)
    env = case_environment("%s_version" % case, version, args, workdir)
    spawner = Spawner()
    res, failed = None, True
    t0 = time.monotonic()
    try:
        res = run_case(args, workdir, spawner)
        failed = bool(res["failures"])
    finally:
        logs = clean_workdir(workdir, owned, args.keep,
                             failed or bool(res and res["outliers"]))
    seconds = time.monotonic() - t0
    env.update(facts(res))
    env["loadavg_end"] = loadavg()
    return env, res, failed, logs, seconds


def report_case(args, env, section, heading, res, failed, logs, outlier_factor, timing,
                more=None):
    """The rest of the report of a script that runs one case: the header's end, the
    case's section (HEADING and what it ran on, its notes, TIMING and the load, its
    table, outliers and failures), then report_end with the case as SECTION in the JSON
    (plus MORE); the exit code."""
    print_header_end(env)
    print("## %s — %s" % (heading, res["about"]))
    print_results(dict(res, skipped=None), outlier_factor, [
        "%s; %s" % (timing, load_span(env["loadavg_start"], env["loadavg_end"]))])
    result = {"section": section, "title": res["about"], "rows": res["rows"],
              "runs": res["runs"], "failures": res["failures"], "outliers": res["outliers"]}
    result.update(more or {})
    report_end(args, env, [result], res["problems"], logs)
    return 1 if failed or res["problems"] else 0


# ---------------------------------------------------------------------------
# The runs: their files, records, checks, order; rows, outliers and tables
# ---------------------------------------------------------------------------

def make_run_dirs(d):
    """D (a case's directory, WORKDIR/runs/CASE) with its logs/ and json/; returns D."""
    for sub in ("logs", "json"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    return d


def run_paths(d, name, rep, with_json):
    """(log, JSON or None) of repetition REP of the run NAME, in D's logs/ and json/."""
    stem = "%s-rep%d" % ("".join(c if c.isalnum() or c in ".-" else "_" for c in name), rep)
    return (os.path.join(d, "logs", stem + ".log"),
            os.path.join(d, "json", stem + ".json") if with_json else None)


def run_record(fields, argv, m, dropped, prep, log_path):
    """A timed run's record: FIELDS (what ran), then its command ARGV, what it cost (M,
    a Measure), whether the page cache was dropped before it, its untimed preparation
    (PREP seconds), the load after it and its log."""
    record = dict(fields)
    record.update({
        "argv": argv, "wall_s": m.wall, "cpu_user_s": m.user, "cpu_sys_s": m.sys,
        "cpu_s": m.user + m.sys, "maxrss_kib": m.maxrss_kib, "exit_code": m.exit_code,
        "cache_dropped": dropped, "untimed_prep_s": prep, "loadavg_after": loadavg(),
        "log": log_path,
    })
    return record


def exit_problem(code, log_path, expected=None):
    """A run's wrong exit status (EXPECTED: the one it should have had, in the message)
    and the last lines of its log."""
    return "%s%s; last lines of %s:\n%s" % (
        describe_exit(code), ", expected %d" % expected if expected is not None else "",
        log_path, tail(log_path))


def note_failure(failures, what, problems):
    """A run's PROBLEMS, if any: one line of FAILURES (WHAT: which run) and the log."""
    if problems:
        failures.append("%s: %s" % (what, "; ".join(problems)))
        log("  " + "; ".join(problems).replace("\n", "\n  "))


def rotation(items, rep):
    """ITEMS in the order of repetition REP (from 1): rotated by REP - 1, so that none
    always runs first or last."""
    k = (rep - 1) % len(items)
    return items[k:] + items[:k]


def run_rounds(ctx, run_one, order):
    """The timed runs of check.py and longtail.py: at each repetition REP (from 1 to
    ctx["args"].reps) RUN_ONE(CTX, tool, REP, runs, failures) for each tool of
    ORDER(REP).  Returns (runs, failures)."""
    a = ctx["args"]
    runs, failures = [], []
    for rep in range(1, a.reps + 1):
        log("repetition %d/%d" % (rep, a.reps))
        for tool in order(rep):
            run_one(ctx, tool, rep, runs, failures)
    return runs, failures


def compare_copy(src, dst, expected, rsync, verify, log_path, verify_opts=(), more=None):
    """What differs between the copy DST and SRC, whose TreeCount is EXPECTED: the
    counts and bytes, then what MORE(problems so far) finds, then with VERIFY
    `RSYNC -ain --delete VERIFY_OPTS SRC/ DST/`, which must print nothing (what it
    prints goes to LOG_PATH too); [] when DST is right."""
    try:
        got = count_tree(dst)
    except OSError as exc:
        return ["cannot walk DEST: %s" % exc]
    problems = []
    for field in ("files", "dirs", "symlinks", "bytes"):
        if getattr(got, field) != getattr(expected, field):
            problems.append("%s: DEST %d, SRC %d"
                            % (field, getattr(got, field), getattr(expected, field)))
    if more is not None:
        problems += more(problems)
    if verify:
        argv = [rsync, "-ain", "--delete"] + list(verify_opts) + [
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


def median_or_none(values):
    """The median of VALUES but None, None when there is none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summary_row(mine, fields):
    """(row, good runs) of one table row over MINE, its runs: FIELDS (what ran), how many
    runs and good runs and, when one was good, the median, min and max of their wall
    times; the caller adds its own figures."""
    good = [r for r in mine if r["ok"]]
    row = dict(fields)
    row.update({"runs": len(mine), "ok_runs": len(good)})
    if good:
        walls = [r["wall_s"] for r in good]
        row.update({"median_s": statistics.median(walls), "min_s": min(walls),
                    "max_s": max(walls)})
    return row, good


def find_slow_runs(runs, rows, keys, name, factor):
    """Good runs slower than FACTOR x the median of their row (a run and its row agree
    on KEYS): on a shared machine they are usually noise, but a stall inside the tool
    looks the same, so they are listed (with their CPU time) rather than hidden.
    NAME(run) says which run it was."""
    medians = dict((tuple(r[k] for k in keys), r["median_s"]) for r in rows
                   if "median_s" in r)
    out = []
    for run in runs:
        median = medians.get(tuple(run[k] for k in keys))
        if run["ok"] and median and run["wall_s"] > factor * median:
            out.append("%s, rep %d: %.2f s (median %.2f s), CPU %.2f s, log %s"
                       % (name(run), run["rep"], run["wall_s"], median, run["cpu_s"],
                          run["log"]))
    return out


def ok_note(row):
    """After a tool's name in a table: how many of its runs were good, when not all."""
    return "" if row["ok_runs"] == row["runs"] else " (%d/%d ok)" % (row["ok_runs"],
                                                                     row["runs"])
