"""--bwlimit as a timetable in the rsync options ("08:00,10M 19:00,off", rclone's form):
each bucket's rsync gets its share of the rate in force when it starts.

The rsyncs are run through a wrapper on PATH that logs their arguments, so that what
each was given is read after the run, not raced for while it runs."""

import json
import os
import time

import pytest

from helpers import age, assert_same_tree, build, load_msrsync, run_msrsync, run_rsync, text

MSR = load_msrsync()


def _logged(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "rsync"
    script.write_text('#!/bin/sh\ncase "$*" in *--version*|*preflight-*) ;; *) echo "$*" >> %s;; esac\n'
                      'exec /usr/bin/rsync "$@"\n' % (tmp_path / "argv.log"))
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env["PATH"])
    return env


def _hhmm(offset_minutes):
    return time.strftime("%H:%M", time.localtime(time.time() + 60 * offset_minutes))


@pytest.mark.parametrize("rate, share", [("2M", b"--bwlimit=524288b"), ("off", None)])
def test_each_rsync_gets_its_share_of_the_rate_in_force_when_it_starts(tmp_path, rate, share):
    if time.localtime().tm_hour == 23 and time.localtime().tm_min >= 50 or \
            time.localtime().tm_hour == 0 and time.localtime().tm_min < 10:
        pytest.skip("the table's entries would straddle midnight")
    src = tmp_path / "src"
    build(src, dict(("d%d/f%d" % (n % 2, n), "x" * (1000 + n)) for n in range(16)))
    age(src, everything=True)     # (rsync leaves a directory whose time matches to the second)
    # in force now: `rate`; the other entries far from now
    table = "%s,1K %s,%s %s,1K" % (_hhmm(-8), _hhmm(-1), rate, _hhmm(8))
    cp = run_msrsync("-p", "4", "-f", "2", "--json", tmp_path / "run.json",
                     "--rsync", "-a --bwlimit=%s" % table.replace(" ", "\\ "),
                     str(src) + "/", tmp_path / "dest", env=_logged(tmp_path))
    assert cp.returncode == 0, text(cp.stderr)
    runs = (tmp_path / "argv.log").read_bytes().splitlines()
    assert len(runs) >= 8
    for argv in runs:
        # the rate in force (2M over 4 rsyncs), never the timetable itself
        limits = [word for word in argv.split() if word.startswith(b"--bwlimit")]
        assert limits == ([share] if share else []), argv
    assert json.loads((tmp_path / "run.json").read_text())["bwlimit_in_force"] == rate
    oracle = tmp_path / "oracle"
    assert run_rsync(str(src) + "/", oracle, opts=["-a"]).returncode == 0
    assert_same_tree(os.fsencode(str(oracle)), os.fsencode(str(tmp_path / "dest")))


def test_the_rate_in_force_is_the_last_entry_at_or_before_the_time():
    table = MSR.BwTimetable("08:00,10M 19:00,off Sat-00:00,1M Sat-12:00,off")

    def at(day, hour, minute):
        # 2026-11-23 is a Monday
        return table.rate_at(time.mktime((2026, 11, 23 + day, hour, minute, 0, 0, 0, -1)))
    assert at(0, 7, 59) == None       # Monday before 08:00: Sunday's 19:00 entry (off)
    assert at(0, 8, 0) == "10M"
    assert at(2, 18, 59) == "10M"
    assert at(2, 19, 0) is None
    assert at(5, 0, 0) == "1M"        # Saturday's own entry, from Saturday 00:00...
    assert at(5, 8, 30) == "10M"      # ...to the daily 08:00 one
    assert at(5, 12, 0) is None
    assert MSR.BwTimetable("00:00,0").rate_at() is None
    assert MSR.BwTimetable("Mon-09:00,5M").rate_at(
        time.mktime((2026, 11, 22, 10, 0, 0, 0, 0, -1))) == "5M"   # a Sunday: the week's last


@pytest.mark.parametrize("table, needle", [
    ("8:00,10M 25:00,1M", "bad timetable entry '25:00,1M'"),
    ("08:00,10M 19:00", "bad timetable entry '19:00'"),
    ("08:00,fast", "bad rate 'fast'"),
    ("Xyz-08:00,1M", "bad timetable entry"),
    ("08:00,1M 08:00,2M", "each at a time of its own"),
])
def test_a_bad_timetable_is_one_line_and_nothing_is_made(tmp_path, table, needle):
    src = tmp_path / "src"
    build(src, {"a": "x"})
    cp = run_msrsync("--rsync", "-a --bwlimit=%s" % table.replace(" ", "\\ "),
                     str(src) + "/", tmp_path / "dest")
    err = text(cp.stderr)
    assert cp.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "dest").exists()
