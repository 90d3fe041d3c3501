"""Helpers shared by the benchmark scripts of bench/ (bench.py, remote.py, suite.py).

Standard library only, Python 3.6+, Linux (/proc, os.wait4, prctl).  What lives here:
running one command and measuring it (wall, CPU of its whole tree, peak RSS: Spawner and
measure), counting and removing trees, the seeded small-file dataset, the private
loopback sshd of tests/remote.py, and small parsing and formatting helpers.
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
import subprocess
import sys
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
    """Progress lines go to stderr, so stdout holds only the tables; they are tagged
    with the script's name (bench, remote, suite)."""
    name = os.path.splitext(os.path.basename(sys.argv[0] or "bench"))[0]
    sys.stderr.write("[%s %s] %s\n" % (name, time.strftime("%H:%M:%S"), msg))
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


def parse_size(text, minimum=1):
    """1G, 50M, 1.5G, 4096 (powers of 1024) -> bytes, at least MINIMUM."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError("not a size: %r (e.g. 1G, 50M)" % text)
    value = float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")
    if value < minimum:
        raise argparse.ArgumentTypeError("size too small: %r" % text)
    return int(value)


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


def add_run_options(parser, default_seed, verify_help):
    """The options every benchmark script has: the dataset seed, where it
    works, a check after each copy, the page cache, what it keeps, JSON."""
    parser.add_argument("--seed", type=int, default=default_seed, help="dataset seed")
    parser.add_argument("--workdir", metavar="DIR",
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
