"""Worker hosts lost the hard ways: a link cut under the ssh configuration automation has
(BatchMode yes, no keep-alive of its own), a host that freezes, a host that crashes.

msrsync watches every host session itself (a keep-alive newline it writes, a NUL byte the
host's script answers), so a host that falls silent is given up within HOST_SILENCE
seconds whatever the launcher; the script on the host stops its rsync once msrsync's
keep-alives stop, and a bucket lost with its host runs again only after that, its lost
runs' temporary files removed first. Each case is compared with one plain rsync, and
nothing of the lost host may be left running or lying in DEST.

The hosts are network namespaces with their own sshd (see netns.py). Where a case is not
about the bound itself, the limits are made shorter through msrsync's environment
(MSRSYNC_HOST_SILENCE, MSRSYNC_HOST_FENCE), so that it runs in seconds.

One of the three files on worker hosts: test_hosts.py holds the options, the sessions
and a host lost mid-run (and the runs and trees this file reuses), test_slurm.py the
hosts of a real Slurm cluster.
"""

import json
import os
import signal
import subprocess
import time

import pytest

import netns
from helpers import (OutputLines, transferring, assert_reports_agree, describe, report_args, run_cmd, start_msrsync,
                     text, wait_for)
from test_hosts import (OPTS, QUICK, SLOW, SLOW_CAPS, Run, copies, host_lines,
                        host_summaries, names_host, no_traceback, slash, slow_tree,
                        top_rsyncs, wait_for_copies)

# the bound the man page states: a host cut off is declared gone within this many seconds
DECLARED_WITHIN = 30


@pytest.fixture(scope="module")
def make_hosts(tmp_path_factory):
    yield from netns.serve_hosts(tmp_path_factory)


@pytest.fixture(scope="module")
def slow_src(tmp_path_factory):
    """12 files of 256 KiB, a bucket each with -s 256K, about a second each with SLOW:
    enough that a host is lost while the others still have buckets to run."""
    return slow_tree(tmp_path_factory.mktemp("slow-src") / "src", count=12)


class TimedRun(Run):
    """A differential Run whose stderr lines are read as they come, with the time each
    came at (lines: [(monotonic time, str)])."""

    def __init__(self, tmp_path, srcs, rsync_opts, msrsync_opts, slower=(), env=None,
                 watch=()):
        super().__init__(tmp_path, srcs, rsync_opts, msrsync_opts, slower=slower,
                         watch=watch, env=env)

    def _start(self, args):
        proc = start_msrsync(*args, env=self.env)
        self.output = OutputLines(proc)
        return proc

    @property
    def lines(self):
        return [(t, line.decode("utf-8", "replace")) for t, line in list(self.output.timed)]

    def wait(self, timeout=120):
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.watch:
                self.watch.stop()
        out, err = self.output.joined()
        self.result = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
        return self.result

    def first_line_naming(self, alias):
        return next((t for t, line in self.lines if names_host(line, alias)), None)


def lose_midrun(tmp_path, hs, slow_src, lose, shell, env=None, lost="h3", hosts=None,
                procs=2):
    """A slow run over hs (--hosts `hosts`, all of them by default, through shell) with
    env; once `lost` copies, lose(that host). Returns (the TimedRun, its
    CompletedProcess, when the host was lost): exit 0 and DEST as rsync's are
    asserted."""
    host = hs.get(lost)
    run = TimedRun(tmp_path, [slash(slow_src)], OPTS,
                   ["-p", str(procs)] + SLOW_CAPS +
                   ["--hosts", hosts or ",".join(hs.aliases), "--host-shell", shell,
                    "--json", tmp_path / "summary.json"],
                   slower=SLOW, env=env)
    try:
        assert wait_for(lambda: top_rsyncs(host), 30), "no rsync on %s" % lost
        assert transferring(run.dests[1]), "nothing copied"
        at = time.monotonic()
        lose(host)
        cp = run.wait(timeout=180)
        assert cp.returncode == 0, describe(cp)
        no_traceback(cp)
        run.compare()
    finally:
        host.thaw()
        run.end()
    return run, cp, at


def test_the_batch_configuration_has_no_keep_alive_of_its_own(make_hosts):
    """The control: with the hosts' automation configuration, ssh reports the
    keep-alive Debian sets for batch mode (300 s, a lost link seen after 15 minutes),
    so nothing but msrsync's own watch can see a cut link in seconds."""
    hs = make_hosts(1)
    cp = run_cmd(["ssh", "-F", hs.batch_ssh_config, "-G", "h1"])
    assert cp.returncode == 0, describe(cp)
    found = dict(l.split(None, 1) for l in cp.stdout.decode().splitlines() if " " in l)
    assert found.get("batchmode") == "yes", found.get("batchmode")
    assert found.get("serveraliveinterval") in ("0", "300"), found.get("serveraliveinterval")


@pytest.mark.slow
def test_a_cut_link_under_batch_ssh_is_seen_within_the_bound_and_its_run_stopped_there(
        tmp_path, make_hosts, slow_src):
    """BatchMode yes and no keep-alive in the ssh configuration, h3's link cut mid-run
    (it neither answers nor closes; its rsyncs see the shared storage and go on): a line
    names h3 within the bound, with msrsync's own limits; its buckets run on h1 and h2;
    the script on h3 stops its rsyncs once the keep-alives stop (no rsync is left in
    h3's namespace, though nothing reached it); DEST ends as one rsync's, with no stray
    temporary file."""
    with make_hosts(3) as hs:
        run, cp, at = lose_midrun(tmp_path, hs, slow_src, netns.link_down, hs.batch_shell)
        told = run.first_line_naming("h3")
        assert told is not None, "no line names h3:\n" + describe(cp)
        # (bench/README.md quotes this figure: pytest -s shows it)
        print("\nh3 named %.1f s after its link was cut" % (told - at))
        assert told - at <= DECLARED_WITHIN, "h3 named %.1f s after its link was cut" % (
            told - at)
        assert not [l for l in host_lines(cp, "h3") if l.startswith("msrsync: error")]
        assert wait_for(lambda: not top_rsyncs(hs.get("h3")), 10), hs.get("h3").rsyncs()
        entries = host_summaries(tmp_path / "summary.json")
        assert entries["h3"]["alive"] is False and entries["h3"]["gone_because"], entries
        assert entries["h1"]["alive"] and entries["h2"]["alive"], entries
        after = copies(hs, tmp_path)
        assert after["h1"] and after["h2"], after


@pytest.mark.slow
def test_a_frozen_host_under_ip_netns_exec_is_given_up_and_leaves_no_stray_file(
        tmp_path, make_hosts, slow_src):
    """--host-shell "ip netns exec" (no network, no keep-alive of any kind below
    msrsync): the namespace's every process stopped mid-run. msrsync hears nothing,
    gives the host up, kills its sessions here (the frozen rsyncs die with their
    temporary files in DEST), and removes those files before their buckets run again
    on this machine: DEST ends as one rsync's."""
    with make_hosts(1) as hs:
        ns = hs[0]
        run, cp, at = lose_midrun(tmp_path, hs, slow_src, lambda h: h.freeze(),
                                  "ip netns exec", env=QUICK, lost="h1",
                                  hosts=":,%s:2" % ns.netns, procs=1)
        told = run.first_line_naming(ns.netns)
        assert told is not None and told - at <= 4 + 2 + 5, describe(cp)


@pytest.mark.slow
def test_a_host_that_crashes_leaves_no_stray_temporary_file(tmp_path, make_hosts,
                                                           slow_src):
    """Every process of h2 killed at once mid-run (SIGKILL: its rsyncs leave their
    temporary files in DEST, as a crashed machine does): the buckets it lost run again
    elsewhere, and DEST ends as one rsync's, with none of those files."""
    with make_hosts(3) as hs:
        run, cp, at = lose_midrun(tmp_path, hs, slow_src, lambda h: h.crash(), hs.shell,
                                  env=QUICK, lost="h2")
        assert host_lines(cp, "h2"), describe(cp)


@pytest.mark.slow
def test_a_lost_hosts_buckets_are_neither_failed_nor_counted_twice_in_any_report(
        tmp_path, make_hosts, slow_src):
    """h2 crashes mid-run: once it is gone, the SIGUSR1 line counts the hosts alive,
    names the one gone and no failure, and so does the status file; at the end stderr,
    --stats, --json, the status file and --metrics agree that every bucket is done,
    none failed (a lost run is moved, not failed), and that the bytes done are what DEST
    holds (a lost run's partial bytes are not counted beside its second run's)."""
    with make_hosts(2) as hs:
        run = TimedRun(tmp_path, [slash(slow_src)], OPTS,
                       ["-p", "1"] + SLOW_CAPS + report_args(tmp_path) +
                       ["--hosts", "h1,h2", "--host-shell", hs.shell],
                       slower=SLOW, env=dict(QUICK, MSRSYNC_STATUS_INTERVAL="0.2"))
        try:
            wait_for_copies(hs, ["h2"], tmp_path)
            hs.get("h2").crash()
            # (its first lost run is a warning; the host is gone after a few in a row)
            assert wait_for(lambda: [l for _, l in run.lines if names_host(l, "h2") and
                                     "is gone" in l], 60), run.lines
            os.kill(run.proc.pid, signal.SIGUSR1)
            assert wait_for(lambda: [l for _, l in run.lines if "status:" in l], 10), \
                run.lines
            with open(str(tmp_path / "status.json")) as handle:
                midway = json.load(handle)
            cp = run.wait(timeout=180)
            assert cp.returncode == 0, describe(cp)
            run.compare()
        finally:
            run.end()
        status = [l for _, l in run.lines if "status:" in l]
        assert "[hosts alive 1/2; gone: h2]" in status[0], status
        assert "[failed 0]" in status[0], status
        assert midway["buckets_failed"] == 0 and midway["failures"] == [], midway
        total = midway["buckets_total"]
        assert_reports_agree(tmp_path, text(cp.stdout), text(cp.stderr), total, total,
                             run.dests[1])
