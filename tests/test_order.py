"""The order in which buckets run (PendingBuckets: the largest pending bucket first), and
what --resume clears after msrsync itself was SIGKILLed (remove_debris).

Unit tests drive PendingBuckets directly (load_msrsync); the end-to-end tests run the real
executable, one of them with an rsync wrapper first in PATH that records which bucket each
rsync run was (its stderr is the bucket's log, NNNNNN.log) and holds the first one until
the scan is over, so that the order the others run in is deterministic.
"""

import json
import os
import queue
import re
import shlex
import shutil
import signal
import threading
import time

import pytest

from helpers import (age, assert_same_tree, build, describe, differential, end,
                     load_msrsync, run_msrsync, run_rsync, every_rsync, start_msrsync,
                     text, wait_for)

m = load_msrsync()


def bucket(number, size, kind=None, names=0, units=0):
    """A Bucket as the scanner cuts it, of `size` bytes holding `names` subtrees given as
    arguments and `units` journal units (what PendingBuckets counts as names held)."""
    b = m.Bucket(number, None, kind or m.Kind.TREES, 1, size, b"%06d.list" % number,
                 b"%06d.log" % number)
    if names:
        b.arg_names = [b"n%d" % i for i in range(names)]
    if units:
        b.units = [(b"u%d" % i, 1, 1) for i in range(units)]
    return b


def drain(pending):
    """Everything pending, in the order workers get it: bucket numbers, None as None."""
    out = []
    while True:
        try:
            item = pending.get(timeout=0)
        except queue.Empty:
            return out
        out.append(None if item is None else item.number)


# --------------------------------------------------------------------------- PendingBuckets

def test_largest_pending_bucket_is_taken_first():
    """Catches a FIFO queue (the old queue.Queue): cut order 1..6, taken by size."""
    pending = m.PendingBuckets(2)
    for number, size in [(1, 10), (2, 500), (3, 30), (4, 70000), (5, 0), (6, 1 << 30)]:
        pending.put(bucket(number, size))
    assert pending.qsize() == 6 and not pending.empty()
    assert drain(pending) == [6, 4, 2, 3, 1, 5]
    assert pending.empty() and pending.qsize() == 0


def test_equal_sizes_go_in_cut_order():
    """Catches ties broken by anything but the order cut (heapq comparing Buckets would
    raise TypeError; a LIFO tie-break would reverse them)."""
    pending = m.PendingBuckets(1)
    for number in range(1, 8):
        pending.put(bucket(number, 4096 if number % 2 else 100))
    assert drain(pending) == [1, 3, 5, 7, 2, 4, 6]


def test_missing_args_bucket_first_and_sentinel_last():
    """--delete-missing-args' bucket (size 0, cut first) is taken before any bigger bucket;
    the end-of-run sentinel None, put first here, comes after every bucket (a worker that
    got it before a bucket would quit and leave the bucket unrun)."""
    pending = m.PendingBuckets(2)
    pending.put(None)
    pending.put(bucket(1, 10))
    pending.put(bucket(0, 0, kind=m.Kind.MISSING))
    pending.put(bucket(2, 1 << 40))
    pending.put(None)
    pending.put(bucket(3, 0))
    assert drain(pending) == [0, 2, 1, 3, None, None]


def test_get_on_empty_raises_empty():
    pending = m.PendingBuckets(1)
    started = time.monotonic()
    with pytest.raises(queue.Empty):
        pending.get(timeout=0.1)
    assert 0.05 < time.monotonic() - started < 5
    with pytest.raises(queue.Empty):
        pending.get_nowait()


@pytest.mark.parametrize("workers", [1, "many"])
def test_bounded_by_bucket_count(workers):
    """max(PENDING_MIN, PENDING_PER_WORKER * workers) buckets, then queue.Full (after the
    timeout, not forever); catches an unbounded heap (the scan would hold the whole tree's
    buckets in memory) and a bound that ignores the worker count."""
    if workers == "many":
        workers = m.PENDING_MIN // m.PENDING_PER_WORKER + 2
    limit = max(m.PENDING_MIN, m.PENDING_PER_WORKER * workers)
    assert limit == (m.PENDING_MIN if workers == 1 else m.PENDING_PER_WORKER * workers)
    pending = m.PendingBuckets(workers)
    for number in range(1, limit + 1):
        pending.put(bucket(number, number), timeout=0)
    assert pending.qsize() == limit
    started = time.monotonic()
    with pytest.raises(queue.Full):
        pending.put(bucket(limit + 1, 1 << 40), timeout=0.1)
    assert time.monotonic() - started < 5
    with pytest.raises(queue.Full):
        pending.put(None, timeout=0)
    # one taken (the largest), one more fits, no more
    assert pending.get(timeout=0).number == limit
    pending.put(bucket(limit + 1, 0), timeout=0)
    with pytest.raises(queue.Full):
        pending.put(bucket(limit + 2, 0), timeout=0)


def test_bounded_by_names_held():
    """Subtree names (arg_names) and journal units held by pending buckets count against
    PENDING_NAMES; an empty queue takes a bucket of any size (else a bucket holding more
    names than the bound would wait forever). Catches a bound on the count alone."""
    limit = m.PENDING_NAMES
    pending = m.PendingBuckets(1)
    pending.put(bucket(1, 10, names=limit - 10), timeout=0)
    with pytest.raises(queue.Full):
        pending.put(bucket(2, 10, names=6, units=5), timeout=0)     # 11 > 10 left
    pending.put(bucket(3, 10, names=6, units=4), timeout=0)         # exactly at the bound
    with pytest.raises(queue.Full):
        pending.put(bucket(4, 10, units=1), timeout=0)
    # a bucket without names still fits (count bound far away)
    pending.put(bucket(5, 10), timeout=0)
    assert drain(pending) == [1, 3, 5]
    # the names were given back: a bucket over the bound alone fits an empty queue
    pending.put(bucket(6, 10, names=limit + 1), timeout=0)
    with pytest.raises(queue.Full):
        pending.put(bucket(7, 10, names=1), timeout=0)
    assert pending.get(timeout=0).number == 6
    pending.put(bucket(7, 10, names=limit), timeout=0)


class _WatchedCondition(threading.Condition):
    """A Condition that says when a thread first waits on it."""

    def __init__(self):
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout=None):
        self.waiting.set()
        return super().wait(timeout)


@pytest.mark.parametrize("bound", ["count", "names"])
def test_a_get_frees_room_for_a_blocked_put(bound):
    """A put waiting on a full queue goes in as soon as a worker takes a bucket (not at
    its timeout); catches a get that does not notify the waiting scanner."""
    pending = m.PendingBuckets(1)
    pending.cond = _WatchedCondition()
    if bound == "count":
        for number in range(1, pending.limit + 1):
            pending.put(bucket(number, number), timeout=0)
        late = bucket(9999, 5)
    else:
        pending.put(bucket(1, 100, names=m.PENDING_NAMES), timeout=0)
        late = bucket(9999, 5, names=1)
    done = []

    def scanner():
        started = time.monotonic()
        try:
            pending.put(late, timeout=30)
            done.append(time.monotonic() - started)
        except queue.Full:
            done.append("full")

    thread = threading.Thread(target=scanner, daemon=True)
    thread.start()
    # (set while the put holds the lock the get needs: the get comes after it waits)
    assert pending.cond.waiting.wait(30), "put never waited"
    assert thread.is_alive() and not done, "put did not wait on a full queue"
    taken = pending.get(timeout=0)
    assert taken.number in (1, pending.limit)
    thread.join(10)
    assert not thread.is_alive() and done and done[0] != "full", done
    assert done[0] < 5, done
    assert 9999 in drain(pending)


# --------------------------------------------------------------------------- end to end

def _order_tree(root):
    """30 directories of ten 3000-byte files (two to a 64K bucket), then, in the
    directory the scan reaches last, three files bigger than a bucket (one bucket each,
    cut after most small ones)."""
    spec = {}
    for d in range(30):
        for f in range(10):
            spec["a%02d/f%02d" % (d, f)] = "%02d%02d" % (d, f) * 750
    for i in range(3):
        spec["zz/big%d" % i] = ("b%d" % i) * (100000 + 500 * i)
    build(root, spec)
    age(root)
    return os.fsencode(root)


def test_small_files_and_late_big_files_copy_like_rsync(tmp_path):
    """-p 3 -s 64K over many small directories and big files found last: DEST as plain
    rsync leaves it, every bucket run once. Catches a queue that loses or repeats
    buckets, or hands a worker its end (None) while buckets are pending (their files
    would be missing)."""
    src = _order_tree(tmp_path / "src")
    summary = tmp_path / "summary.json"
    result = differential(tmp_path, [src + b"/"], ["-p", "3", "-s", "64K", "--json", summary])
    s = json.loads(summary.read_text())
    assert s["buckets_failed"] == 0, s
    assert s["buckets_done"] == s["buckets_total"] >= 15, s
    assert b"Traceback" not in result.msrsync.stderr


GATED_RSYNC = """#!/bin/sh
# msrsync's rsync for this test: a bucket run (stderr is NNNNNN.log) is recorded in RUNS;
# the first one waits until GATE exists (made once msrsync says its scan is over)
log=$(readlink /proc/$$/fd/2)
case "$log" in
*/[0-9][0-9][0-9][0-9][0-9][0-9].log)
    echo "$log" >> {runs}
    if mkdir {held} 2>/dev/null; then
        i=0
        while [ ! -e {gate} ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
    fi;;
esac
exec {rsync} "$@"
"""


def _listed_size(src, bucket_dir, number):
    """Bytes of the regular files a bucket's list stands for ("dir/": the entry alone)."""
    with open(os.path.join(bucket_dir, b"%06d.list" % number), "rb") as handle:
        names = [n for n in handle.read().split(b"\0") if n]
    total = 0
    for name in names:
        path = os.path.join(src, name[2:] if name.startswith(b"./") else name)
        if name.endswith(b"/"):
            continue
        if os.path.isdir(path):
            for top, _, files in os.walk(path):
                total += sum(os.lstat(os.path.join(top, f)).st_size for f in files)
        else:
            total += os.lstat(path).st_size
    return total


def test_one_worker_runs_the_largest_pending_bucket_first(tmp_path):
    """-p 1 -s 64K: the first bucket is held (by an rsync wrapper) until msrsync's
    status line (SIGUSR1) says the scan is over, so every other bucket is pending by
    then. They then run largest first, equal sizes in the order cut: the three big
    files, cut late, run before the small directories cut before them.
    Catches a FIFO queue: the runs would follow the bucket numbers."""
    src = _order_tree(tmp_path / "src")
    dest = tmp_path / "dest"
    buckets = tmp_path / "buckets"
    bindir = tmp_path / "bin"
    for d in (buckets, bindir):
        d.mkdir()
    runs, held, gate = tmp_path / "runs", tmp_path / "held", tmp_path / "gate"
    wrapper = bindir / "rsync"
    wrapper.write_text(GATED_RSYNC.format(runs=shlex.quote(str(runs)),
                                          held=shlex.quote(str(held)),
                                          gate=shlex.quote(str(gate)),
                                          rsync=shlex.quote(shutil.which("rsync"))))
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    errors = tmp_path / "stderr"
    with open(errors, "wb") as err:
        proc = start_msrsync("-p", "1", "-s", "64K", "-k", "-b", buckets, src + b"/", dest,
                             env=env, stderr=err)
    try:
        assert wait_for(held.exists, 30), "no bucket started"

        def scan_over():
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.1)
            found = re.findall(rb"\[\d+/\d+(\+?) entries\]", errors.read_bytes())
            return any(plus == b"" for plus in found)

        assert wait_for(scan_over, 30, interval=0.2), errors.read_bytes()
        gate.touch()
        proc.communicate(timeout=90)
        assert proc.returncode == 0, errors.read_bytes()
    finally:
        gate.touch()
        end(proc, tmp_path)
    assert_same_tree(src, dest)
    (run_dir,) = os.listdir(buckets)
    bucket_dir = os.path.join(os.fsencode(buckets), os.fsencode(run_dir))
    numbers = [int(os.path.basename(line)[:6]) for line in runs.read_bytes().split()]
    assert len(numbers) == len(set(numbers)) >= 15, numbers
    sizes = dict((n, _listed_size(src, bucket_dir, n)) for n in numbers)
    assert len([n for n in numbers if sizes[n] >= 100000]) == 3, sizes
    # the held first run is whichever bucket was largest when the worker got free: on a
    # loaded machine the scan may be over by then and it is a big one
    rest = numbers[1:]
    big = [n for n in rest if sizes[n] >= 100000]
    assert big, (numbers, sizes)
    # the big files were cut after small buckets: in cut order they would run later
    assert min(rest) < min(big), (numbers, sizes)
    assert rest == sorted(rest, key=lambda n: (-sizes[n], n)), (numbers, sizes)
    assert rest[:len(big)] == sorted(big, key=lambda n: -sizes[n]), (numbers, sizes)


# --------------------------------------------------------------------------- remove_debris

def _states(bucket_dir):
    """{bucket number: first word of its NNNNNN.state} ("running", "done", ...)."""
    found = {}
    for name in os.listdir(bucket_dir):
        match = re.match(rb"^([0-9]{6})\.state$", name)
        if match:
            with open(os.path.join(bucket_dir, name), "rb") as handle:
                words = handle.read().split()
            if words:
                found[int(match.group(1))] = words
    return found


def _listed(bucket_dir, number):
    with open(os.path.join(bucket_dir, b"%06d.list" % number), "rb") as handle:
        names = [n for n in handle.read().split(b"\0") if n]
    return [n[2:] if n.startswith(b"./") else n for n in names]


def _files_under(root, name):
    """(directory relative to root, file name) of the regular files a listed name stands
    for: itself, or those in its subtree."""
    path = os.path.join(root, name)
    if not os.path.isdir(path):
        return [(os.path.dirname(name), os.path.basename(name))]
    found = []
    for top, _, files in os.walk(path):
        rel = os.path.relpath(top, root)
        found += [(rel, f) for f in sorted(files)]
    return found


def _with_dest_dir(src, dest, bucket_dir, numbers):
    """(bucket, directory, file name) of the first file listed by one of the buckets
    (numbers) whose directory exists in DEST; None when there is none."""
    for n in sorted(numbers):
        for name in _listed(bucket_dir, n):
            for rel, f in _files_under(src, name):
                if os.path.isdir(os.path.join(dest, rel)):
                    return n, rel, f
    return None


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["flat", "trees"])
def test_resume_removes_temp_files_of_the_buckets_killed_running(tmp_path, shape):
    """msrsync SIGKILLed while buckets run: an rsync receiver killed with it may leave its
    empty temporary file ".NAME.XXXXXX" (0600) in DEST. --resume removes, in the part of
    DEST of the buckets the journal says were running, those beside a name SRC holds.
    It keeps: a file of that form SRC holds itself (SRC's own, copied, left as it was),
    one beside a name SRC lacks, one in a done bucket's part. Catches a --resume without
    remove_debris (the debris stays: rsync without --delete never removes it), and one
    that removes too much (a kept file missing, or SRC's own file copied again)."""
    src = tmp_path / "src"
    spec = {}
    if shape == "flat":
        for i in range(100):
            spec["f%03d" % i] = "%03d" % i * 2731
    else:
        for d in range(25):
            for f in range(4):
                spec["d%02d/f%d" % (d, f)] = "%02d%d" % (d, f) * 2731
    build(src, spec)
    age(src)
    src = os.fsencode(src)
    dest = os.fsencode(tmp_path / "dest")
    buckets = tmp_path / "buckets"
    buckets.mkdir()
    proc = start_msrsync("-p", "2", "-f", "10", "-b", buckets, "--rsync",
                         "-a --bwlimit=200", src + b"/", dest)
    try:
        def bucket_dir():
            found = os.listdir(buckets)
            return os.path.join(os.fsencode(buckets), os.fsencode(found[0])) if found else None

        def running_and_done():
            d = bucket_dir()
            states = _states(d) if d else {}
            return (_with_dest_dir(src, dest, d, [n for n, w in states.items()
                                                  if w[0] == b"running"]) and
                    any(w[0] == b"done" for w in states.values()))

        assert wait_for(running_and_done, 30), "no bucket done while another ran"
        proc.kill()
        proc.communicate(timeout=15)
        # msrsync's watchdog stops its rsyncs
        left = wait_for(lambda: not every_rsync(tmp_path), 15) or every_rsync(tmp_path)
        assert left is True, "rsync processes left running: %r" % (left,)
    finally:
        end(proc, tmp_path)
    run_dir = bucket_dir()
    states = _states(run_dir)
    running = sorted(n for n, w in states.items() if w[0] == b"running")
    done = sorted(n for n, w in states.items() if w[0] == b"done")
    assert running and done, states
    for n in running:
        fields = dict(w.split(b"=", 1) for w in states[n][1:] if b"=" in w)
        assert fields.get(b"kind") == (b"flat" if shape == "flat" else b"trees"), states[n]
        assert bytes.fromhex(fields[b"src"].decode()) == src + b"/", states[n]

    def first_with_dest_dir(numbers):
        found = _with_dest_dir(src, dest, run_dir, numbers)
        assert found, "no DEST directory of buckets %r exists" % (numbers,)
        return found

    # debris beside a name of a running bucket: removed by --resume
    n, rel, name = first_with_dest_dir(running)
    debris = os.path.join(dest, rel, b"." + name + b".Sr41Kk")
    with open(debris, "wb"):
        pass
    os.chmod(debris, 0o600)
    kept = []
    # the same form, but a file of SRC's own (SRC has it, at the same place): kept as is
    own = os.path.join(rel, b"." + name + b".Ab12Cd")
    with open(os.path.join(src, own), "wb") as handle:
        handle.write(b"SRC's own file that looks like rsync's temporary file\n")
    os.utime(os.path.join(src, own), (10 ** 9, 10 ** 9))
    # DEST's copy: same size and time (rsync's quick check skips it), other bytes, so
    # that a removal and a new copy would show
    with open(os.path.join(dest, own), "wb") as handle:
        handle.write(b"DEST's copy".ljust(os.path.getsize(os.path.join(src, own)), b"."))
    assert os.path.getsize(os.path.join(dest, own)) == os.path.getsize(os.path.join(src, own))
    os.utime(os.path.join(dest, own), (10 ** 9, 10 ** 9))
    if shape == "trees":
        # the same form beside a name SRC lacks, in a running bucket's subtree: kept
        ghost = os.path.join(dest, rel, b".ghost.Qq11Ww")
        with open(ghost, "wb"):
            pass
        os.chmod(ghost, 0o600)
        kept.append(os.path.relpath(ghost, dest))
    # the same form beside a name of a bucket that was done: kept
    n_done, rel_done, name_done = first_with_dest_dir(done)
    other = os.path.join(dest, rel_done, b"." + name_done + b".Zz99Yy")
    with open(other, "wb"):
        pass
    os.chmod(other, 0o600)
    kept.append(os.path.relpath(other, dest))

    cp = run_msrsync("--resume", run_dir, timeout=120)
    assert cp.returncode == 0, describe(cp)
    assert not os.path.lexists(debris), "the killed bucket's temporary file is still there"
    with open(os.path.join(dest, own), "rb") as handle:
        assert handle.read().startswith(b"DEST's copy"), \
            "SRC's own file was removed from DEST and copied again"
    # DEST is SRC plus exactly the kept files
    check = run_rsync(src + b"/", dest + b"/", opts=["-ani", "--delete"])
    assert check.returncode == 0, describe(check)
    lines = text(check.stdout).splitlines()
    assert sorted(lines) == sorted("*deleting   %s" % text(k) for k in kept), lines
