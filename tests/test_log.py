"""--log FILE: one JSON line per entry the rsyncs transferred, changed, deleted or
verified, one per failed bucket, and the run's totals last; checked, file by file, against
what one plain ``rsync -i --out-format`` reports for the same transfer, for a first copy, a
mirror with deletions, a failed bucket and a resumed run.  The file itself is made as
every output file is: new, never through another user's symlink."""

import base64
import json
import os
import subprocess

import pytest

from helpers import (IS_ROOT, describe, end, make_tree, run_msrsync, run_rsync, start_msrsync,
                     wait_for)

OPTS = ["-aH", "--numeric-ids"]
MS = ["-p", "3", "-f", "4"]


def _records(path):
    with open(path, "rb") as handle:
        return [json.loads(line) for line in handle]


def _name(record):
    if "path_b64" in record:
        return base64.b64decode(record["path_b64"])
    return record["path"].encode("utf-8")


def _unescape(name):
    import re
    return re.sub(rb"\\#([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), name)


def _rsync_items(stdout):
    """rsync's --out-format=%i|%n lines as the log records them: (kind, name, itemize)
    (a directory's mtime alone left out: see RunLog; a deletion by its name)."""
    items = []
    for line in stdout.splitlines():
        itemize, sep, name = line.partition(b"|")
        if not sep:
            continue
        name = _unescape(name)
        if itemize.startswith(b"*"):
            items.append(("deleted", name, None))
            continue
        if itemize[1:2] == b"d" and itemize[:1] != b"c" and \
                not itemize[2:].replace(b"t", b".").replace(b" ", b".").strip(b"."):
            continue
        kind = "transferred" if itemize[:1] in (b"<", b">") else "changed"
        items.append((kind, name, itemize.decode()))
    return sorted(items)


def _log_items(records):
    items = []
    for r in records:
        if r["kind"] in ("transferred", "changed"):
            items.append((r["kind"], _name(r), r["itemize"]))
        elif r["kind"] == "deleted":
            items.append(("deleted", _name(r), None))
    return sorted(items)


def _both(tmp_path, src, extra_rsync=(), extra_ms=(), expect=0, log=None):
    """One rsync -i and one msrsync --log of the same transfer into their own DESTs."""
    oracle = run_rsync(src + b"/", os.fsencode(tmp_path / "oracle"),
                       opts=OPTS + list(extra_rsync) + ["--out-format=%i|%n"])
    log = log or str(tmp_path / "run.log")
    cp = run_msrsync(*(MS + list(extra_ms) + ["--log", log, "--rsync",
                                              " ".join(OPTS + list(extra_rsync)),
                                              src + b"/", os.fsencode(tmp_path / "ms")]))
    assert oracle.returncode == expect, describe(oracle)
    assert cp.returncode == expect, describe(cp)
    return oracle, cp, _records(log)


def test_the_log_is_rsyncs_itemized_list_file_by_file(tmp_path):
    """A first copy, then a mirror of a changed tree (files changed, added, deleted, a
    directory gone): the log's entries are rsync's, each once, the totals theirs."""
    src = os.fsencode(tmp_path / "src")
    make_tree(src, kind="weird", seed=5)
    oracle, cp, records = _both(tmp_path, src)
    assert _log_items(records) == _rsync_items(oracle.stdout)
    totals = records[-1]
    assert totals["kind"] == "totals" and totals["exit_code"] == 0, totals
    assert totals["transferred"] == sum(1 for r in records if r["kind"] == "transferred")
    assert totals["bytes_transferred"] == sum(r["size"] for r in records
                                              if r["kind"] == "transferred")
    assert all(r["rsync_exit"] == 0 and r["host"] for r in records[:-1])
    assert any("path_b64" in r for r in records), "the tree has names that are not UTF-8"
    # the same tree changed, mirrored: deletions come from the deletion pass
    with open(os.path.join(src, b"top.txt"), "ab") as handle:
        handle.write(b"more\n")
    with open(os.path.join(src, b"new file"), "wb") as handle:
        handle.write(b"new\n")
    victims = sorted(n for n in os.listdir(src) if os.path.isfile(os.path.join(src, n)) and
                     not os.path.islink(os.path.join(src, n)) and n != b"top.txt")[:2]
    for name in victims:
        os.unlink(os.path.join(src, name))
    oracle, cp, records = _both(tmp_path, src, ["--delete"])
    got, want = _log_items(records), _rsync_items(oracle.stdout)
    assert got == want
    assert [n for k, n, _ in got if k == "deleted"] == sorted(victims)
    assert records[-1]["deleted"] == len(victims)


@pytest.mark.skipif(not IS_ROOT, reason="chattr +i needs root")
def test_a_failed_bucket_and_its_resumed_run_append_to_the_log(tmp_path):
    """A DEST directory that refuses new files (immutable) fails its bucket (23): its
    entries carry the exit code, a "failed" record says rsync's words; --resume, once it
    is writable, appends the rest, after the first run's totals."""
    src = os.fsencode(tmp_path / "src")
    for d in (b"a", b"b", b"c"):
        os.makedirs(os.path.join(src, d))
        for i in range(6):
            with open(os.path.join(src, d, b"f%d" % i), "wb") as handle:
                handle.write(b"%s %d\n" % (d, i))
    stuck = []
    for side in ("oracle", "ms"):
        path = tmp_path / side / "b"
        path.mkdir(parents=True)
        subprocess.run(["chattr", "+i", str(path)], check=True)
        stuck.append(str(path))
    log = str(tmp_path / "run.log")
    try:
        oracle, cp, records = _both(tmp_path, src, expect=23, log=log)
        assert _log_items(records) == _rsync_items(oracle.stdout)
        failed = [r for r in records if r["kind"] == "failed"]
        assert failed and all(r["rsync_exit"] == 23 and r["errors"] for r in failed), failed
        assert records[-1]["kind"] == "totals" and records[-1]["exit_code"] == 23
        assert records[-1]["failed_buckets"] == len(failed)
        kept = [line.split("--resume ", 1)[1].strip() for line in cp.stderr.decode().splitlines()
                if "--resume " in line]
        assert kept, describe(cp)
    finally:
        for path in stuck:
            subprocess.run(["chattr", "-i", path])
    with open(log, "rb") as handle:
        first = handle.read()
    cp = run_msrsync("--resume", kept[0])
    assert cp.returncode == 0, describe(cp)
    with open(log, "rb") as handle:
        both = handle.read()
    assert both.startswith(first), "--resume rewrote the first run's records"
    again = [json.loads(line) for line in both[len(first):].splitlines()]
    assert again[-1]["kind"] == "totals" and again[-1]["exit_code"] == 0
    sent = set(_name(r) for r in _records(log) if r["kind"] == "transferred" and
               r["rsync_exit"] == 0)
    assert set(b"b/f%d" % i for i in range(6)) <= sent, sent


def test_verify_logs_every_file_it_compared(tmp_path):
    src = os.fsencode(tmp_path / "src")
    make_tree(src, kind="weird", seed=6)
    log = str(tmp_path / "run.log")
    cp = run_msrsync(*(MS + ["--verify", "--log", log, "--rsync", " ".join(OPTS),
                             src + b"/", os.fsencode(tmp_path / "d")]))
    assert cp.returncode == 0, describe(cp)
    records = _records(log)
    verified = [r for r in records if r["kind"] == "verified"]
    files = [r for r in records if r["kind"] == "transferred" and r["itemize"][1] == "f"]
    assert sorted(map(_name, verified)) == sorted(map(_name, files))
    assert all(r["identical"] for r in verified)
    assert records[-1]["verified"] == len(verified) and records[-1]["differing"] == 0


def test_the_log_is_a_new_file_never_another_users_link(tmp_path):
    """An old file is replaced whole by a new one (not appended to, not written
    through); another user's symlink is refused before anything is copied (exit 45)."""
    src = os.fsencode(tmp_path / "src")
    make_tree(src, kind="weird", seed=7)
    log = tmp_path / "run.log"
    log.write_bytes(b"old contents\n")
    before = os.stat(str(log)).st_ino
    cp = run_msrsync(*(MS + ["--log", str(log), src + b"/", os.fsencode(tmp_path / "d")]))
    assert cp.returncode == 0, describe(cp)
    assert b"old contents" not in log.read_bytes()
    assert os.stat(str(log)).st_ino != before
    _records(str(log))
    if not IS_ROOT:
        return
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(str(shared), 0o1777)
    target = tmp_path / "victim"
    target.write_bytes(b"precious\n")
    planted = shared / "run.log"
    os.symlink(str(target), str(planted))
    os.lchown(str(planted), 1, 1)
    cp = run_msrsync(*(MS + ["--log", str(planted), src + b"/",
                             os.fsencode(tmp_path / "d2")]))
    assert cp.returncode == 45, describe(cp)
    assert target.read_bytes() == b"precious\n"
    assert not os.path.exists(str(tmp_path / "d2"))


def test_a_log_keeps_msrsync_from_becoming_rsync(tmp_path):
    """-p 1 of a local copy would be rsync itself, which writes no log: --log keeps
    msrsync in charge, and the log is rsync's list."""
    src = os.fsencode(tmp_path / "src")
    make_tree(src, kind="weird", seed=8)
    oracle = run_rsync(src + b"/", os.fsencode(tmp_path / "oracle"),
                       opts=OPTS + ["--out-format=%i|%n"])
    log = str(tmp_path / "run.log")
    cp = run_msrsync("--log", log, "--rsync", " ".join(OPTS), src + b"/",
                     os.fsencode(tmp_path / "ms"))
    assert cp.returncode == 0 and oracle.returncode == 0, describe(cp)
    assert _log_items(_records(log)) == _rsync_items(oracle.stdout)


def test_a_killed_run_leaves_whole_lines_and_resume_adds_the_rest(tmp_path):
    """msrsync SIGKILLed mid-run: every line of the log is whole JSON (each bucket's are
    written at once, when its rsync ends); --resume appends what is left, then its
    totals, and every file of SRC is in the log as sent once at least."""
    src = os.fsencode(tmp_path / "src")
    for d in range(4):
        os.makedirs(os.path.join(src, b"d%d" % d))
        for i in range(5):
            with open(os.path.join(src, b"d%d" % d, b"f%d" % i), "wb") as handle:
                handle.write(os.urandom(20000))
    log = str(tmp_path / "run.log")
    buckets = tmp_path / "b"
    buckets.mkdir()
    proc = start_msrsync("-p", "2", "-f", "2", "-b", str(buckets), "--log", log, "--rsync",
                         "-a --bwlimit=100", src + b"/", os.fsencode(tmp_path / "d"))
    try:
        assert wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 0, 60), \
            "no bucket ended"
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        end(proc, tmp_path)
    first = _records(log)
    assert first and first[-1]["kind"] != "totals", first[-1]
    (kept,) = os.listdir(str(buckets))
    cp = run_msrsync("--resume", os.path.join(str(buckets), kept), timeout=300)
    assert cp.returncode == 0, describe(cp)
    records = _records(log)
    assert records[:len(first)] == first and records[-1]["kind"] == "totals"
    sent = set(_name(r) for r in records if r["kind"] == "transferred")
    assert sent == set(b"d%d/f%d" % (d, i) for d in range(4) for i in range(5)), sent
