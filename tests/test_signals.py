"""SIGINT, SIGTERM and SIGHUP stop msrsync with exit 20 and leave no rsync behind."""

import json
import os
import signal
import time

import pytest

from helpers import (transferring, assert_no_rsync_left, assert_same_tree, describe, end, make_tree,
                     run_msrsync, run_rsync, running_rsyncs, every_rsync, start_msrsync, stderr_lines, text,
                     wait_for)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_stops_run_with_exit_20_and_no_rsync_left(tmp_path, signum):
    # four 1 MiB files at 100 KiB/s each: about ten seconds of work per worker
    src = make_tree(tmp_path / "src", "big", count=4, size=1 << 20)
    proc = start_msrsync("-p", "2", "-s", "1M", "--rsync", "-a --bwlimit=100",
                         src + b"/", tmp_path / "dest")
    try:
        assert wait_for(lambda: len(running_rsyncs(tmp_path)) >= 2, 10), \
            "rsync workers never started"
        assert transferring(tmp_path / "dest"), "nothing copied"
        sent = time.monotonic()
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=15)
        took = time.monotonic() - sent
        assert proc.returncode == 20, (proc.returncode, text(err))
        assert took < 10, "msrsync took %.1f s to stop" % took
        assert b"Traceback" not in err
        assert_no_rsync_left(tmp_path)
    finally:
        end(proc, tmp_path)


@pytest.mark.slow
def test_interrupted_run_reports_interrupted_status(tmp_path):
    src = make_tree(tmp_path / "src", "big", count=4, size=1 << 20)
    json_path = tmp_path / "int.json"
    proc = start_msrsync("-p", "2", "-s", "1M", "--stats", "--json", json_path,
                         "--rsync", "-a --bwlimit=100", src + b"/", tmp_path / "dest")
    try:
        assert wait_for(lambda: len(running_rsyncs(tmp_path)) >= 2, 10)
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        end(proc, tmp_path)
    assert proc.returncode == 20
    assert "Status: INTERRUPTED" in text(out).splitlines()
    summary = json.loads(json_path.read_text())
    assert summary["status"] == "INTERRUPTED"
    assert summary["exit_code"] == 20
    assert summary["buckets_done"] < summary["buckets_total"]


@pytest.mark.slow
def test_second_sigint_kills_at_once(tmp_path):
    src = make_tree(tmp_path / "src", "big", count=2, size=1 << 20)
    proc = start_msrsync("-p", "2", "-s", "1M", "--rsync", "-a --bwlimit=100",
                         src + b"/", tmp_path / "dest")
    try:
        assert wait_for(lambda: len(running_rsyncs(tmp_path)) >= 2, 10)
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=15)
        assert proc.returncode == 20
        assert time.monotonic() - sent < 5
        assert_no_rsync_left(tmp_path)
    finally:
        end(proc, tmp_path)


@pytest.mark.slow
def test_sigkilled_msrsync_leaves_no_rsync_running(tmp_path):
    """SIGKILL cannot be caught: msrsync's watchdog process sees its pipe close and
    stops every rsync process group msrsync started, within seconds."""
    src = make_tree(tmp_path / "src", "big", count=4, size=1 << 20)
    proc = start_msrsync("-p", "2", "-s", "1M", "--rsync", "-a --bwlimit=100",
                         src + b"/", tmp_path / "dest")
    try:
        assert wait_for(lambda: len(running_rsyncs(tmp_path)) >= 2, 10), \
            "rsync workers never started"
        assert transferring(tmp_path / "dest"), "nothing copied"
        proc.kill()
        proc.communicate(timeout=15)
        left = wait_for(lambda: not every_rsync(tmp_path), 10) or \
            every_rsync(tmp_path)
        assert left is True, "rsync processes left running: %r" % (left,)
    finally:
        end(proc, tmp_path)


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


@pytest.mark.slow
@pytest.mark.parametrize("retries,expect", [(None, 0), ("0", 41)])
def test_a_worker_rsync_killed_by_someone_else_is_retried(tmp_path, retries, expect):
    """A worker rsync killed by a signal msrsync did not send (exit 41) may well work
    the second time: with the default --retries its bucket runs again and the run
    ends complete with 0; --retries 0 reports 41."""
    src = make_tree(tmp_path / "src", "big", count=4, size=1 << 20)
    opts = ["--retries", retries] if retries is not None else []
    proc = start_msrsync(*(opts + ["-p", "2", "-s", "1M", "--rsync", "-a --bwlimit=1000",
                                   src + b"/", tmp_path / "dest"]))
    try:
        def workers():
            return [pid for pid, _ in running_rsyncs(tmp_path) if _ppid(pid) == proc.pid]
        assert wait_for(lambda: len(workers()) >= 1, 10), "rsync workers never started"
        assert transferring(tmp_path / "dest"), "nothing copied"
        os.kill(workers()[0], signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == expect, (proc.returncode, text(err))
        assert b"Traceback" not in err
        if expect == 0:
            assert b"will run again" in err, text(err)
            for name in os.listdir(src):
                with open(os.path.join(src, name), "rb") as a, \
                        open(os.path.join(tmp_path / "dest", os.fsdecode(name)), "rb") as b:
                    assert a.read() == b.read()
    finally:
        end(proc, tmp_path)


@pytest.mark.slow
def test_resume_after_sigkill_skips_finished_buckets_and_ends_like_rsync(tmp_path):
    """msrsync SIGKILLed mid-run keeps its bucket directory and journal; --resume DIR
    runs the recorded command again, skips the buckets the journal says are done
    (their names and rules unchanged) and leaves DEST as plain rsync does."""
    src = make_tree(tmp_path / "src", "big", count=12, size=1 << 20)
    s, journal = _kill_then_resume(tmp_path, src, "-f", "1", "-s", "1M")
    done_before = _journal_keys(journal)
    assert s["buckets_skipped"] >= done_before >= 3
    assert s["rsync_processes"] <= s["buckets_total"] - s["buckets_skipped"] + 2


def _kill_then_resume(tmp_path, src, *caps):
    """Run msrsync -p 2 CAPS (slowed down) from SRC/ into tmp_path/dest, SIGKILL it
    once three buckets are in its journal, wait for its rsyncs to be gone, then
    --resume it (exit 0) and check DEST equals plain rsync's.  Returns the resumed
    run's --json summary and done.journal as the killed run left it."""
    buckets = tmp_path / "buckets"
    os.mkdir(buckets)
    proc = start_msrsync(*(("-p", "2") + caps + ("-b", buckets, "--rsync",
                                                 "-a --bwlimit=2000", src + b"/",
                                                 tmp_path / "dest")))
    try:
        assert wait_for(lambda: _journal_keys(_done_journal(buckets)) >= 3, 30), \
            "no bucket finished"
        proc.kill()
        proc.communicate(timeout=15)
        journal = _done_journal(buckets)
        assert wait_for(lambda: not every_rsync(tmp_path), 10)
        (run_dir,) = os.listdir(buckets)
        summary = tmp_path / "summary.json"
        cp = run_msrsync("--resume", os.path.join(buckets, run_dir), "--json", summary)
        assert cp.returncode == 0, text(cp.stderr)
        oracle = tmp_path / "oracle"
        assert run_rsync(src + b"/", os.fsencode(oracle), opts=["-a"]).returncode == 0
        assert_same_tree(os.fsencode(oracle), os.fsencode(tmp_path / "dest"))
        return json.loads(summary.read_text()), journal
    finally:
        end(proc, tmp_path)


def _done_journal(buckets):
    """The done.journal of the one run under the -b directory (b"" before it exists)."""
    found = [os.path.join(buckets, d) for d in os.listdir(buckets)]
    path = os.path.join(found[0], "done.journal") if found else None
    if path is None or not os.path.exists(path):
        return b""
    with open(path, "rb") as handle:
        return handle.read()


def _journal_keys(data):
    """Finished buckets in a done.journal: its sha256 lines (the "U" lines
    before each are the subtrees it copied whole)."""
    return sum(1 for line in data.split(b"\n") if len(line) == 64)


def test_resume_does_not_walk_the_subtrees_of_finished_buckets(tmp_path):
    """The scan resumes too: subtrees copied whole by buckets the journal says are
    done are not walked again (their journaled counts stand in, so the same buckets
    come out and are skipped); DEST ends as plain rsync leaves it."""
    src = tmp_path / "src"
    for i in range(10):
        make_tree(src / ("d%02d" % i), "big", count=1, size=1 << 20, seed=i)
    # one subtree (a directory of one 1 MiB file) per bucket
    s, journal = _kill_then_resume(tmp_path, os.fsencode(src), "-s", "1M")
    done_before = _journal_keys(journal)
    assert journal.count(b"\nU ") + journal.startswith(b"U ") >= done_before
    assert s["buckets_skipped"] >= done_before >= 3, s
    assert s["scan_skipped_subtrees"] >= done_before, s
    assert s["buckets_total"] >= 10, s


def test_resume_needs_a_run_directory(tmp_path):
    cp = run_msrsync("--resume", tmp_path)
    assert cp.returncode == 1
    assert len(stderr_lines(cp)) == 1 and b"run.json" in cp.stderr


def test_a_report_option_given_with_resume_replaces_the_recorded_one(tmp_path):
    """--resume DIR --json B: B is written, and the recorded --json A is not (the
    resumed command line put the new options first, and the recorded A won); an option
    that decides the buckets (-f) is refused, in one line, before anything runs."""
    src = make_tree(tmp_path / "src", "small", seed=3)
    buckets = tmp_path / "buckets"
    buckets.mkdir()
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    cp = run_msrsync("-k", "-b", buckets, "-p", "2", "--json", first, src + b"/",
                     tmp_path / "dest")
    assert cp.returncode == 0, describe(cp)
    (run_dir,) = [os.path.join(str(buckets), n) for n in os.listdir(str(buckets))]
    os.unlink(str(first))
    again = run_msrsync("--resume", run_dir, "--json", second, "-p", "3")
    assert again.returncode == 0, describe(again)
    assert json.loads(second.read_text())["workers"] == 3
    assert not first.exists(), "the recorded --json was written, not the one given"
    refused = run_msrsync("--resume", run_dir, "-f", "5")
    assert refused.returncode == 1, describe(refused)
    lines = stderr_lines(refused)
    assert len(lines) == 1 and "-f cannot be given again" in lines[0], describe(refused)
