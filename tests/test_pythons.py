"""msrsync supports Python 3.6 to 3.13: the end-to-end differential copy runs under the
oldest and the newest interpreter pyenv provides."""

import json
import os

import pytest

from helpers import describe, differential, pyenv_python, run_msrsync, stderr_lines


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


def test_refused_option_under_python(tmp_path, python, small_src):
    cp = run_msrsync("--rsync", "-a --write-batch=x", small_src + b"/", tmp_path / "d", python=python)
    assert cp.returncode == 4, describe(cp)
    assert not os.path.exists(tmp_path / "d")


@pytest.mark.slow
def test_filters_delete_and_hard_links_under_python(tmp_path, python):
    from test_rsync_features import _extras, _hardlink_tree
    src = _hardlink_tree(os.fsencode(tmp_path / "in" / "src"))
    differential(tmp_path, [src + b"/"], ["-p", "3", "-f", "5"],
                 rsync_opts=["-aH", "--delete", "--exclude=*.dat", "--include=d0*/"],
                 prepare_dest=_extras, python=python)
