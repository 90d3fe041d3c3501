"""The run's time window: --stop-at, --max-duration, --window-grace, and rsync's own
--stop-at and --time-limit read as the run's.

Once the window ends no bucket starts; the running ones finish, or are stopped after
the grace; the exit is 46 and --resume goes on, to a DEST the same as one plain
rsync's.  The rsyncs here are slowed by a wrapper on PATH (each transfer waits before
it execs rsync; rsync's own --version probe does not), so that the window ends with
buckets still to run whatever the machine's speed."""

import json
import os
import re
import time

import pytest

from helpers import (age, assert_reports_agree, assert_same_tree, build, load_msrsync,
                     report_args, run_msrsync, run_rsync, every_rsync, text)

MSR = load_msrsync()


def _wrapper(tmp_path, wait):
    """An environment whose rsync waits `wait` seconds before each transfer and logs
    its arguments (one line a run) to tmp_path/argv.log."""
    bindir = tmp_path / "slow-bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "argv.log"
    script = bindir / "rsync"
    script.write_text('#!/bin/sh\ncase "$*" in *--version*|*preflight-*) ;; *) echo "$*" >> %s; sleep %s;; '
                      'esac\nexec %s "$@"\n' % (log, wait, "/usr/bin/rsync"))
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", ""))
    return env


def _tree(root, files=24):
    build(root, dict(("d%d/f%02d" % (n % 3, n), "x" * (100 + n)) for n in range(files)))
    age(root, everything=True)    # (rsync leaves a directory whose time matches to the second)


def _summary(path):
    with open(path) as handle:
        return json.load(handle)


def _kept_dir(buckets):
    runs = os.listdir(buckets)
    assert len(runs) == 1, runs
    return os.path.join(buckets, runs[0])


def test_the_window_ends_the_run_and_resume_finishes_it_as_rsync_would(tmp_path):
    src, dest, buckets = tmp_path / "src", tmp_path / "dest", tmp_path / "buckets"
    _tree(src)
    buckets.mkdir()
    slow = _wrapper(tmp_path, 0.5)
    started = time.monotonic()
    cp = run_msrsync("-p", "2", "-f", "2", "-b", buckets, "--max-duration", "1s",
                     "--json", tmp_path / "run.json", str(src) + "/", dest, env=slow)
    took = time.monotonic() - started
    assert cp.returncode == 46, text(cp.stderr)
    err = text(cp.stderr)
    assert b"Traceback" not in cp.stderr
    assert "the time window ended at" in err and "msrsync --resume" in err, err
    summary = _summary(tmp_path / "run.json")
    assert summary["status"] == "WINDOW ENDED" and summary["window_ended"] is True
    assert summary["exit_meaning"].startswith("the time window ended")
    assert 0 < summary["buckets_done"] < summary["buckets_total"], summary
    # no bucket started after the end: what ran is what had started by then
    assert took < 1 + 2 * 0.5 + 5, took
    assert not every_rsync(tmp_path)
    # the next window: --resume goes on, DEST ends as one rsync's
    cp = run_msrsync("--resume", _kept_dir(buckets), "--max-duration", "1h", env=slow)
    assert cp.returncode == 0, text(cp.stderr)
    oracle = tmp_path / "oracle"
    assert run_rsync(str(src) + "/", oracle).returncode == 0
    assert_same_tree(os.fsencode(str(oracle)), os.fsencode(str(dest)))


def test_past_the_grace_the_running_rsyncs_are_stopped_and_their_buckets_stay_to_do(
        tmp_path):
    src, dest, buckets = tmp_path / "src", tmp_path / "dest", tmp_path / "buckets"
    _tree(src, files=8)
    buckets.mkdir()
    started = time.monotonic()
    cp = run_msrsync("-p", "2", "-f", "2", "-b", buckets, "--max-duration", "1s",
                     "--window-grace", "1s", "--json", tmp_path / "run.json",
                     str(src) + "/", dest, env=_wrapper(tmp_path, 60))
    took = time.monotonic() - started
    assert cp.returncode == 46, text(cp.stderr)
    assert took < 20, took          # not the wrapper's 60 s
    summary = _summary(tmp_path / "run.json")
    # the two it stopped ended without completing (nor are they failures to report)
    assert summary["buckets_done"] - summary["buckets_failed"] == 0, summary
    assert summary["failures"] == [] and summary["window_ended"] is True
    assert not every_rsync(tmp_path)
    cp = run_msrsync("--resume", _kept_dir(buckets))
    assert cp.returncode == 0, text(cp.stderr)
    oracle = tmp_path / "oracle"
    assert run_rsync(str(src) + "/", oracle).returncode == 0
    assert_same_tree(os.fsencode(str(oracle)), os.fsencode(str(dest)))


def test_a_window_given_again_with_resume_replaces_the_recorded_one(tmp_path):
    src, dest, buckets = tmp_path / "src", tmp_path / "dest", tmp_path / "buckets"
    _tree(src)
    buckets.mkdir()
    slow = _wrapper(tmp_path, 0.5)
    cp = run_msrsync("-p", "2", "-f", "2", "-b", buckets, "--max-duration", "1s",
                     str(src) + "/", dest, env=slow)
    assert cp.returncode == 46, text(cp.stderr)
    # the recorded 1s would end this one too: tonight's window is an hour
    cp = run_msrsync("--resume", _kept_dir(buckets), "--max-duration", "1h",
                     "--json", tmp_path / "again.json", env=slow)
    assert cp.returncode == 0, text(cp.stderr)
    assert _summary(tmp_path / "again.json")["window_ended"] is False


def test_a_run_within_its_window_ends_as_usual_and_says_when_the_window_ends(tmp_path):
    src = tmp_path / "src"
    _tree(src, files=6)
    cp = run_msrsync("-p", "2", "-f", "2", "--stop-at", "2099-01-01T00:00",
                     "--json", tmp_path / "run.json", str(src) + "/", tmp_path / "dest")
    assert cp.returncode == 0, text(cp.stderr)
    summary = _summary(tmp_path / "run.json")
    assert summary["window_end"] == "2099-01-01 00:00:00"
    assert summary["window_ended"] is False and summary["status"] == "SUCCESS"


@pytest.mark.parametrize("option", ["--time-limit=7", "--stop-after=7", "--stop-at=%s"])
def test_rsyncs_own_stop_at_and_time_limit_are_the_runs_window_not_each_rsyncs(
        tmp_path, option):
    src = tmp_path / "src"
    _tree(src, files=6)
    if "%s" in option:
        ahead = time.localtime(time.time() + 3 * 3600)
        option = option % time.strftime("%Y-%m-%dT%H:%M", ahead)
        expected = time.strftime("%Y-%m-%d %H:%M:00", ahead)
    started = time.time()
    cp = run_msrsync("-p", "2", "-f", "2", "--json", tmp_path / "run.json",
                     "--rsync", "-a " + option, str(src) + "/", tmp_path / "dest",
                     env=_wrapper(tmp_path, 0))
    assert cp.returncode == 0, text(cp.stderr)
    end = _summary(tmp_path / "run.json")["window_end"]
    if "stop-at" in option:
        assert end == expected
    else:
        when = time.mktime(time.strptime(end, "%Y-%m-%d %H:%M:%S"))
        assert abs(when - (started + 7 * 60)) < 60, (end, started)
    # no rsync got it: each would stop itself (exit 30) at the time
    runs = (tmp_path / "argv.log").read_text()
    assert runs.count("\n") >= 3
    assert not re.search(r"--(time-limit|stop-after|stop-at)", runs), runs


@pytest.mark.parametrize("args, needle", [
    (["--stop-at", "25:00"], "invalid time '25:00'"),
    (["--stop-at", "2001-01-01T00:00"], "is past"),
    (["--max-duration", "10"], "invalid duration '10'"),
    (["--window-grace", "1s"], "--window-grace needs a time window"),
    (["--rsync", "-a --time-limit=soon"], "--time-limit in --rsync"),
    (["--rsync", "-a --stop-at=tomorrow"], "--stop-at in --rsync"),
    (["--check", "--max-duration", "1h"], "a check is not resumed"),
])
def test_bad_window_input_is_one_line_and_nothing_is_made(tmp_path, args, needle):
    src = tmp_path / "src"
    _tree(src, files=2)
    dest = tmp_path / "dest"
    cp = run_msrsync(*(args + [str(src) + "/", dest]))
    err = text(cp.stderr)
    assert cp.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not dest.exists()


def test_stop_at_takes_the_next_occurrence_of_what_is_left_out():
    now = time.mktime((2026, 11, 28, 8, 0, 0, 0, 0, -1))

    def at(textual):
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(MSR.parse_stop_at(textual, now)))
    assert at("09:30") == "2026-11-28 09:30"
    assert at("06:00") == "2026-11-29 06:00"
    assert at("T23:59") == "2026-11-28 23:59"
    assert at("31T01:00") == "2026-12-31 01:00"
    assert at("2-29T10:00") == "2028-02-29 10:00"
    assert at("12-31 23:59") == "2026-12-31 23:59"
    assert at("2027-01-02T03:04") == "2027-01-02 03:04"
    assert MSR.parse_duration("1h30m") == 5400
    assert MSR.parse_duration("45s") == 45
    assert MSR.parse_duration("2d") == 2 * 86400


# ---------------------------------------------------------------- one set of bucket states

def _gated_wrapper(tmp_path, fast):
    """rsync that runs its first `fast` transfers at once and waits 60 s before each
    later one (a bucket msrsync stops copies nothing)."""
    bindir = tmp_path / "gated-bin"
    bindir.mkdir()
    count = tmp_path / "runs"
    script = bindir / "rsync"
    script.write_text('#!/bin/sh\ncase "$*" in *--version*|*preflight-*) ;; *) echo x >> %s\n'
                      '  [ "$(wc -l < %s)" -gt %d ] && sleep 60;; esac\nexec %s "$@"\n'
                      % (count, count, fast, "/usr/bin/rsync"))
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", ""))
    return env


def test_buckets_the_windows_grace_stopped_are_to_do_in_every_report(tmp_path):
    """--window-grace 1s stops the two rsyncs running when it is over: stderr, --json,
    the status file and --metrics all say the buckets done before (2) are done, none
    failed, the rest (the stopped two too) to do, and count no byte of the stopped ones
    (stderr said "0 of N completed" where --json said buckets_done 2, buckets_failed 2
    and --metrics bucket_failures_total 2)."""
    src, dest, buckets = tmp_path / "src", tmp_path / "dest", tmp_path / "buckets"
    _tree(src, files=12)
    buckets.mkdir()
    cp = run_msrsync(*(["-p", "2", "-f", "2", "-b", buckets, "--max-duration", "3s",
                        "--window-grace", "1s"] + report_args(tmp_path) +
                       [str(src) + "/", dest]), env=_gated_wrapper(tmp_path, 2))
    assert cp.returncode == 46, text(cp.stderr)
    summary = _summary(tmp_path / "run.json")
    assert summary["buckets_done"] == 2 and summary["buckets_total"] > 4, summary
    assert_reports_agree(tmp_path, text(cp.stdout), text(cp.stderr), 2,
                          summary["buckets_total"], dest)


def test_buckets_a_sigint_stopped_are_to_do_in_every_report(tmp_path):
    """SIGINT with two buckets done and two running: the SIGUSR1 line before it, and
    then stderr, --json, the status file and --metrics say 2 done, 0 failed, the rest
    to do."""
    import signal
    from helpers import OutputLines, end, start_msrsync, wait_for
    src, dest = tmp_path / "src", tmp_path / "dest"
    _tree(src, files=12)
    proc = start_msrsync(*(["-p", "2", "-f", "2"] + report_args(tmp_path) +
                           [str(src) + "/", dest]), env=dict(
                               _gated_wrapper(tmp_path, 2), MSRSYNC_STATUS_INTERVAL="0.2"))
    try:
        def two_done_two_running():
            try:
                s = _summary(tmp_path / "status.json")
            except (OSError, ValueError):
                return False
            return s["buckets_done"] == 2 and s["buckets_running"] == 2 and s["scan_done"]
        assert wait_for(two_done_two_running, 30), "never 2 done and 2 running"
        total = _summary(tmp_path / "status.json")["buckets_total"]
        lines = OutputLines(proc)
        proc.send_signal(signal.SIGUSR1)
        assert lines.wait_line(b"msrsync: status: "), lines.err_lines
        proc.send_signal(signal.SIGINT)
        out, err = lines.finish(timeout=30)
    finally:
        end(proc, tmp_path)
    assert proc.returncode == 20, text(err)
    status_line = [l for l in text(err).splitlines() if l.startswith("msrsync: status: ")]
    assert status_line and "[failed 0] [buckets left %d]" % (total - 2) in status_line[0], err
    assert_reports_agree(tmp_path, text(out), text(err), 2, total, dest)
