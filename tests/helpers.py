"""Test harness for msrsync: drive the real executable, build awkward trees, compare trees.

The oracle of every copy test is plain rsync: the same SRC arguments are copied once with
``rsync OPTS SRC... DEST_oracle`` and once with ``msrsync ... SRC... DEST``, then the two
destinations are compared entry by entry (type, mode, owner, size, content, mtime, link
target, hard-link groups, xattrs), like rsync's own testsuite ``checkit``.
"""

import collections
import glob
import hashlib
import json
import importlib.machinery
import os
import random
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import types

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
PROJECT_DIR = os.path.dirname(TESTS_DIR)
MSRSYNC = os.path.join(PROJECT_DIR, "msrsync")
README = os.path.join(PROJECT_DIR, "README.md")
MANPAGE = os.path.join(PROJECT_DIR, "man", "msrsync.1")

DEFAULT_RSYNC_OPTS = ["-aS", "--numeric-ids"]
DEFAULT_TIMEOUT = 120
IS_ROOT = os.geteuid() == 0
NOBODY = 65534
# A fixed, old, nanosecond-precise timestamp so that an mtime which rsync failed to copy
# can never be mistaken for "now".
BASE_TIME_NS = 1500000000 * 10 ** 9 + 123456789
T0 = 1400000000                     # seconds: the past every hand-made tree lives in (age)
RECENT_NS = (T0 + 10 ** 6) * 10 ** 9  # newer than this: touched by the test, to be aged

# msrsync settings: worker count and tiny buckets, so one tree makes many buckets
SETTINGS = {
    "p1-f1": ["-p", "1", "-f", "1"],
    "p2-f1": ["-p", "2", "-f", "1"],
    "p2-f7": ["-p", "2", "-f", "7"],
    "p8-f1": ["-p", "8", "-f", "1"],
    "p8-s1K": ["-p", "8", "-s", "1K"],
}


def settings(*names):
    """The SETTINGS named, as parameters of a test (their names its ids)."""
    return [pytest.param(SETTINGS[n], id=n) for n in names]


# --------------------------------------------------------------------------- processes

def _arg(value):
    """subprocess accepts str and bytes arguments; turn path objects into bytes."""
    if isinstance(value, (str, bytes)):
        return value
    if hasattr(value, "__fspath__"):
        return os.fsencode(value)
    return str(value)


def run_cmd(argv, timeout=DEFAULT_TIMEOUT, env=None, cwd=None, input=None):
    """Run argv (str/bytes/path items), capture stdout/stderr as bytes."""
    argv = [_arg(a) for a in argv]
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL if input is None else None,
                          input=input, timeout=timeout, env=env, cwd=cwd and _arg(cwd))


def run_msrsync(*args, python=sys.executable, timeout=DEFAULT_TIMEOUT, env=None, cwd=None,
                prefix=(), input=None):
    """Run ``[*prefix, python, MSRSYNC, *args]``; returns a CompletedProcess (bytes output)."""
    return run_cmd(list(prefix) + [python, MSRSYNC] + list(args), timeout=timeout, env=env,
                   cwd=cwd, input=input)


def run_rsync(*args, opts=None, prefix=(), timeout=DEFAULT_TIMEOUT, env=None, cwd=None,
              input=None):
    """Run plain rsync: ``rsync OPTS args...`` (OPTS defaults to msrsync's defaults)."""
    opts = DEFAULT_RSYNC_OPTS if opts is None else list(opts)
    return run_cmd(list(prefix) + ["rsync"] + opts + list(args), timeout=timeout, env=env,
                   cwd=cwd, input=input)


def start_msrsync(*args, python=sys.executable, env=None, cwd=None, stderr=subprocess.PIPE):
    """Start msrsync in the background (SIGINT at its default, as from a terminal)."""
    def restore_sigint():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    argv = [python, MSRSYNC] + [_arg(a) for a in args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr,
                            stdin=subprocess.DEVNULL, env=env, cwd=cwd and _arg(cwd),
                            preexec_fn=restore_sigint)


def text(data):
    """bytes -> str without ever failing (non-UTF-8 names survive as surrogates)."""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


def describe(cp):
    """Human-readable account of a finished process, for assertion messages."""
    return "argv: %r\nexit: %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
        cp.args, cp.returncode, text(cp.stdout)[-4000:], text(cp.stderr)[-4000:])


def stderr_lines(cp):
    return [l for l in text(cp.stderr).splitlines()]


def processes():
    """(pid, parent's pid, state letter, command line) of every process in /proc."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmdline = f.read()
            with open("/proc/%s/stat" % name, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            yield int(name), int(fields[1]), fields[0], cmdline
        except (OSError, IndexError, ValueError):
            continue


# What the command line of every rsync of msrsync's pre-flight of DEST holds (its probe's
# directory at DEST, or its own in the bucket directory): not a worker's.
PREFLIGHT_MARK = b"preflight-"


def rsync_processes_mentioning(needle, preflight=False):
    """(pid, argv) of live rsync processes whose command line contains needle (bytes):
    the run's workers, and with preflight those of its pre-flight of DEST too.

    Scans /proc; zombies are ignored (they hold nothing and are reaped by their parent).
    """
    needle = os.fsencode(needle)
    found = []
    for pid, _, state, cmdline in processes():
        argv = cmdline.split(b"\0")
        if state == b"Z" or not argv or not argv[0]:
            continue
        if os.path.basename(argv[0]).startswith(b"rsync") and needle in cmdline and \
                (preflight or PREFLIGHT_MARK not in cmdline):
            found.append((pid, argv))
    return found


def wait_for(predicate, timeout, interval=0.05):
    """Poll predicate until it returns something truthy or timeout passes; return the value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def running_rsyncs(tmp_path, preflight=False):
    """(pid, argv) of the live rsyncs whose command line names tmp_path: this test's own
    workers (with preflight, its pre-flight's too)."""
    return rsync_processes_mentioning(os.fsencode(tmp_path), preflight)


def every_rsync(tmp_path):
    """Every live rsync of this test's own, its pre-flight's too."""
    return running_rsyncs(tmp_path, preflight=True)


def kill_leftovers(tmp_path, find=every_rsync):
    """Clean up after a failed test: SIGKILL the (pid, argv) find(tmp_path) lists, only
    processes of this test's own directory."""
    for pid, _ in find(tmp_path):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def end(proc, tmp_path):
    """After a test, failed or not: msrsync stopped, no rsync of this test left."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
    kill_leftovers(tmp_path)


def assert_no_rsync_left(tmp_path):
    """Killed process groups go at once; allow the kernel a moment to reap them."""
    left = wait_for(lambda: not every_rsync(tmp_path), 2) or every_rsync(tmp_path)
    assert left is True, "rsync processes left running: %r" % (left,)


def load_msrsync():
    """The msrsync script loaded as a module (msrsync_mod), for tests of its functions."""
    loader = importlib.machinery.SourceFileLoader("msrsync_mod", MSRSYNC)

    module = types.ModuleType(loader.name)
    module.__file__ = MSRSYNC
    loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- other users

def nonroot_prefix():
    """Command prefix that runs a command as nobody (65534), or None when impossible."""
    if not IS_ROOT:
        return None
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    if shutil.which("runuser"):
        try:
            import pwd
            name = pwd.getpwuid(NOBODY).pw_name
        except (KeyError, ImportError):
            return None
        return ["runuser", "-u", name, "--"]
    return None


def nonroot_python(prefix):
    """A Python interpreter that nobody can run and that can read msrsync, or None."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(candidate):
            continue
        cp = run_cmd(list(prefix) + [candidate, "-c",
                                     "import sys; open(sys.argv[1], 'rb').read()", MSRSYNC],
                     timeout=30)
        if cp.returncode == 0:
            return candidate
    return None


def shared_tmpdir():
    """A fresh 0777 directory under /tmp (pytest's tmp_path is 0700, closed to nobody)."""
    path = tempfile.mkdtemp(prefix="msrsync-test-", dir="/tmp")
    os.chmod(path, 0o777)
    return path


def chown_tree(root, uid, gid):
    root = os.fsencode(root)
    os.lchown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


def rmtree_force(path):
    """rmtree that also copes with 0555/000 directories when not root."""
    path = os.fsencode(path)
    if not os.path.lexists(path):
        return
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                try:
                    os.chmod(full, 0o700)
                except OSError:
                    pass
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- trees

def build(root, spec, mtime=None):
    """Make the entries of spec under root (made too), in order; returns root as bytes.

    spec maps a path relative to root (str or bytes) to what it becomes:
      a key ending in "/"    a directory; its value is ignored ("dir/", None) or is an int,
                             its mode, given once everything is made (deepest first, so a
                             0555 directory can still be filled)
      str or bytes           a regular file with that content (str as UTF-8)
      ("file", data, mode)   a regular file with that content and mode
      ("symlink", target)    a symbolic link
      ("hardlink", other)    a hard link to other (relative to root, or absolute)
      ("fifo",)              a named pipe
    Missing parent directories are made on the way. With mtime (seconds), every entry
    spec names (a symlink itself, not what it names) gets it once everything is made;
    otherwise times are the caller's (see age).
    """
    root = os.fsencode(root)
    os.makedirs(root, exist_ok=True)
    dir_modes = []
    for rel, what in spec.items():
        path = os.path.join(root, os.fsencode(rel))
        if path.endswith(b"/"):
            os.makedirs(path, exist_ok=True)
            if isinstance(what, int):
                dir_modes.append((path, what))
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        kind, args = (what[0], what[1:]) if isinstance(what, tuple) else ("file", (what, None))
        if kind == "file":
            data, mode = args
            with open(path, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
            if mode is not None:
                os.chmod(path, mode)
        elif kind == "symlink":
            os.symlink(os.fsencode(args[0]), path)
        elif kind == "hardlink":
            os.link(os.path.join(root, os.fsencode(args[0])), path)
        elif kind == "fifo":
            os.mkfifo(path)
        else:
            raise ValueError("unknown entry %r for %r" % (what, rel))
    for path, mode in sorted(dir_modes, key=lambda pm: pm[0].count(b"/"), reverse=True):
        os.chmod(path, mode)
    if mtime is not None:
        for rel in spec:
            os.utime(os.path.join(root, os.fsencode(rel)), (mtime, mtime),
                     follow_symlinks=False)
    return root


def age(root, when=T0, everything=False):
    """Give every entry under root (root included) touched since RECENT_NS, or every
    entry at all with everything, the mtime `when` (seconds), deepest first and each
    directory after its contents; returns root as bytes."""
    root = os.fsencode(root)
    ns = int(when) * 10 ** 9

    def touch(path):
        if everything or os.lstat(path).st_mtime_ns > RECENT_NS:
            os.utime(path, ns=(ns, ns), follow_symlinks=False)

    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            if name in filenames or os.path.islink(path):
                touch(path)
        touch(dirpath)      # its subdirectories came earlier (bottom-up walk)
    return root


def p(root, rel):
    """root/rel as bytes."""
    return os.path.join(os.fsencode(root), os.fsencode(rel))


def contents(src):
    """The SRC argument that copies src's contents: [b"src/"]."""
    return [os.fsencode(src) + b"/"]


def dests(workdir):
    """The two destinations differential() fills: (rsync's, msrsync's)."""
    w = os.fsencode(workdir)
    return [os.path.join(w, b"oracle", b"dest"), os.path.join(w, b"msrsync", b"dest")]


def on_both_dests(workdir, spec, when):
    """The same extra entries, with the same mtimes, in both destinations."""
    for dest in dests(workdir):
        build(dest, spec)
        age(dest, when)


def _content(rng, size):
    return bytes(rng.getrandbits(8) for _ in range(size)) if size < 64 else \
        (hashlib.sha256(str(rng.random()).encode()).digest() * (size // 32 + 1))[:size]


def _set_times(root, rng):
    """Give every entry an old, distinct mtime: files and links first, then directories
    deepest first (setting a file's time does not touch its directory, but creating
    entries does, so directories come last)."""
    dirs = []
    for dirpath, dirnames, filenames in os.walk(root):
        # by name, not in the listing's order: two trees built alike can list
        # their entries in different orders (tmpfs did, once in ~1,000 trees)
        dirnames.sort()
        dirs.append(dirpath)
        for name in sorted(filenames) + [d for d in dirnames
                                         if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            t = BASE_TIME_NS + rng.randrange(10 ** 6) * 10 ** 9 + rng.randrange(10 ** 9)
            os.utime(full, ns=(t, t), follow_symlinks=False)
    for dirpath in sorted(dirs, key=lambda d: d.count(b"/"), reverse=True):
        t = BASE_TIME_NS + rng.randrange(10 ** 6) * 10 ** 9 + rng.randrange(10 ** 9)
        os.utime(dirpath, ns=(t, t), follow_symlinks=False)


# Names that have broken copy tools before: shell metacharacters, option look-alikes,
# bytes that are not UTF-8, a newline (rsync escapes it as \#012 in its output).
WEIRD_NAMES = [
    b"with space", b"two  spaces ", b"quote'single", b'quote"double', b"new\nline",
    b"-rf", b"--help", b"-", b"back\\slash", b"\xff\xfe-invalid-utf8", b"tab\tname",
    b"star*?[x]", b"dollar$HOME", b"semi;colon&amp|pipe", b"percent%s%n", b"#hash", b";semicolon first",
    u"unicode \u00e9\u00fc \u65e5\u672c\u8a9e \U0001f389".encode("utf-8"),
    b"n" * 200, b"m" * 255, b".hidden", b"..dots", b"trailing.",
]


def make_tree(root, kind="weird", seed=0, **kw):
    """Build a source tree of the given kind under root (created); returns root as bytes.

    kinds:
      weird    -- every awkward case at once (see WEIRD_NAMES, symlinks, FIFO, modes,
                  read-only dir, 30-deep nesting, hard links, sparse file, owners when root)
      small    -- the weird names, links and modes but only a few dozen files
      tiny     -- about twenty entries: a few awkward names, a link, an empty and a 0555 dir
      readonly -- a 0555 directory holding many files (and a 0555 subdirectory), kw n=...
      big      -- kw count=... files of kw size=... bytes (for slow, interruptible copies)
      flat     -- kw n=... small files in one directory
    """
    root = os.fsencode(root)
    rng = random.Random(seed)
    spec = {}
    if kind in ("weird", "small"):
        spec = _weird_spec(rng, many=(kind == "weird"))
    elif kind == "tiny":
        for i, name in enumerate([b"a b", b"-x", b"q'\"", b"nl\n", b"\xff\xfe", b"#c"]):
            spec[name] = _content(rng, 100 * i)
        spec[b"sub dir/deeper/"] = None
        for i in range(4):
            spec[b"sub dir/f%d" % i] = _content(rng, 50 * i)
        spec[b"sub dir/deeper/leaf"] = ("file", b"leaf\n", 0o600)
        spec[b"link"] = ("symlink", b"sub dir/f1")
        spec[b"empty/"] = None
        spec[b"ro/"] = 0o555
        for i in range(3):
            spec[b"ro/r%d" % i] = b"r" * i
    elif kind == "readonly":
        n = kw.get("n", 60)
        spec[b"ro dir/"] = 0o555
        for i in range(n):
            spec[b"ro dir/f%03d" % i] = _content(rng, rng.randrange(0, 3000))
        spec[b"ro dir/ro sub/"] = 0o555
        for i in range(n // 3):
            spec[b"ro dir/ro sub/g%03d" % i] = _content(rng, rng.randrange(0, 3000))
        spec[b"top file"] = b"top\n"
    elif kind == "big":
        for i in range(kw.get("count", 4)):
            spec[b"big%d.bin" % i] = _content(rng, kw.get("size", 1 << 20))
    elif kind == "flat":
        for i in range(kw.get("n", 20)):
            spec[b"file%03d" % i] = _content(rng, kw.get("size", rng.randrange(1, 500)))
    else:
        raise ValueError("unknown tree kind %r" % kind)
    build(root, spec)
    if kind in ("weird", "small"):
        _weird_extras(root)
    _set_times(root, rng)
    if kind in ("weird", "small"):
        # timestamps rsync must carry too: the epoch and before it
        os.utime(os.path.join(root, b"mode755"), ns=(0, 0))
        os.utime(os.path.join(root, b"mode600"), ns=(-10 ** 18 + 5, -10 ** 18 + 5))
    return root


def _weird_spec(rng, many):
    """The build() spec of the weird (many) or small tree; _weird_extras adds the rest."""
    spec = {}
    # weird names, as files at the top and as directories holding a file with a weird name
    for i, name in enumerate(WEIRD_NAMES):
        spec[name] = _content(rng, rng.randrange(0, 2000))
        d = b"dir " + name[:200] + b"/"
        spec[d] = None
        spec[d + WEIRD_NAMES[(i + 3) % len(WEIRD_NAMES)]] = \
            _content(rng, rng.randrange(0, 2000))
    spec[b"bad\xe9dir/\xc3\x28"] = b"invalid two-byte sequence\n"
    # empty directories
    spec[b"empty/"] = None
    spec[b"empty2/nested empty/-deeper/"] = None
    # 30-deep nesting with a file at the bottom and one half way
    deep = [b"deep"] + [b"d%02d" % i for i in range(1, 31)]
    spec[b"/".join(deep[:16] + [b"middle"])] = b"middle\n"
    spec[b"/".join(deep + [b"leaf"])] = b"leaf\n"
    # symlinks: relative, absolute, dangling, to a directory, with weird targets
    # (no link to an ancestor: rsync -L would copy the tree into itself without end)
    for name, target in ((b"link rel", b"with space"), (b"link abs", b"/etc/hostname"),
                         (b"link dangling", b"does/not/exist"), (b"link to dir", b"deep"),
                         (b"link\nweird", b"new\nline"),
                         (b"dir with space/link up", b"../\xff\xfe-invalid-utf8"),
                         (b"loop", b"loop")):
        spec[name] = ("symlink", target)
    # modes
    for name, data, mode in ((b"mode600", b"secret\n", 0o600),
                             (b"mode755", b"#!/bin/sh\nexit 0\n", 0o755),
                             (b"mode644", b"plain\n", 0o644),
                             (b"mode4755 setuid", b"suid\n", 0o4755),
                             (b"mode444", b"sticky ro\n", 0o444)):
        spec[name] = ("file", data, mode)
    spec[b"dir700/"] = 0o700
    spec[b"dir700/inside"] = b"x\n"
    spec[b"dir2775 setgid/"] = 0o2775
    spec[b"dir2775 setgid/inside"] = b"y\n"
    spec[b"sticky1777/"] = 0o1777
    # a FIFO (rsync -a includes --specials)
    spec[b"fifo"] = spec[b"dir with space/fifo two"] = ("fifo",)
    # hard links (copied as separate files without -H, by rsync and msrsync alike)
    spec[b"hard one"] = b"linked content\n"
    spec[b"dir with space/hard two"] = ("hardlink", b"hard one")
    spec[b"empty file"] = b""
    # many small files of varied sizes, in a few directories
    for i in range(200 if many else 30):
        size = rng.choice([0, 1, 2, 10, 100, 500, 1023, 1024, 1025, 3000, 9000])
        spec[b"many/d%02d/f%04d.dat" % (i % (12 if many else 3), i)] = _content(rng, size)
    # a read-only directory (mode 0555) holding many files
    spec[b"read only/"] = 0o555
    for i in range(50 if many else 10):
        spec[b"read only/r%03d" % i] = _content(rng, rng.randrange(0, 1500))
    return spec


def _weird_extras(root):
    """What the weird and small trees hold beyond their spec: a sparse file (-S),
    extended attributes (copied only with -X), owners other than the runner's (root)."""
    j = lambda *parts: os.path.join(root, *parts)
    with open(j(b"sparse"), "wb") as f:
        f.seek(256 * 1024)
        f.write(b"end of sparse file\n")
    try:
        os.setxattr(j(b"mode644"), b"user.msrsync", b"value \xff")
        os.setxattr(j(b"dir700"), b"user.dir", b"dir value")
    except OSError:
        pass    # no user xattrs on this filesystem
    if IS_ROOT:
        os.lchown(j(b"mode644"), 4242, 4343)
        os.lchown(j(b"link rel"), 4444, 4545)
        os.lchown(j(b"dir700"), 4646, 4747)
        os.lchown(j(b"many", b"d01"), 1, 2)


def hardlink_tree(root):
    """The small tree with link groups inside a directory, across far-apart directories,
    of three, into a read-only directory, between awkward names."""
    root = make_tree(root, "small", seed=23)
    build(root, {b"many/d00/same dir link": ("hardlink", b"many/d00/f0000.dat"),
                 b"deep/d01/d02/d03/far link": ("hardlink", b"many/d01/f0001.dat"),
                 b"many/d02/three 2": ("hardlink", b"mode644"),
                 b"empty2/three 3 \xff": ("hardlink", b"mode644"),
                 b"link to ro \n file": ("hardlink", b"read only/r000")})
    for d in (b"many/d00", b"deep/d01/d02/d03", b"many/d02", b"empty2", b""):
        os.utime(os.path.join(root, d) if d else root, (10 ** 9 + len(d), 10 ** 9 + len(d)))
    return root


def extras(dest, under=b""):
    """Put entries at DEST (under dest/under) that SRC (the weird or small tree) does not
    have; every entry of DEST then gets the time 10 ** 9."""
    spec = {b"many/d01/": None, b"zz extra dir/sub/subsub/": None,
            b"deep/d01/extra dir/": None, b"read only/": None}
    for rel in (b"extra top file", b"many/d01/extra.dat", b"many/d01/extra.keep",
                b"zz extra dir/sub/subsub/f", b"zz extra dir/f", b"deep/d01/extra dir/x",
                b"read only/extra", b"#extra", b"-extra", b"extra\nnewline \xff"):
        spec[rel] = b"extra\n"
    spec[b"extra link"] = ("symlink", b"nowhere")
    spec[b"many/extra fifo"] = ("fifo",)
    build(os.path.join(os.fsencode(dest), under), spec)
    age(dest, 10 ** 9, everything=True)


def filter_tree(root):
    """Names for filter rules to tell apart: globs, anchors, "**", character classes,
    wildcard characters in names, a file and directories named alike at several depths."""
    spec = {
        "top.txt": "t\n", "top.o": "o\n", "build": "a file named build\n",
        "src/main.c": "c\n", "src/util.c": "c\n", "src/util.o": "o\n",
        "src/build/out.bin": "bin\n", "src/build/sub/deeper.bin": "bin\n",
        "cache/sub/x": "x\n", "cache/keep": "k\n", "a/cache/y": "y\n",
        "keep/k1": "k\n", "keep/deep/k2": "k\n",
        "9dir/n": "n\n", "9file": "9\n", "Upper/u": "u\n", "lower/l": "l\n",
        "br[ack]et": "b\n", "q?mark": "q\n", "star*name": "s\n",
        "a/b/c/deep.txt": "d\n", "a/b/deep.txt": "d\n", "deep.txt": "d\n",
        "notes/readme.md": "r\n", "notes/sub/x": "x\n",
        "sp ace/f 1": "s\n",
    }
    return age(build(root, spec))


def pruning_tree(root):
    """Directory chains for -m to prune: empty ones (keep/ for a "P keep/" rule), one
    whose only files are *.o, a directory named only.o, a file deep down, 25 sibling
    directories of which one holds a file."""
    d = "dir/"
    spec = {"a/": d, "a/e/": d, "a/e/e2/": d, "a/x/": d, "a/x/f1": "1", "a/x/f2": "2",
            "b/": d, "b/c/": d, "b/c/d/": d, "b/c/d/deep": "deep", "empty/": d,
            "keep/": d, "keep/sub/": d, "only.o/": d, "objs/": d, "objs/x.o": "o",
            "objs/y.o": "o", "many/": d, "top": "top"}
    for i in range(25):
        spec["many/e%02d/" % i] = d
    spec["many/e07/z"] = "z"
    build(root, spec)
    age(root)


def tree_stats(root):
    """Counts for a source tree: entries below root (root excluded), regular files,
    directories (root excluded), symlinks, others, and bytes of regular files."""
    snap = snapshot(root)
    counts = collections.Counter(e["type"] for p, e in snap.items() if p != b".")
    return {
        "entries": len(snap) - 1,
        "files": counts["file"],
        "dirs": counts["dir"],
        "symlinks": counts["symlink"],
        "others": sum(v for k, v in counts.items() if k not in ("file", "dir", "symlink")),
        "file_bytes": sum(e["size"] for e in snap.values() if e["type"] == "file"),
        "sizes": [e["size"] for e in snap.values() if e["type"] == "file"],
    }


# --------------------------------------------------------------------------- comparing

_TYPES = [(stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
          (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "chardev"),
          (stat.S_ISBLK, "blockdev")]


def _sha256(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 16), b""):
                h.update(block)
    except OSError as e:
        return "unreadable: %s" % e.strerror
    return h.hexdigest()


def _xattrs(path):
    """Sorted (name, value) extended attributes of path, () when unsupported."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
        return tuple(sorted((n, os.getxattr(path, n, follow_symlinks=False)) for n in names))
    except OSError:
        return ()


def snapshot(root, ignore_root_mtime=False):
    """Map each path relative to root (bytes; root itself is b".") to its attributes.

    Uses os.lstat on bytes paths and never follows symlinks. Records type, permission
    bits (S_IMODE), uid, gid, mtime_ns (for every type, symlinks included: rsync -a sets
    them on Linux), size and sha256 for regular files, target for symlinks, rdev for
    devices, extended attributes of files and directories, and the hard-link group (sorted relative paths sharing the inode) of regular
    files whose link count is above 1. Directory sizes are left out (they depend on the
    directory's history, not on its contents).
    """
    root = os.fsencode(root)
    entries = {}
    inodes = collections.defaultdict(list)
    stack = [b"."]
    while stack:
        rel = stack.pop()
        full = root if rel == b"." else os.path.join(root, rel)
        st = os.lstat(full)
        kind = next((name for test, name in _TYPES if test(st.st_mode)), "unknown")
        entry = {"type": kind, "mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid,
                 "gid": st.st_gid, "mtime_ns": st.st_mtime_ns}
        if kind == "file":
            entry["size"] = st.st_size
            entry["sha256"] = _sha256(full)
            if st.st_nlink > 1:
                inodes[(st.st_dev, st.st_ino)].append(rel)
        elif kind == "symlink":
            entry["target"] = os.readlink(full)
        elif kind in ("chardev", "blockdev"):
            entry["rdev"] = st.st_rdev
        elif kind == "dir":
            for name in os.listdir(full):
                stack.append(name if rel == b"." else os.path.join(rel, name))
        if kind in ("file", "dir"):
            xattrs = _xattrs(full)
            if xattrs:
                entry["xattrs"] = xattrs
        if rel == b"." and ignore_root_mtime:
            del entry["mtime_ns"]
        entries[rel] = entry
    for group in inodes.values():
        for rel in group:
            entries[rel]["hardlinks"] = tuple(sorted(group))
    return entries


def diff_snapshots(a, b, label_a="expected", label_b="actual"):
    """List of human-readable differences between two snapshots (empty when equal)."""
    diffs = []
    for rel in sorted(set(a) | set(b)):
        if rel not in b:
            diffs.append("%r: only in %s (%s)" % (rel, label_a, a[rel]["type"]))
        elif rel not in a:
            diffs.append("%r: only in %s (%s)" % (rel, label_b, b[rel]["type"]))
        else:
            for key in sorted(set(a[rel]) | set(b[rel])):
                va, vb = a[rel].get(key), b[rel].get(key)
                if va != vb:
                    diffs.append("%r: %s differs: %s=%r %s=%r"
                                 % (rel, key, label_a, va, label_b, vb))
    return diffs


def assert_same_tree(a, b, ignore_root_mtime=False, label_a="expected", label_b="actual",
                     max_shown=25):
    """Assert two trees (paths or snapshots) are identical; the message lists the first
    differences, one per line."""
    __tracebackhide__ = True
    if not isinstance(a, dict):
        a = snapshot(a, ignore_root_mtime)
    if not isinstance(b, dict):
        b = snapshot(b, ignore_root_mtime)
    if ignore_root_mtime:
        a, b = dict(a), dict(b)
        for snap in (a, b):
            if b"." in snap:
                snap[b"."] = {k: v for k, v in snap[b"."].items() if k != "mtime_ns"}
    diffs = diff_snapshots(a, b, label_a, label_b)
    if diffs:
        shown = "\n  ".join(diffs[:max_shown])
        more = "\n  ... and %d more" % (len(diffs) - max_shown) if len(diffs) > max_shown else ""
        raise AssertionError("trees differ (%d differences, %d vs %d entries):\n  %s%s"
                             % (len(diffs), len(a), len(b), shown, more))


def mask_run_time_dir_mtimes(a, b):
    """Drop, from two snapshots, the mtime of directories both tools left at the time of
    the run (newer than RECENT_NS: an extraneous DEST directory whose contents were partly
    deleted, a directory rsync wrote a backup into after it set its mtime, backup
    directories rsync made itself); where only one side did, the difference stays."""
    for rel in set(a) & set(b):
        ea, eb = a[rel], b[rel]
        if ea["type"] == eb["type"] == "dir" and \
                ea.get("mtime_ns", 0) > RECENT_NS and eb.get("mtime_ns", 0) > RECENT_NS:
            ea.pop("mtime_ns")
            eb.pop("mtime_ns")
    return a, b


# --------------------------------------------------------------------------- the oracle

class Differential(object):
    """Outcome of one differential run: the oracle (plain rsync) and msrsync side by side."""

    __slots__ = ("oracle", "msrsync", "oracle_dest", "msrsync_dest")

    def __init__(self, oracle, msrsync, oracle_dest, msrsync_dest):
        self.oracle = oracle            # CompletedProcess of plain rsync
        self.msrsync = msrsync          # CompletedProcess of msrsync
        self.oracle_dest = oracle_dest  # DEST made by rsync (bytes)
        self.msrsync_dest = msrsync_dest  # DEST made by msrsync (bytes)


def rsync_opts_string(opts):
    return " ".join(shlex.quote(text(o)) for o in opts)


def differential(workdir, srcs, msrsync_opts=(), rsync_opts=None, dest_name=b"dest",
                 expect_rc=0, ignore_root_mtime=None, python=sys.executable, cwd=None,
                 prepare_dest=None, prefix=(), dest_parent_exists=True, compare=True,
                 timeout=DEFAULT_TIMEOUT):
    """Copy srcs with plain rsync into workdir/oracle/DEST and with msrsync into
    workdir/msrsync/DEST; check both exit with expect_rc and the trees are the same.

    srcs are passed unchanged to both tools (trailing slashes, '.', '..' kept). When
    cwd is given, relative srcs are resolved there (by both tools). rsync_opts None means
    msrsync's defaults (no --rsync given); otherwise msrsync gets ``--rsync "OPTS"``.
    ignore_root_mtime defaults to True unless there is one SRC whose contents are copied
    (trailing '/', '/.' or '/..'): otherwise DEST's root is a container made at run time.
    prepare_dest(path) may pre-populate each DEST (called for both before the runs).
    """
    workdir = os.fsencode(workdir)
    srcs = [_arg(s) for s in srcs]
    if ignore_root_mtime is None:
        ignore_root_mtime = not (len(srcs) == 1 and
                                 re.search(rb"/(\.\.?)?$", os.fsencode(srcs[0])))
    dests = []
    for side in (b"oracle", b"msrsync"):
        parent = os.path.join(workdir, side)
        if dest_parent_exists:
            os.makedirs(parent, exist_ok=True)
            if prefix:
                os.chmod(parent, 0o777)
        dest = os.path.join(parent, os.fsencode(dest_name))
        if prepare_dest is not None:
            prepare_dest(dest)
        dests.append(dest)
    oracle = run_rsync(*(srcs + [dests[0]]), opts=rsync_opts, prefix=prefix, cwd=cwd,
                       timeout=timeout)
    args = list(msrsync_opts)
    if rsync_opts is not None:
        args += ["--rsync", rsync_opts_string(rsync_opts)]
    result = run_msrsync(*(args + srcs + [dests[1]]), python=python, prefix=prefix, cwd=cwd,
                         timeout=timeout)
    assert oracle.returncode == expect_rc, "plain rsync (the oracle) did not exit %d:\n%s" % (
        expect_rc, describe(oracle))
    assert result.returncode == expect_rc, "msrsync did not exit %d like rsync:\n%s" % (
        expect_rc, describe(result))
    assert b"Traceback" not in result.stderr, describe(result)
    if compare:
        assert_same_tree(dests[0], dests[1], ignore_root_mtime=ignore_root_mtime,
                         label_a="rsync", label_b="msrsync")
    return Differential(oracle, result, dests[0], dests[1])


def pyenv_python(minor):
    """Absolute path of a pyenv python3 for e.g. minor '3.6', newest patch; None if absent."""
    roots = [os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv")]
    found = []
    for r in filter(None, roots):
        for exe in glob.glob(os.path.join(r, "versions", minor + ".*", "bin", "python3")):
            version = os.path.basename(os.path.dirname(os.path.dirname(exe)))
            if re.match(r"^\d+\.\d+\.\d+$", version):
                found.append((tuple(int(x) for x in version.split(".")), exe))
    return max(found)[1] if found else None


def rsync_stats_figures(output):
    """rsync --stats --no-h output (bytes or str) -> {label: first integer} per line."""
    figures = {}
    for line in text(output).splitlines():
        label, sep, value = line.partition(":")
        words = value.split()
        if sep and words and words[0].replace(",", "").isdigit():
            figures[label.strip()] = int(words[0].replace(",", ""))
    return figures


def item_lines(output):
    """rsync -i lines ("YXcstpoguax name") of a process output."""
    return [l for l in text(output).splitlines()
            if re.match(r"^([<>ch.][fdLDS]|\*deleting)[ .+?a-zA-Z]* ", l)]


def oracle_figures(srcs, workdir, opts=None):
    """The --stats figures of plain rsync copying srcs into a fresh DEST under workdir."""
    dest = os.path.join(os.fsencode(workdir), b"oracle-stats-%d" % random.randrange(10 ** 9))
    opts = list(DEFAULT_RSYNC_OPTS if opts is None else opts) + ["--stats", "--no-h"]
    cp = run_rsync(*(list(srcs) + [dest]), opts=opts)
    assert cp.returncode == 0, describe(cp)
    return rsync_stats_figures(cp.stdout)


# ------------------------------------------------------------- reports that agree

def _json(path):
    with open(str(path)) as handle:
        return json.load(handle)


def metric_value(text_, name, **labels):
    for line in text_.splitlines():
        if line.startswith("msrsync_%s{" % name) and all(
                '%s="%s"' % item in line for item in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no %s %s in\n%s" % (name, labels, text_))


def dest_bytes(dest):
    """The bytes of DEST's files, DEST as a str, bytes or a pathlib path, while a
    run may still be writing it: a file gone between the listing and its stat (an
    rsync's temporary file renamed, the pre-flight's probe removed) counts nothing."""
    total = 0
    for top, _, files in os.walk(os.fsdecode(os.fspath(dest))):
        for f in files:
            try:
                total += os.lstat(os.path.join(top, f)).st_size
            except FileNotFoundError:
                pass
    return total


def assert_reports_agree(tmp_path, stdout, stderr, done, total, dest):
    """stderr's "D of T buckets completed" (no such line when all are), --stats,
    --json, the status file's last write and --metrics: the same buckets done, none
    failed, the rest to do, nothing running, and as bytes done what the done buckets
    copied (what DEST holds)."""
    if done < total:
        assert "%d of %d buckets completed" % (done, total) in stderr, stderr
    else:
        assert "buckets completed" not in stderr, stderr
    assert "Buckets done: %d, failed: 0, to do: %d" % (done, total - done) in stdout, stdout
    summary = _json(tmp_path / "run.json")
    status = _json(tmp_path / "status.json")
    metrics = (tmp_path / "run.prom").read_text()
    for s in (summary, status):
        assert (s["buckets_total"], s["buckets_done"], s["buckets_failed"], s["buckets_todo"],
                s["buckets_running"]) == (total, done, 0, total - done, 0), s
        assert s["failures"] == [], s
        assert s["bytes_done"] == dest_bytes(dest), (s["bytes_done"], dest_bytes(dest))
    assert metric_value(metrics, "buckets", state="done") == done
    assert metric_value(metrics, "buckets", state="failed") == 0
    assert metric_value(metrics, "buckets", state="todo") == total - done
    assert metric_value(metrics, "buckets", state="running") == 0
    assert metric_value(metrics, "bucket_failures_total") == 0
    assert metric_value(metrics, "bytes_done_total") == summary["bytes_done"]


def report_args(tmp_path):
    return ["--stats", "--json", tmp_path / "run.json", "--status-file", tmp_path / "status.json",
            "--metrics", tmp_path / "run.prom"]


# ------------------------------------------------------------- waiting on events

def transferring(dest, timeout=30):
    """Wait until some file under DEST has bytes (an rsync is copying, not merely
    started): the moment a test signals or cuts a run, in place of a fixed sleep."""
    return wait_for(lambda: os.path.isdir(os.fsdecode(os.fspath(dest))) and
                    dest_bytes(dest) > 0, timeout)


class OutputLines(object):
    """A started process's stdout and stderr read as they come, by threads, so that
    a test can wait for a line (say, the status line SIGUSR1 prints) before its next
    step; `timed` holds each stderr line with the monotonic time it came at;
    finish() waits for the exit and gives (stdout, stderr) as bytes."""

    def __init__(self, proc):
        import threading
        self.proc = proc
        self.timed, self.out = [], []
        self.threads = [threading.Thread(target=self._read_err, daemon=True),
                        threading.Thread(target=lambda: self.out.append(proc.stdout.read()),
                                         daemon=True)]
        for thread in self.threads:
            thread.start()

    def _read_err(self):
        for line in self.proc.stderr:
            self.timed.append((time.monotonic(), line))

    @property
    def err_lines(self):
        return [line for _, line in list(self.timed)]

    def wait_line(self, needle, count=1, timeout=30):
        """Until `count` lines of stderr hold `needle` (bytes)."""
        return wait_for(lambda: sum(needle in l for l in self.err_lines) >= count, timeout)

    def finish(self, timeout=60):
        self.proc.wait(timeout=timeout)
        return self.joined()

    def joined(self):
        """(stdout, stderr) read so far, once the readers are done (the process has
        exited)."""
        for thread in self.threads:
            thread.join(10)
        return b"".join(self.out), b"".join(self.err_lines)
