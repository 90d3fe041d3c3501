"""The Debian package and the RPM, as `make deb` and `make rpm` build them from the
working tree with dpkg-deb and rpmbuild: what they hold (the one file, byte for byte,
at /usr/bin/msrsync; the man page; the bash and zsh completions; the documents), what
they depend on, their changelog (the newest section of NEWS.md) and scripts (none).
As root on a Debian box, the .deb is installed with dpkg -i, runs its self-test from
/usr/bin, writes nothing beside itself, its completions are found where the shells
look, and dpkg -r and dpkg -P leave nothing of it."""

import contextlib
import fcntl
import functools
import glob
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import time

import pytest

from helpers import (IS_ROOT, MANPAGE, MSRSYNC, PROJECT_DIR, describe, run_cmd, text)
import shells

# (pytest 9.2 ignores this mark: the builds and dpkg are kept one at a time by locks)
pytestmark = [pytest.mark.xdist_group("packages"), pytest.mark.slow]

COMPLETION_DIR = os.path.join(PROJECT_DIR, "man", "completion")
NEWS = os.path.join(PROJECT_DIR, "NEWS.md")

# What each package installs (files, and the directories rpm owns).
DEB_FILES = {
    "/usr/bin/msrsync": MSRSYNC,
    "/usr/share/man/man1/msrsync.1.gz": MANPAGE,
    "/usr/share/bash-completion/completions/msrsync": os.path.join(COMPLETION_DIR,
                                                                   "msrsync.bash"),
    "/usr/share/zsh/vendor-completions/_msrsync": os.path.join(COMPLETION_DIR, "_msrsync"),
    "/usr/share/doc/msrsync/README.md.gz": os.path.join(PROJECT_DIR, "README.md"),
    "/usr/share/doc/msrsync/changelog.gz": NEWS,
    "/usr/share/doc/msrsync/changelog.Debian.gz": None,     # made from NEWS.md
    "/usr/share/doc/msrsync/copyright": None,               # Debian's form of LICENSE
    "/usr/share/lintian/overrides/msrsync": None,           # tags that do not apply
}
RPM_FILES = {
    "/usr/bin/msrsync": MSRSYNC,
    "/usr/share/man/man1/msrsync.1.gz": MANPAGE,
    "/usr/share/bash-completion/completions/msrsync": os.path.join(COMPLETION_DIR,
                                                                   "msrsync.bash"),
    "/usr/share/zsh/site-functions/_msrsync": os.path.join(COMPLETION_DIR, "_msrsync"),
    "/usr/share/doc/msrsync/README.md": os.path.join(PROJECT_DIR, "README.md"),
    "/usr/share/doc/msrsync/NEWS.md": NEWS,
    "/usr/share/licenses/msrsync/LICENSE": os.path.join(PROJECT_DIR, "LICENSE"),
}
RPM_DIRS = {"/usr/share/doc/msrsync", "/usr/share/licenses/msrsync"}
DEPENDS = "python3 (>= 3.6), rsync (>= 3.1.0)"
# the program's first line is #!/bin/sh, which rpmbuild adds by itself
RPM_REQUIRES = {"/bin/sh", "python3 >= 3.6", "rsync >= 3.1.0"}


@functools.lru_cache()
def version():
    cp = run_cmd([MSRSYNC, "--version"])
    assert cp.returncode == 0, describe(cp)
    return text(cp.stdout).split()[1]


def newest_news():
    """(heading, first line of its first item) of NEWS.md's top section."""
    with open(NEWS, encoding="utf-8") as handle:
        news = handle.read()
    section = re.search(r"^## ([^\n]*)\n(.*?)(?=^## |\Z)", news, re.M | re.S)
    item = re.search(r"^- (.*)$", section.group(2), re.M)
    return section.group(1).strip(), item.group(1).replace("**", "")


def gunzip(data):
    return gzip.GzipFile(fileobj=io.BytesIO(data)).read()


def read_file(path, mode="rb"):
    with open(path, mode) as handle:
        return handle.read()


def with_parents(paths):
    """PATHS and every directory above them, as dpkg -L names them ("/." the root)."""
    found = {"/."}
    for path in paths:
        while path != "/":
            found.add(path)
            path = os.path.dirname(path)
    return found


@contextlib.contextmanager
def locked(name, tmp_path_factory):
    """An exclusive lock every xdist worker of the session sees (the directory
    their temporary directories share)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with open(os.path.join(str(root), name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield root


def build(kind, tmp_path_factory):
    """`make KIND` into a directory the session's workers share: once a session."""
    with locked("package-" + kind, tmp_path_factory) as root:
        builddir = os.path.join(str(root), "package-" + kind)
        done = os.path.join(builddir, "built")
        if not os.path.exists(done):
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
            cp = run_cmd(["make", "-C", PROJECT_DIR, "--no-print-directory", kind,
                          "BUILDDIR=" + builddir], env=env, timeout=300)
            assert cp.returncode == 0, describe(cp)
            open(done, "w").close()
        return builddir


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if not shutil.which("dpkg-deb"):
        pytest.skip("needs dpkg-deb (Debian's dpkg)")
    (path,) = glob.glob(os.path.join(build("deb", tmp_path_factory), "*.deb"))
    return path


@pytest.fixture(scope="module")
def rpm(tmp_path_factory):
    if not shutil.which("rpmbuild") or not shutil.which("rpm"):
        pytest.skip("needs rpmbuild and rpm (Debian's rpm package; .ci/deps installs it)")
    builddir = build("rpm", tmp_path_factory)
    (path,) = glob.glob(os.path.join(builddir, "*.noarch.rpm"))
    assert len(glob.glob(os.path.join(builddir, "*.src.rpm"))) == 1
    return path


def deb_members(deb):
    """{path: TarInfo} and {path: bytes} of the .deb's files, read by dpkg-deb."""
    cp = run_cmd(["dpkg-deb", "--fsys-tarfile", deb])
    assert cp.returncode == 0, describe(cp)
    infos, data = {}, {}
    with tarfile.open(fileobj=io.BytesIO(cp.stdout)) as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            path = "/." if name == "." else "/" + name
            infos[path] = member
            if member.isfile():
                data[path] = archive.extractfile(member).read()
    return infos, data


def test_deb_holds_the_one_file_its_man_page_completions_and_documents(deb):
    infos, data = deb_members(deb)
    assert set(infos) == with_parents(DEB_FILES), sorted(set(infos) ^ with_parents(DEB_FILES))
    assert sorted(data) == sorted(DEB_FILES)
    for path, info in infos.items():
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "root", "root"), path
        mode = 0o755 if info.isdir() or path == "/usr/bin/msrsync" else 0o644
        assert info.mode & 0o7777 == mode, (path, oct(info.mode))
    for path, source in DEB_FILES.items():
        if source is not None:
            content = gunzip(data[path]) if path.endswith(".gz") else data[path]
            assert content == read_file(source), "%s is not %s" % (path, source)
    copyright = data["/usr/share/doc/msrsync/copyright"].decode()
    assert copyright.startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n")
    assert "\nFiles: *\n" in copyright and "\nLicense: GPL-3+\n" in copyright
    assert '"/usr/share/common-licenses/GPL-3"' in copyright
    assert b"Version 3, 29 June 2007" in read_file(os.path.join(PROJECT_DIR, "LICENSE"))


def test_deb_is_architecture_all_and_depends_on_python3_and_rsync(deb):
    cp = run_cmd(["dpkg-deb", "--field", deb, "Package", "Version", "Architecture",
                  "Depends", "Installed-Size"])
    assert cp.returncode == 0, describe(cp)
    fields = dict(line.split(": ", 1) for line in text(cp.stdout).splitlines())
    assert fields["Package"] == "msrsync"
    assert fields["Version"] == version() + "-1"
    assert fields["Architecture"] == "all"
    assert fields["Depends"] == DEPENDS
    assert int(fields["Installed-Size"]) > os.path.getsize(MSRSYNC) // 1024
    assert os.path.basename(deb) == "msrsync_%s-1_all.deb" % version()


def test_deb_changelog_entry_is_the_newest_news_section(deb, tmp_path):
    if not shutil.which("dpkg-parsechangelog"):
        pytest.skip("needs dpkg-parsechangelog (dpkg-dev; .ci/deps installs it)")
    changelog = tmp_path / "changelog"
    changelog.write_bytes(gunzip(deb_members(deb)[1]["/usr/share/doc/msrsync/changelog.Debian.gz"]))
    fields = {}
    for name in ("Source", "Version", "Distribution", "Urgency", "Changes"):
        cp = run_cmd(["dpkg-parsechangelog", "-l", str(changelog), "-S", name])
        assert cp.returncode == 0 and not cp.stderr, describe(cp)
        fields[name] = text(cp.stdout).strip()
    heading, first_item = newest_news()
    assert fields["Source"] == "msrsync"
    assert fields["Version"] == version() + "-1"
    assert fields["Distribution"] == ("UNRELEASED" if heading.lower() == "unreleased"
                                      else "unstable")
    assert fields["Urgency"] == "medium"
    assert "\n  * %s\n" % first_item in fields["Changes"], fields["Changes"][:600]


def test_lintian_reports_no_error_nor_warning_on_the_deb(deb):
    """Debian's own checker on the .deb: nothing at error or warning level (the sh
    header of the program failed sh -n; the copyright file had no notice), the tags
    that do not apply overridden in the package, each with its reason."""
    if not shutil.which("lintian"):
        pytest.skip("needs lintian (.ci/deps installs it)")
    cp = run_cmd(["lintian", "--fail-on", "error,warning", deb], timeout=300)
    tags = [l for l in text(cp.stdout).splitlines() if re.match(r"^[EW]: ", l)]
    assert cp.returncode == 0 and tags == [], describe(cp)
    overrides = deb_members(deb)[1]["/usr/share/lintian/overrides/msrsync"].decode()
    lines = overrides.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("msrsync: "):
            assert i and lines[i - 1].startswith("# "), "an override without its reason"


def test_rpmlint_reports_no_error_nor_warning_on_the_rpms(rpm):
    """rpmlint on the binary and source RPMs, with the project's configuration (Fedora's
    choices where rpmlint's defaults are another distribution's, and the tags that do
    not apply, each with its reason): no error, no warning."""
    if not shutil.which("rpmlint"):
        pytest.skip("needs rpmlint (.ci/deps installs it)")
    config = os.path.join(PROJECT_DIR, ".ci", "rpmlint.toml")
    rpms = sorted(glob.glob(os.path.join(os.path.dirname(rpm), "*.rpm")))
    assert len(rpms) == 2, rpms
    cp = run_cmd(["rpmlint", "-c", config] + rpms, timeout=300)
    assert cp.returncode == 0, describe(cp)
    assert re.search(rb"\b0 errors, 0 warnings\b", cp.stdout), describe(cp)
    with open(config) as handle:
        lines = handle.read().splitlines()
    for i, line in enumerate(lines):
        if re.match(r'^\s+"', line):
            assert lines[i - 1].strip().startswith("#") or lines[i - 1].strip().startswith('"'), \
                "a filter without its reason: %s" % line


def rpm_query(rpm, *args):
    cp = run_cmd(["rpm", "-qp"] + list(args) + [rpm])
    assert cp.returncode == 0, describe(cp)
    return text(cp.stdout)


def test_rpm_holds_the_same_files_needs_python3_and_rsync_and_runs_no_script(rpm):
    assert rpm_query(rpm, "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}") == \
        "msrsync %s 1 noarch GPL-3.0-or-later" % version()
    listed = rpm_query(rpm, "-l").splitlines()
    assert sorted(listed) == sorted(set(RPM_FILES) | RPM_DIRS)
    requires = {r.strip() for r in rpm_query(rpm, "-R").splitlines()
                if not r.startswith("rpmlib(")}
    assert requires == RPM_REQUIRES
    assert rpm_query(rpm, "--scripts") == ""
    # --dump: path size mtime digest mode owner group ...
    for line in rpm_query(rpm, "--dump").splitlines():
        path, _, _, digest, mode, owner, group = line.split()[:7]
        assert (owner, group) == ("root", "root"), line
        if path in RPM_DIRS:
            assert int(mode, 8) == 0o40755, line
            continue
        assert int(mode, 8) == (0o100755 if path == "/usr/bin/msrsync" else 0o100644), line
        if path.endswith(".gz"):
            continue                # the man page, gzipped by rpmbuild (brp-compress)
        assert digest == hashlib.sha256(read_file(RPM_FILES[path])).hexdigest(), \
            "%s is not %s" % (path, RPM_FILES[path])


def test_rpm_changelog_entry_is_the_newest_news_section(rpm):
    changelog = rpm_query(rpm, "--changelog").splitlines()
    heading, first_item = newest_news()
    assert re.match(r"^\* \w{3} \w{3} \d\d \d{4} .+ <.+@.+> - %s-1$" % re.escape(version()),
                    changelog[0]), changelog[0]
    assert changelog[1] == "- " + first_item, changelog[:3]
    assert not [line for line in changelog[1:] if line.startswith("*")]


# ---------------------------------------------------------------- installed

def dpkg(*args):
    """dpkg ARGS, again while another dpkg or apt holds dpkg's lock (up to a minute)."""
    deadline = time.monotonic() + 60
    while True:
        cp = run_cmd(["dpkg"] + list(args), timeout=300)
        if cp.returncode == 0 or "lock" not in text(cp.stderr) \
                or time.monotonic() > deadline:
            return cp
        time.sleep(1)


def package_state():
    """dpkg's two-letter state of msrsync ("ii" installed), "" when dpkg knows none."""
    cp = run_cmd(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "msrsync"])
    return text(cp.stdout).strip() if cp.returncode == 0 else ""


def installed_completion(shell_name, tmp_path):
    """What bash (bash-completion) or zsh (compinit, its default $fpath) makes of
    `msrsync --hostf<TAB>` with only the system's completions to go by."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
           "TERM": "dumb", "LC_ALL": "C"}
    if shell_name == "bash":
        shell = shells.Bash(env)
    else:
        shell = shells.Zsh(env, None, str(tmp_path / "zsh-matches"))
    try:
        return shell.complete("msrsync --hostf").line
    finally:
        shell.close()


def test_deb_installs_runs_from_usr_bin_and_is_removed_without_a_trace(deb, tmp_path,
                                                                       tmp_path_factory):
    if not IS_ROOT:
        pytest.skip("needs root to install the .deb with dpkg -i")
    if not shutil.which("dpkg") or not shutil.which("dpkg-query"):
        pytest.skip("needs dpkg (a Debian box)")
    for tool in ("bash", "zsh"):
        if not shutil.which(tool):
            pytest.skip("needs %s to check the installed completion (.ci/deps installs it)"
                        % tool)
    if not os.path.exists(shells.BASH_COMPLETION):
        pytest.skip("needs bash-completion to check the installed completion")
    with locked("dpkg-msrsync", tmp_path_factory):
        if package_state() not in ("", "un", "pn"):
            pytest.skip("a msrsync package is on this box (dpkg state %r): not replaced"
                        % package_state())
        present = sorted(p for p in DEB_FILES if os.path.lexists(p))
        if present:
            pytest.skip("%s exist(s) and no package owns them: not overwritten"
                        % ", ".join(present))
        before = {p for p in with_parents(DEB_FILES) if os.path.lexists(p)}
        try:
            check_installed(deb, tmp_path)
            check_removed(before)
        finally:
            if package_state() not in ("", "un", "pn"):
                dpkg("--purge", "--no-triggers", "msrsync")
            # the triggers msrsync's files set off (man-db's index of the man
            # pages), run once for the install and the removal
            cp = dpkg("--triggers-only", "--pending")
            assert cp.returncode == 0, describe(cp)


def check_installed(deb, tmp_path):
    cp = dpkg("--install", "--no-triggers", deb)
    assert cp.returncode == 0, describe(cp)
    assert package_state() == "ii"
    # the self-test, as root (who may write /usr/bin): nothing is written beside
    # the program, its compiled code goes to the cache; meanwhile, the files
    home, cache, tmpdir = tmp_path / "home", tmp_path / "cache", tmp_path / "tmp"
    for path in (home, tmpdir):
        path.mkdir()
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(cache), TMPDIR=str(tmpdir))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    beside = set(os.listdir("/usr/bin"))
    selftest = subprocess.Popen(["/usr/bin/msrsync", "--selftest"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    try:
        cp = run_cmd(["dpkg", "--listfiles", "msrsync"])
        assert cp.returncode == 0, describe(cp)
        assert sorted(text(cp.stdout).splitlines()) == sorted(with_parents(DEB_FILES))
        assert read_file("/usr/bin/msrsync") == read_file(MSRSYNC)
        if shutil.which("man"):
            cp = run_cmd(["man", "-w", "msrsync"])
            assert text(cp.stdout).strip() == "/usr/share/man/man1/msrsync.1.gz", describe(cp)
        # the completions are where bash-completion and zsh look
        assert installed_completion("bash", home) == "msrsync --hostfile "
        assert installed_completion("zsh", home) == "msrsync --hostfile="
        output = text(selftest.communicate(timeout=600)[0])
    finally:
        if selftest.poll() is None:
            selftest.kill()
            selftest.wait()
    assert selftest.returncode == 0 and "0 failed" in output, output[-3000:]
    assert set(os.listdir("/usr/bin")) - beside == set()
    assert not os.path.exists("/usr/bin/__pycache__")
    assert [name.endswith(".pyc") for name in os.listdir(str(cache / "msrsync"))] == [True]
    assert os.listdir(str(tmpdir)) == []


def check_removed(before):
    cp = dpkg("--remove", "--no-triggers", "msrsync")
    assert cp.returncode == 0, describe(cp)
    left = {p for p in with_parents(DEB_FILES) if os.path.lexists(p)}
    assert left == before, "left by dpkg -r: %s" % sorted(left - before)
    cp = dpkg("--purge", "--no-triggers", "msrsync")
    assert cp.returncode == 0, describe(cp)
    assert package_state() in ("", "un", "pn")
    assert {p for p in with_parents(DEB_FILES) if os.path.lexists(p)} == before
