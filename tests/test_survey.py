"""--survey: SRC scanned as a run would scan it, nothing copied, what the run would send
described (a table on stdout, --json, a self-contained --html page).

The counts are compared with what one rsync with the same options copies into an empty
directory (rsync -n --stats is no oracle: its sender counts the directories -m prunes),
the other figures with an independent walk of the tree in the test, and the
scanner's path (with rules) with the survey's own walk (without)."""

import collections
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile

import pytest

from helpers import age, build, load_msrsync, run_msrsync, run_rsync, text
from remote import serve_sshd

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    yield from serve_sshd(tmp_path_factory)


def survey(*args, env=None, code=0):
    """The --survey report of these arguments (--json -), checked to have exited `code`."""
    cp = run_msrsync("--survey", "--json", "-", *args, env=env)
    assert cp.returncode == code, text(cp.stderr)
    return json.loads(text(cp.stdout))


def copied(opts, src, tmp_path, code=0):
    """(entries by type, bytes in regular files) of what one rsync OPTS copies of src
    into an empty directory: what the run would send."""
    dest = tmp_path / "copy"
    cp = run_rsync(os.fsdecode(src) + "/", str(dest) + "/", opts=opts)
    assert cp.returncode == code, text(cp.stderr)
    kinds, size = collections.Counter(), 0
    for top, dirs, files in os.walk(str(dest)):
        kinds["directories"] += top == str(dest)
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            kind = ("files" if stat.S_ISREG(st.st_mode) else
                    "directories" if stat.S_ISDIR(st.st_mode) else
                    "symlinks" if stat.S_ISLNK(st.st_mode) else "others")
            kinds[kind] += 1
            size += st.st_size if kind == "files" else 0
    return dict(kinds), size


@pytest.mark.parametrize("opts", [
    ["-a"], ["-aH", "--exclude=*.txt"], ["-a", "--exclude=/d*/"], ["-aL"],
    ["-am", "--include=*/", "--include=f*", "--exclude=*"],
])
def test_counts_equal_what_rsync_copies_of_the_weird_tree(weird_src, tmp_path, opts):
    # (with -L the tree's dangling link and its loop are errors: 23 for both)
    code = 23 if "-aL" in opts else 0
    report = survey("--rsync", " ".join(opts), os.fsdecode(weird_src) + "/", code=code)
    kinds, size = copied(opts, weird_src, tmp_path, code)
    types = report["types"]
    assert dict((k, v) for k, v in types.items() if v) == kinds
    assert report["entries"] == sum(kinds.values())
    assert report["bytes"] == size


def _tree(root):
    """Known figures: sizes, two top-level directories, a hard-link group of 3, a sparse
    file, odd names, a fifo, a symlink, a 4-deep directory."""
    spec = {
        "a/f0": b"", "a/f1": b"x", "a/f3": b"xyz", "a/sub/deep/er/f4": b"1234",
        "a/sub/f5k": b"k" * 5000, "b/f70k": b"m" * 70000, "b/-dash": b"--",
        "top.txt": b"top\n", "b/q?x": b"q", "b/trail.": b"t",
    }
    build(root, spec)
    os.link(os.path.join(root, "a/f3"), os.path.join(root, "b/f3-link"))
    os.link(os.path.join(root, "a/f3"), os.path.join(root, "b/f3-link2"))
    with open(os.path.join(root, "b/sparse"), "wb") as handle:
        handle.truncate(1 << 20)
    os.symlink("a/f1", os.path.join(root, "ln"))
    os.mkfifo(os.path.join(root, "fifo"))
    with open(os.path.join(os.fsencode(root), b"b/not-utf8-\xff"), "wb") as handle:
        handle.write(b"u")
    with open(os.path.join(root, "b/new\nline"), "wb") as handle:
        handle.write(b"nl")
    os.utime(os.path.join(root, "a/f0"), (100000000, 100000000))       # the oldest
    os.utime(os.path.join(root, "b/f70k"), (4000000000, 4000000000))   # the newest
    return root


def test_figures_of_a_known_tree(tmp_path):
    src = _tree(str(tmp_path / "src"))
    report = survey("--rsync", "-aH", src + "/")
    assert report["types"] == {"files": 15, "directories": 6, "symlinks": 1, "others": 1}
    assert report["entries"] == 23
    # (f3's three paths are three files: rsync sends each)
    sizes = [0, 1, 3, 4, 5000, 70000, 2, 4, 1, 1, 3, 3, 1 << 20, 1, 2]
    assert report["bytes"] == sum(sizes)
    bins = dict((cell["from"], (cell["files"], cell["bytes"])) for cell in report["size_histogram"])
    assert bins[0] == (1, 0)                       # f0
    assert bins[1] == (4, 4)                       # f1, q?x, trail., not-utf8
    assert bins[2] == (5, 13)                      # -dash, new\nline, f3 and its 2 links
    assert bins[4] == (2, 8)                       # f4, top.txt
    assert bins[4096] == (1, 5000)
    assert bins[65536] == (1, 70000)
    assert bins[1 << 20] == (1, 1 << 20)
    assert sum(files for files, _ in bins.values()) == 15
    assert [f["path"] for f in report["largest_files"][:3]] == ["b/sparse", "b/f70k", "a/sub/f5k"]
    assert report["hard_links"] == {"groups": 1, "paths": 3, "bytes": 3}
    assert report["sparse"] == {"files": 1, "bytes": 1 << 20, "allocated": 0}
    tops = report["top_level"]
    assert [(t["path"], t["entries"], t["bytes"]) for t in tops["by_bytes"]] == [
        ("b", 9, 70000 + 2 + 1 + 1 + 3 + 3 + (1 << 20) + 1 + 2), ("a", 8, 5008)]
    assert tops["in_root"] == {"entries": 6, "bytes": 4}   # itself, a, b, top.txt, ln, fifo
    odd = report["odd_names"]
    assert odd["not_utf8"]["examples"] == ["b/not-utf8-\\#377"]
    assert odd["newline"]["examples"] == ["b/new\\#012line"]
    assert odd["leading_dash"]["examples"] == ["b/-dash"]
    assert sorted(odd["smb"]["examples"]) == ["b/new\\#012line", "b/q?x", "b/trail."]
    assert odd["long"]["count"] == 0
    assert report["deepest"] == {"depth": 4, "path": "a/sub/deep/er"}
    assert report["oldest"]["path"] == "a/f0" and report["oldest"]["time"] == 100000000
    assert report["newest"]["path"] == "b/f70k" and report["newest"]["time"] == 4000000000
    assert report["dest_held"] is None and report["xattrs"] is None


@pytest.mark.parametrize("rules", [[], ["--exclude=*.txt", "--exclude=/d*/", "--include=f*"]])
def test_the_scanners_path_and_the_plain_walk_agree(weird_src, tmp_path, rules):
    """A per-directory rule (here of a file that exists nowhere) sends the scan through
    the run's scanner; global rules alone are applied by the survey's own walk: the
    same report."""
    plain = survey("--rsync", " ".join(["-aH"] + rules), os.fsdecode(weird_src) + "/")
    scanned = survey("--rsync", " ".join(["-aH", "--filter=:_.no-such-merge-file"] + rules),
                     os.fsdecode(weird_src) + "/")
    plain.pop("seconds")
    scanned.pop("seconds")
    assert plain == scanned
    if rules:
        return      # (anchored rules match other names under "SRC")
    named = survey("--rsync", "-aH", os.fsdecode(weird_src))      # "SRC": its name first
    assert named["types"] == plain["types"] and named["bytes"] == plain["bytes"]
    assert all(t["path"].startswith("src/") for t in named["top_level"]["by_bytes"])


def test_what_dest_holds_by_rsyncs_quick_check(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    build(src, dict(("d%d/f%d" % (i % 3, i), b"x" * (100 * i)) for i in range(12)))
    age(src, everything=True)
    assert run_rsync("-a", str(src) + "/", str(dest) + "/").returncode == 0
    os.utime(dest / "d0" / "f3", (1000, 1000))              # a time differs
    (dest / "d1" / "f4").write_bytes(b"y" * 401)            # a size differs
    (dest / "d2" / "f5").unlink()                           # gone
    report = survey(str(src) + "/", str(dest) + "/")
    held = report["dest_held"]
    assert (held["files"], held["compared_by"]) == (9, "size and mtime")
    assert held["bytes"] == sum(100 * i for i in range(12)) - 300 - 400 - 500
    sized = survey("--rsync", "-a --size-only", str(src) + "/", str(dest) + "/")["dest_held"]
    assert (sized["files"], sized["compared_by"]) == (10, "size")
    # rsync agrees: it would send the other 3
    cp = run_rsync("-n", "-i", str(src) + "/", str(dest) + "/", opts=["-a"])
    sent = [line for line in text(cp.stdout).splitlines() if line.startswith(">f")]
    assert len(sent) == 12 - held["files"]
    # "SRC" (no slash) is copied to DEST/SRC: nothing of it there yet
    assert survey(str(src), str(dest) + "/")["dest_held"]["files"] == 0


def _posix_acl(uid):
    """A system.posix_acl_access value: user::rw- user:UID:r-- group::r-- mask::r-- other::---"""
    entries = [(0x01, 6, 0xffffffff), (0x02, 4, uid), (0x04, 4, 0xffffffff),
               (0x10, 4, 0xffffffff), (0x20, 0, 0xffffffff)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def test_xattrs_and_acls_counted_with_X_and_A(tmp_path):
    src = tmp_path / "src"
    build(src, {"a": b"a", "b": b"b", "c": b"c", "d/e": b"e"})
    try:
        os.setxattr(str(src / "a"), "user.tag", b"1")
        os.setxattr(str(src / "d"), "user.tag", b"2")
        os.setxattr(str(src / "b"), "system.posix_acl_access", _posix_acl(1234))
    except OSError as exc:
        pytest.skip("this file system keeps no user xattrs or ACLs: %s" % exc)
    report = survey("--rsync", "-aXA", str(src) + "/")
    assert (report["xattrs"], report["acls"]) == (2, 1)
    plain = survey(str(src) + "/")
    assert (plain["xattrs"], plain["acls"]) == (None, None)


def test_a_remote_src_over_ssh_gives_the_local_figures(tmp_path, sshd_server):
    src = _tree(str(tmp_path / "src"))
    local = survey("--rsync", "-aH", src + "/")
    remote = survey("--rsync", "-aH -e '%s'" % sshd_server.rsh, sshd_server.remote(src) + "/")
    for key in ("types", "bytes", "size_histogram", "hard_links", "sparse", "odd_names",
                "deepest", "top_level", "largest_files"):
        assert remote[key] == local[key], key
    assert remote["oldest"]["time"] == local["oldest"]["time"]


def test_a_remote_src_that_is_one_file(tmp_path, sshd_server):
    """Its one entry is counted from the stat the remote walker sends (the scanner
    walks directories only)."""
    src = tmp_path / "one-file"
    src.write_bytes(b"x" * 5000)
    remote = survey("--rsync", "-a -e '%s'" % sshd_server.rsh, sshd_server.remote(str(src)))
    assert remote["types"] == {"files": 1, "directories": 0, "symlinks": 0, "others": 0}
    assert remote["bytes"] == 5000 and remote["largest_files"][0]["path"] == "one-file"


def test_table_on_stdout_and_json_file(tmp_path):
    src = _tree(str(tmp_path / "src"))
    out = tmp_path / "survey.json"
    cp = run_msrsync("--survey", "--json", out, "--rsync", "-aH", src + "/")
    assert cp.returncode == 0, text(cp.stderr)
    table = text(cp.stdout)
    report = json.loads(out.read_text())
    assert "entries" in table and "{:,}".format(report["entries"]) in table
    assert "Names a target may refuse" in table and "b/-dash" in table
    assert "Top-level directories by bytes" in table
    assert not os.path.exists(str(tmp_path / "src" / "..dest"))
    assert sorted(os.listdir(str(tmp_path))) == ["src", "survey.json", "tmp"] or \
        "survey.json" in os.listdir(str(tmp_path))


@pytest.mark.parametrize("args, code, words", [
    (["--html", "x.html", "SRC/", "DEST/"], 1, "--html goes with --survey"),
    (["--survey", "--check", "SRC/"], 1, "--survey with --check"),
    (["--survey", "--html", "/nonexistent-dir/x.html", "SRC/"], 11, "--html"),
    (["--survey", "NOSUCH/"], 23, "nothing to survey"),
    (["--survey"], 1, "missing SRC"),
    (["--survey", "--rsync", "-a --files-from=list", "SRC/"], 4, "--files-from"),
])
def test_bad_input_gets_one_line_and_its_code(tmp_path, args, code, words):
    src = tmp_path / "src"
    build(src, {"f": b"f"})
    args = [str(src) + "/" if a == "SRC/" else str(tmp_path / "dest") + "/" if a == "DEST/"
            else str(tmp_path / "nosuch") + "/" if a == "NOSUCH/" else a for a in args]
    cp = run_msrsync(*args, cwd=str(tmp_path))
    err = text(cp.stderr)
    assert cp.returncode == code, err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "dest").exists() and not (tmp_path / "x.html").exists()


def test_nothing_is_made_or_changed(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    build(src, {"a/b": b"b", "c": b"c"})
    before = sorted(os.listdir(str(tmp_path)))
    survey(str(src) + "/", str(dest) + "/")
    assert sorted(os.listdir(str(tmp_path))) == before
    assert sorted(os.listdir(os.environ.get("TMPDIR", "/tmp"))) == sorted(
        os.listdir(os.environ.get("TMPDIR", "/tmp")))


# ------------------------------------------------------------------ the page, in a browser

MEASURE = """
<script>
window.addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    svg.querySelectorAll("rect.bar").forEach(function (bar) {
      var r = bar.getBoundingClientRect();
      out.push({chart: svg.dataset.chart, label: bar.dataset.label,
                value: Number(bar.dataset.value), width: r.width, left: r.left,
                svgLeft: box.left, svgRight: box.right});
    });
    svg.querySelectorAll("text.label").forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (r.left < box.left - 0.5) out.push({chart: svg.dataset.chart, clipped: t.textContent});
    });
  });
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/deps installs it)")
def test_the_html_page_renders_its_figures_in_a_real_browser(tmp_path):
    src = _tree(str(tmp_path / "src"))
    long_name = "x" * 80
    os.makedirs(os.path.join(src, long_name))
    with open(os.path.join(src, long_name, "f"), "wb") as handle:
        handle.write(b"z" * 3000)
    page, out = tmp_path / "survey.html", tmp_path / "survey.json"
    cp = run_msrsync("--survey", "--html", page, "--json", out, "--rsync", "-aH", src + "/")
    assert cp.returncode == 0, text(cp.stderr)
    report = json.loads(out.read_text())
    html = page.read_text()
    # self-contained: nothing to fetch, and the browser is told to fetch nothing
    assert not re.search(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', html)
    assert "default-src 'none'" in html
    # measured by the browser: the page with a script that writes what it laid out
    probe = tmp_path / "probe.html"
    # (its policy lets this one inline script run, nothing else)
    probe.write_text(html.replace("default-src 'none';", "default-src 'none'; script-src "
                                  "'unsafe-inline';").replace("</body>", MEASURE + "</body>"))
    # (its singleton socket's path must be short: a TMPDIR of its own under /tmp)
    short = tempfile.mkdtemp(prefix="chromium-", dir="/tmp")
    try:
        env = dict(os.environ, TMPDIR=short, HOME=short)
        cp = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                             "--user-data-dir=%s" % os.path.join(short, "profile"),
                             "--window-size=1200,3000", "--virtual-time-budget=5000",
                             "--dump-dom", probe.as_uri()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                            stdin=subprocess.DEVNULL, env=env)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    dom = text(cp.stdout)
    found = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert found, text(cp.stderr)[-2000:]
    measured = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")
                          .replace("&lt;", "<").replace("&gt;", ">"))
    assert not [m for m in measured if "clipped" in m], measured
    bars = collections.defaultdict(dict)
    for m in measured:
        bars[m["chart"]][m["label"]] = m
    types = report["types"]
    want = {
        "types": {"files": types["files"], "directories": types["directories"],
                  "symlinks": types["symlinks"], "others": types["others"]},
        "tops-bytes": dict((t["path"], t["bytes"]) for t in report["top_level"]["by_bytes"]),
        "tops-entries": dict((t["path"], t["entries"])
                             for t in report["top_level"]["by_entries"]),
    }
    files_by_bin = [cell["files"] for cell in report["size_histogram"]]
    assert sorted(m["value"] for m in bars["sizes-files"].values()) == sorted(files_by_bin)
    assert sorted(m["value"] for m in bars["sizes-bytes"].values()) == sorted(
        cell["bytes"] for cell in report["size_histogram"])
    for chart, values in want.items():
        assert dict((label, m["value"]) for label, m in bars[chart].items()) == values, chart
    for chart, shown in bars.items():
        top = max(m["value"] for m in shown.values())
        widest = max(m["width"] for m in shown.values())
        assert widest > 100, chart
        for m in shown.values():
            # each bar as long as its figure says, inside its chart
            assert abs(m["width"] - widest * m["value"] / top) < 1.0, (chart, m)
            assert m["svgLeft"] <= m["left"] and m["left"] + m["width"] <= m["svgRight"]


@pytest.mark.parametrize("rules", ["-a", "-a --filter=:_.no-such-merge-file"])
def test_a_huge_directory_is_counted_in_chunks(tmp_path, monkeypatch, rules):
    """Memory does not grow with a directory's size: its entries reach the counting
    SURVEY_CHUNK at a time, on the survey's own walk and on the scanner's."""
    m = load_msrsync()
    monkeypatch.setattr(m, "SURVEY_CHUNK", 50)
    src = tmp_path / "src"
    build(src, dict([("flat/f%03d" % i, b"x" * i) for i in range(470)] +
                    [("flat/sub%d/g" % i, b"g") for i in range(3)]))
    survey_ = m.plan_survey(m.parse_args(["--survey", "--rsync", rules, str(src) + "/"]))
    sizes, entries = [], []
    listing = survey_.tally.listing

    def recorded(rel, path, names, stats, subdirs):
        sizes.append(len(stats))
        entries.append(len(names) + len(subdirs))
        return listing(rel, path, names, stats, subdirs)
    monkeypatch.setattr(survey_.tally, "listing", recorded)
    for source in survey_.sources:
        survey_.tally.begin_source(source, None)
        survey_.lister.list(source)
    survey_.tally.end()
    assert max(sizes) <= 50 and sum(entries) == 1 + 470 + 3 + 3
    assert (survey_.tally.files, survey_.tally.dirs) == (473, 5)
    assert survey_.tally.bytes == sum(range(470)) + 3
