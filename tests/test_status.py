"""Watching a run from outside: kill -USR1 prints one status line on stderr, and
--status-file is rewritten whole while the run goes on, its last write the final
summary. The run itself is not disturbed: DEST ends as plain rsync's."""

import contextlib
import json
import os
import shutil
import signal
import time

from helpers import (OutputLines, age, assert_same_tree, build, rsync_processes_mentioning, run_rsync,
                     start_msrsync, text, wait_for)

# a run of several seconds: 6 files of 1 MiB, one a bucket, 1 MB/s a worker
SLOW = "-a --bwlimit=1000"


def _slow_src(root):
    """Files old enough that no mtime falls in the second of the run (rsync compares
    a directory's mtime to the second)."""
    build(root, {"f%d" % i: os.urandom(1 << 20) for i in range(6)})
    return age(root, everything=True)


@contextlib.contextmanager
def ended(proc):
    """msrsync started in the background is not left running, whatever happens."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def assert_like_rsync(tmp_path, src, dest, opts):
    """DEST is what plain rsync OPTS SRC/ makes."""
    oracle = tmp_path / "oracle"
    assert run_rsync(src + b"/", oracle, opts=opts).returncode == 0
    assert_same_tree(str(oracle), str(dest))


def _env(**extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def test_sigusr1_prints_a_status_line_and_the_run_goes_on(tmp_path):
    src = _slow_src(str(tmp_path / "src"))
    dest = tmp_path / "dest"
    proc = start_msrsync("-p", "2", "-f", "1", "--rsync", SLOW, src + b"/", dest)
    with ended(proc):
        assert wait_for(lambda: rsync_processes_mentioning(os.fsencode(dest)), 30), \
            "no rsync started"
        lines = OutputLines(proc)
        proc.send_signal(signal.SIGUSR1)
        assert lines.wait_line(b"msrsync: status: "), lines.err_lines
        proc.send_signal(signal.SIGUSR1)
        out, err = lines.finish(timeout=120)
    assert proc.returncode == 0, text(err)
    status = [l for l in text(err).splitlines() if l.startswith("msrsync: status: ")]
    assert len(status) == 2, text(err)
    for line in status:
        assert "entries]" in line and "[workers " in line and "[failed 0]" in line, line
        assert "[buckets left " in line, line
    assert_like_rsync(tmp_path, src, dest, ["-a"])


def test_status_file_is_rewritten_whole_while_running_and_ends_with_the_summary(tmp_path):
    src = _slow_src(str(tmp_path / "src"))
    dest = tmp_path / "dest"
    status = tmp_path / "status.json"
    summary = tmp_path / "summary.json"
    proc = start_msrsync("-p", "2", "-f", "1", "--status-file", status, "--json", summary,
                         "--rsync", SLOW, src + b"/", dest,
                         env=_env(MSRSYNC_STATUS_INTERVAL="0.2"))
    seen = []
    with ended(proc):
        while proc.poll() is None:
            if os.path.exists(str(status)):
                with open(str(status)) as handle:
                    seen.append(json.load(handle))   # always whole: written, then renamed
            time.sleep(0.1)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, text(err)
    running = [s for s in seen if s["status"] == "RUNNING"]
    assert len(running) >= 3, [s["status"] for s in seen]
    stamps = [s["updated_unix"] for s in running]
    assert stamps == sorted(stamps) and stamps[0] < stamps[-1], stamps
    # counts grow as the buckets go
    assert running[-1]["entries_done"] >= running[0]["entries_done"]
    with open(str(status)) as handle:
        final = json.load(handle)
    with open(str(summary)) as handle:
        summarized = json.load(handle)
    assert final["status"] == "SUCCESS" and final["exit_code"] == 0, final
    for key in ("entries_total", "entries_done", "buckets_total", "buckets_done",
                "rsync_stats", "total_seconds"):
        assert final[key] == summarized[key], key
    assert "updated" in final and final["updated_unix"] >= stamps[-1]
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith("status.json.")] == []
    assert_like_rsync(tmp_path, src, dest, ["-a"])


def test_a_status_file_that_becomes_unwritable_is_one_warning_and_the_copy_goes_on(tmp_path):
    """Its directory removed once the run has written it: one warning, the copy goes on
    to rsync's end.  (One that cannot be written when the run starts is status 11, before
    anything is copied: test_errors.)"""
    src = _slow_src(str(tmp_path / "src"))
    dest = tmp_path / "dest"
    where = tmp_path / "status"
    where.mkdir()
    proc = start_msrsync("-p", "2", "-f", "3", "--status-file", where / "such.json",
                         "--rsync", SLOW, src + b"/", dest,
                         env=_env(MSRSYNC_STATUS_INTERVAL="0.1"))

    def running():
        try:
            with open(str(where / "such.json")) as handle:
                return json.load(handle)["status"] == "RUNNING"
        except (OSError, ValueError):
            return False
    with ended(proc):
        # removed while the rsyncs still run (at --bwlimit, seconds), so a write is left
        assert wait_for(running, 60), "no status file written while running"
        shutil.rmtree(str(where))
        assert proc.poll() is None, "the run ended before its status file was removed"
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, text(err)
    lines = [l for l in text(err).splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("msrsync: warning: cannot write the "
                                                   "status file"), lines
    assert_like_rsync(tmp_path, src, dest, ["-a"])


def test_bwlimit_is_one_limit_for_the_run_shared_by_the_rsyncs(tmp_path):
    """--bwlimit=RATE in the rsync options: each of the -p rsyncs gets RATE/p (here
    512 KiB/s over 4: 131072 bytes a second each), so the run's total stays within RATE:
    2 MiB take 4 s or more, where 4 rsyncs at the full rate each would take 1 s."""
    src = tmp_path / "src"
    build(str(src), {"f%d" % i: os.urandom(256 << 10) for i in range(8)})
    src = age(str(src), everything=True)
    dest = tmp_path / "dest"
    started = time.monotonic()
    proc = start_msrsync("-p", "4", "-f", "1", "--rsync", "-a --bwlimit=512", src + b"/", dest)
    with ended(proc):
        running = wait_for(lambda: rsync_processes_mentioning(os.fsencode(dest)), 30)
        assert running, "no rsync started"
        assert all(b"--bwlimit=131072b" in argv for _, argv in running), running
        out, err = proc.communicate(timeout=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, text(err)
    assert seconds >= 3.5, seconds
    assert_like_rsync(tmp_path, src, dest, ["-a"])
