"""make install installs the program, its man page and its bash and zsh completions,
and make uninstall removes them. An installed msrsync writes nothing beside itself: its
compiled code lives in the user's cache directory ($XDG_CACHE_HOME/msrsync, else
~/.cache/msrsync), and --selftest leaves nothing in $TMPDIR."""

import os
import subprocess

import pytest

from helpers import MSRSYNC, PROJECT_DIR, make_tree, run_cmd, text, assert_same_tree, run_rsync


def _env(tmp_path, **extra):
    """The environment of a user whose HOME and cache are the test's own, with
    bytecode writing allowed (a developer's shell may forbid it)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("XDG_CACHE_HOME", None)
    env["HOME"] = str(tmp_path / "home")
    os.makedirs(env["HOME"], exist_ok=True)
    env.update(extra)
    return env


def _install(tmp_path):
    """`make install` into a DESTDIR of the test's own; the installed program's path."""
    destdir = tmp_path / "root"
    cp = run_cmd(["make", "-C", PROJECT_DIR, "install", "DESTDIR=%s" % destdir,
                  "PREFIX=/usr/local"], env=_env(tmp_path, PYTHONDONTWRITEBYTECODE="1"))
    assert cp.returncode == 0, text(cp.stderr)
    return destdir / "usr" / "local" / "bin" / "msrsync"


def _files_under(root):
    return sorted(os.path.relpath(os.path.join(d, f), str(root))
                  for d, _, files in os.walk(str(root)) for f in files)


def test_install_puts_the_completions_where_the_shells_look_and_uninstall_removes_all(
        tmp_path):
    program = _install(tmp_path)
    root = tmp_path / "root"
    installed = {
        "usr/local/bin/msrsync": "msrsync",
        "usr/local/share/man/man1/msrsync.1": "man/msrsync.1",
        "usr/local/share/bash-completion/completions/msrsync": "man/completion/msrsync.bash",
        "usr/local/share/zsh/site-functions/_msrsync": "man/completion/_msrsync",
    }
    assert _files_under(root) == sorted(installed)
    for path, source in installed.items():
        with open(str(root / path), "rb") as got, \
                open(os.path.join(PROJECT_DIR, source), "rb") as want:
            assert got.read() == want.read(), path
    assert os.stat(str(program)).st_mode & 0o777 == 0o755
    cp = run_cmd(["make", "-C", PROJECT_DIR, "uninstall", "DESTDIR=%s" % root,
                  "PREFIX=/usr/local"], env=_env(tmp_path, PYTHONDONTWRITEBYTECODE="1"))
    assert cp.returncode == 0, text(cp.stderr)
    assert _files_under(root) == []
    # the completion directories can be chosen (the .deb's zsh directory is Debian's)
    other = tmp_path / "other"
    cp = run_cmd(["make", "-C", PROJECT_DIR, "install", "DESTDIR=%s" % other, "PREFIX=/usr",
                  "BASHCOMPDIR=/etc/bash_completion.d",
                  "ZSHCOMPDIR=/usr/share/zsh/vendor-completions"],
                 env=_env(tmp_path, PYTHONDONTWRITEBYTECODE="1"))
    assert cp.returncode == 0, text(cp.stderr)
    assert _files_under(other) == ["etc/bash_completion.d/msrsync", "usr/bin/msrsync",
                                   "usr/share/man/man1/msrsync.1",
                                   "usr/share/zsh/vendor-completions/_msrsync"]


def _cache_files(cache_home):
    where = os.path.join(str(cache_home), "msrsync")
    return sorted(os.listdir(where)) if os.path.isdir(where) else []


def test_installed_program_writes_nothing_beside_itself_and_caches_its_code(tmp_path):
    program = _install(tmp_path)
    cache = tmp_path / "cache"
    env = _env(tmp_path, XDG_CACHE_HOME=str(cache))
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(str(src), kind="small")
    for _ in range(2):
        cp = run_cmd([str(program), "--version"], env=env)
        assert cp.returncode == 0 and text(cp.stdout).startswith("msrsync "), text(cp.stderr)
    cp = run_cmd([str(program), "-p", "2", "-f", "3", str(src) + "/", str(dst)], env=env)
    assert cp.returncode == 0, text(cp.stderr)
    oracle = tmp_path / "oracle"
    assert run_rsync(str(src) + "/", str(oracle)).returncode == 0
    assert_same_tree(str(oracle), str(dst))
    # the bin directory holds the program alone: no __pycache__, no .pyc
    assert sorted(os.listdir(str(program.parent))) == ["msrsync"]
    files = _cache_files(cache)
    assert len(files) == 1 and files[0].endswith(".pyc"), files
    assert not os.path.exists(tmp_path / "home" / ".cache"), "XDG_CACHE_HOME was not used"


def test_cached_code_is_reused_and_renewed_when_the_program_changes(tmp_path):
    program = tmp_path / "bin" / "msrsync"
    os.makedirs(str(program.parent))
    with open(MSRSYNC, "rb") as handle:
        source = handle.read()
    program.write_bytes(source)
    os.chmod(str(program), 0o755)
    cache = tmp_path / "cache"
    env = _env(tmp_path, XDG_CACHE_HOME=str(cache))
    assert run_cmd([str(program), "--version"], env=env).returncode == 0
    (name,) = _cache_files(cache)
    path = os.path.join(str(cache), "msrsync", name)
    before = os.stat(path)
    assert run_cmd([str(program), "--version"], env=env).returncode == 0
    after = os.stat(path)
    # reused, not written again (a new cache file is renamed into place)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # a changed program is compiled again: its new version is what runs
    program.write_bytes(source.replace(b'VERSION = "', b'VERSION = "9.9.9-', 1))
    cp = run_cmd([str(program), "--version"], env=env)
    assert cp.returncode == 0 and "9.9.9-" in text(cp.stdout), text(cp.stdout)
    assert "9.9.9-" in text(run_cmd([str(program), "--version"], env=env).stdout)


def test_default_cache_is_under_home_and_an_unusable_one_is_no_error(tmp_path):
    program = _install(tmp_path)
    # XDG_CACHE_HOME unset (or relative, which the XDG spec says to ignore): ~/.cache
    for extra in ({}, {"XDG_CACHE_HOME": "relative/dir"}):
        cp = run_cmd([str(program), "--version"], env=_env(tmp_path, **extra))
        assert cp.returncode == 0, text(cp.stderr)
        assert len(_cache_files(tmp_path / "home" / ".cache")) == 1
    assert not os.path.exists(tmp_path / "relative")
    # a cache that cannot be written (a file in its place), or bytecode writing
    # turned off: the program runs, nothing is written
    blocker = tmp_path / "blocked"
    blocker.write_bytes(b"")
    for extra in ({"XDG_CACHE_HOME": str(blocker)},
                  {"XDG_CACHE_HOME": str(tmp_path / "off"), "PYTHONDONTWRITEBYTECODE": "1"}):
        cp = run_cmd([str(program), "--version"], env=_env(tmp_path, **extra))
        assert cp.returncode == 0 and text(cp.stdout).startswith("msrsync "), text(cp.stderr)
    assert not os.path.exists(tmp_path / "off")
    assert sorted(os.listdir(str(program.parent))) == ["msrsync"]


@pytest.mark.slow
def test_selftest_passes_and_leaves_nothing_in_tmpdir(tmp_path):
    """The program's --selftest, run as a user runs it (the program, through its
    loader): every check ok, nothing left in $TMPDIR.  (One run for both: each
    takes a while.)"""
    tmpdir = tmp_path / "tmp"
    os.makedirs(str(tmpdir))
    env = _env(tmp_path, TMPDIR=str(tmpdir), XDG_CACHE_HOME=str(tmp_path / "cache"))
    cp = subprocess.run([MSRSYNC, "--selftest"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, timeout=300)
    assert cp.returncode == 0, text(cp.stdout) + text(cp.stderr)
    lines = text(cp.stdout).splitlines()
    assert "0 failed" in text(cp.stdout)
    assert any(line.startswith("ok") for line in lines), lines
    assert not any(line.startswith("not ok") for line in lines), lines
    assert b"Traceback" not in cp.stderr
    assert os.listdir(str(tmpdir)) == []
