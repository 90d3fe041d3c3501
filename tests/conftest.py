"""Shared fixtures: a private $TMPDIR per test, source trees built once, a non-root runner."""

import fcntl
import os
import tempfile
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import helpers  # noqa: E402


def pytest_collection_modifyitems(items):
    """Slow tests first: pytest-xdist hands tests out in this order, and the
    longest (rsync's own test suite, minutes) then runs beside the many short
    ones instead of alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a couple of seconds")
    config.addinivalue_line("markers", "nonroot: runs msrsync as an unprivileged user")


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path, monkeypatch):
    """Every test gets its own $TMPDIR (inherited by msrsync), so bucket directories left
    behind are visible to the test and never pile up in /tmp."""
    path = tmp_path / "TMPDIR"
    path.mkdir()
    monkeypatch.setenv("TMPDIR", str(path))
    return path


@pytest.fixture
def page_cache_lock(tmp_path_factory):
    """Held by a test that drops the page cache (msrsync --bench, as root) and by
    one that needs files to stay in it: under pytest-xdist they never run at once.
    A lock in the directory the workers' temporary directories share, not a
    scheduling mark (pytest 9.2 silently ignores xdist's loadgroup marks)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent                # pytest-N/popen-gwK: pytest-N is shared
    with open(os.path.join(str(root), "page-cache.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def weird_src(tmp_path_factory):
    """The full weird tree (about 500 entries); never modified by tests."""
    return helpers.make_tree(tmp_path_factory.mktemp("weird") / "src", "weird")


@pytest.fixture(scope="session")
def small_src(tmp_path_factory):
    """The weird names, links and modes with few files (for runs with one entry per
    bucket); never modified by tests."""
    return helpers.make_tree(tmp_path_factory.mktemp("small") / "src", "small", seed=1)


@pytest.fixture
def nonroot():
    """(prefix, python, workdir) to run commands as nobody in a 0777 directory under /tmp.

    Skips with the reason when the suite does not run as root, or neither setpriv nor
    runuser exists, or no Python is usable by nobody."""
    prefix = helpers.nonroot_prefix()
    if prefix is None:
        pytest.skip("needs root plus setpriv or runuser to run msrsync as nobody (65534)")
    python = helpers.nonroot_python(prefix)
    if python is None:
        pytest.skip("no python3 that user nobody can run and that can read %s"
                    % helpers.MSRSYNC)
    workdir = helpers.shared_tmpdir()
    # nobody's $TMPDIR is as /tmp is, sticky (msrsync refuses to make its bucket
    # directory where others may rename it), beside the 0777 workdir, not in it
    tmpdir = tempfile.mkdtemp(prefix="msrsync-test-tmpdir-", dir="/tmp")
    os.chmod(tmpdir, 0o1777)
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmpdir
    try:
        yield prefix, python, os.fsencode(workdir)
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        helpers.rmtree_force(workdir)
        helpers.rmtree_force(tmpdir)
