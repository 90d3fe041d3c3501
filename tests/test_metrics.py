"""--metrics FILE: the run's figures in the Prometheus text exposition format.

The file is read by the format's rules (a parser here, strict: HELP and TYPE before a
family's samples, one TYPE a family, metric and label names as the format allows,
label values escaped, values that parse, no series twice, a final newline), while the
run goes on and at its end, and its figures are checked against the --json summary
of the same run."""

import json
import os
import re
import time

import pytest

from helpers import build, run_msrsync, start_msrsync, text, wait_for

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


def parse(data):
    """{(name, ((label, value), ...)): value} of a text-format file, and {name: type};
    AssertionError at the first rule broken."""
    assert data.endswith("\n"), "the file does not end with a newline"
    samples, types, helps, current, seen_families = {}, {}, {}, None, set()
    for number, line in enumerate(data[:-1].split("\n"), 1):
        where = "line %d: %r" % (number, line)
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert NAME.match(name) and name not in helps, where
            helps[name] = help_text
            continue
        if line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert NAME.match(name) and kind in TYPES and name not in types, where
            assert name not in seen_families, "TYPE after its samples: " + where
            types[name], current = kind, name
            continue
        assert line and not line.startswith("#"), where
        match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        assert match, where
        name, _, body, value = match.groups()
        assert name == current, "a sample outside its family: " + where
        seen_families.add(name)
        labels, rest = [], body or ""
        while rest:
            label = LABEL.match(rest)
            assert label, "bad labels: " + where
            labels.append((label.group(1), label.group(2).replace("\\n", "\n")
                           .replace('\\"', '"').replace("\\\\", "\\")))
            rest = rest[label.end():]
        assert len(set(k for k, _ in labels)) == len(labels), where
        key = (name, tuple(sorted(labels)))
        assert key not in samples, "a series twice: " + where
        samples[key] = float(value)
    for name, kind in types.items():
        assert name in helps, "no HELP for " + name
        if kind == "counter":
            assert name.endswith("_total"), name
    return samples, types


def value(samples, name, **labels):
    found = [v for (n, ls), v in samples.items()
             if n == name and all(dict(ls).get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def _slow(tmp_path, wait):
    bindir = tmp_path / "slow-bin"
    bindir.mkdir()
    script = bindir / "rsync"
    script.write_text('#!/bin/sh\ncase "$*" in *--version*|*preflight-*) ;; *) sleep %s;; esac\n'
                      'exec /usr/bin/rsync "$@"\n' % wait)
    script.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (bindir, env["PATH"])
    env["MSRSYNC_STATUS_INTERVAL"] = "0.2"
    return env


def test_the_metrics_follow_the_run_and_end_with_its_figures_and_exit_code(tmp_path):
    src = tmp_path / "src"
    build(src, dict(("d%d/f%02d" % (n % 3, n), "y" * (10 * n)) for n in range(20)))
    # a DEST whose name needs escaping in a label value
    dest = tmp_path / 'de"st\\x'
    metrics, summary = tmp_path / "msrsync.prom", tmp_path / "run.json"
    proc = start_msrsync("-p", "2", "-f", "2", "--metrics", metrics, "--json", summary,
                         "--max-duration", "1h", str(src) + "/", dest, env=_slow(tmp_path, 0.3))
    try:
        def running():
            if not metrics.exists():
                return False
            found, _ = parse(metrics.read_text())
            return value(found, "msrsync_running") == 1 and \
                value(found, "msrsync_buckets", state="done") >= 1
        wait_for(running, 30)
        found, types = parse(metrics.read_text())
        assert value(found, "msrsync_buckets", state="done") <= \
            value(found, "msrsync_buckets", state="total")
        assert ("msrsync_exit_code", ()) not in [(n, ()) for n, _ in found]
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, text(err)
    found, types = parse(metrics.read_text())
    facts = json.loads(summary.read_text())
    run = os.path.basename(facts["buckets_dir"])
    assert all(dict(labels)["run"] == run for _, labels in found)
    assert value(found, "msrsync_info", destination=str(dest) + "") == 1
    assert value(found, "msrsync_running") == 0
    assert value(found, "msrsync_exit_code") == 0
    assert value(found, "msrsync_entries_seen") == facts["entries_total"]
    assert value(found, "msrsync_entries_done_total") == facts["entries_done"]
    assert value(found, "msrsync_bytes_done_total") == sum(10 * n for n in range(20))
    assert value(found, "msrsync_buckets", state="total") == facts["buckets_total"]
    assert value(found, "msrsync_buckets", state="done") == facts["buckets_total"]
    assert value(found, "msrsync_bucket_failures_total") == 0
    assert value(found, "msrsync_rsync_runs_total") == facts["rsync_processes"]
    assert value(found, "msrsync_scan_done") == 1
    assert value(found, "msrsync_window_ended") == 0
    assert abs(value(found, "msrsync_window_end_time_seconds") - (time.time() + 3600)) < 120
    started = value(found, "msrsync_start_time_seconds")
    assert started <= value(found, "msrsync_last_update_time_seconds") <= time.time()
    assert types["msrsync_bytes_done_total"] == "counter"
    assert types["msrsync_buckets"] == "gauge"


def test_worker_hosts_have_their_own_series(tmp_path):
    src = tmp_path / "src"
    build(src, dict(("f%02d" % n, "z" * n) for n in range(12)))
    metrics = tmp_path / "m.prom"
    cp = run_msrsync("--hosts", ":1,hx:1", "--host-shell", "env -u", "-f", "2",
                     "--metrics", metrics, "--json", tmp_path / "run.json",
                     str(src) + "/", tmp_path / "dest")
    assert cp.returncode == 0, text(cp.stderr)
    found, _ = parse(metrics.read_text())
    hosts = json.loads((tmp_path / "run.json").read_text())["hosts"]
    for host in hosts:
        assert value(found, "msrsync_host_alive", host=host["host"]) == 1
        assert value(found, "msrsync_host_buckets_total", host=host["host"]) == host["buckets"]
        assert value(found, "msrsync_host_bytes_total", host=host["host"]) == host["bytes"]
    assert sum(h["buckets"] for h in hosts) == value(found, "msrsync_buckets", state="total")


@pytest.mark.parametrize("where", ["missing/dir/m.prom", "a-file/m.prom"])
def test_a_metrics_file_that_cannot_be_written_is_one_line_before_anything_is_copied(
        tmp_path, where):
    src = tmp_path / "src"
    build(src, {"a": "x"})
    (tmp_path / "a-file").write_text("not a directory")
    cp = run_msrsync("--metrics", tmp_path / where, str(src) + "/", tmp_path / "dest")
    err = text(cp.stderr)
    assert cp.returncode == 11, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("msrsync: error: --metrics")
    assert not (tmp_path / "dest").exists()


def test_the_parser_here_refuses_what_the_format_does(tmp_path):
    """The checks above can fail: a file that breaks a rule is refused."""
    good = '# HELP msrsync_a x\n# TYPE msrsync_a gauge\nmsrsync_a{run="r"} 1\n'
    parse(good)
    for bad in (good[:-1],                                          # no final newline
                good.replace('"r"', '"r\\q"'),                      # a bad escape
                good + 'msrsync_a{run="r"} 2\n',                    # a series twice
                good.replace("gauge", "counter"),                   # a counter not _total
                good + "msrsync_b 1\n",                             # outside its family
                good.replace(" 1\n", " one\n")):                    # not a number
        with pytest.raises((AssertionError, ValueError)):
            parse(bad)
