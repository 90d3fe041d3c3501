"""msrsync supports Python 3.6 to 3.13: the end-to-end differential copy runs under the
oldest and the newest interpreter pyenv provides."""

import json
import os
import shutil
import sys

import pytest

from helpers import (MSRSYNC, assert_same_tree, describe, differential, extras, hardlink_tree,
                     pyenv_python, run_cmd, run_msrsync, run_rsync, stderr_lines)


@pytest.fixture(params=["3.6", "3.13"])
def python(request):
    exe = pyenv_python(request.param)
    if exe is None:
        pytest.skip("no pyenv Python %s.x under $PYENV_ROOT or ~/.pyenv/versions"
                    % request.param)
    return exe


@pytest.mark.slow
def test_differential_copy_under_python(tmp_path, small_src, python):
    json_path = tmp_path / "py.json"
    d = differential(tmp_path, [small_src + b"/"],
                     ["-p", "3", "-f", "7", "-s", "1.5K", "-P", "--stats", "--json", json_path],
                     python=python)
    assert "Status: SUCCESS" in d.msrsync.stdout.decode()
    summary = json.loads(json_path.read_text())
    assert summary["exit_code"] == 0
    differential(tmp_path / "noslash", [small_src], ["-p", "2", "-f", "20"],
                 rsync_opts=["-a", "-v"], python=python)


def test_usage_error_and_version_under_python(tmp_path, python):
    cp = run_msrsync("-p", "0", "a", tmp_path / "b", python=python)
    assert cp.returncode == 1, describe(cp)
    assert len(stderr_lines(cp)) == 1
    cp = run_msrsync("--version", python=python)
    assert cp.stdout == b"msrsync 1.0.0\n", describe(cp)
    cp = run_msrsync("--help", python=python)
    assert cp.returncode == 0 and b"--processes" in cp.stdout


def test_a_run_that_becomes_rsync_under_python(tmp_path, python, small_src):
    """-p 1 with --readahead 0 execs rsync once its probe passes: through
    subprocess on 3.6 (no os.posix_spawn), through posix_spawn on 3.13."""
    differential(tmp_path, [small_src + b"/"], ["--readahead", "0"],
                 rsync_opts=["-a", "--delete"], python=python)
    cp = run_msrsync("--readahead", "0", "--rsync", "-a --no-such-option",
                     small_src + b"/", tmp_path / "d", python=python)
    assert cp.returncode == 1 and len(stderr_lines(cp)) == 1, describe(cp)
    assert stderr_lines(cp)[0].startswith("msrsync: error: rsync rejects"), describe(cp)


def test_an_unsplittable_option_is_one_rsync_under_python(tmp_path, python, small_src):
    """Batch mode cannot be split: one plain rsync writes the batch, with a note."""
    batch = tmp_path / "x"
    cp = run_msrsync("-p", "2", "--rsync", "-a --write-batch=%s" % batch, small_src + b"/",
                     tmp_path / "d", python=python)
    assert cp.returncode == 0, describe(cp)
    assert [l.startswith("msrsync: note: ") for l in stderr_lines(cp)] == [True], describe(cp)
    assert os.path.getsize(batch) > 0
    o = run_rsync(small_src + b"/", tmp_path / "o", opts=["-a"])
    assert o.returncode == 0, describe(o)
    assert_same_tree(tmp_path / "o", tmp_path / "d")


@pytest.mark.slow
def test_filters_delete_and_hard_links_under_python(tmp_path, python):
    src = hardlink_tree(os.fsencode(tmp_path / "in" / "src"))
    differential(tmp_path, [src + b"/"], ["-p", "3", "-f", "5"],
                 rsync_opts=["-aH", "--delete", "--exclude=*.dat", "--include=d0*/"],
                 prepare_dest=extras, python=python)


@pytest.mark.parametrize("minor", [None, "3.6", "3.13"], ids=["this", "3.6", "3.13"])
def test_run_as_a_program_it_keeps_its_compiled_code(tmp_path, small_src, minor):
    """./msrsync: sh starts the python3 in PATH on it (-S) through its loader, which
    keeps its compiled code in $XDG_CACHE_HOME/msrsync, never beside the program (see
    test_install.py).  The copy is rsync's,
    from the code compiled and then from the kept one; an edited file is compiled
    again; errors keep their one line and code; no module of the current
    directory is imported (python3 -c would put it first in sys.path); with
    PYTHONDONTWRITEBYTECODE nothing is kept."""
    python = sys.executable if minor is None else pyenv_python(minor)
    if python is None:
        pytest.skip("no pyenv Python %s.x" % minor)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    program = bindir / "msrsync"
    shutil.copy2(MSRSYNC, str(program))
    env = dict(os.environ, PATH=os.path.dirname(python) + os.pathsep + os.environ["PATH"])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cache = tmp_path / "cache"
    env["XDG_CACHE_HOME"] = str(cache)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "json.py").write_text("raise SystemExit('json.py of the current directory')\n")
    # the standard library is all it uses: no site module, no sitecustomize
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text("raise SystemExit('sitecustomize ran')\n")
    env["PYTHONPATH"] = str(hooks)
    oracle = tmp_path / "oracle"
    run_rsync(small_src + b"/", oracle, opts=["-a"])
    for n in range(2):
        dest = tmp_path / ("d%d" % n)
        cp = run_cmd([program, "-p", "3", "-f", "5", "--rsync", "-a", small_src + b"/", dest],
                     env=env, cwd=cwd)
        assert cp.returncode == 0, describe(cp)
        assert_same_tree(oracle, dest)
        kept = os.listdir(str(cache / "msrsync"))
        assert len(kept) == 1 and kept[0].endswith(".pyc"), kept
        assert os.listdir(str(bindir)) == ["msrsync"]
    program.write_bytes(program.read_bytes().replace(b'VERSION = "1.0.0"', b'VERSION = "9.9.9"'))
    cp = run_cmd([program, "--version"], env=env, cwd=cwd)
    assert cp.stdout == b"msrsync 9.9.9\n", describe(cp)
    cp = run_cmd([program, "-p", "0", "a", tmp_path / "b"], env=env, cwd=cwd)
    assert cp.returncode == 1 and len(stderr_lines(cp)) == 1, describe(cp)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy2(MSRSYNC, str(other / "msrsync"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache-off")
    cp = run_cmd([other / "msrsync", "--version"], env=env, cwd=cwd)
    assert cp.stdout == b"msrsync 1.0.0\n", describe(cp)
    assert os.listdir(str(other)) == ["msrsync"]
    assert not os.path.exists(str(tmp_path / "cache-off"))
