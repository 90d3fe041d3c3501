#!/usr/bin/env python3
"""Benchmark msrsync's worker hosts (--hosts, --host-shell) against local workers.

Needs Python 3.6+ (standard library only), Linux, rsync, openssh (sshd, ssh, ssh-keygen),
iproute2's ip and root: the worker hosts are network namespaces of this machine that the
script makes itself, as the tests do (tests/netns.py): each is joined to this one by a veth
pair with a /30 of the benchmarking range 198.18.0.0/15, and runs its own sshd there with
throwaway keys; an ssh_config names them h1..h4.  They see this machine's file system, so
they share SRC and DEST as --hosts wants; they also share its CPUs and its disk, so what
this measures is what running a bucket through a host shell costs, not what more machines
gain.  No traffic goes anywhere but those namespaces and loopback.

Cases (--only copy,rerun,sshfs,slope), each tool run --reps times (slope: --slope-rounds),
interleaved round-robin, the page cache dropped before every run (as root), medians
reported:

  copy    initial copy of bench.py's tree of small files (--files, 100,000) into an empty
          DEST: rsync -aS --numeric-ids (the reference), msrsync -p 4 (local workers),
          msrsync -p 4 --readahead 0 (local workers without the readahead, which hosts
          on other machines do not get), msrsync --hosts h1:2,h2:2 and --hosts h1,h2,h3,h4 -p 1 with --host-shell
          "ssh -F CONF", and the same two layouts with --host-shell "ip netns exec" (the
          namespaces' names as hosts: no ssh, the host script's path alone); every msrsync
          run with the same -f (--bucket-files, 1000) so that a bucket costs the same
  rerun   the same commands again onto the complete DEST (up-to-date re-run)
  sshfs   suite.py's latency-bound source (a small-file tree over sshfs without caches,
          through bench/relay.py's delay): rsync, msrsync -p 2/4/8 here, and msrsync
          --hosts h1 / h1,h2 / h1,h2,h3,h4 -p 2 over ssh, every msrsync run with the same
          -f (--sshfs-bucket-files, about 20 buckets); initial copy and re-run
  slope   what one bucket costs, start-up apart: the slope of run time over buckets.  Two
          trees of small files cut in exactly 8 and 48 buckets of 1,000 entries
          (--slope-small, --slope-large, --slope-bucket-files; SRC/ holds F - 1 files,
          each further bucket is a directory of F - 1 files), each copied into an empty
          DEST with -f F by msrsync -p 4 (local), --hosts NS1:2,NS2:2 --host-shell "ip
          netns exec" and --hosts h1:2,h2:2 --host-shell "ssh -F CONF"; in each of
          --slope-rounds (5) rounds every layout copies both trees back to back (the
          order swapped every other round).  Per layout: the median over rounds of
          (t_large - t_small) / (buckets_large - buckets_small) in ms a bucket, its range,
          the intercept t_small - buckets_small x slope (start-up), the ratio of its slope
          to the local one, the same slope in CPU; the buckets each run really ran come
          from its --json.  --compare OLD (a file, or a git revision of this repository)
          runs that msrsync too, side by side in every round: before/after in one session

Each table of copy, rerun and sshfs gives per tool its median, the ratio to rsync, the
buckets msrsync ran (from its --json), the wall time per bucket, and against the local run
with as many rsyncs at once (msrsync -p N): the extra wall time per bucket, the same in a
worker's time (x the rsyncs at once) and the extra CPU per bucket (the tool's tree plus the
hosts' sshds).

    python3 bench/hosts.py --quick --reps 1        # smoke run, a few minutes
    python3 bench/hosts.py --json hosts.json       # full sizes, 3 repetitions
    python3 bench/hosts.py --only sshfs --sshfs-files 2000
    python3 bench/hosts.py --msrsync /path/to/msrsync   # one that has --hosts
    python3 bench/hosts.py --only slope --json slope.json      # a few minutes
    python3 bench/hosts.py --only slope --compare HEAD~1       # before/after, one session
    python3 bench/hosts.py --only slope --slope-bucket-files 50 --slope-rounds 1  # smoke

Everything it starts (the hosts' sshds, their namespaces and veth pairs, the loopback sshd,
the relay, the sshfs mount) is stopped by pid and by the names it made, at the end, on an
error, on Ctrl-C and on SIGTERM; bench/README.md describes the figures.
"""

import atexit
import collections
import importlib.util
import os
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import longtail  # noqa: E402
import suite  # noqa: E402
from common import (MAX_FILE_SIZE_BITS, MiB, BenchError, Spawner,  # noqa: E402
                    add_run_options, cached_tree, changed_since, clean_workdir,
                    command_prefix, dataset_layout, exit_problem, file_digest,
                    filesystem_note, filesystem_of, fill_sizes, find_slow_runs, first_line_of,
                    fmt_load, fmt_ratio, fmt_seconds, load_servers, load_span, loadavg, log,
                    machine_env, make_run_dirs, make_workdir, measure, median_or_none,
                    msrsync_version, note_failure, ok_note, parse_int_list, positive_int,
                    print_header_end, print_results, print_workdir, proc_cpu_ticks,
                    random_block, read_json, remove_tree, report_end, require_msrsync,
                    rotation, run_main, script_parser, settle_caches, start_sshd,
                    summary_row, wait_idle)

HOSTS_VERSION = "1.0"
REPO = os.path.dirname(HERE)
NETNS_PY = os.path.join(REPO, "tests", "netns.py")
DEFAULT_MSRSYNC = os.path.join(REPO, "msrsync")
RSYNC_OPTS = ["-aS", "--numeric-ids"]          # msrsync's default rsync options
DEFAULT_SEED = bench.DEFAULT_SEED              # bench.py's tree, suite.py's sshfs tree
FULL = {"files": 100000, "sshfs_files": 5000, "slope_bucket_files": 1000}
QUICK = {"files": 10000, "sshfs_files": 300, "slope_bucket_files": 200}
CASES = ("copy", "rerun", "sshfs", "slope")
N_HOSTS = 4                                     # h1..h4
SLOPE_HOSTS = 2                                 # slope: --hosts h1:2,h2:2
SLOPE_SLOTS = 2                                 # ... and local -p 4 (hosts x slots)
SCENARIO_INITIAL = bench.SCENARIO_INITIAL
SCENARIO_UPTODATE = bench.SCENARIO_UPTODATE
OUTLIER_FACTOR = bench.OUTLIER_FACTOR

# One tool: label (the table's), kind (rsync, local, ssh, netns), slots (rsyncs at once),
# args (msrsync's options before -f, as run), shown (the same for the table, hosts by their
# alias), ref (the label of the local run with as many rsyncs at once: the base of the
# "extra per bucket" columns; None for it and for rsync).
Tool = collections.namedtuple("Tool", "label kind slots args shown ref")


# ---------------------------------------------------------------------------
# The hosts: tests/netns.py, without what only the tests need
# ---------------------------------------------------------------------------

def load_netns(servers):
    """tests/netns.py as a module.  It imports `remote`, meaning tests/remote.py (SERVERS,
    from load_servers()), while bench/remote.py holds that name here (suite.py imports
    it): the name points at SERVERS while netns.py loads, then back."""
    if not os.path.exists(NETNS_PY):
        raise BenchError("%s not found: it makes the worker hosts" % NETNS_PY)
    saved = sys.modules.get("remote")
    sys.modules["remote"] = servers
    try:
        spec = importlib.util.spec_from_file_location("msrsync_test_netns", NETNS_PY)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop("remote", None)
        else:
            sys.modules["remote"] = saved
    return module


def make_hosts(netns, servers, directory, count):
    """COUNT hosts h1..hN (not started: the caller starts them and closes them in a
    finally).  They are tests/netns.py's with two changes for measuring:

    - the sshd runs in `ip netns exec`'s mount namespace, not in a private one of its own
      with a wrapper over every rsync binary (the tests' record of which host ran which
      rsync: a shell and a log line more per rsync, which would be measured here);
    - the names are msrb<pid>h<n> (namespaces), msrb<pid>a<n> and msrb<pid>b<n> (veth
      pairs), so that they are told from the tests' msrt<pid>... at a glance.

    Addresses are still taken under the tests' lock, so a test session running at the same
    time never gets the same /30."""

    class BenchHost(netns.Host):
        def __init__(self, directory, alias, number):
            netns.Host.__init__(self, directory, alias)
            tag = "msrb%d" % os.getpid()
            self.netns = "%sh%d" % (tag, number)
            self.veth = "%sa%d" % (tag, number)
            self.peer = "%sb%d" % (tag, number)

        def start(self, host_key, authorized_keys):
            os.makedirs(self.directory, exist_ok=True)
            self._write_config(host_key, authorized_keys)
            argv = [netns._ip(), "netns", "exec", self.netns, netns.SSHD, "-D", "-E",
                    self.log, "-f", self.config]
            with open(self.out, "ab") as out:
                # ip netns exec execs sshd: the pid is sshd's; SIGTERM if we die
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, close_fds=True,
                                             preexec_fn=servers._pdeathsig_and_session)
            self._wait_for_banner()

    class BenchHosts(netns.Hosts):
        def __init__(self, directory, count):
            netns.Hosts.__init__(self, directory, [])
            self.hosts = [BenchHost(self.directory, "h%d" % (i + 1), i + 1)
                          for i in range(count)]

    return BenchHosts(directory, count)


def sshd_ticks(hosts):
    """CPU clock ticks of the hosts' sshds and every session they reaped (the rsyncs run
    over ssh are in there)."""
    total = 0
    for h in hosts or ():
        if h.pid is not None:
            total += proc_cpu_ticks(h.pid) or 0
    return total


def timed(argv, times=5):
    """Median seconds of ARGV run TIMES times (output discarded); None if it fails."""
    walls = []
    for _ in range(times):
        t0 = time.monotonic()
        try:
            code = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        if code != 0:
            return None
        walls.append(time.monotonic() - t0)
    return statistics.median(walls)


def output_of(argv):
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60).stdout.decode(
                                  "utf-8", "replace")
    except (OSError, subprocess.SubprocessError) as exc:
        return "(%s)" % exc


# ---------------------------------------------------------------------------
# What runs, torn down whatever happens
# ---------------------------------------------------------------------------

class Rig(object):
    """Everything the script starts: the loopback sshd, the relay and the sshfs mount
    (case sshfs), then the hosts.  close() stops them in the reverse order (the hosts
    first: their sshds hold a copy of the mount), each step even if one before failed;
    it runs once, from the finally of run() or else from atexit, with SIGINT and
    SIGTERM ignored meanwhile so that a second Ctrl-C cannot leave half of it."""

    def __init__(self):
        self.servers = self.netns = None
        self.server = self.relay = self.mount = self.hosts = None
        self.relay_stats = None
        self.closed = False
        self.leftovers = []

    def close(self):
        if self.closed:
            return
        self.closed = True
        old = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                old[sig] = signal.signal(sig, signal.SIG_IGN)
            except (ValueError, OSError):
                pass
        try:
            if self.hosts is not None:
                try:
                    self.hosts.close()
                except Exception as exc:    # noqa: BLE001 - teardown goes on regardless
                    log("stopping the hosts: %s" % exc)
                for h in self.hosts:
                    try:
                        self.leftovers += h.leftovers()
                    except Exception as exc:    # noqa: BLE001
                        self.leftovers.append("%s: %s" % (h.alias, exc))
                log("hosts stopped" + ("; LEFT: %s" % "; ".join(self.leftovers)
                                       if self.leftovers else ""))
            if self.mount is not None:
                try:
                    self.mount.stop()
                except Exception as exc:    # noqa: BLE001
                    log("unmounting sshfs: %s" % exc)
                if os.path.ismount(self.mount.mountpoint):
                    self.leftovers.append("mount %s" % self.mount.mountpoint)
            if self.relay is not None:
                try:
                    self.relay_stats = self.relay.stop()
                except Exception as exc:    # noqa: BLE001
                    log("stopping the relay: %s" % exc)
            if self.server is not None:
                try:
                    self.server.stop()
                    log("loopback sshd stopped")
                except Exception as exc:    # noqa: BLE001
                    log("stopping the loopback sshd: %s" % exc)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------

def host_tools(hosts, ip_path, conf_shown):
    """The tools of the copy and rerun cases."""
    ns = [h.netns for h in hosts]
    shown_ns = ["NS%d" % (i + 1) for i in range(len(ns))]
    ssh = ["--host-shell", hosts.shell]
    ssh_shown = ["--host-shell", "ssh -F %s" % conf_shown]
    ipx = ["--host-shell", "%s netns exec" % ip_path]
    ipx_shown = ["--host-shell", "ip netns exec"]
    local = "msrsync -p 4"

    def layouts(names):
        """2 hosts x 2 rsyncs, 4 hosts x 1: (--hosts value, more options)."""
        return [("%s:2,%s:2" % (names[0], names[1]), []),
                (",".join(names[:4]), ["-p", "1"])]
    tools = [Tool("rsync", "rsync", 1, [], [], None),
             Tool(local, "local", 4, ["-p", "4"], ["-p", "4"], None),
             # the hosts read nothing ahead: what the local readahead is worth
             Tool(local + " --readahead 0", "local", 4, ["-p", "4", "--readahead", "0"],
                  ["-p", "4", "--readahead", "0"], local)]
    for kind, names, shown_names, shell, shell_shown in (
            ("ssh", hosts.aliases, hosts.aliases, ssh, ssh_shown),
            ("netns", ns, shown_ns, ipx, ipx_shown)):
        for (spec, extra), (shown, _) in zip(layouts(names), layouts(shown_names)):
            tools.append(Tool("%s: --hosts %s" % (kind, " ".join([shown] + extra)), kind, 4,
                              ["--hosts", spec] + extra + shell,
                              ["--hosts", shown] + extra + shell_shown, local))
    return tools


def sshfs_tools(hosts, args, conf_shown):
    """The tools of the sshfs case: rsync, -p N here, and as many rsyncs at once on 1, 2,
    4 hosts over ssh."""
    slots = args.sshfs_slots
    tools = [Tool("rsync", "rsync", 1, [], [], None)]
    for n in args.sshfs_hosts:
        p = n * slots
        tools.append(Tool("msrsync -p %d" % p, "local", p, ["-p", str(p)], ["-p", str(p)],
                          None))
    for n in args.sshfs_hosts:
        names = ",".join(hosts.aliases[:n])
        opts = ["--hosts", names, "-p", str(slots)]
        tools.append(Tool("ssh: --hosts %s -p %d" % (names, slots), "ssh", n * slots,
                          opts + ["--host-shell", hosts.shell],
                          opts + ["--host-shell", "ssh -F %s" % conf_shown],
                          "msrsync -p %d" % (n * slots)))
    return tools


def tool_argv(tool, src, dst, args, bucket_opts, json_path, shown=False):
    src_slash, dst_slash = src.rstrip("/") + "/", dst.rstrip("/") + "/"
    if tool.kind == "rsync":
        return ["rsync" if shown else args.rsync] + RSYNC_OPTS + [src_slash, dst_slash]
    prefix = ["msrsync"] if shown else command_prefix(args.msrsync)
    return (prefix + (tool.shown if shown else tool.args) + bucket_opts
            + ["--json", "RUN.json" if shown else json_path] + [src_slash, dst_slash])


def shown_command(tool, args, bucket_opts):
    argv = tool_argv(tool, "SRC", "DST", args, bucket_opts, None, shown=True)
    return "`%s`" % " ".join(shlex.quote(a) for a in argv)


# ---------------------------------------------------------------------------
# The timed runs
# ---------------------------------------------------------------------------

def slug(text):
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_")


def run_files(ctx, name):
    """(log, JSON) of the run NAME, in the case's logs/ and json/."""
    d = ctx["case_dir"]
    return os.path.join(d, "logs", name + ".log"), os.path.join(d, "json", name + ".json")


def timed_run(ctx, fields, argv, log_path, json_path, src, dst, expected, initial, check):
    """One timed run of ARGV and its record (FIELDS: what ran, first), not yet kept:
    DST removed first when INITIAL, the page cache dropped, the hosts' sshds' CPU
    counted, msrsync's --json read from JSON_PATH (None: plain rsync), the copy checked
    against SRC (EXPECTED, its TreeCount) when CHECK.  record["ok"] and
    record["problems"] say how it went."""
    a = ctx["args"]
    if json_path is not None:
        remove_tree(json_path)
    t0 = time.monotonic()
    if initial:
        remove_tree(dst)
    dropped = settle_caches(not a.no_drop_caches)
    prep = time.monotonic() - t0
    hosts = ctx["hosts"]
    ticks0 = sshd_ticks(hosts)
    m = measure(argv, log_path, ctx["spawner"])
    idle = all(wait_idle(ctx["servers"], h.pid) for h in hosts if h.pid is not None)
    sshd_cpu = (sshd_ticks(hosts) - ticks0) / float(ctx["clk_tck"])
    summary = read_json(json_path) if json_path is not None else None
    record = dict(fields)
    record.update({
        "argv": argv, "wall_s": m.wall,
        "cpu_user_s": m.user, "cpu_sys_s": m.sys, "cpu_s": m.user + m.sys,
        "sshd_cpu_s": sshd_cpu, "maxrss_kib": m.maxrss_kib, "exit_code": m.exit_code,
        "cache_dropped": dropped, "untimed_prep_s": prep, "loadavg_after": loadavg(),
        "log": log_path, "check": None, "buckets": None, "rsync_processes": None,
        "hosts": None,
    })
    problems = []
    if m.exit_code != 0:
        problems.append(exit_problem(m.exit_code, log_path))
    if summary is not None:
        record["buckets"] = summary.get("buckets_total")
        record["rsync_processes"] = summary.get("rsync_processes")
        record["hosts"] = [{"host": h.get("host"), "buckets": h.get("buckets"),
                            "failures": h.get("failures")} for h in summary.get("hosts", [])]
    elif json_path is not None and m.exit_code == 0:
        problems.append("msrsync wrote no --json summary to %s" % json_path)
    if check:
        found = bench.check_copy(src, dst, expected, a, log_path)
        record["check"] = "ok" if not found else "; ".join(found)
        problems += found
    if not idle:
        problems.append("a host's sshd still had sessions 60 s after the run")
    record["ok"] = not problems
    record["problems"] = problems
    return record


def run_one(ctx, case, tool, scenario, rep, src, dst, expected, bucket_opts, runs,
            failures):
    """One timed run; appends its record to RUNS and returns it."""
    a = ctx["args"]
    name = "%s-%s-rep%d" % (slug(tool.label), scenario.split()[0], rep)
    log_path, json_path = run_files(ctx, name)
    argv = tool_argv(tool, src, dst, a, bucket_opts, json_path)
    record = timed_run(
        ctx, {"case": case, "rep": rep, "tool": tool.label, "kind": tool.kind,
              "slots": tool.slots, "scenario": scenario},
        argv, log_path, json_path if tool.kind != "rsync" else None, src, dst, expected,
        scenario == SCENARIO_INITIAL, scenario == SCENARIO_INITIAL or ctx["rerun_only"])
    runs.append(record)
    log("rep %d  %-34s %-17s %7.2fs  cpu %6.2fs  sshd %5.2fs  buckets %4s  %s  (prep %.1fs)"
        % (rep, tool.label, scenario, record["wall_s"], record["cpu_s"],
           record["sshd_cpu_s"],
           record["buckets"] if record["buckets"] is not None else "-",
           "ok" if record["ok"] else "FAILED", record["untimed_prep_s"]))
    note_failure(failures, "%s, %s, rep %d" % (tool.label, scenario, rep), record["problems"])
    return record


def run_tools(ctx, case, tools, scenarios, src, expected, bucket_opts):
    """bench.py's round robin: at repetition r the order is rotated by r; each tool does
    its initial copy then its re-run back to back (the re-run needs that DEST).  With the
    re-run alone, DEST is made up to date once, untimed, by plain rsync."""
    a = ctx["args"]
    d = make_run_dirs(ctx["case_dir"])
    dst = os.path.join(d, "dst")
    runs, failures = [], []
    ctx["rerun_only"] = scenarios == [SCENARIO_UPTODATE]
    if ctx["rerun_only"]:
        bench.make_uptodate(src, dst, expected, a, d)
    for rep in range(1, a.reps + 1):
        log("%s: repetition %d/%d" % (case, rep, a.reps))
        for tool in rotation(tools, rep):
            if ctx["rerun_only"]:
                run_one(ctx, case, tool, SCENARIO_UPTODATE, rep, src, dst, expected,
                        bucket_opts, runs, failures)
                continue
            first = run_one(ctx, case, tool, SCENARIO_INITIAL, rep, src, dst, expected,
                            bucket_opts, runs, failures)
            if SCENARIO_UPTODATE in scenarios and first["exit_code"] == 0:
                run_one(ctx, case, tool, SCENARIO_UPTODATE, rep, src, dst, expected,
                        bucket_opts, runs, failures)
    remove_tree(dst)
    return runs, failures


# ---------------------------------------------------------------------------
# Summary and tables
# ---------------------------------------------------------------------------

def summarize(tools, runs, scenario):
    """One row per tool: medians over its good runs, the ratio to rsync and the costs per
    bucket against its local reference (Tool.ref)."""
    rows = []
    for tool in tools:
        row, good = summary_row(
            [r for r in runs if r["tool"] == tool.label and r["scenario"] == scenario],
            {"scenario": scenario, "tool": tool.label, "kind": tool.kind,
             "slots": tool.slots, "ref": tool.ref})
        if good:
            row.update({
                "cpu_s": statistics.median(r["cpu_s"] for r in good),
                "sshd_cpu_s": statistics.median(r["sshd_cpu_s"] for r in good),
            })
            row["cpu_total_s"] = row["cpu_s"] + row["sshd_cpu_s"]
            buckets = [r["buckets"] for r in good if r["buckets"] is not None]
            row["buckets"] = statistics.median(buckets) if buckets else None
            row["buckets_range"] = [min(buckets), max(buckets)] if buckets else None
            per_host = collections.OrderedDict()
            for r in good:
                for h in r["hosts"] or []:
                    per_host.setdefault(h["host"], []).append(h["buckets"] or 0)
            row["host_buckets"] = collections.OrderedDict(
                (h, statistics.median(v)) for h, v in per_host.items())
        rows.append(row)
    by_label = dict((r["tool"], r) for r in rows)
    base = next((r for r in rows if r["kind"] == "rsync" and "median_s" in r), None)
    for row in rows:
        if "median_s" not in row:
            continue
        row["ratio_to_rsync"] = row["median_s"] / base["median_s"] if base else None
        b = row.get("buckets")
        row["ms_per_bucket"] = 1000.0 * row["median_s"] / b if b else None
        ref = by_label.get(row["ref"]) if row["ref"] else None
        if b and ref is not None and "median_s" in ref:
            extra = row["median_s"] - ref["median_s"]
            row["extra_ms_per_bucket"] = 1000.0 * extra / b
            row["extra_slot_ms_per_bucket"] = 1000.0 * extra * row["slots"] / b
            row["extra_cpu_ms_per_bucket"] = 1000.0 * (row["cpu_total_s"]
                                                       - ref["cpu_total_s"]) / b
    return rows


def failures_of(runs):
    return ["%s, %s, rep %d: %s" % (r["tool"], r["scenario"], r["rep"],
                                    "; ".join(r["problems"])) for r in runs if not r["ok"]]


def find_outliers(runs, rows):
    return bench.find_outliers(runs, rows)


def markdown_table(rows, with_scenario):
    cols = (["scenario"] if with_scenario else []) + [
        "tool", "median s", "min", "max", "ratio to rsync", "buckets", "ms/bucket",
        "+ms/bucket", "+slot-ms/bucket", "CPU s", "sshd CPU s", "+CPU ms/bucket"]
    out = ["| " + " | ".join(cols) + " |",
           "|" + ("---|" * (2 if with_scenario else 1)) + "---:|" * (len(cols) - (
               2 if with_scenario else 1))]
    f0 = lambda v: "%.0f" % v if v is not None else ""    # noqa: E731
    f1 = lambda v: "%.1f" % v if v is not None else ""    # noqa: E731
    for r in rows:
        lead = ([r["scenario"]] if with_scenario else [])
        if "median_s" not in r:
            out.append("| " + " | ".join(lead + ["%s" % r["tool"], "FAILED (%d/%d ok)" % (
                r["ok_runs"], r["runs"])] + [""] * (len(cols) - len(lead) - 2)) + " |")
            continue
        buckets = ""
        if r.get("buckets") is not None:
            lo, hi = r["buckets_range"]
            buckets = f0(r["buckets"]) + (" (%d-%d)" % (lo, hi) if lo != hi else "")
        cells = lead + [
            r["tool"] + ok_note(r), fmt_seconds(r["median_s"]), fmt_seconds(r["min_s"]),
            fmt_seconds(r["max_s"]),
            "%.2f" % r["ratio_to_rsync"] if r.get("ratio_to_rsync") else "-",
            buckets, f1(r.get("ms_per_bucket")), f1(r.get("extra_ms_per_bucket")),
            f1(r.get("extra_slot_ms_per_bucket")), fmt_seconds(r["cpu_s"]),
            fmt_seconds(r["sshd_cpu_s"]) if r["kind"] == "ssh" else "-",
            f1(r.get("extra_cpu_ms_per_bucket"))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def figures_line(ref):
    """What the per-bucket columns are; REF names the local run a host run is set
    against."""
    return (
        "ms/bucket = median / buckets (buckets: the median of msrsync's `buckets_total` in "
        "its `--json`, the range when it varied); +ms/bucket = (median - the median of %s) "
        "/ buckets: the wall time a bucket costs more through the host shell, msrsync's "
        "check of every host before it starts (one shell a host) included; "
        "+slot-ms/bucket = the same x the rsyncs at once: what one worker loses a bucket; "
        "CPU s = user+system of the tool and every process it waited for (os.wait4); sshd "
        "CPU s = the hosts' sshds and their sessions, the rsyncs run over ssh included; "
        "+CPU ms/bucket = (CPU s + sshd CPU s - the same of %s) / buckets" % (ref, ref))


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def case_result(case, title, lines, rows, runs, failures, outliers, with_scenario,
                skipped=None):
    return {"case": case, "title": title, "lines": lines, "rows": rows, "runs": runs,
            "failures": failures, "outliers": outliers,
            "table": markdown_table(rows, with_scenario) if rows else "", "skipped": skipped}


def print_result(res):
    print("## %s" % res["title"])
    print_results(res, OUTLIER_FACTOR)


def host_spread(rows):
    """"ssh: --hosts h1:2,h2:2: h1 26, h2 25; ..." from the rows' median buckets a host."""
    parts = []
    for r in rows:
        hb = r.get("host_buckets")
        if hb:
            parts.append("%s: %s" % (r["tool"], ", ".join(
                "%s %g" % (re.sub(r"^msrb\d+h", "NS", h), v) for h, v in hb.items())))
    return "; ".join(parts)


def run_local_cases(ctx, cases):
    """Cases copy and rerun: one loop (each tool's copy then its re-run), two tables."""
    a = ctx["args"]
    tools = ctx["host_tools"]
    bucket_opts = ["-f", str(a.bucket_files)]
    scenarios = ([SCENARIO_INITIAL] if "copy" in cases else []) + (
        [SCENARIO_UPTODATE] if "rerun" in cases else [])
    ctx["case_dir"] = os.path.join(ctx["workdir"], "runs", "local")
    t0, la0 = time.monotonic(), loadavg()
    runs, failures = run_tools(ctx, "copy+rerun", tools, scenarios, ctx["src"],
                               ctx["expected"], bucket_opts)
    seconds = time.monotonic() - t0
    results = []
    for scenario, case, number in ((SCENARIO_INITIAL, "copy", 1),
                                   (SCENARIO_UPTODATE, "rerun", 2)):
        if case not in cases:
            continue
        mine = [r for r in runs if r["scenario"] == scenario]
        rows = summarize(tools, mine, scenario)
        dropped = sum(1 for r in mine if r["cache_dropped"])
        lines = [
            "commands: %s" % "; ".join(shown_command(t, a, bucket_opts) for t in tools),
            "hosts h1..h4: network namespaces of this machine, each with its own sshd "
            "(CONF: the ssh_config naming them); NS1..NS4: the same namespaces by name, "
            "run by `ip netns exec NS sh` (no ssh); every layout runs 4 rsyncs at once, "
            "as msrsync -p 4 does here",
            "%s; %s" % ("DEST removed (untimed) before each run; counts and bytes checked "
                        "after it" if scenario == SCENARIO_INITIAL else
                        "each run onto the DEST its own initial copy made just before"
                        if not ctx["rerun_only"] else
                        "DEST made up to date once (untimed, rsync); counts and bytes "
                        "checked after each run",
                        "page cache dropped before %d of %d runs" % (dropped, len(mine))),
            figures_line("msrsync -p 4"),
            "buckets a host ran (medians): %s" % (host_spread(rows) or "-"),
            "%.0f s for the copy and re-run loop; %s" % (seconds,
                                                         load_span(la0, loadavg())),
        ]
        results.append(case_result(
            case, "%d. %s: %s" % (number, scenario, ctx["dataset_about"]), lines, rows, mine,
            failures_of(mine), find_outliers(mine, rows), False))
    return results


def verify_sshfs_seen(ctx, mountpoint):
    """None when every host sees the sshfs mount at MOUNTPOINT, through ssh and through
    ip netns exec, as this machine does; else why not."""
    want = sorted(os.listdir(mountpoint))
    if not want:
        return "the sshfs mount %s lists nothing here" % mountpoint
    hosts = ctx["rig"].hosts
    script = "ls -A %s" % shlex.quote(mountpoint)
    ip_path = ctx["ip"]
    for h in hosts:
        for how, argv in (("ssh -F CONF %s" % h.alias,
                           shlex.split(hosts.shell) + [h.alias, script]),
                          ("ip netns exec %s" % h.netns,
                           [ip_path, "netns", "exec", h.netns, "sh", "-c", script])):
            got = sorted(output_of(argv).split())
            if got != want:
                return ("host %s does not see the sshfs mount at %s (%s lists %s, this "
                        "machine %s)" % (h.alias, mountpoint, how, got[:5] or "nothing",
                                         want))
    return None


def run_sshfs_case(ctx):
    a = ctx["args"]
    rig = ctx["rig"]
    title = ("3. latency-bound source: sshfs through a %.1f ms relay, 1/2/4 hosts"
             % a.delay_ms)
    if ctx.get("sshfs_skip"):
        return [case_result("sshfs", title, [], [], [], [], [], True,
                            skipped=ctx["sshfs_skip"])]
    why = verify_sshfs_seen(ctx, rig.mount.mountpoint)
    if why:
        return [case_result("sshfs", title, [], [], [], [], [], True, skipped=why)]
    log("sshfs: every host sees %s (ssh and ip netns exec)" % rig.mount.mountpoint)
    tools = sshfs_tools(rig.hosts, a, ctx["conf_shown"])
    bucket_opts = ["-f", str(a.sshfs_bucket_files)] if a.sshfs_bucket_files else []
    ctx["case_dir"] = os.path.join(ctx["workdir"], "runs", "sshfs")
    data = ctx["sshfs_data"]
    t0, la0 = time.monotonic(), loadavg()
    runs, failures = run_tools(ctx, "sshfs", tools, [SCENARIO_INITIAL, SCENARIO_UPTODATE],
                               rig.mount.mountpoint, data.count, bucket_opts)
    seconds = time.monotonic() - t0
    rows = (summarize(tools, runs, SCENARIO_INITIAL)
            + summarize(tools, runs, SCENARIO_UPTODATE))
    dropped = sum(1 for r in runs if r["cache_dropped"])
    lines = [
        "SRC: %s over sshfs: `sshfs -o ssh_command='ssh -p RELAY ...',sftp_server=%s,%s "
        "HOST:TREE MNT` from a loopback sshd through bench/relay.py (%.3f ms added each "
        "way; no sshfs cache, no kernel name or attribute cache: every lookup, stat and "
        "read is a round trip), as suite.py's section f; the hosts see the mount at the "
        "same path (checked through ssh and ip netns exec before the runs)"
        % (data.about, suite.sftp_server(), ",".join(suite.SSHFS_CACHE_OPTS), a.delay_ms),
        "commands: %s" % "; ".join(shown_command(t, a, bucket_opts) for t in tools),
        "msrsync's bucket caps: %s" % ("-f %d" % a.sshfs_bucket_files
                                       if a.sshfs_bucket_files else "its own (no -f, -s)"),
        "initial copy into an empty DEST (removed untimed), then the same command again "
        "onto it; counts and bytes checked after each copy; page cache dropped before "
        "%d of %d runs" % (dropped, len(runs)),
        figures_line("msrsync -p N with as many rsyncs at once (hosts x %d)" % a.sshfs_slots),
        "buckets a host ran (medians, initial copy): %s" % (
            host_spread([r for r in rows if r["scenario"] == SCENARIO_INITIAL]) or "-"),
        "%.0f s; %s" % (seconds, load_span(la0, loadavg())),
    ]
    return [case_result("sshfs", title, lines, rows, runs, failures,
                        find_outliers(runs, rows), True)]


# ---------------------------------------------------------------------------
# Case slope: what a bucket costs on a host, its start-up apart
# ---------------------------------------------------------------------------

# One slope tree: its name (small, large), path, TreeCount, the buckets msrsync -f F cuts
# it in, and a line about it.
SlopeTree = collections.namedtuple("SlopeTree", "name path count buckets about")

# One tool of the slope case: label (the table's), layout (the same without the version),
# kind (local, netns, ssh), version (None, or new/old with --compare), msrsync (its path),
# args (its options before -f, as run) and shown (the same for the table).
SlopeTool = collections.namedtuple("SlopeTool",
                                   "label layout kind version msrsync args shown")


def build_slope_tree(path, buckets, files, seed):
    """PATH with BUCKETS x FILES entries that msrsync -f FILES cuts in BUCKETS buckets of
    FILES entries each: FILES - 1 files in PATH itself (PATH and its files: one bucket of
    its own, run without recursion) and BUCKETS - 1 directories b0001... of FILES - 1
    files each (a subtree of FILES entries: a bucket each, run with -r).  Sizes of 0-8
    KiB and contents as bench.py's tree; bucket B's files depend on (SEED, B) alone, so
    that the small tree is the first buckets of the large one."""
    block = random_block(random.Random(seed), MiB)
    width = len(str(max(files - 2, 1)))
    os.makedirs(path)
    for b in range(buckets):
        d = path if b == 0 else os.path.join(path, "b%04d" % b)
        if b:
            os.makedirs(d)
        rng = random.Random(seed * 10000 + b)
        for i in range(files - 1):
            size = rng.getrandbits(MAX_FILE_SIZE_BITS)
            offset = rng.getrandbits(20) % (MiB - size + 1)
            with open(os.path.join(d, "f%0*d.dat" % (width, i)), "wb") as f:
                f.write(block[offset:offset + size])


def slope_trees(workdir, args):
    """The small and the large tree of the slope case, built or reused (cached_tree)."""
    trees = {}
    for name, buckets in (("small", args.slope_small), ("large", args.slope_large)):
        files = args.slope_bucket_files
        params = {"kind": "slope", "buckets": buckets, "files": files,
                  "seed": args.seed + 70, "hosts_version": HOSTS_VERSION}
        path, count, _ = cached_tree(
            workdir, "slope-%dx%d" % (buckets, files), params,
            lambda p, b=buckets, f=files: build_slope_tree(p, b, f, args.seed + 70))
        trees[name] = SlopeTree(name, path, count, buckets, "%d buckets: %s files in %s "
                                "directories, %.1f MiB" % (
                                    buckets, format(count.files, ","),
                                    format(count.dirs, ","), count.bytes / float(MiB)))
    return trees


def slope_versions(args):
    """[(version, msrsync path)]: (None, --msrsync) alone, or with --compare ("new",
    --msrsync) and ("old", the other)."""
    if not args.compare_path:
        return [(None, args.msrsync)]
    return [("new", args.msrsync), ("old", args.compare_path)]


def slope_tools(hosts, ip_path, conf_shown, versions):
    """Local workers, 2 hosts x 2 rsyncs over ip netns exec, the same over ssh: as many
    rsyncs at once in each; with two versions each layout twice, side by side."""
    ns = [h.netns for h in hosts][:SLOPE_HOSTS]
    names = hosts.aliases[:SLOPE_HOSTS]
    shown_ns = ["NS%d" % (i + 1) for i in range(SLOPE_HOSTS)]
    spec = lambda hs: ",".join("%s:%d" % (h, SLOPE_SLOTS) for h in hs)    # noqa: E731
    slots = SLOPE_HOSTS * SLOPE_SLOTS
    layouts = [
        ("local: -p %d" % slots, "local", ["-p", str(slots)], ["-p", str(slots)]),
        ("netns: --hosts %s" % spec(shown_ns), "netns",
         ["--hosts", spec(ns), "--host-shell", "%s netns exec" % ip_path],
         ["--hosts", spec(shown_ns), "--host-shell", "ip netns exec"]),
        ("ssh: --hosts %s" % spec(names), "ssh",
         ["--hosts", spec(names), "--host-shell", hosts.shell],
         ["--hosts", spec(names), "--host-shell", "ssh -F %s" % conf_shown]),
    ]
    tools = []
    for layout, kind, argv, shown in layouts:
        for version, path in versions:
            label = layout if version is None else "%s %s" % (version, layout)
            tools.append(SlopeTool(label, layout, kind, version, path, argv, shown))
    return tools


def slope_argv(tool, src, dst, files, json_path, shown=False):
    prefix = ["msrsync"] if shown else command_prefix(tool.msrsync)
    return (prefix + (tool.shown if shown else tool.args) + ["-f", str(files)]
            + ["--json", "RUN.json" if shown else json_path]
            + [src.rstrip("/") + "/", dst.rstrip("/") + "/"])


def slope_run(ctx, tool, tree, rep, dst, runs, failures):
    """One timed copy of the slope tree TREE into an empty DST."""
    a = ctx["args"]
    name = "%s-%s-rep%d" % (slug(tool.label), tree.name, rep)
    log_path, json_path = run_files(ctx, name)
    argv = slope_argv(tool, tree.path, dst, a.slope_bucket_files, json_path)
    record = timed_run(
        ctx, {"case": "slope", "rep": rep, "tool": tool.label, "layout": tool.layout,
              "kind": tool.kind, "version": tool.version, "tree": tree.name,
              "expected_buckets": tree.buckets, "scenario": SCENARIO_INITIAL},
        argv, log_path, json_path, tree.path, dst, tree.count, True, True)
    runs.append(record)
    log("round %d  %-36s %-5s %7.2fs  cpu %6.2fs  sshd %5.2fs  buckets %4s/%d  %s  "
        "(prep %.1fs)" % (
            rep, tool.label, tree.name, record["wall_s"], record["cpu_s"],
            record["sshd_cpu_s"],
            record["buckets"] if record["buckets"] is not None else "-", tree.buckets,
            "ok" if record["ok"] else "FAILED", record["untimed_prep_s"]))
    note_failure(failures, "%s, %s tree, round %d" % (tool.label, tree.name, rep),
                 record["problems"])
    return record


def run_slope_rounds(ctx, tools, trees):
    """--slope-rounds rounds; in each every tool (the order rotated a place a round)
    copies the small tree then the large one (the large first in even rounds), each
    into an empty DEST, the page cache dropped before each."""
    a = ctx["args"]
    d = make_run_dirs(ctx["case_dir"])
    dst = os.path.join(d, "dst")
    runs, failures = [], []
    for rep in range(1, a.slope_rounds + 1):
        log("slope: round %d/%d" % (rep, a.slope_rounds))
        order = ("small", "large") if rep % 2 else ("large", "small")
        for tool in rotation(tools, rep):
            for name in order:
                slope_run(ctx, tool, trees[name], rep, dst, runs, failures)
    remove_tree(dst)
    return runs, failures


def slope_pairs(runs, label):
    """The rounds of the tool LABEL whose two runs were good and ran more buckets on the
    large tree: per round its times, buckets, slope (seconds a bucket), intercept and
    CPU slope (the tool's tree and the hosts' sshds)."""
    by_round = collections.OrderedDict()
    for r in runs:
        if r["tool"] == label:
            by_round.setdefault(r["rep"], {})[r["tree"]] = r
    pairs = []
    for rep, got in by_round.items():
        small, large = got.get("small"), got.get("large")
        if not (small and large and small["ok"] and large["ok"]):
            continue
        bs, bl = small["buckets"], large["buckets"]
        if bs is None or bl is None or bl <= bs:
            continue
        slope = (large["wall_s"] - small["wall_s"]) / (bl - bs)
        cpu = ((large["cpu_s"] + large["sshd_cpu_s"]) -
               (small["cpu_s"] + small["sshd_cpu_s"])) / (bl - bs)
        pairs.append({"round": rep, "small_s": small["wall_s"], "large_s": large["wall_s"],
                      "buckets": [bs, bl], "slope_s": slope,
                      "intercept_s": small["wall_s"] - bs * slope, "cpu_slope_s": cpu})
    return pairs


def summarize_slope(tools, runs, trees):
    """One row per tool: its rounds, the buckets its runs ran, the medians of its small
    and large copies, of its slope (min, max) and intercept, and its slope against the
    local one of the same msrsync (ratio_to_local: of the medians; round_ratio: the
    median of the ratios round by round) and, with --compare, against the old msrsync's
    in the same layout."""
    rows = []
    for tool in tools:
        mine = [r for r in runs if r["tool"] == tool.label]
        good = [r for r in mine if r["ok"]]
        row = {"tool": tool.label, "layout": tool.layout, "kind": tool.kind,
               "version": tool.version, "msrsync": tool.msrsync, "runs": len(mine),
               "ok_runs": len(good), "expected_buckets": [trees["small"].buckets,
                                                          trees["large"].buckets]}
        for name in ("small", "large"):
            these = [r for r in good if r["tree"] == name]
            row["%s_s" % name] = median_or_none(r["wall_s"] for r in these)
            row["%s_buckets" % name] = sorted(set(r["buckets"] for r in these
                                                  if r["buckets"] is not None))
        pairs = slope_pairs(runs, tool.label)
        row["pairs"] = pairs
        row["rounds"] = len(pairs)
        if pairs:
            slopes = [p["slope_s"] for p in pairs]
            row.update({
                "slope_ms": 1000.0 * statistics.median(slopes),
                "slope_min_ms": 1000.0 * min(slopes), "slope_max_ms": 1000.0 * max(slopes),
                "intercept_s": statistics.median(p["intercept_s"] for p in pairs),
                "cpu_slope_ms": 1000.0 * statistics.median(p["cpu_slope_s"]
                                                           for p in pairs),
            })
        rows.append(row)
    by_key = dict(((r["version"], r["kind"]), r) for r in rows)
    for row in rows:
        local = by_key.get((row["version"], "local"))
        row["ratio_to_local"] = row["round_ratio"] = row["round_ratio_range"] = None
        if local is not None and local.get("slope_ms") and local["slope_ms"] > 0 \
                and row.get("slope_ms") is not None:
            row["ratio_to_local"] = row["slope_ms"] / local["slope_ms"]
            base = dict((p["round"], p["slope_s"]) for p in local["pairs"])
            ratios = [p["slope_s"] / base[p["round"]] for p in row["pairs"]
                      if base.get(p["round"], 0) > 0]
            if ratios:
                row["round_ratio"] = statistics.median(ratios)
                row["round_ratio_range"] = [min(ratios), max(ratios)]
        old = by_key.get(("old", row["kind"])) if row["version"] == "new" else None
        row["ratio_to_old"] = None
        if old is not None and old.get("slope_ms") and old["slope_ms"] > 0 \
                and row.get("slope_ms") is not None:
            row["ratio_to_old"] = row["slope_ms"] / old["slope_ms"]
    return rows


def slope_table(rows, compare):
    cols = ["tool", "rounds", "buckets", "small s", "large s", "ms/bucket", "min", "max",
            "start-up s", "ratio to local", "CPU ms/bucket"] + (
                ["ratio to old"] if compare else [])
    out = ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
    f1 = lambda v: "%.1f" % v if v is not None else "-"    # noqa: E731
    fs = lambda v: fmt_seconds(v) if v is not None else "-"    # noqa: E731

    def buckets(values):
        return "-".join(str(v) for v in (values[:1] + values[-1:] if len(values) > 1
                                         else values)) or "-"
    for r in rows:
        rounds = "%d" % r["rounds"]
        if r["ok_runs"] != r["runs"]:
            rounds += " (%d/%d runs ok)" % (r["ok_runs"], r["runs"])
        cells = [r["tool"], rounds,
                 "%s/%s" % (buckets(r["small_buckets"]), buckets(r["large_buckets"])),
                 fs(r["small_s"]), fs(r["large_s"]), f1(r.get("slope_ms")),
                 f1(r.get("slope_min_ms")), f1(r.get("slope_max_ms")),
                 fs(r.get("intercept_s")), fmt_ratio(r["ratio_to_local"]),
                 f1(r.get("cpu_slope_ms"))] + (
                     [fmt_ratio(r["ratio_to_old"])] if compare else [])
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def bucket_check(rows, trees):
    """The buckets msrsync ran against those the trees are cut for, in a line."""
    want = (trees["small"].buckets, trees["large"].buckets)
    off = ["%s ran %s/%s" % (r["tool"], ",".join(map(str, r["small_buckets"])) or "-",
                             ",".join(map(str, r["large_buckets"])) or "-")
           for r in rows if (r["small_buckets"], r["large_buckets"]) != ([want[0]],
                                                                         [want[1]])]
    if not off:
        return "buckets run (each run's --json buckets_total): %d and %d in every good " \
               "run, as the trees are cut" % want
    return ("buckets run (each run's --json buckets_total) NOT always %d and %d: %s; "
            "the slopes use the buckets each run reported" % (want[0], want[1],
                                                                "; ".join(off)))


def run_slope_case(ctx):
    a = ctx["args"]
    trees = ctx["slope_trees"]
    versions = slope_versions(a)
    compare = len(versions) > 1
    tools = slope_tools(ctx["rig"].hosts, ctx["ip"], ctx["conf_shown"], versions)
    ctx["case_dir"] = os.path.join(ctx["workdir"], "runs", "slope")
    small, large = trees["small"], trees["large"]
    title = ("4. a bucket's cost (slope of run time over buckets): %d and %d buckets of "
             "%s entries, %d paired round(s)" % (small.buckets, large.buckets,
                                             format(a.slope_bucket_files, ","),
                                             a.slope_rounds))
    t0, la0 = time.monotonic(), loadavg()
    runs, failures = run_slope_rounds(ctx, tools, trees)
    seconds = time.monotonic() - t0
    rows = summarize_slope(tools, runs, trees)
    dropped = sum(1 for r in runs if r["cache_dropped"])
    per_tree = [{"tool": r["tool"], "tree": name, "median_s": r["%s_s" % name]}
                for r in rows for name in ("small", "large") if r["%s_s" % name]]
    outliers = find_slow_runs(runs, per_tree, ("tool", "tree"),
                              lambda r: "%s, %s tree" % (r["tool"], r["tree"]),
                              OUTLIER_FACTOR)
    lines = [
        "trees: small %s; large %s; in each, SRC/ holds %s files and each further "
        "bucket is a directory of as many (0-8 KiB each): with -f %d msrsync cuts one "
        "bucket of SRC/ itself and one a directory, each %s entries; the small tree is "
        "the first buckets of the large one" % (
            small.about, large.about, format(a.slope_bucket_files - 1, ","),
            a.slope_bucket_files, format(a.slope_bucket_files, ",")),
        "commands: %s" % "; ".join(collections.OrderedDict.fromkeys(
            "`%s`" % " ".join(shlex.quote(x) for x in slope_argv(
                t, "SRC", "DST", a.slope_bucket_files, None, shown=True)) for t in tools)),
    ]
    if compare:
        lines.append("msrsync(new): %s; msrsync(old): %s (--compare %s); both in every "
                     "round, side by side" % (a.msrsync, a.compare_path, a.compare))
    lines += [
        "hosts: NS1, NS2 are the namespaces of h1, h2 by name (`ip netns exec NS sh`: no "
        "ssh), h1, h2 the same over `ssh -F CONF`; every layout runs %d rsyncs at once"
        % (SLOPE_HOSTS * SLOPE_SLOTS),
        "each round: every tool (the order rotated a place a round) copies the small tree "
        "then the large one (in even rounds the large first) into an empty DEST (removed "
        "untimed), counts and bytes checked after each copy; page cache dropped before "
        "%d of %d runs" % (dropped, len(runs)),
        "ms/bucket = the median over rounds of (large s - small s) / (large's buckets - "
        "small's buckets), each run's buckets from its --json (min, max: the rounds' "
        "extremes); start-up s = the median of small s - small's buckets x that round's "
        "slope (the intercept: msrsync's start, its host checks and logins, its end); "
        "ratio to local = ms/bucket / the local layout's ms/bucket of the same msrsync; "
        "CPU ms/bucket = the same slope of the CPU (the tool and what it waited for, plus "
        "the hosts' sshds and their sessions)" + (
            "; ratio to old = new's ms/bucket / old's in the same layout" if compare
            else ""),
        "ratio to local round by round (the median and range of each round's slope over "
        "the local one's in the same round): %s" % ("; ".join(
            "%s %.2f (%.2f-%.2f)" % (r["tool"], r["round_ratio"], r["round_ratio_range"][0],
                                     r["round_ratio_range"][1])
            for r in rows if r["kind"] != "local" and r["round_ratio"] is not None) or "-"),
        bucket_check(rows, trees),
        "%.0f s; %s" % (seconds, load_span(la0, loadavg())),
    ]
    res = {"case": "slope", "title": title, "lines": lines, "rows": rows, "runs": runs,
           "failures": failures, "outliers": outliers,
           "table": slope_table(rows, compare), "skipped": None}
    return [res]


# ---------------------------------------------------------------------------
# Set-up
# ---------------------------------------------------------------------------

def start_sshfs(ctx):
    """The loopback sshd, the relay and the sshfs mount of the sshfs tree (suite.py's
    pieces); they must be up before the hosts start, whose sshds get a copy of this
    machine's mounts when they start.  A reason to skip the case instead of an error."""
    a, rig = ctx["args"], ctx["rig"]
    why = suite.sshfs_missing()
    if why:
        return why
    data = ctx["sshfs_data"]
    d = os.path.join(ctx["workdir"], "runs", "sshfs-setup")
    os.makedirs(d, exist_ok=True)
    log("starting a loopback sshd, the relay and the sshfs mount")
    rig.server = start_sshd(rig.servers, os.path.join(ctx["workdir"], "sshd"))
    rig.relay = suite.Relay(rig.servers, rig.server.port, a.delay_ms, d)
    rig.relay.start()
    rig.mount = suite.SshfsMount(rig.servers, rig.server, rig.relay.port, data.path,
                                 os.path.join(ctx["workdir"], "mnt"),
                                 os.path.join(d, "sshfs.log"))
    rig.mount.start()
    return None


def check_msrsync(path, option="--msrsync PATH"):
    require_msrsync(path)
    version = msrsync_version(path)
    text = output_of(command_prefix(path) + ["--help"])
    if "--hosts" not in text or "--host-shell" not in text:
        raise BenchError("%s has no --hosts/--host-shell (the worker hosts): give one that "
                         "has them with %s" % (path, option))
    return version


def compare_msrsync(args, workdir):
    """--compare OLD as a file: OLD itself when it is one, else msrsync's file at git
    revision OLD of this repository, written into WORKDIR (longtail.extract_old).
    Returns its path and what it was taken from."""
    args.compare_extracted = not os.path.isfile(args.compare)
    if not args.compare_extracted:
        return os.path.abspath(args.compare), args.compare
    path, short = longtail.extract_old(args.compare, workdir)
    return path, "git revision %s (%s)" % (args.compare, short)


def environment(args, workdir, msrsync_version):
    mnt, fstype = filesystem_of(workdir)
    env = machine_env("hosts_version", HOSTS_VERSION)
    env.update({
        "python_executable": sys.executable,
        "rsync": first_line_of([args.rsync, "--version"], required=True),
        "msrsync": msrsync_version, "msrsync_path": os.path.abspath(args.msrsync),
        "msrsync_sha256": file_digest(args.msrsync),
        "ssh": first_line_of(["ssh", "-V"]),
        "workdir": workdir, "filesystem": fstype, "mount": mnt,
        "filesystem_note": filesystem_note(workdir), "euid": os.geteuid(),
        "loadavg_start": loadavg(),
    })
    if "sshfs" in args.only:
        env["sshfs"] = suite.sshfs_version()
    return env


def compare_environment(env, args, origin):
    """The --compare msrsync in ENV: its version, path, sha256 and where it came from."""
    env.update({
        "compare_msrsync": check_msrsync(args.compare_path, "--compare OLD"),
        "compare_msrsync_path": args.compare_path,
        "compare_msrsync_sha256": file_digest(args.compare_path),
        "compare_from": origin,
    })



def print_header(env, ctx):
    a = ctx["args"]
    print("# msrsync benchmark: worker hosts (%s)" % env["date"])
    print()
    print("- rsync: %s" % env["rsync"])
    print("- msrsync: %s (%s, sha256 %s)" % (env["msrsync"], env["msrsync_path"],
                                            (env["msrsync_sha256"] or "?")[:12]))
    if "compare_msrsync" in env:
        print("- old msrsync (--compare, case slope): %s (%s, from %s, sha256 %s)" % (
            env["compare_msrsync"], env["compare_msrsync_path"], env["compare_from"],
            (env["compare_msrsync_sha256"] or "?")[:12]))
    print("- python: %s" % env["python"])
    print("- cpus: %d (%s)" % (env["cpus"], env["cpu_model"]))
    print("- kernel: %s" % env["kernel"])
    print("- ssh: %s" % env["ssh"])
    if "sshfs" in env:
        print("- sshfs: %s" % env["sshfs"])
    print_workdir(env)
    print("- hosts: h1..h%d, network namespaces of this machine (%s), each joined to this "
          "one by a veth pair with a /30 of 198.18.0.0/15 and running its own sshd with "
          "throwaway keys (tests/netns.py); they share this machine's CPUs, disk and file "
          "system; one ssh login (`ssh -F CONF h1 true`) %s, `ip netns exec NS1 true` %s "
          "(medians of 5)" % (
              N_HOSTS, ", ".join(env["netns"]),
              "%.3f s" % env["ssh_login_s"] if env.get("ssh_login_s") else "?",
              "%.3f s" % env["netns_exec_s"] if env.get("netns_exec_s") else "?"))
    if "dataset" in env:
        print("- dataset: %s" % env["dataset"])
    if "sshfs_dataset" in env:
        print("- sshfs dataset: %s" % env["sshfs_dataset"])
    if "slope_dataset" in env:
        print("- slope trees: %s" % env["slope_dataset"])
    print("- cases: %s; %s, tools interleaved round-robin, medians; page cache %s before "
          "every run" % (
              ", ".join(a.only), "; ".join(
                  (["%d repetition(s)" % a.reps] if set(a.only) - {"slope"} else [])
                  + (["slope: %d paired round(s)" % a.slope_rounds]
                     if "slope" in a.only else [])),
              "not dropped (--no-drop-caches)" if a.no_drop_caches else
              "dropped (as root)"))
    if set(a.only) - {"slope"}:
        print("- ratio to rsync = median / plain rsync's median in the same table (below 1 "
              "is faster)")
    print_header_end(env)


# ---------------------------------------------------------------------------
# Command line and main
# ---------------------------------------------------------------------------

def parse_args(argv):
    p = script_parser("hosts.py", __doc__, [
        "python3 bench/hosts.py --quick --reps 1",
        "python3 bench/hosts.py --json hosts.json",
        "python3 bench/hosts.py --only copy,rerun --files 20000",
        "python3 bench/hosts.py --only sshfs --sshfs-files 2000",
        "python3 bench/hosts.py --only slope --json slope.json",
        "python3 bench/hosts.py --only slope --compare HEAD~1"])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (%d files, sshfs %d, slope -f %d), a few minutes"
                   % (QUICK["files"], QUICK["sshfs_files"], QUICK["slope_bucket_files"]))
    p.add_argument("--only", metavar="CASE[,CASE]",
                   help="run these cases only: copy, rerun, sshfs, slope [all]")
    p.add_argument("--reps", type=positive_int, default=3, help="repetitions [3]")
    p.add_argument("--files", type=positive_int,
                   help="files of the small-file tree (copy, rerun) [%d, quick %d]"
                   % (FULL["files"], QUICK["files"]))
    p.add_argument("--bucket-files", type=positive_int, default=1000, metavar="N",
                   help="msrsync -f N in copy and rerun, the same for every layout [1000]")
    p.add_argument("--sshfs-files", type=positive_int,
                   help="files of the tree served over sshfs [%d, quick %d]"
                   % (FULL["sshfs_files"], QUICK["sshfs_files"]))
    p.add_argument("--sshfs-hosts", type=parse_int_list, default=[1, 2, 4], metavar="N,N",
                   help="numbers of hosts in sshfs, at most %d [1,2,4]" % N_HOSTS)
    p.add_argument("--sshfs-slots", type=positive_int, default=2, metavar="N",
                   help="rsyncs at once a host in sshfs (-p N); the local rows run hosts x "
                        "N [2]")
    p.add_argument("--sshfs-bucket-files", type=int, metavar="N",
                   help="msrsync -f N in sshfs, the same for every row; 0: msrsync's own "
                        "caps, as suite.py [--sshfs-files / 20, at least 10: about 20 "
                        "buckets]")
    p.add_argument("--delay-ms", type=float, default=0.5,
                   help="sshfs: added to each direction by the relay [0.5]")
    p.add_argument("--slope-bucket-files", type=positive_int, metavar="F",
                   help="slope: entries a bucket (msrsync -f F; F - 1 files a bucket "
                        "directory), at least 2 [%d, quick %d]"
                   % (FULL["slope_bucket_files"], QUICK["slope_bucket_files"]))
    p.add_argument("--slope-small", type=positive_int, default=8, metavar="N",
                   help="slope: buckets of the small tree [8]")
    p.add_argument("--slope-large", type=positive_int, default=48, metavar="N",
                   help="slope: buckets of the large tree, more than --slope-small [48]")
    p.add_argument("--slope-rounds", type=positive_int, default=5, metavar="N",
                   help="slope: paired rounds (every layout copies both trees in each) "
                        "[5]")
    p.add_argument("--compare", metavar="OLD",
                   help="slope: also run this msrsync, a file or a git revision of this "
                        "repository (its msrsync), side by side with --msrsync in every "
                        "round: a before/after comparison in one session [none]")
    p.add_argument("--msrsync", default=DEFAULT_MSRSYNC, metavar="PATH",
                   help="msrsync to test, one with --hosts [../msrsync next to this script]")
    p.add_argument("--rsync", default="rsync", metavar="PATH",
                   help="rsync binary of the reference run (msrsync runs rsync from PATH, "
                        "as bench.py) [rsync]")
    add_run_options(p, DEFAULT_SEED, "also rsync -ain --delete SRC/ DST/ after each copy")
    args = p.parse_args(argv)
    fill_sizes(args, FULL, QUICK)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        bad = [w for w in wanted if w not in CASES]
        if bad or not wanted:
            p.error("--only: a list of %s" % ", ".join(CASES))
        args.only = [c for c in CASES if c in wanted]
    else:
        args.only = list(CASES)
    if args.slope_bucket_files < 2:
        p.error("--slope-bucket-files must be >= 2")
    if args.slope_large <= args.slope_small:
        p.error("--slope-large must be more than --slope-small")
    if args.compare and "slope" not in args.only:
        p.error("--compare is for the slope case (--only slope, or all cases)")
    args.compare_path, args.compare_extracted = None, False
    if args.sshfs_bucket_files is None:
        args.sshfs_bucket_files = max(10, args.sshfs_files // 20)
    elif args.sshfs_bucket_files < 0:
        p.error("--sshfs-bucket-files must be >= 0")
    if max(args.sshfs_hosts) > N_HOSTS:
        p.error("--sshfs-hosts: at most %d hosts" % N_HOSTS)
    if args.delay_ms < 0:
        p.error("--delay-ms must be >= 0")
    return args


def run(args):
    if os.geteuid() != 0:
        raise BenchError("needs root: it makes network namespaces and veth pairs, runs an "
                         "sshd in each and drops the page cache (run it as root, e.g. sudo "
                         "python3 bench/hosts.py ...)")
    msrsync_version = check_msrsync(args.msrsync)
    rig = Rig()
    atexit.register(rig.close)
    rig.servers = load_servers()
    rig.netns = netns = load_netns(rig.servers)
    why = netns.unusable()
    if why:
        raise BenchError(why)
    workdir, owned = make_workdir(args.workdir, "msrsync-hosts-")
    ctx = {"args": args, "workdir": workdir, "rig": rig, "spawner": Spawner(),
           "servers": rig.servers, "clk_tck": os.sysconf("SC_CLK_TCK"), "hosts": [],
           "ip": netns._ip(), "rerun_only": False}
    env = environment(args, workdir, msrsync_version)
    results, failed = [], False
    t_all = time.monotonic()
    try:
        if args.compare:
            args.compare_path, origin = compare_msrsync(args, workdir)
            compare_environment(env, args, origin)
        # datasets: bench.py's tree (src/, dataset.json) and suite.py's sshfs tree
        if set(args.only) & {"copy", "rerun"}:
            src, expected, _ = bench.prepare_dataset(workdir, args.files, args.seed)
            ctx["src"], ctx["expected"] = src, expected
            tops, subs = dataset_layout(args.files)
            ctx["dataset_about"] = ("%s files of 0-8 KiB in %s directories, %.1f MiB"
                                    % (format(expected.files, ","),
                                       format(expected.dirs, ","),
                                       expected.bytes / float(MiB)))
            env["dataset"] = "%s (%d x %d leaf directories), seed %d, bench.py's tree" % (
                ctx["dataset_about"], tops, subs, args.seed)
        if "sshfs" in args.only:
            params = {"files": args.sshfs_files, "kind": "sshfs", "seed": args.seed,
                      "suite_version": suite.SUITE_VERSION}
            path, count, _ = cached_tree(
                workdir, "sshfs", params,
                lambda p: suite.build_dataset(p, args.sshfs_files, args.seed + 40) and None)
            ctx["sshfs_data"] = suite.Data("sshfs", path, count, suite.describe_small(count))
            env["sshfs_dataset"] = "%s, seed %d, suite.py's sshfs tree" % (
                ctx["sshfs_data"].about, args.seed + 40)
            ctx["sshfs_skip"] = start_sshfs(ctx)
        if "slope" in args.only:
            ctx["slope_trees"] = trees = slope_trees(workdir, args)
            env["slope_dataset"] = "%s; seed %d" % ("; ".join(
                "%s: %s" % (t.name, t.about) for t in trees.values()), args.seed + 70)
        # the hosts, once the sshfs mount is there for their sshds to see
        log("starting %d hosts" % N_HOSTS)
        rig.hosts = make_hosts(netns, rig.servers, os.path.join(workdir, "hosts"), N_HOSTS)
        rig.hosts.start()
        ctx["hosts"] = list(rig.hosts)
        ctx["conf_shown"] = "CONF"
        env["netns"] = [h.netns for h in rig.hosts]
        log("hosts up: %s" % ", ".join("%s %s (%s, sshd pid %d)" % (
            h.alias, h.address, h.netns, h.pid) for h in rig.hosts))
        env["ssh_login_s"] = timed(shlex.split(rig.hosts.shell) + ["h1", "true"])
        env["netns_exec_s"] = timed([ctx["ip"], "netns", "exec", rig.hosts[0].netns, "true"])
        if env["ssh_login_s"] is None:
            raise BenchError("ssh -F %s h1 true fails: %s" % (
                rig.hosts.ssh_config, output_of(shlex.split(rig.hosts.shell)
                                                + ["h1", "true"]).strip()))
        ctx["host_tools"] = host_tools(rig.hosts, ctx["ip"], ctx["conf_shown"])
        print_header(env, ctx)
        if set(args.only) & {"copy", "rerun"}:
            for res in run_local_cases(ctx, args.only):
                print_result(res)
                results.append(res)
        if "sshfs" in args.only:
            for res in run_sshfs_case(ctx):
                print_result(res)
                results.append(res)
        if "slope" in args.only:
            for res in run_slope_case(ctx):
                print_result(res)
                results.append(res)
        failed = any(r["failures"] for r in results)
    finally:
        rig.close()
        for name in ("hosts", "sshd"):
            remove_tree(os.path.join(workdir, name))
        runs_dir = os.path.join(workdir, "runs")
        for sec in (os.listdir(runs_dir) if os.path.isdir(runs_dir) else []):
            remove_tree(os.path.join(runs_dir, sec, "dst"))
        logs = clean_workdir(workdir, owned, args.keep,
                             failed or any(r["outliers"] for r in results), logs_only=True)
    env["loadavg_end"] = loadavg()
    env["total_s"] = time.monotonic() - t_all
    problems = changed_since(args.msrsync, env["msrsync_sha256"])
    if "compare_msrsync_sha256" in env and not args.compare_extracted:
        problems += changed_since(args.compare_path, env["compare_msrsync_sha256"])
    if rig.leftovers:
        problems.append("left after the teardown: %s" % "; ".join(rig.leftovers))
    if rig.relay_stats:
        env["relay"] = stats = rig.relay_stats
        held = stats.get("held_ms", {})
        print("sshfs relay (case 3): it held data %s; it carried %s; its CPU %s s" % (
            ", ".join("%s: median %.3f ms, p99 %.3f ms" % (k, v["median"], v["p99"])
                      for k, v in sorted(held.items())) or "?",
            ", ".join("%s %.1f MB in %d chunks" % (k, stats["bytes"][k] / 1e6,
                                                    stats["chunks"][k])
                      for k in ("up", "down") if k in stats.get("bytes", {})) or "?",
            "%.1f" % stats["cpu_s"] if stats.get("cpu_s") is not None else "?"))
    print("benchmark time %.0f s; load average at end: %s" % (env["total_s"],
                                                             fmt_load(env["loadavg_end"])))
    report_end(args, env, results, problems, logs)
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(run_main("hosts.py", run, parse_args(sys.argv[1:])))
