"""--verify: once the copy is done, exactly the files this run transferred are compared
by content (rsync -c -n), in parallel; a difference is shown and counted as --check
shows it, exit 44.

A bad write is made by an rsync wrapper on PATH: after each transfer run (not the
verify pass's, which has -n), it overwrites one copied file in DEST with other bytes of
the same size and mtime, which rsync's quick check cannot see, and removes another."""

import json
import os

import pytest

from helpers import age, build, run_msrsync, text

FILES = 24


def _tree(root):
    build(root, dict(("d%d/f%02d" % (n % 3, n), "%02d" % n * (50 + n)) for n in range(FILES)))
    age(root, everything=True)


def _bad_writes(tmp_path, dest):
    """An environment whose rsync, after a transfer, spoils DEST's d1/f01 (same size
    and mtime) and removes d2/f02."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "rsync"
    spoiled, gone = dest / "d1" / "f01", dest / "d2" / "f02"
    script.write_text(
        '#!/bin/sh\n'
        '/usr/bin/rsync "$@"; r=$?\n'
        'case " $* " in *" -n "*|*--version*) exit $r;; esac\n'
        'if [ -f "{s}" ] && [ ! -e "{s}.done" ]; then\n'
        '  touch -r "{s}" "{s}.t"; printf "%0$(stat -c %s "{s}")d" 0 > "{s}"\n'
        '  touch -r "{s}.t" "{s}"; rm -f "{s}.t"; : > "{s}.done"\n'
        'fi\n'
        'if [ -f "{g}" ] && [ ! -e "{g}.done" ]; then rm -f "{g}"; : > "{g}.done"; fi\n'
        'exit $r\n'.format(s=spoiled, g=gone))
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env["PATH"])
    return env


def test_a_file_written_wrong_and_one_gone_are_found_and_exit_44(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    _tree(src)
    cp = run_msrsync("-p", "2", "-f", "5", "--verify", "--json", tmp_path / "run.json",
                     str(src) + "/", dest, env=_bad_writes(tmp_path, dest))
    err = text(cp.stderr)
    assert cp.returncode == 44, err
    out = text(cp.stdout).splitlines()
    assert [line for line in out if line.endswith("d1/f01")][0].startswith(">fc")
    assert [line for line in out if line.endswith("d2/f02")][0].startswith(">f+++++++++")
    assert "msrsync: verify: %d files transferred, %d identical, 1 differing, 1 missing" % (
        FILES, FILES - 2) in err, err
    found = json.loads((tmp_path / "run.json").read_text())["verify"]
    assert (found["files"], found["differing"], found["missing"]) == (FILES, 1, 1)
    assert sorted(d["path"] for d in found["differences"]) == ["d1/f01", "d2/f02"]


def test_only_what_this_run_transferred_is_verified(tmp_path):
    """DEST's up-to-date copies are not this run's: one spoiled beforehand (same size
    and mtime) is no difference for --verify, where --check -c sees it."""
    src, dest = tmp_path / "src", tmp_path / "dest"
    _tree(src)
    assert run_msrsync(str(src) + "/", dest).returncode == 0
    stale = dest / "d0" / "f00"
    st = os.stat(str(stale))
    stale.write_bytes(b"z" * st.st_size)
    os.utime(str(stale), ns=(st.st_atime_ns, st.st_mtime_ns))
    new = src / "d0" / "new"
    new.write_text("fresh")
    cp = run_msrsync("-p", "2", "-f", "5", "--verify", "--json", tmp_path / "run.json",
                     str(src) + "/", dest)
    assert cp.returncode == 0, text(cp.stderr)
    found = json.loads((tmp_path / "run.json").read_text())["verify"]
    assert (found["files"], found["differing"], found["missing"]) == (1, 0, 0)
    cp = run_msrsync("--check", "--rsync", "-aS --numeric-ids -c", str(src) + "/", dest)
    assert cp.returncode == 44 and "d0/f00" in text(cp.stdout), text(cp.stdout)


def test_files_sent_by_worker_hosts_are_verified_too(tmp_path):
    src = tmp_path / "src"
    _tree(src)
    cp = run_msrsync("--hosts", ":1,hx:1", "--host-shell", "env -u", "-f", "4", "--verify",
                     "--json", tmp_path / "run.json", str(src) + "/", tmp_path / "dest")
    assert cp.returncode == 0, text(cp.stderr)
    summary = json.loads((tmp_path / "run.json").read_text())
    assert all(h["buckets"] for h in summary["hosts"]), summary["hosts"]
    assert summary["verify"]["files"] == FILES and summary["verify"]["identical"] == FILES


@pytest.mark.parametrize("args, needle", [
    (["--verify", "--check"], "--verify with --check"),
    (["--verify", "-d"], "--verify with -d/--dry-run"),
    (["--verify", "--rsync", "-an"], "--verify with rsync's -n"),
    (["--verify", "--rsync", "-a --remove-source-files"], "--remove-source-files"),
])
def test_verify_with_nothing_to_verify_is_one_line(tmp_path, args, needle):
    src = tmp_path / "src"
    build(src, {"a": "x"})
    cp = run_msrsync(*(args + [str(src) + "/", tmp_path / "dest"]))
    err = text(cp.stderr)
    assert cp.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "dest").exists()


def test_several_srcs_in_one_worker_are_verified_each_from_its_own_base(tmp_path):
    """-p 1 without caps is one plain rsync of everything, whose item lines do not say
    which SRC a name is of: with --verify and several SRCs the run cuts buckets."""
    one, two = tmp_path / "one", tmp_path / "two"
    build(one, {"a/x": "1" * 10})
    build(two, {"b/y": "2" * 20, "c": "3"})
    cp = run_msrsync("--verify", "--json", tmp_path / "run.json", one, str(two) + "/",
                     tmp_path / "dest")
    assert cp.returncode == 0, text(cp.stderr)
    found = json.loads((tmp_path / "run.json").read_text())["verify"]
    assert (found["files"], found["identical"]) == (3, 3), found
