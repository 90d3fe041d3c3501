"""Attacks by another user on a root run of msrsync.

Every attack here is made by the unprivileged user nobody (65534), in a child process
that has dropped root's privileges, so the kernel's permission checks are real.  The
attacker works in a directory shared with it: 0777 under /tmp, WITHOUT the sticky bit
(a directory a group shares).  fs.protected_symlinks never protects such a directory,
so a symlink nobody plants there IS followed by root's plain open(), whatever the
sysctl says; each attack has a control that shows its set-up is real (the planted link
is followed by a naive open, the planted code is run when it sits somewhere trusted).

What msrsync must not trust (exit 45, one line "msrsync: error: ..." naming the path):
another user's symlink on the way to --json FILE or --status-file FILE, a --resume
directory (or an entry in it) another user owns or may write, a -b directory (or
TMPDIR) that others may write without the sticky bit or that another user owns; and
the compiled-code cache is used only when it is the running user's and no one else may
write it.
"""

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

import helpers
from helpers import (IS_ROOT, NOBODY, age, assert_same_tree, build, describe, run_cmd,
                     run_rsync, stderr_lines, text)

pytestmark = pytest.mark.skipif(
    not IS_ROOT, reason="the attacks are made by user nobody (65534) against a root run "
                        "of msrsync: only root can be both")

MSRSYNC = helpers.MSRSYNC
UNTRUSTED = 45


# --------------------------------------------------------------------------- the attacker

def _drop_to_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _nobody_python():
    """A Python interpreter nobody can run (pytest's may live under /root, 0700)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3",
                      shutil.which("python3") or ""):
        if not candidate or not os.path.exists(candidate):
            continue
        try:
            cp = subprocess.run([candidate, "-c", "import os; print(os.getuid())"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, preexec_fn=_drop_to_nobody,
                                cwd="/", timeout=30)
        except OSError:
            continue
        if cp.returncode == 0 and cp.stdout.strip() == str(NOBODY).encode():
            return candidate
    return None


@pytest.fixture(scope="module")
def nobody_python():
    python = _nobody_python()
    if python is None:
        pytest.skip("no Python interpreter that user nobody (65534) can run")
    return python


@pytest.fixture
def attacker(nobody_python):
    """attacker(code, *args): run Python code as nobody (uid and gid 65534, no
    supplementary groups); returns its stdout (bytes); fails the test if it fails."""
    def run(code, *args):
        cp = subprocess.run([nobody_python, "-c", code] + [os.fsdecode(a) for a in args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=_drop_to_nobody,
                            cwd="/", env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                            timeout=60)
        assert cp.returncode == 0, "the attacker's action failed:\n%s" % describe(cp)
        return cp.stdout
    return run


def tmp_dir(prefix, mode):
    """A fresh directory under /tmp with MODE, removed after the test."""
    path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(path, mode)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def shared():
    """A directory under /tmp that nobody may write: 0777, no sticky bit."""
    yield from tmp_dir("msrsync-sec-shared-", 0o777)


@pytest.fixture
def rootdir():
    """A root-owned 0755 directory under /tmp: nobody can reach (not write) what is in
    it; every directory above it is safe (/tmp is sticky)."""
    yield from tmp_dir("msrsync-sec-root-", 0o755)


# --------------------------------------------------------------------------- msrsync runs

def msrsync(*args, env=None, cwd=None, timeout=60):
    return run_cmd([sys.executable, MSRSYNC] + list(args), env=env, cwd=cwd, timeout=timeout)


def small_src(path):
    """A small tree of plain names, old mtimes."""
    build(path, {"a": "alpha\n", "b/c": "gamma\n" * 50, "b/d": "delta\n", "e/": None,
                 "e/f": "phi\n"})
    return age(path, everything=True)


def assert_refused(cp, *named):
    """Exit 45, one line "msrsync: error: ..." on stderr, naming each of named."""
    __tracebackhide__ = True
    assert cp.returncode == UNTRUSTED, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, describe(cp)
    assert lines[0].startswith("msrsync: error: "), describe(cp)
    for name in named:
        assert text(os.fsencode(name)) in lines[0], describe(cp)
    return lines[0]


def make_victim(directory, name="victim"):
    """A root-owned file an attacker would like root to overwrite."""
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write("precious root data\n")
    os.chmod(path, 0o644)
    return path


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


PLANT_LINK = "import os, sys; os.symlink(sys.argv[1], sys.argv[2])"


# --------------------------------------------------------------------------- --status-file

PLANT_PID_LINKS = r"""
import os, sys
prefix, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open("/proc/sys/kernel/ns_last_pid") as f:
    last = int(f.read())
for pid in range(last + 1, last + 1 + count):
    os.symlink(target, "%s.%d.tmp" % (prefix, pid))
print(last)
"""


def test_status_file_temporary_name_cannot_be_guessed_and_planted(tmp_path, shared,
                                                                  attacker):
    """Attack: nobody predicts msrsync's pid (ns_last_pid) and plants
    SHARED/st.json.<pid>.tmp -> a root file for the next 300 pids; the old code wrote
    its status file to that name with a plain open(), overwriting the victim.  Now the
    temporary file has a random name, made O_EXCL|O_NOFOLLOW: the victim is
    untouched, st.json holds the final summary, no temporary file is left."""
    src = small_src(tmp_path / "src")
    victim = make_victim(str(tmp_path))
    status = os.path.join(shared, "st.json")
    # control: a link nobody plants here is followed by a naive open() as root
    control_victim = make_victim(str(tmp_path), "control-victim")
    control_link = os.path.join(shared, "control.link")
    attacker(PLANT_LINK, control_victim, control_link)
    with open(control_link, "w") as handle:
        handle.write("overwritten through the link\n")
    assert read(control_victim) == b"overwritten through the link\n"
    os.unlink(control_link)

    for _ in range(3):
        last = int(attacker(PLANT_PID_LINKS, status, victim, "300"))
        planted = set("st.json.%d.tmp" % pid for pid in range(last + 1, last + 301))
        proc = subprocess.Popen([sys.executable, MSRSYNC, "-p", "2", "-f", "1",
                                 "--status-file", status, src + b"/", tmp_path / "dest"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        out, err = proc.communicate(timeout=60)
        if last < proc.pid <= last + 300:
            break
        # other processes took the planted pids first: plant again
        for name in os.listdir(shared):
            os.unlink(os.path.join(shared, name))
        shutil.rmtree(tmp_path / "dest", ignore_errors=True)
    else:
        pytest.fail("msrsync's pid was never among the 300 planted ones")
    cp = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert read(victim) == b"precious root data\n", "the victim was overwritten:\n%s" % (
        describe(cp))
    assert cp.returncode == 0, describe(cp)
    with open(status) as handle:
        summary = json.load(handle)
    assert summary["status"] == "SUCCESS" and summary["exit_code"] == 0, summary
    assert set(os.listdir(shared)) == planted | {"st.json"}, \
        sorted(set(os.listdir(shared)) - planted)


# --------------------------------------------------------------------------- --json

def test_json_file_that_is_another_users_symlink_is_refused(tmp_path, shared, attacker):
    """Attack: nobody plants SHARED/report.json -> a root file; the old code's
    open(FILE, "w") followed it and clobbered the victim with the summary.  Now the run
    is refused before anything is copied: exit 45, one line naming the path and the
    link's owner; the victim is unchanged and DEST is not made."""
    src = small_src(tmp_path / "src")
    victim = make_victim(str(tmp_path))
    report = os.path.join(shared, "report.json")
    attacker(PLANT_LINK, victim, report)
    # control: root's naive open() follows the planted link
    assert read(report) == b"precious root data\n"
    dest = tmp_path / "dest"
    cp = msrsync("-p", "2", "-f", "1", "--json", report, src + b"/", dest)
    assert read(victim) == b"precious root data\n", "the victim was overwritten"
    line = assert_refused(cp, report)
    assert "link" in line and "owned" in line, line
    assert not os.path.lexists(dest), "DEST was made by a refused run"
    assert os.path.islink(report)


def test_status_file_that_is_another_users_symlink_is_refused(tmp_path, shared,
                                                              attacker):
    """nobody plants SHARED/st2.json -> a root file and root asks for --status-file
    SHARED/st2.json: refused before anything is copied (exit 45, one line naming the
    path).  (The old code renamed its temporary file over the link, so the victim was
    safe there; only the new behaviour is pinned.)"""
    src = small_src(tmp_path / "src")
    victim = make_victim(str(tmp_path))
    status = os.path.join(shared, "st2.json")
    attacker(PLANT_LINK, victim, status)
    assert read(status) == b"precious root data\n"      # control: the link is followed
    dest = tmp_path / "dest"
    cp = msrsync("-p", "2", "-f", "1", "--status-file", status, src + b"/", dest)
    line = assert_refused(cp, status)
    assert "link" in line and "owned" in line, line
    assert read(victim) == b"precious root data\n"
    assert not os.path.lexists(dest), "DEST was made by a refused run"
    assert os.path.islink(status)


def test_json_file_below_another_users_symlinked_directory_is_refused(tmp_path, shared,
                                                                      attacker):
    """Attack: nobody plants SHARED/d -> a root-only directory; --json SHARED/d/r.json
    would have root write r.json in the directory nobody chose (the old code did).
    Refused: exit 45, one line naming the path; nothing is written there."""
    src = small_src(tmp_path / "src")
    target = tmp_path / "rootdir"
    os.mkdir(target, 0o700)
    link = os.path.join(shared, "d")
    attacker(PLANT_LINK, target, link)
    # control: root goes through the planted link into the root directory
    assert os.stat(link).st_ino == os.stat(target).st_ino
    report = os.path.join(link, "r.json")
    dest = tmp_path / "dest"
    cp = msrsync("-p", "2", "-f", "1", "--json", report, src + b"/", dest)
    assert os.listdir(target) == [], "msrsync wrote through nobody's link"
    assert_refused(cp, report)
    assert not os.path.lexists(dest), "DEST was made by a refused run"


@pytest.mark.parametrize("option", ["--json", "--status-file"])
def test_output_file_that_is_roots_own_symlink_is_followed(tmp_path, option):
    """Not an attack: FILE a symlink root owns, to a root file, is followed: the target
    gets the summary and the link stays a link."""
    src = small_src(tmp_path / "src")
    target = tmp_path / "target.json"
    target.write_text("old\n")
    link = tmp_path / "out.json"
    os.symlink(target, link)
    cp = msrsync("-p", "2", "-f", "1", option, link, src + b"/", tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    assert os.path.islink(link) and os.readlink(link) == str(target)
    summary = json.loads(target.read_text())
    assert summary["status"] == "SUCCESS", summary


def test_json_to_dev_stdout_still_works(tmp_path):
    """Not an attack: --json /dev/stdout (a link of root's to /proc/self/fd/1) writes
    the summary on stdout."""
    src = small_src(tmp_path / "src")
    cp = msrsync("-p", "2", "-f", "1", "--json", "/dev/stdout", src + b"/",
                 tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    summary = json.loads(text(cp.stdout))
    assert summary["status"] == "SUCCESS" and summary["exit_code"] == 0, summary


def test_status_file_on_a_device_writes_it_and_never_replaces_it(tmp_path):
    """Not an attack, but what root's old run did: --status-file naming a device (here
    a null device made in tmp_path, as /dev/null is) was replaced by a regular file
    renamed over it.  Now a device, FIFO or terminal is written as it is: after the
    run it is the same character device."""
    null = str(tmp_path / "null")
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    before = os.lstat(null)
    src = small_src(tmp_path / "src")
    cp = msrsync("-p", "2", "-f", "1", "--status-file", null, "--json", null,
                 src + b"/", tmp_path / "dest")
    assert cp.returncode == 0 and not stderr_lines(cp), describe(cp)
    after = os.lstat(null)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev, after
    assert after.st_ino == before.st_ino


def test_json_into_another_users_fifo_is_refused(tmp_path, shared, attacker):
    """Attack: nobody makes a FIFO at the --json name in a shared directory and reads
    it: root's summary (its command line, paths, failures) would go to nobody.  A
    FIFO, socket or device is written as it is only when it is root's (or the
    user's): refused, exit 45, one line naming it."""
    fifo = os.path.join(shared, "report.json")
    attacker("import os, sys; os.mkfifo(sys.argv[1], 0o666)", fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.lstat(fifo).st_uid == NOBODY
    src = small_src(tmp_path / "src")
    dest = tmp_path / "dest"
    assert_refused(msrsync("-p", "2", "--json", fifo, src + b"/", dest), fifo)
    assert not os.path.lexists(dest), "DEST was made by a refused run"


# --------------------------------------------------------------------------- --resume

def kept_run(base):
    """A finished run of msrsync -k under BASE (root's 0755): (its kept bucket
    directory, SRC, DEST).  Its journal says every bucket is done."""
    src = small_src(os.path.join(base, "src"))
    buckets = os.path.join(base, "buckets")
    os.mkdir(buckets, 0o755)
    dest = os.path.join(base, "dest")
    cp = msrsync("-k", "-p", "2", "-f", "1", "-b", buckets, "--rsync", "-a", src + b"/", dest)
    assert cp.returncode == 0, describe(cp)
    (run_dir,) = os.listdir(buckets)
    run_dir = os.path.join(buckets, run_dir)
    assert {"run.json", "done.journal"} <= set(os.listdir(run_dir))
    return run_dir, src, dest


def test_resume_of_an_untouched_kept_directory_works(rootdir, tmp_path):
    """Control of the --resume attacks: the same kept directory, untouched, resumes
    (exit 0) and DEST is plain rsync's."""
    run_dir, src, dest = kept_run(rootdir)
    cp = msrsync("--resume", run_dir)
    assert cp.returncode == 0, describe(cp)
    oracle = tmp_path / "oracle"
    assert run_rsync(src + b"/", oracle, opts=["-a"]).returncode == 0
    assert_same_tree(os.fsencode(oracle), os.fsencode(dest))


def test_resume_of_a_directory_another_user_owns_is_refused(rootdir):
    """The kept directory chowned to nobody and made 0777: whatever is in it may be
    nobody's.  Refused: exit 45, one line naming it."""
    run_dir, _, _ = kept_run(rootdir)
    os.chown(run_dir, NOBODY, NOBODY)
    os.chmod(run_dir, 0o777)
    assert_refused(msrsync("--resume", run_dir), os.path.realpath(run_dir))


EVIL_RSH = """#!/bin/sh
# a remote shell that runs the command here, after leaving its mark
touch "%s"
shift
exec sh -c "$*"
"""

REWRITE_RUN_JSON = r"""
import json, os, sys
path, data = sys.argv[1], sys.argv[2]
os.unlink(path)            # root's 0600 file, in a directory nobody may write
with open(path, "w") as handle:
    handle.write(data)
"""


def evil_run_json(run_dir, rsh, dest):
    """run.json's command line with "-e RSH" added to its rsync options and DEST on a
    remote host reached through RSH (which runs everything locally)."""
    with open(os.path.join(run_dir, "run.json")) as handle:
        data = json.load(handle)
    argv = [bytes.fromhex(a) for a in data["argv_bytes"]]
    i = argv.index(b"--rsync")
    argv[i + 1] += b" -e " + os.fsencode(rsh)
    argv[-1] = b"fakehost:" + os.fsencode(dest)
    data["argv"] = [os.fsdecode(a) for a in argv]
    data["argv_bytes"] = [a.hex() for a in argv]
    return json.dumps(data)


def test_resume_of_a_run_json_another_user_rewrote_is_refused(rootdir, shared, attacker):
    """Attack: the kept directory is 0777 (no sticky bit); nobody replaces run.json by
    one whose command line runs nobody's script as the remote shell (-e SCRIPT, DEST
    "fakehost:DEST").  The old code ran the script as root.  Refused: exit 45, one line
    naming the directory; the script never runs."""
    run_dir, _, dest = kept_run(rootdir)
    os.chmod(run_dir, 0o777)
    marker = os.path.join(shared, "ran-as-root")
    script = os.path.join(shared, "rsh")
    attacker("import os, sys; open(sys.argv[1], 'w').write(sys.argv[2]); "
             "os.chmod(sys.argv[1], 0o755)", script, EVIL_RSH % marker)
    data = evil_run_json(run_dir, script, dest + "-remote")
    attacker(REWRITE_RUN_JSON, os.path.join(run_dir, "run.json"), data)
    assert os.stat(os.path.join(run_dir, "run.json")).st_uid == NOBODY
    # control: the attacker's script runs (as root) when root runs it
    control_marker = os.path.join(shared, "control-ran")
    control = os.path.join(shared, "control-rsh")
    attacker("import os, sys; open(sys.argv[1], 'w').write(sys.argv[2]); "
             "os.chmod(sys.argv[1], 0o755)", control, EVIL_RSH % control_marker)
    assert run_cmd([control, "host", "true"]).returncode == 0
    assert os.stat(control_marker).st_uid == 0
    cp = msrsync("--resume", run_dir)
    assert not os.path.exists(marker), "nobody's script ran as root:\n%s" % describe(cp)
    assert_refused(cp, os.path.realpath(run_dir))


def test_resume_with_a_run_json_others_may_write_is_refused(rootdir):
    """run.json root's but 0666: anyone may have rewritten the command line.  Refused:
    exit 45, one line naming it."""
    run_dir, _, _ = kept_run(rootdir)
    os.chmod(os.path.join(run_dir, "run.json"), 0o666)
    assert_refused(msrsync("--resume", run_dir),
                   os.path.join(os.path.realpath(run_dir), "run.json"))


def test_resume_with_a_state_file_another_user_owns_is_refused(rootdir):
    """A bucket's state file (NNNNNN.state) owned by nobody.  Refused: exit 45, one
    line naming it."""
    run_dir, _, _ = kept_run(rootdir)
    states = sorted(n for n in os.listdir(run_dir) if n.endswith(".state"))
    assert states, os.listdir(run_dir)
    os.chown(os.path.join(run_dir, states[0]), NOBODY, NOBODY)
    assert_refused(msrsync("--resume", run_dir),
                   os.path.join(os.path.realpath(run_dir), states[0]))


def test_resume_with_a_symlink_in_the_directory_is_refused(rootdir, shared, attacker):
    """Attack: run.json replaced by a symlink to a run.json nobody wrote in a shared
    directory, whose command line runs nobody's script as the remote shell; the old
    code read it through the link and ran the script as root.  A symlink in the
    directory is refused: exit 45, one line naming it; the script never runs."""
    run_dir, _, dest = kept_run(rootdir)
    marker = os.path.join(shared, "ran-as-root")
    script = os.path.join(shared, "rsh")
    attacker("import os, sys; open(sys.argv[1], 'w').write(sys.argv[2]); "
             "os.chmod(sys.argv[1], 0o755)", script, EVIL_RSH % marker)
    evil = os.path.join(shared, "run.json")
    attacker("import sys; open(sys.argv[1], 'w').write(sys.argv[2])", evil,
             evil_run_json(run_dir, script, dest + "-remote"))
    run_json = os.path.join(run_dir, "run.json")
    os.unlink(run_json)
    os.symlink(evil, run_json)
    assert json.loads(read(run_json))["argv"][-1].startswith("fakehost:")   # control
    cp = msrsync("--resume", run_dir)
    assert not os.path.exists(marker), "nobody's script ran as root:\n%s" % describe(cp)
    assert_refused(cp, os.path.join(os.path.realpath(run_dir), "run.json"))


def test_resume_below_a_directory_others_may_write_is_refused(rootdir):
    """The directory above the kept one made 0777 without the sticky bit: another user
    could rename the kept directory away and put their own in its place.  Refused:
    exit 45, one line naming that directory."""
    run_dir, _, _ = kept_run(rootdir)
    parent = os.path.dirname(run_dir)
    os.chmod(parent, 0o777)
    assert_refused(msrsync("--resume", run_dir), os.path.realpath(parent))


def test_resume_below_a_directory_another_user_owns_is_refused(rootdir):
    """The directory above the kept one owned by nobody (0755): nobody could rename the
    kept directory away and put their own in its place.  Refused: exit 45, one line
    naming that directory."""
    run_dir, _, _ = kept_run(rootdir)
    parent = os.path.dirname(run_dir)
    os.chown(parent, NOBODY, NOBODY)
    assert_refused(msrsync("--resume", run_dir), os.path.realpath(parent))


# --------------------------------------------------------------------------- -b and TMPDIR

def assert_bucket_parent_refused(tmp_path, parent, *options, env=None):
    """A run whose bucket directory would go in PARENT is refused before anything is
    made: exit 45, one line naming PARENT; nothing in it, no DEST."""
    src = small_src(tmp_path / "src")
    dest = tmp_path / "dest"
    cp = msrsync(*(["-p", "2", "-f", "1"] + list(options) + [src + b"/", dest]), env=env)
    assert_refused(cp, os.path.realpath(parent))
    assert os.listdir(parent) == []
    assert not os.path.lexists(dest), "DEST was made by a refused run"


def test_buckets_in_a_directory_others_may_write_are_refused(tmp_path, shared):
    """-b SHARED, a 0777 directory without the sticky bit: another user could rename
    the bucket directory away and put their own lists in its place."""
    assert_bucket_parent_refused(tmp_path, shared, "-b", shared)


def test_buckets_in_a_directory_another_user_owns_are_refused(tmp_path, rootdir):
    """-b DIR owned by nobody (0755): nobody could rename the bucket directory away."""
    theirs = os.path.join(rootdir, "nobodys")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, NOBODY, NOBODY)
    assert_bucket_parent_refused(tmp_path, theirs, "-b", theirs)


def test_buckets_in_a_sticky_directory_of_roots_work(tmp_path, rootdir):
    """Not an attack: -b a root-owned 01777 directory (as /tmp): the sticky bit keeps
    other users from renaming what root makes there.  The copy works."""
    src = small_src(tmp_path / "src")
    sticky = os.path.join(rootdir, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    dest = tmp_path / "dest"
    cp = msrsync("-p", "2", "-f", "1", "-b", sticky, "--rsync", "-a", src + b"/", dest)
    assert cp.returncode == 0, describe(cp)
    oracle = tmp_path / "oracle"
    assert run_rsync(src + b"/", oracle, opts=["-a"]).returncode == 0
    assert_same_tree(os.fsencode(oracle), os.fsencode(dest))


def test_default_bucket_parent_tmpdir_another_user_owns_is_refused(tmp_path, rootdir):
    """Without -b the bucket directory goes in TMPDIR; TMPDIR a directory nobody owns
    is refused as -b would be."""
    theirs = os.path.join(rootdir, "nobodys-tmp")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, NOBODY, NOBODY)
    assert_bucket_parent_refused(tmp_path, theirs, env=dict(os.environ, TMPDIR=theirs))


# --------------------------------------------------------------------------- the code cache

class Program(object):
    """A copy of msrsync of its own (so its cache file's device-inode name is this
    test's), run directly so that its sh loader runs, with HOME and XDG_CACHE_HOME
    as a test sets them and PYTHONDONTWRITEBYTECODE unset."""

    def __init__(self, directory):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "msrsync")
        shutil.copy(MSRSYNC, self.path)
        os.chmod(self.path, 0o755)
        st = os.stat(self.path)
        self.env = dict(os.environ)
        for name in ("XDG_CACHE_HOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
            self.env.pop(name, None)
        # the loader's cache tag is the python3 first in PATH's (the program execs it)
        cp = run_cmd(["python3", "-c", "import sys; print(sys.implementation.cache_tag)"],
                     env=self.env)
        assert cp.returncode == 0, describe(cp)
        self.tag = text(cp.stdout).strip()
        self.stamp = b"msrsync %d %d %s" % (st.st_size, st.st_mtime_ns, self.tag.encode())
        self.cache_name = "%d-%d.%s.pyc" % (st.st_dev, st.st_ino, self.tag)

    def payload(self, marker):
        """A cache file the loader takes for this program's: its code writes MARKER."""
        code = "open(%r, 'w').write('ran')\n" % marker
        cp = run_cmd(["python3", "-c", "import marshal, sys; sys.stdout.buffer.write("
                      "marshal.dumps(compile(sys.argv[1], 'payload', 'exec')))", code],
                     env=self.env)
        assert cp.returncode == 0, describe(cp)
        return self.stamp + b"\n" + cp.stdout

    def version(self, home, xdg=None):
        env = dict(self.env, HOME=home)
        if xdg is not None:
            env["XDG_CACHE_HOME"] = xdg
        return run_cmd([self.path, "--version"], env=env)


def assert_not_run(cp, marker):
    __tracebackhide__ = True
    assert not os.path.exists(marker), "the planted code ran as root:\n%s" % describe(cp)
    assert cp.returncode == 0, describe(cp)
    assert text(cp.stdout).startswith("msrsync "), describe(cp)
    version = text(cp.stdout).split()[1]
    assert all(part.isdigit() for part in version.split(".")) and \
        version.count(".") == 2, describe(cp)


PLANT_CACHE = r"""
import os, sys
directory, name, data = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
os.makedirs(directory, exist_ok=True)
with open(os.path.join(directory, name), "wb") as handle:
    handle.write(data)
"""


@pytest.fixture
def program(tmp_path):
    """A Program in tmp_path.  When the cache directory HOME or XDG_CACHE_HOME names is
    refused, the loader keeps its compiled code in root's home from the password
    database: that file is removed afterwards, with the directories made for it if
    they were not there before."""
    home = pwd.getpwuid(os.geteuid()).pw_dir
    dirs = [os.path.join(home, ".cache"), os.path.join(home, ".cache", "msrsync")]
    existed = [os.path.isdir(d) for d in dirs]
    made = Program(str(tmp_path / "prog"))
    try:
        yield made
    finally:
        try:
            os.unlink(os.path.join(dirs[1], made.cache_name))
        except OSError:
            pass
        for directory, was in reversed(list(zip(dirs, existed))):
            if not was:
                try:
                    os.rmdir(directory)
                except OSError:
                    pass


def roots_cache_with_payload(tmp_path, rootdir, program, mode):
    """A root-owned 0700 home and cache directory holding the payload as a root-owned
    file of MODE: (home, the marker the payload writes)."""
    home = os.path.join(rootdir, "root-home")
    cache = os.path.join(home, ".cache", "msrsync")
    os.makedirs(cache, 0o700)
    os.chmod(home, 0o700)
    marker = str(tmp_path / "marker")
    pyc = os.path.join(cache, program.cache_name)
    with open(pyc, "wb") as handle:
        handle.write(program.payload(marker))
    os.chmod(pyc, mode)
    return home, marker


def test_code_cache_of_roots_own_is_run(tmp_path, rootdir, program):
    """Control of the cache attacks: the payload, in a root-owned 0700 cache directory
    as a root-owned 0600 file, IS run by the loader (the payload is a valid cache
    file of this program)."""
    home, marker = roots_cache_with_payload(tmp_path, rootdir, program, 0o600)
    cp = program.version(home)
    assert os.path.exists(marker), "the control payload did not run:\n%s" % describe(cp)


def test_code_cache_in_another_users_home_is_not_run(tmp_path, rootdir, attacker,
                                                     program):
    """Attack: root runs msrsync with HOME nobody's home (su without -, sudo keeping
    HOME); nobody planted .cache/msrsync/DEV-INO.TAG.pyc there, code that writes a
    marker.  The old loader ran it as root.  Now HOME/.cache is not root's, so it is
    not used: no marker, --version prints the version, exit 0."""
    home = os.path.join(rootdir, "nobody-home")
    os.mkdir(home, 0o755)
    os.chown(home, NOBODY, NOBODY)
    marker = str(tmp_path / "marker")
    attacker(PLANT_CACHE, os.path.join(home, ".cache", "msrsync"), program.cache_name,
             program.payload(marker).hex())
    assert_not_run(program.version(home), marker)


def test_code_cache_in_another_users_xdg_cache_home_is_not_run(tmp_path, rootdir,
                                                               attacker, program):
    """Attack: XDG_CACHE_HOME a directory of nobody's, where nobody planted
    msrsync/DEV-INO.TAG.pyc.  The old loader ran it as root; now it is not used (HOME
    is root's own, and used instead): no marker, the version, exit 0."""
    home = os.path.join(rootdir, "root-home")
    os.mkdir(home, 0o700)
    xdg = os.path.join(rootdir, "nobody-cache")
    os.mkdir(xdg, 0o755)
    os.chown(xdg, NOBODY, NOBODY)
    marker = str(tmp_path / "marker")
    attacker(PLANT_CACHE, os.path.join(xdg, "msrsync"), program.cache_name,
             program.payload(marker).hex())
    assert_not_run(program.version(home, xdg=xdg), marker)


def test_code_cache_directory_others_may_write_is_not_run(tmp_path, rootdir, attacker,
                                                          program):
    """Attack: root's own HOME, but its .cache/msrsync is 0777 (and no sticky bit);
    nobody planted the .pyc in it.  The old loader ran it as root; now a cache
    directory others may write is not used: no marker, the version, exit 0."""
    home = os.path.join(rootdir, "root-home")
    cache = os.path.join(home, ".cache", "msrsync")
    os.makedirs(cache, 0o755)
    os.chmod(cache, 0o777)
    marker = str(tmp_path / "marker")
    attacker(PLANT_CACHE, cache, program.cache_name, program.payload(marker).hex())
    assert os.stat(os.path.join(cache, program.cache_name)).st_uid == NOBODY
    assert_not_run(program.version(home), marker)


def test_code_cache_file_others_may_write_is_not_run(tmp_path, rootdir, program):
    """The .pyc root's, in root's 0700 cache directory, but mode 0666: anyone who
    could reach it could have written it.  Not used: no marker, the version, exit 0."""
    home, marker = roots_cache_with_payload(tmp_path, rootdir, program, 0o666)
    assert_not_run(program.version(home), marker)


def test_code_cache_directory_that_is_a_symlink_to_another_users_is_not_run(
        tmp_path, rootdir, attacker, program):
    """Attack: root's HOME/.cache/msrsync a symlink to a directory of nobody's holding
    the planted .pyc.  The old loader ran it as root; now a symlinked cache directory
    is not used: no marker, the version, exit 0."""
    home = os.path.join(rootdir, "root-home")
    os.makedirs(os.path.join(home, ".cache"), 0o700)
    theirs = os.path.join(rootdir, "nobody-cache")
    os.mkdir(theirs, 0o755)
    os.chown(theirs, NOBODY, NOBODY)
    marker = str(tmp_path / "marker")
    attacker(PLANT_CACHE, theirs, program.cache_name, program.payload(marker).hex())
    os.symlink(theirs, os.path.join(home, ".cache", "msrsync"))
    assert_not_run(program.version(home), marker)


# --------------------------------------------------------------------------- names on root's terminal

# Every byte a name may hold that moves a terminal's cursor, retitles or clears it, or
# forges a line: C0 but tab (NUL and "/" cannot be in a name), DEL, and the C1 bytes
# as UTF-8 (U+0080-U+009F: \xc2\x80 to \xc2\x9f), plus a byte that is not UTF-8.
HOSTILE_BYTES = ([bytes([b]) for b in range(1, 32) if b not in (9,)] + [b"\x7f"] +
                 [b"\xc2" + bytes([b]) for b in range(0x80, 0xa0)] + [b"\xff"])

PLANT_HOSTILE = r"""
import os, sys
root = sys.argv[1].encode()
for i, raw in enumerate(sys.argv[2:]):
    byte = bytes.fromhex(raw)
    d = os.path.join(root, b"d%02d" % i + byte + b"x")
    os.makedirs(d)
    with open(os.path.join(d, b"f" + byte + b"y"), "wb") as f:
        f.write(b"z" * (10000 if byte in (b"\r", b"\x1b") else 100 + i))
    if i == 0:
        os.symlink(b"/nonexistent", os.path.join(root, b"dangling" + byte))
        os.symlink(b"/etc/passwd", os.path.join(root, b".rsync-filter"))
"""


def _raw_control_bytes(data):
    """The hostile bytes found in output, raw (each one a forged line or an escape)."""
    found = set()
    for raw in HOSTILE_BYTES:
        if raw == b"\n":
            continue        # lines are split on it: counted by the name test below
        if raw in data:
            found.add(raw)
    return found


def test_names_with_control_bytes_reach_roots_terminal_escaped(shared, attacker):
    """nobody makes files and directories whose names hold every control byte, DEL and
    C1 byte, a dangling symlink and a .rsync-filter that is its symlink; root's
    --survey table, its warnings and a -F copy's "refusing to follow" line write each
    such byte as rsync does, \\#ooo, never raw (a CR forged a line in root's report, an
    ESC retitled or cleared its terminal)."""
    src = os.path.join(shared, "src")
    os.mkdir(src)
    os.chmod(src, 0o777)
    attacker(PLANT_HOSTILE, src, *[b.hex() for b in HOSTILE_BYTES])
    assert any(b"\x1b" in n for n in os.listdir(os.fsencode(src))), "not real"
    survey = msrsync("--survey", src + "/")
    assert survey.returncode == 0, describe(survey)
    out = survey.stdout + survey.stderr
    assert _raw_control_bytes(out) == set(), describe(survey)
    assert b"\\#033" in out and b"\\#015" in out and b"\\#302\\#233" in out, describe(survey)
    # a name holding a newline is still one line of the table
    assert not any(l.startswith(b"x/f") for l in out.splitlines()), describe(survey)
    dest = os.path.join(shared, "dest")
    copy = msrsync("-p", "2", "--rsync", "-rlF", src + "/", dest)
    out = copy.stdout + copy.stderr
    assert b"refusing to follow" in out, describe(copy)
    assert _raw_control_bytes(out) == set(), describe(copy)


# --------------------------------------------------------------------------- Pythons msrsync starts

PLANT_PYTHON_HOOKS = r"""
import os, sys
home, marker = sys.argv[1], sys.argv[2]
hook = "import os; open(%r + '.' + str(os.getpid()), 'w').write('ran')\n" % marker
for minor in range(6, 15):
    site = os.path.join(home, ".local", "lib", "python3.%d" % minor, "site-packages")
    os.makedirs(site)
    with open(os.path.join(site, "evil.pth"), "w") as f:
        f.write(hook)
    for name in ("sitecustomize.py", "usercustomize.py"):
        with open(os.path.join(site, name), "w") as f:
            f.write(hook)
os.makedirs(os.path.join(home, "path"))
with open(os.path.join(home, "path", "sitecustomize.py"), "w") as f:
    f.write(hook)
"""


@pytest.mark.slow
@pytest.mark.parametrize("what", ["--selftest", "--bench"])
def test_selftest_and_bench_run_no_code_of_an_inherited_home_or_tmpdir(tmp_path, shared,
                                                                       attacker, what,
                                                                       page_cache_lock):
    """Root runs the program with the HOME, PYTHONPATH and TMPDIR of nobody (sudo -E):
    nobody's user site holds a .pth hook, sitecustomize.py and usercustomize.py, its
    PYTHONPATH a sitecustomize.py, its TMPDIR is its own 0777 directory.  None of that
    code runs in any Python msrsync starts (its self-test's and benchmark's msrsyncs ran
    it, 33 times), and the self-test passes, working in /tmp, with one line that says
    why (it failed: its runs refused nobody's TMPDIR).  (page_cache_lock: as root the
    benchmark drops the page cache.)"""
    home = os.path.join(shared, "home")
    tmpdir = os.path.join(shared, "tmp")
    attacker("import os, sys; os.mkdir(sys.argv[1]); os.mkdir(sys.argv[2]); "
             "os.chmod(sys.argv[2], 0o777)", home, tmpdir)
    marker = os.path.join(str(tmp_path), "ran")
    os.chmod(str(tmp_path), 0o777)
    attacker(PLANT_PYTHON_HOOKS, home, marker)
    env = dict(os.environ, HOME=home, TMPDIR=tmpdir, PYTHONPATH=os.path.join(home, "path"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    # the control: a plain Python of root's with that environment runs the hooks
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    assert any(n.startswith("ran.") for n in os.listdir(str(tmp_path))), "not real"
    for name in os.listdir(str(tmp_path)):
        if name.startswith("ran."):
            os.unlink(os.path.join(str(tmp_path), name))
    argv = [MSRSYNC, what] + (["--bench-entries", "2000", "--bench-reps", "1"]
                              if what == "--bench" else [])
    cp = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        stdin=subprocess.DEVNULL, env=env, timeout=400)
    assert cp.returncode == 0, describe(cp)
    ran = [n for n in os.listdir(str(tmp_path)) if n.startswith("ran.")]
    assert ran == [], "%d Pythons ran nobody's code\n%s" % (len(ran), describe(cp))
    assert b"not ok" not in cp.stdout, describe(cp)
    notes = stderr_lines(cp)
    assert len(notes) == 1 and "working in /tmp instead" in notes[0], describe(cp)
    assert os.listdir(tmpdir) == []
