"""Worker hosts on a real Slurm cluster: srun as the host shell, inside salloc and sbatch.

The cluster (see slurm.py) is Debian's slurm-wlm and munge, private to this module: one
slurmctld here and one slurmd per network-namespace host, made once for all the cases,
which run one after the other on one xdist worker (xdist_group). Each copy is compared
with one plain rsync, and which nodes ran rsyncs is read from their namespaces.

One of the three files on worker hosts: test_hosts.py holds the options, the sessions
and a host lost mid-run (and the runs and trees this file reuses), test_host_loss.py
the hosts lost the hard ways (a cut link, a frozen or crashed host).
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

import slurm
from helpers import MSRSYNC, assert_same_tree, describe, run_rsync, wait_for
from test_hosts import (OPTS, QUICK, SLOW, SLOW_CAPS, Watch, host_summaries, slash, slow_tree,
                        top_rsyncs)

pytestmark = [pytest.mark.xdist_group("slurm"), pytest.mark.slow]

README = os.path.join(os.path.dirname(MSRSYNC), "README.md")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from slurm.serve_cluster(tmp_path_factory, nodes=3)


@pytest.fixture(scope="module")
def slow_src(tmp_path_factory):
    """12 files of 256 KiB (see test_hosts.slow_tree): a bucket each with SLOW_CAPS."""
    return slow_tree(tmp_path_factory.mktemp("slurm-src") / "src", count=12)


def msrsync_words(*args):
    return [sys.executable, MSRSYNC] + [os.fsdecode(a) for a in args]


def oracle(tmp_path, src):
    dest = tmp_path / "oracle"
    cp = run_rsync(slash(src), dest, opts=OPTS)
    assert cp.returncode == 0, describe(cp)
    return dest


def test_hosts_slurm_in_an_allocation_runs_on_every_node_like_rsync(tmp_path, cluster,
                                                                   slow_src):
    """salloc -N3 --ntasks-per-node=2 msrsync --hosts slurm: srun runs the buckets on
    the job's three nodes, two at once on each (the job's tasks, -p not given); DEST is
    rsync's."""
    expected = oracle(tmp_path, slow_src)
    summary = tmp_path / "summary.json"
    watch = Watch(cluster.hosts)
    try:
        cp = cluster.run(["salloc", "-N3", "--ntasks-per-node=2", "--no-kill"] +
                         msrsync_words("-f", "2", "--hosts", "slurm", "--json", summary,
                                       "--rsync", " ".join(OPTS + ["--bwlimit=2000"]),
                                       slash(slow_src), tmp_path / "dest"))
    finally:
        watch.stop()
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(expected, tmp_path / "dest", label_a="rsync", label_b="msrsync")
    entries = host_summaries(summary)
    assert sorted(entries) == cluster.nodes, entries
    assert all(e["rsyncs"] == 2 and e["buckets"] >= 1 for e in entries.values()), entries
    assert all(watch.seen[n] for n in cluster.nodes), watch.seen
    assert max(watch.most.values()) <= 2, watch.most


def test_the_readme_slurm_examples_run_as_written(tmp_path, cluster, slow_src):
    """Each Slurm line of the README's worker-host example, its paths made this test's,
    msrsync this one and its node count this cluster's, run as a shell runs it (inside
    salloc where it is not one): DEST is rsync's."""
    text = open(README).read()
    block = text.split("## Worker hosts", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = re.sub(r"\\\n\s*", "", block).splitlines()
    commands = [c.split("  #", 1)[0].strip() for c in commands
                if "slurm" in c or "srun" in c or "scontrol" in c]
    assert len(commands) >= 2, block
    expected = oracle(tmp_path, slow_src)
    for i, command in enumerate(commands):
        dest = tmp_path / ("dest%d" % i)
        paths = re.findall(r"(/\S+/) (/\S+/)$", command)
        assert paths, command
        line = command[:-len("%s %s" % paths[0])] + "%s %s/" % (
            shlex.quote(os.fsdecode(slash(slow_src))), shlex.quote(str(dest)))
        line = line.replace("msrsync ", " ".join(map(shlex.quote, msrsync_words())) + " ", 1)
        # (the allocation's size made this cluster's)
        line = re.sub(r"(^| )-N ?\d+", r"\1-N%d" % len(cluster.nodes), line)
        if not line.startswith(("salloc", "sbatch")):
            line = "salloc -N3 --no-kill sh -c %s" % shlex.quote(line)
        cp = cluster.run(["sh", "-c", line])
        assert cp.returncode == 0, "%s\n%s" % (line, describe(cp))
        assert_same_tree(expected, dest, label_a="rsync", label_b="msrsync")


def test_hosts_slurm_outside_a_job_is_one_line(tmp_path, cluster):
    env = {k: v for k, v in cluster.env.items() if not k.startswith("SLURM_JOB")}
    env.pop("SLURM_NODELIST", None)
    cp = cluster.run(msrsync_words("--hosts", "slurm", tmp_path, tmp_path / "d"), env=env)
    assert cp.returncode == 1, describe(cp)
    lines = cp.stderr.decode().splitlines()
    assert len(lines) == 1 and "not inside a Slurm job" in lines[0], lines


def _background_job(cluster, tmp_path, src, env=None, caps=SLOW_CAPS, slower=SLOW,
                    procs="2"):
    """salloc -N3 --no-kill running msrsync --hosts slurm in the background; its pid
    file and DEST."""
    pid_file = tmp_path / "msrsync.pid"
    dest = tmp_path / "dest"
    words = msrsync_words("-p", procs, *caps, "--hosts", "slurm", "--rsync",
                          " ".join(OPTS + slower), slash(src), dest)
    inner = "echo $$ > %s; exec %s" % (shlex.quote(str(pid_file)),
                                      " ".join(map(shlex.quote, words)))
    proc = subprocess.Popen(["salloc", "-N3", "--no-kill", "sh", "-c", inner],
                            env=dict(cluster.env, **(env or {})), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc, pid_file, dest


def test_a_node_lost_mid_run_has_its_buckets_run_on_the_others(tmp_path, cluster,
                                                               slow_src):
    """h2's slurmd and every process of it killed while it copies: its srun sessions
    end without rsync's exit status (or fall silent), msrsync names h2 and runs its
    buckets on h1 and h3; DEST is rsync's, with no temporary file left."""
    expected = oracle(tmp_path, slow_src)
    proc, pid_file, dest = _background_job(cluster, tmp_path, slow_src, env=QUICK)
    try:
        assert wait_for(lambda: top_rsyncs(cluster.hosts.get("h2")), 60), \
            "h2 ran no rsync"
        time.sleep(0.3)
        cluster.kill_node("h2")
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        cluster.start_node("h2")
    cp = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert cp.returncode == 0, describe(cp)
    assert re.search(rb"host h2 .*(lost|gone)", err), describe(cp)
    assert_same_tree(expected, dest, label_a="rsync", label_b="msrsync")
    cluster.wait_idle(["h2"], timeout=90)


def _rsyncs_anywhere(cluster, needle):
    found = [(h.alias, h.rsyncs()) for h in cluster.hosts if h.rsyncs()]
    here = subprocess.run(["pgrep", "-af", "rsync"], stdout=subprocess.PIPE).stdout
    found += [("here", l) for l in here.decode().splitlines()
              if needle in l and "msrsync" not in l.split()[1]]
    return found


@pytest.mark.parametrize("how", ["scancel", "SIGTERM"])
def test_scancel_or_sigterm_leaves_no_rsync_on_any_node(tmp_path, cluster, slow_src, how):
    """The job cancelled (scancel), or msrsync sent SIGTERM, while every node copies:
    within seconds no rsync runs on any node nor here."""
    proc, pid_file, dest = _background_job(cluster, tmp_path, slow_src,
                                           slower=["--bwlimit=64"])
    try:
        assert wait_for(lambda: all(top_rsyncs(h) for h in cluster.hosts), 60), \
            [(h.alias, h.rsyncs()) for h in cluster.hosts]
        if how == "scancel":
            jobs = cluster.run(["squeue", "-h", "-o", "%i"]).stdout.split()
            assert len(jobs) == 1, jobs
            cluster.run(["scancel", jobs[0].decode()])
        else:
            os.kill(int(open(pid_file).read()), signal.SIGTERM)
        proc.communicate(timeout=60)
        assert wait_for(lambda: not _rsyncs_anywhere(cluster, str(tmp_path)), 20), \
            _rsyncs_anywhere(cluster, str(tmp_path))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    cluster.wait_idle(cluster.nodes, timeout=90)
