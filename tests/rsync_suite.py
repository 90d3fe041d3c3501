#!/usr/bin/env python3
"""Run an rsync source tree's own test suite through msrsync.

msrsync promises that DEST ends as one `rsync OPTS SRC... DEST` would leave
it.  rsync's test suite is the largest collection of such promises there is,
so this runner holds msrsync to it: it builds the tree's rsync (when not yet
built), runs the tree's suite once with that rsync, then once more with a
shim in its place that sends every local client copy through msrsync (and
hands every other call -- servers, daemons, remote ends, listings, batches,
--version -- to the real rsync unchanged).  A test that passes the first
time and not the second is a difference; the report names each one with the
tail of its log and of the shim's log, minus ALLOWED_DIFFERENCES.

Both suite flavours work: rsync 3.2's shell tests (testsuite/*.test, run by
runtests.sh) and rsync 3.4+'s Python tests (testsuite/*_test.py, run by
runtests.py).  Standard library only, Python 3.6 or newer; it needs a C
compiler and make to build the tree (and autoconf for a git checkout).

Exit status: 0 when no test passes plain and fails through msrsync (other
than an allowed difference), 1 when one does, 2 on a setup error (the tree
cannot be built, no suite found, a bad option).
"""

import argparse
import collections
import concurrent.futures
import fnmatch
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

EXIT_OK = 0
EXIT_DIFFERENCES = 1
EXIT_SETUP = 2

HERE = os.path.dirname(os.path.abspath(__file__))
MSRSYNC = os.path.join(os.path.dirname(HERE), "msrsync")

# msrsync's options in the second run: several rsyncs at once over buckets
# of a few entries, so that even the suite's small trees are cut into many.
DEFAULT_MSRSYNC_ARGS = "-p 4 -f 3"

# ./configure options that keep the build's dependencies to a C compiler and
# libc (the bundled popt and zlib, no man pages, no optional checksums or
# compressors); ACL and xattr support stay (Debian: libacl1-dev,
# libattr1-dev).  Only those the tree's configure accepts are given.
CONFIGURE_OPTIONS = (
    "--with-included-popt", "--with-included-zlib", "--disable-md2man",
    "--disable-xxhash", "--disable-zstd", "--disable-lz4", "--disable-openssl",
)

# Tests left out by default: none of them makes a local client copy, so
# the shim hands every rsync they run to the real one and the second run
# would only repeat the first (at a cost in time).  Pattern, reason.
NOT_LOCAL_COPY_TESTS = (
    ("daemon*", "an rsync daemon's side: --daemon and host::module"),
    ("chroot*", "a daemon module with use chroot"),
    ("batch*", "--write-batch/--read-batch, which the shim hands to rsync"),
    ("ssh*", "a remote shell: host:path"),
    ("protocol*", "protocol negotiation between two rsyncs"),
    ("*-tcp*", "a daemon over TCP"),
    ("proxy-*", "RSYNC_PROXY and a daemon connection"),
    ("xrsync", "the suite's own Python client of a daemon"),
    ("proto-*", "a hand-made protocol peer (testsuite/rsync_proto.py)"),
    ("remote-*", "a remote shell: host:path"),
    ("rrsync*", "rrsync, the restricted remote-shell wrapper"),
)

# Tests whose only difference through msrsync is allowed, with the reason:
# the order in which parallel rsyncs print their lines (msrsync's man page,
# LIMITATIONS).  The allowance holds only where the test's log shows just
# that: diffs whose removed and added lines are the same lines (see
# only_order_differs); any other failure of the test is reported.
ALLOWED_DIFFERENCES = {
    "delete": "the deletions --del -n prints come in the order the parallel rsyncs "
              "print them",
    "itemize": "item lines come in the order the parallel rsyncs print them",
    "exclude": "the item lines of its -aiiO --update run come in the order the parallel "
               "rsyncs print them",
    "devices": "the item lines of its -aiHvv run come in the order the parallel rsyncs "
               "print them",
    "devices-fake": "the item lines of its -aiHvv run come in the order the parallel "
                    "rsyncs print them",
}

# A unified diff's hunk header: "@@ -start[,count] +start[,count] @@".
HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# The per-test outcomes both runners print ("PASS    name").
OUTCOME_LINE = re.compile(r"^(PASS|FAIL|SKIP|XFAIL|ERROR)\s+(\S+)", re.MULTILINE)

# A popt table row: {"long-name", 'c' or 0, POPT_ARG_..., ...}.
POPT_ROW = re.compile(r"""\{\s*(?:"([^"]+)"|0|NULL)\s*,\s*(?:'(.)'|0)\s*,\s*(POPT_ARG_\w+)""")
# The kinds of popt argument that take no value of their own.
POPT_NO_VALUE = ("POPT_ARG_NONE", "POPT_ARG_VAL", "POPT_BIT_SET", "POPT_BIT_CLR",
                 "POPT_ARG_INCLUDE_TABLE", "POPT_ARG_CALLBACK", "POPT_ARG_INTL_DOMAIN")
# Used when the tree's options.c cannot be read: rsync 3.2.7's table.
FALLBACK_LONG_WITH_VALUE = (
    "info", "debug", "stderr", "modify-window", "chmod", "max-size", "min-size",
    "max-alloc", "max-delete", "filter", "exclude", "include", "exclude-from",
    "include-from", "checksum-choice", "cc", "block-size", "compare-dest",
    "copy-dest", "link-dest", "compress-choice", "zc", "skip-compress",
    "compress-level", "zl", "partial-dir", "log-file", "log-file-format",
    "out-format", "log-format", "bwlimit", "backup-dir", "suffix", "read-batch",
    "write-batch", "only-write-batch", "files-from", "usermap", "groupmap", "chown",
    "timeout", "contimeout", "stop-after", "time-limit", "stop-at", "rsh",
    "rsync-path", "temp-dir", "iconv", "copy-as", "address", "port", "sockopts",
    "password-file", "early-input", "outbuf", "remote-option", "protocol",
    "checksum-seed", "config", "dparam",
)
FALLBACK_SHORT_WITH_VALUE = "@fBeTM"

# The real rsync does the whole call when one of these is given: they are
# not a local copy DEST ends from (a server or daemon side, batch files,
# the version or help text, a listing).
REAL_RSYNC_OPTIONS = ("server", "sender", "daemon", "config", "dparam", "version",
                      "help", "list-only", "read-batch", "write-batch",
                      "only-write-batch")
REAL_RSYNC_SHORT = "V"


class SetupError(Exception):
    """The runner cannot run the suite (exit 2)."""


# ---------------------------------------------------------------- the tree

def run_logged(argv, cwd, log, stdin=subprocess.DEVNULL, env=None):
    """Run argv in cwd, its output appended to the open file log."""
    log.write("+ (cd %s && %s)\n" % (cwd, " ".join(shlex.quote(a) for a in argv)))
    log.flush()
    return subprocess.call(argv, cwd=cwd, stdin=stdin, stdout=log, stderr=subprocess.STDOUT,
                           env=env)


def check_prerequisites(tree):
    """The targets `make check` builds before it runs the suite: rsync and
    the helper programs and symlinks the tests use (3.4 names them
    check-progs; 3.2 only lists them under check)."""
    with open(os.path.join(tree, "Makefile")) as makefile:
        text = makefile.read()
    match = re.search(r"^check:([^\n]*)", text, re.MULTILINE)
    if not match:
        raise SetupError("%s/Makefile has no check target" % tree)
    return match.group(1).split()


def is_built(tree):
    """Whether the tree has a built rsync and the suite's helpers."""
    return all(os.access(os.path.join(tree, name), os.X_OK)
               for name in ("rsync", "tls", "trimslash", "t_unsafe", "wildtest", "getgroups"))


def is_older(path, than):
    """Whether path is missing or older than the file than."""
    try:
        return os.stat(path).st_mtime < os.stat(than).st_mtime
    except FileNotFoundError:
        return not os.path.exists(path) and os.path.exists(than)


def build_tree(tree, log_path):
    """Configure and build the tree in place, unless it is built already."""
    if is_built(tree):
        return False
    with open(log_path, "a") as log:
        def step(argv, what, **kwargs):
            if run_logged(argv, tree, log, **kwargs) != 0:
                raise SetupError("%s failed in %s (see %s)" % (what, tree, log_path))
        if not os.path.exists(os.path.join(tree, "Makefile")):
            if is_older(os.path.join(tree, "configure.sh"), os.path.join(tree, "configure.ac")):
                # A git checkout has no configure.sh, and a patched
                # configure.ac (Debian's) wants a new one: autoconf makes it.
                # Left to make, it would run twice at once under -j.
                step(["./prepare-source"], "./prepare-source (needs autoconf)")
            accepted = subprocess.run(["./configure", "--help"], cwd=tree,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, universal_newlines=True).stdout
            options = [o for o in CONFIGURE_OPTIONS if re.search(re.escape(o) + r"\b", accepted)]
            step(["./configure"] + options, "./configure")
        jobs = "-j%d" % (os.cpu_count() or 1)
        # An extra makefile on stdin names check's prerequisites as one target.
        rule = "rsync-suite-progs: %s\n" % " ".join(check_prerequisites(tree))
        with tempfile.TemporaryFile("w+") as extra:
            extra.write(rule)
            extra.seek(0)
            step(["make", jobs, "-f", "Makefile", "-f", "/dev/stdin", "rsync-suite-progs"],
                 "make", stdin=extra)
    if not is_built(tree):
        raise SetupError("make left no rsync and test helpers in %s (see %s)" % (tree, log_path))
    return True


def value_options(tree):
    """rsync's options that take a value (long names, short letters), read
    from the popt table in the tree's options.c, so that the shim splits a
    command line as this rsync does."""
    try:
        with open(os.path.join(tree, "options.c"), errors="replace") as source:
            text = source.read()
        table = text[text.index("long_options[] = {"):]
        table = table[:table.index("\n};")]
    except (OSError, ValueError):
        return set(FALLBACK_LONG_WITH_VALUE), set(FALLBACK_SHORT_WITH_VALUE)
    long_names, letters = set(), set()
    for name, letter, kind in POPT_ROW.findall(table):
        if kind in POPT_NO_VALUE:
            continue
        if name:
            long_names.add(name)
        if letter:
            letters.add(letter)
    if "filter" not in long_names or "f" not in letters:
        return set(FALLBACK_LONG_WITH_VALUE), set(FALLBACK_SHORT_WITH_VALUE)
    return long_names, letters


# ---------------------------------------------------------------- the shim

SHIM = r'''#!%(python)s -S
# rsync for rsync's test suite: a local client copy goes through msrsync,
# every other call to the real rsync.  Written by tests/rsync_suite.py.
import json, os, shlex, signal, subprocess, sys, time

REAL_RSYNC = %(real_rsync)r
REAL_DIR = %(real_dir)r
MSRSYNC = %(msrsync)r
MSRSYNC_ARGS = %(msrsync_args)r
LOG = %(log)r
LONG_WITH_VALUE = %(long_with_value)r
SHORT_WITH_VALUE = %(short_with_value)r
REAL_OPTIONS = %(real_options)r
REAL_SHORT = %(real_short)r
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                     signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)


def split_command_line(args):
    """(options, paths) as rsync's popt reads them: a value in the same
    word or the next; "--" ends the options; under POSIXLY_CORRECT (which
    the suite sets) so does the first path."""
    options, paths, i = [], [], 0
    posix = bool(os.environ.get("POSIXLY_CORRECT") or os.environ.get("POSIX_ME_HARDER"))
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            paths.extend(args[i:])
            break
        if arg.startswith("--"):
            options.append(arg)
            if "=" not in arg and arg[2:] in LONG_WITH_VALUE and i < len(args):
                options.append(args[i])
                i += 1
        elif arg.startswith("-") and arg != "-":
            options.append(arg)
            for at, letter in enumerate(arg[1:], 1):
                if letter in SHORT_WITH_VALUE:
                    if at == len(arg) - 1 and i < len(args):
                        options.append(args[i])
                        i += 1
                    break
        else:
            paths.append(arg)
            if posix:
                paths.extend(args[i:])
                break
    return options, paths


def is_remote(path):
    """rsync's test for a host: rsync://, or a colon before any slash."""
    if path.startswith("rsync://"):
        return True
    colon, slash = path.find(":"), path.find("/")
    return colon > 0 and (slash < 0 or colon < slash)


def option_names(options):
    """The long names and the short letters given (values skipped)."""
    names, letters, i = set(), set(), 0
    while i < len(options):
        arg = options[i]
        i += 1
        if arg.startswith("--"):
            name, equals, value = arg[2:].partition("=")
            names.add(name)
            if name == "files-from" and (value if equals else
                                         (options[i] if i < len(options) else "")):
                files_from = value if equals else options[i]
                if is_remote(files_from):
                    names.add("remote-files-from")
            if not equals and name in LONG_WITH_VALUE:
                i += 1
        else:
            for at, letter in enumerate(arg[1:], 1):
                letters.add(letter)
                if letter in SHORT_WITH_VALUE:
                    if at == len(arg) - 1:
                        i += 1
                    break
    return names, letters


def route(args):
    """Why the real rsync does this call, or None for msrsync."""
    options, paths = split_command_line(args)
    names, letters = option_names(options)
    real = sorted(names & set(REAL_OPTIONS)) + sorted(letters & set(REAL_SHORT))
    if real:
        return "real rsync: " + " ".join(real)
    if "remote-files-from" in names:
        return "real rsync: a remote --files-from"
    if len(paths) < 2:
        return "real rsync: a listing (fewer than two paths)"
    if any(is_remote(path) for path in paths):
        return "real rsync: a remote path"
    return None


def main():
    args = sys.argv[1:]
    started = time.time()
    why = route(args)
    if why is None:
        options, paths = split_command_line(args)
        argv = ([sys.executable, "-S", MSRSYNC] + MSRSYNC_ARGS
                + ["--rsync", " ".join(shlex.quote(o) for o in options), "--"] + paths)
        env = dict(os.environ, PATH=REAL_DIR + os.pathsep + os.environ.get("PATH", ""))
        why = "msrsync"
    else:
        argv, env = [REAL_RSYNC] + args, None
    # The shim stands where rsync would: a signal a test sends it (SIGTERM
    # to interrupt a transfer) goes on to what it runs.
    child = subprocess.Popen(argv, env=env)
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, lambda signum, _: child.send_signal(signum))
    code = child.wait()
    record = {"test": os.path.basename(os.environ.get("scratchdir", "")),
              "cwd": os.getcwd(), "argv": args, "route": why, "ran": argv,
              "exit": code, "seconds": round(time.time() - started, 3)}
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)
    if code < 0:
        # Killed by a signal: so is the shim, as the caller would see rsync.
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


sys.exit(main())
'''


def write_shim(work_dir, real_rsync, msrsync, msrsync_args, options):
    """Write shim/rsync and real/rsync (the link msrsync finds in PATH) under
    work_dir; returns the shim's path."""
    shim_dir, real_dir = os.path.join(work_dir, "shim"), os.path.join(work_dir, "real")
    for directory in (shim_dir, real_dir):
        os.makedirs(directory, exist_ok=True)
    real_link = os.path.join(real_dir, "rsync")
    if os.path.lexists(real_link):
        os.unlink(real_link)
    os.symlink(real_rsync, real_link)
    long_with_value, short_with_value = options
    shim = os.path.join(shim_dir, "rsync")
    with open(shim, "w") as out:
        out.write(SHIM % {
            "python": sys.executable, "real_rsync": real_rsync, "real_dir": real_dir,
            "msrsync": msrsync, "msrsync_args": shlex.split(msrsync_args),
            "log": shim_log_path(work_dir), "long_with_value": sorted(long_with_value),
            "short_with_value": "".join(sorted(short_with_value)),
            "real_options": list(REAL_RSYNC_OPTIONS), "real_short": REAL_RSYNC_SHORT,
        })
    os.chmod(shim, 0o755)
    return shim


def shim_log_path(work_dir):
    return os.path.join(work_dir, "shim.log")


def shim_records(work_dir, test):
    """The shim's log records of one test."""
    records = []
    try:
        with open(shim_log_path(work_dir)) as log:
            for line in log:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("test") == test:
                    records.append(record)
    except OSError:
        pass
    return records


# ---------------------------------------------------------------- the suites

# One test's result: its outcome word (PASS, FAIL, SKIP, XFAIL, ERROR, or
# NONE when the runner printed none), what the runner printed, the test's
# log file, and the seconds it took.
Outcome = collections.namedtuple("Outcome", "status output log seconds")


class ShellSuite:
    """rsync 3.2's testsuite/*.test, one at a time through runtests.sh."""

    def __init__(self, tree):
        # The built tree: TOOLDIR and srcdir both.
        self.tree = tree

    def tests(self):
        return sorted(os.path.basename(p)[:-len(".test")]
                      for p in glob.glob(os.path.join(self.tree, "testsuite", "*.test")))

    def command(self, test, rsync_bin, scratchbase):
        """argv and environment that run one test; runtests.sh puts its
        scratch dir in $scratchbase/testtmp/TEST."""
        env = dict(os.environ, rsync_bin=rsync_bin, TOOLDIR=self.tree,
                   scratchbase=scratchbase, whichtests=test + ".test")
        for name in ("preserve_scratch", "always_log", "nopersist", "RSYNC_EXPECT_SKIPPED"):
            env.pop(name, None)
        return ["sh", os.path.join(self.tree, "runtests.sh")], env

    def log_of(self, test, scratchbase):
        return os.path.join(scratchbase, "testtmp", test, "test.log")


class PythonSuite(ShellSuite):
    """rsync 3.4+'s testsuite/*_test.py through runtests.py."""

    def tests(self):
        return sorted(os.path.basename(p)[:-len("_test.py")]
                      for p in glob.glob(os.path.join(self.tree, "testsuite", "*_test.py")))

    def command(self, test, rsync_bin, scratchbase):
        env = dict(os.environ, scratchbase=scratchbase)
        for name in ("whichtests", "preserve_scratch", "RSYNC_EXPECT_SKIPPED", "RSYNC_EXCLUDE",
                     "rsync_bin", "rsync_bin2", "race_timeout"):
            env.pop(name, None)
        return [sys.executable, os.path.join(self.tree, "runtests.py"),
                "--rsync-bin", rsync_bin, "--tooldir", self.tree, "--srcdir", self.tree,
                test], env


def find_suite(tree):
    if glob.glob(os.path.join(tree, "testsuite", "*_test.py")) \
            and os.path.exists(os.path.join(tree, "runtests.py")):
        return PythonSuite(tree)
    if glob.glob(os.path.join(tree, "testsuite", "*.test")) \
            and os.path.exists(os.path.join(tree, "runtests.sh")):
        return ShellSuite(tree)
    raise SetupError("%s has neither testsuite/*_test.py with runtests.py nor "
                     "testsuite/*.test with runtests.sh" % tree)


def run_test(suite, test, rsync_bin, scratchbase, timeout):
    argv, env = suite.command(test, rsync_bin, scratchbase)
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, cwd=suite.tree, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, start_new_session=True)
        output = proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as expired:
        output = (expired.output or b"").decode("utf-8", "replace")
        output += "\nrsync_suite: %s took over %d s\n" % (test, timeout)
    statuses = [status for status, name in OUTCOME_LINE.findall(output) if name == test]
    return Outcome(statuses[-1] if statuses else "NONE", output,
                   suite.log_of(test, scratchbase), time.monotonic() - started)


def run_suite(suite, tests, rsync_bin, scratchbase, jobs, timeout, say):
    """Every test in tests, jobs at once: {test: Outcome}."""
    os.makedirs(os.path.join(scratchbase, "testtmp"), exist_ok=True)
    outcomes = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_test, suite, test, rsync_bin, scratchbase, timeout): test
                   for test in tests}
        for future in concurrent.futures.as_completed(futures):
            test = futures[future]
            outcomes[test] = future.result()
            say("  %-6s %s (%.1f s)" % (outcomes[test].status, test, outcomes[test].seconds))
    return outcomes


def select_tests(all_tests, only, exclude_default):
    """The tests to run: --only's globs when given, else all but the
    NOT_LOCAL_COPY_TESTS."""
    if only:
        return [t for t in all_tests if any(fnmatch.fnmatchcase(t, pat) for pat in only)]
    if not exclude_default:
        return list(all_tests)
    return [t for t in all_tests
            if not any(fnmatch.fnmatchcase(t, pat) for pat, _ in NOT_LOCAL_COPY_TESTS)]


# ---------------------------------------------------------------- the report

def tail(text, lines):
    return "\n".join(text.rstrip("\n").split("\n")[-lines:])


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def describe_difference(test, outcome, work_dir, lines):
    """A failing test's report: its log's tail and the shim's calls (msrsync's
    last, and every call that exited non-zero)."""
    out = ["=== %s: %s through msrsync (log: %s)" % (test, outcome.status, outcome.log)]
    log = read_text(outcome.log) or outcome.output
    out.append("--- tail of the test's log")
    out.append(tail(log, lines))
    records = shim_records(work_dir, test)
    shown = [r for r in records if r["exit"] != 0] or [r for r in records
                                                      if r["route"] == "msrsync"][-3:]
    out.append("--- shim: %d calls, %d through msrsync, %d exited non-zero; shown:"
               % (len(records), sum(r["route"] == "msrsync" for r in records),
                  sum(r["exit"] != 0 for r in records)))
    for record in shown[-8:]:
        out.append("  exit %s  %s\n    rsync %s\n    cwd %s" % (
            record["exit"], record["route"],
            " ".join(shlex.quote(a) for a in record["argv"]), record["cwd"]))
    return "\n".join(out)


def skip_reason(outcome):
    """What the test said when it skipped: "SKIP    name (reason)"."""
    match = re.search(r"^SKIP\s+\S+ \((.*)\)\s*$", outcome.output, re.MULTILINE)
    return match.group(1) if match else "no reason given"


def only_order_differs(log):
    """Whether a test's log shows unified diffs that move lines and change
    none: in each hunk, the lines removed are, with their counts, the lines
    added; at least one hunk, and no tree differs ("Only in")."""
    removed, added = collections.Counter(), collections.Counter()
    lines = log.splitlines()
    hunks = 0
    i = 0
    while i < len(lines):
        match = HUNK.match(lines[i])
        i += 1
        if match is None:
            continue
        hunks += 1
        old, new = (int(n) if n else 1 for n in match.groups())
        while (old > 0 or new > 0) and i < len(lines):
            line = lines[i]
            i += 1
            if line.startswith("-"):
                removed[line[1:]] += 1
                old -= 1
            elif line.startswith("+"):
                added[line[1:]] += 1
                new -= 1
            elif line.startswith(" ") or not line:
                old, new = old - 1, new - 1
            else:
                break           # ("\\ No newline at end of file" and the like)
    return hunks > 0 and removed == added and "Only in " not in log


def report(plain, through, work_dir, lines, say):
    """Print the comparison; returns (passed, failed) as the last line says."""
    passed_plain = sorted(t for t, o in plain.items() if o.status == "PASS")
    skipped = sorted(t for t, o in plain.items() if o.status == "SKIP")
    failed_plain = sorted(t for t, o in plain.items() if o.status not in ("PASS", "SKIP"))
    both = [t for t in passed_plain if through[t].status == "PASS"]
    differ = [t for t in passed_plain if through[t].status != "PASS"]
    allowed = [t for t in differ if t in ALLOWED_DIFFERENCES and
               only_order_differs(read_text(through[t].log) or through[t].output)]
    failed = [t for t in differ if t not in allowed]
    say("")
    say("plain rsync: %d passed, %d skipped, %d failed or errored (of %d run)"
        % (len(passed_plain), len(skipped), len(failed_plain), len(plain)))
    say("  passed: %s" % " ".join(passed_plain))
    for test in skipped:
        say("  skipped: %s (%s)" % (test, skip_reason(plain[test])))
    if failed_plain:
        say("  failing plain too (not compared): %s" % " ".join(
            "%s(%s)" % (t, plain[t].status) for t in failed_plain))
    for test in failed:
        say("")
        say(describe_difference(test, through[test], work_dir, lines))
    if allowed:
        say("")
        say("allowed differences that occurred:")
        for test in allowed:
            say("  %s: %s" % (test, ALLOWED_DIFFERENCES[test]))
    say("")
    if failed:
        say("failing only through msrsync: %s" % " ".join(failed))
    return len(both), len(failed)


# ---------------------------------------------------------------- command line

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="rsync_suite.py",
        description="Run an rsync source tree's test suite plain, then with every local "
                    "client copy sent through msrsync; report the tests that pass plain "
                    "and fail through msrsync.",
        epilog="exit status: 0 no difference (but allowed ones), 1 differences, 2 setup "
               "error.  Example: python3 tests/rsync_suite.py --jobs 2 "
               "/var/cache/msrsync-tests/rsync-3.2.7")
    parser.add_argument("tree", metavar="RSYNC_SOURCE_TREE", nargs="?",
                        help="an rsync source tree (a release, a Debian source package "
                             "or a git checkout); built in place when it has no rsync yet")
    parser.add_argument("--jobs", "-j", type=int, default=2, metavar="N",
                        help="tests run at once [2]")
    parser.add_argument("--keep", metavar="DIR",
                        help="work in DIR (scratch dirs, logs, the shim) and keep it "
                             "[a temporary directory, removed when nothing differs]")
    parser.add_argument("--only", action="append", metavar="GLOB",
                        help="run only the tests whose names match GLOB, which may be "
                             "given more than once (the default exclusions do not apply)")
    parser.add_argument("--all", action="store_true",
                        help="run the daemon, batch, remote... tests too")
    parser.add_argument("--msrsync-args", default=DEFAULT_MSRSYNC_ARGS, metavar='"ARGS"',
                        help='msrsync options in the second run ["%s"]' % DEFAULT_MSRSYNC_ARGS)
    parser.add_argument("--msrsync", default=MSRSYNC, metavar="PATH",
                        help="the msrsync to test [%(default)s]")
    parser.add_argument("--timeout", type=int, default=300, metavar="SECS",
                        help="a test's time limit [300]")
    parser.add_argument("--log-lines", type=int, default=30, metavar="N",
                        help="lines of a failing test's log shown [30]")
    parser.add_argument("--build-only", action="store_true",
                        help="build the tree when it is not built yet, run nothing")
    parser.add_argument("--list-exclusions", action="store_true",
                        help="print the default exclusions and allowed differences, and exit")
    args = parser.parse_args(argv)
    if args.tree is None and not args.list_exclusions:
        parser.error("the following arguments are required: RSYNC_SOURCE_TREE")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def say(text):
        print(text, flush=True)

    if args.list_exclusions:
        for pattern, reason in NOT_LOCAL_COPY_TESTS:
            say("excluded %-12s %s" % (pattern, reason))
        for test, reason in sorted(ALLOWED_DIFFERENCES.items()):
            say("allowed  %-12s %s" % (test, reason))
        return EXIT_OK
    tree = os.path.abspath(args.tree)
    msrsync = os.path.abspath(args.msrsync)
    work_dir = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="rsync-suite.")
    try:
        os.makedirs(work_dir, exist_ok=True)
        if not os.path.isdir(tree):
            raise SetupError("%s is not a directory" % tree)
        if not os.path.isfile(msrsync):
            raise SetupError("no msrsync at %s" % msrsync)
        started = time.monotonic()
        if build_tree(tree, os.path.join(work_dir, "build.log")):
            say("built %s in %.0f s" % (tree, time.monotonic() - started))
        if args.build_only:
            say("%s is built" % tree)
            if not args.keep:
                remove_tree(work_dir)
            return EXIT_OK
        suite = find_suite(tree)
        tests = select_tests(suite.tests(), args.only, not args.all)
        if not tests:
            raise SetupError("no test of %s matches" % tree)
        real_rsync = os.path.join(tree, "rsync")
        shim = write_shim(work_dir, real_rsync, msrsync, args.msrsync_args, value_options(tree))
        version = subprocess.run([real_rsync, "--version"], stdout=subprocess.PIPE,
                                 universal_newlines=True).stdout.split("\n")[0]
        say("%s: %s, %d tests (%s); work dir %s" % (tree, version, len(tests),
                                                    type(suite).__name__, work_dir))
    except (SetupError, OSError) as error:
        say("rsync_suite: setup error: %s" % error)
        return EXIT_SETUP

    started = time.monotonic()
    say("plain rsync, %d at once:" % args.jobs)
    plain = run_suite(suite, tests, real_rsync, os.path.join(work_dir, "plain"), args.jobs,
                      args.timeout, say)
    plain_seconds = time.monotonic() - started
    # Only what passes plain can differ: the rest is not run a second time.
    passing = [t for t in tests if plain[t].status == "PASS"]
    started = time.monotonic()
    say("through msrsync %s, %d at once:" % (args.msrsync_args, args.jobs))
    through = run_suite(suite, passing, shim, os.path.join(work_dir, "msrsync"), args.jobs,
                        args.timeout, say)
    through_seconds = time.monotonic() - started
    passed, failed = report(plain, through, work_dir, args.log_lines, say)
    say("(plain run %.0f s, through msrsync %.0f s; shim log %s)"
        % (plain_seconds, through_seconds, shim_log_path(work_dir)))
    if failed or args.keep:
        say("work dir kept: %s" % work_dir)
    else:
        remove_tree(work_dir)
    say("%d passed, %d failed" % (passed, failed))
    return EXIT_DIFFERENCES if failed else EXIT_OK


def remove_tree(path):
    """rm -rf, through the read-only directories tests leave."""
    def make_writable(function, name, _):
        try:
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
        except OSError:
            pass
        function(name)
    try:
        shutil.rmtree(path, onerror=make_writable)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
