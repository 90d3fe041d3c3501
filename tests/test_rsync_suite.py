"""rsync's own test suite holds msrsync to its promise: tests/rsync_suite.py runs the
local-copy tests of an rsync source tree plain, then with every local copy sent
through msrsync, and fails on a test that passes only the first way.

The tree is $MSRSYNC_RSYNC_SOURCE, else the newest that .ci/deps unpacked and built
under /var/cache/msrsync-tests (Debian's rsync source package)."""

import glob
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "rsync_suite.py")
SOURCE_CACHE = "/var/cache/msrsync-tests"


def version_key(tree):
    """rsync-3.10.1 after rsync-3.9.0: the numbers in the name, compared as numbers."""
    return [int(n) for n in re.findall(r"\d+", os.path.basename(tree))]


def rsync_source_tree():
    """(the tree, or None, and why none)."""
    given = os.environ.get("MSRSYNC_RSYNC_SOURCE")
    if given:
        if os.path.isdir(os.path.join(given, "testsuite")):
            return given, ""
        return None, "MSRSYNC_RSYNC_SOURCE=%s is not an rsync source tree" % given
    trees = [os.path.dirname(t) for t in glob.glob(os.path.join(SOURCE_CACHE, "rsync-*",
                                                                "testsuite"))]
    if trees:
        return max(trees, key=version_key), ""
    return None, ("no rsync source tree: neither MSRSYNC_RSYNC_SOURCE nor %s/rsync-* "
                  "(bash .ci/deps fetches Debian's)" % SOURCE_CACHE)


@pytest.mark.slow
def test_rsync_suite_local_copy_tests_pass_through_msrsync():
    tree, why_not = rsync_source_tree()
    if tree is None:
        if os.environ.get("CI") == "true":
            pytest.fail(why_not + "; CI must run rsync's test suite")
        pytest.skip(why_not)
    # The runner's work directory goes under the test's private $TMPDIR, and
    # stays there when a test differs.
    proc = subprocess.run([sys.executable, RUNNER, "--jobs", "2", tree],
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout
    assert re.search(r"^\d+ passed, 0 failed$", proc.stdout, re.MULTILINE), proc.stdout
