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

Cases (--only copy,rerun,sshfs), each tool run --reps times, interleaved round-robin, the
page cache dropped before every run (as root), medians reported:

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

Each table gives per tool its median, the ratio to rsync, the buckets msrsync ran (from
its --json), the wall time per bucket, and against the local run with as many rsyncs at
once (msrsync -p N): the extra wall time per bucket, the same in a worker's time (x the
rsyncs at once) and the extra CPU per bucket (the tool's tree plus the hosts' sshds).

    python3 bench/hosts.py --quick --reps 1        # smoke run, a few minutes
    python3 bench/hosts.py --json hosts.json       # full sizes, 3 repetitions
    python3 bench/hosts.py --only sshfs --sshfs-files 2000
    python3 bench/hosts.py --msrsync /path/to/msrsync   # one that has --hosts

Everything it starts (the hosts' sshds, their namespaces and veth pairs, the loopback sshd,
the relay, the sshfs mount) is stopped by pid and by the names it made, at the end, on an
error, on Ctrl-C and on SIGTERM; bench/README.md describes the figures.
"""

import atexit
import collections
import importlib.util
import os
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
import suite  # noqa: E402
from common import (MiB, BenchError, Spawner, add_run_options, cached_tree,  # noqa: E402
                    changed_since, clean_workdir, command_prefix, dataset_layout,
                    exit_problem, file_digest, filesystem_note, filesystem_of, fill_sizes,
                    first_line_of, fmt_load, fmt_seconds, load_servers, load_span, loadavg,
                    log, machine_env, make_run_dirs, make_workdir, measure, msrsync_version,
                    note_failure, ok_note, parse_int_list, positive_int, print_header_end,
                    print_results, print_workdir, proc_cpu_ticks, read_json, remove_tree,
                    report_end, require_msrsync, rotation, run_main, script_parser,
                    settle_caches, start_sshd, summary_row, wait_idle)

HOSTS_VERSION = "1.0"
REPO = os.path.dirname(HERE)
NETNS_PY = os.path.join(REPO, "tests", "netns.py")
DEFAULT_MSRSYNC = os.path.join(REPO, "msrsync")
RSYNC_OPTS = ["-aS", "--numeric-ids"]          # msrsync's default rsync options
DEFAULT_SEED = bench.DEFAULT_SEED              # bench.py's tree, suite.py's sshfs tree
FULL = {"files": 100000, "sshfs_files": 5000}
QUICK = {"files": 10000, "sshfs_files": 300}
CASES = ("copy", "rerun", "sshfs")
N_HOSTS = 4                                     # h1..h4
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


def run_one(ctx, case, tool, scenario, rep, src, dst, expected, bucket_opts, runs,
            failures):
    """One timed run; appends its record to RUNS and returns it."""
    a = ctx["args"]
    d = ctx["case_dir"]
    name = "%s-%s-rep%d" % (slug(tool.label), scenario.split()[0], rep)
    log_path = os.path.join(d, "logs", name + ".log")
    json_path = os.path.join(d, "json", name + ".json")
    remove_tree(json_path)
    t0 = time.monotonic()
    if scenario == SCENARIO_INITIAL:
        remove_tree(dst)
    dropped = settle_caches(not a.no_drop_caches)
    prep = time.monotonic() - t0
    argv = tool_argv(tool, src, dst, a, bucket_opts, json_path)
    hosts = ctx["hosts"]
    ticks0 = sshd_ticks(hosts)
    m = measure(argv, log_path, ctx["spawner"])
    idle = all(wait_idle(ctx["servers"], h.pid) for h in hosts if h.pid is not None)
    sshd_cpu = (sshd_ticks(hosts) - ticks0) / float(ctx["clk_tck"])
    summary = read_json(json_path) if tool.kind != "rsync" else None
    record = {
        "case": case, "rep": rep, "tool": tool.label, "kind": tool.kind,
        "slots": tool.slots, "scenario": scenario, "argv": argv, "wall_s": m.wall,
        "cpu_user_s": m.user, "cpu_sys_s": m.sys, "cpu_s": m.user + m.sys,
        "sshd_cpu_s": sshd_cpu, "maxrss_kib": m.maxrss_kib, "exit_code": m.exit_code,
        "cache_dropped": dropped, "untimed_prep_s": prep, "loadavg_after": loadavg(),
        "log": log_path, "check": None, "buckets": None, "rsync_processes": None,
        "hosts": None,
    }
    problems = []
    if m.exit_code != 0:
        problems.append(exit_problem(m.exit_code, log_path))
    if summary is not None:
        record["buckets"] = summary.get("buckets_total")
        record["rsync_processes"] = summary.get("rsync_processes")
        record["hosts"] = [{"host": h.get("host"), "buckets": h.get("buckets"),
                            "failures": h.get("failures")} for h in summary.get("hosts", [])]
    elif tool.kind != "rsync" and m.exit_code == 0:
        problems.append("msrsync wrote no --json summary to %s" % json_path)
    if scenario == SCENARIO_INITIAL or ctx["rerun_only"]:
        check = bench.check_copy(src, dst, expected, a, log_path)
        record["check"] = "ok" if not check else "; ".join(check)
        problems += check
    if not idle:
        problems.append("a host's sshd still had sessions 60 s after the run")
    record["ok"] = not problems
    record["problems"] = problems
    runs.append(record)
    log("rep %d  %-34s %-17s %7.2fs  cpu %6.2fs  sshd %5.2fs  buckets %4s  %s  (prep %.1fs)"
        % (rep, tool.label, scenario, m.wall, m.user + m.sys, sshd_cpu,
           record["buckets"] if record["buckets"] is not None else "-",
           "ok" if not problems else "FAILED", prep))
    note_failure(failures, "%s, %s, rep %d" % (tool.label, scenario, rep), problems)
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


def check_msrsync(args):
    require_msrsync(args.msrsync)
    version = msrsync_version(args.msrsync)
    text = output_of(command_prefix(args.msrsync) + ["--help"])
    if "--hosts" not in text or "--host-shell" not in text:
        raise BenchError("%s has no --hosts/--host-shell (the worker hosts): give one that "
                         "has them with --msrsync PATH" % args.msrsync)
    return version


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



def print_header(env, ctx):
    a = ctx["args"]
    print("# msrsync benchmark: worker hosts (%s)" % env["date"])
    print()
    print("- rsync: %s" % env["rsync"])
    print("- msrsync: %s (%s, sha256 %s)" % (env["msrsync"], env["msrsync_path"],
                                            (env["msrsync_sha256"] or "?")[:12]))
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
    print("- cases: %s; %d repetition(s), tools interleaved round-robin, medians; page "
          "cache %s before every run" % (
              ", ".join(a.only), a.reps,
              "not dropped (--no-drop-caches)" if a.no_drop_caches else
              "dropped (as root)"))
    print("- ratio to rsync = median / plain rsync's median in the same table (below 1 is "
          "faster)")
    print_header_end(env)


# ---------------------------------------------------------------------------
# Command line and main
# ---------------------------------------------------------------------------

def parse_args(argv):
    p = script_parser("hosts.py", __doc__, [
        "python3 bench/hosts.py --quick --reps 1",
        "python3 bench/hosts.py --json hosts.json",
        "python3 bench/hosts.py --only copy,rerun --files 20000",
        "python3 bench/hosts.py --only sshfs --sshfs-files 2000"])
    p.add_argument("--quick", action="store_true",
                   help="small sizes (%d files, sshfs %d), a few minutes"
                   % (QUICK["files"], QUICK["sshfs_files"]))
    p.add_argument("--only", metavar="CASE[,CASE]",
                   help="run these cases only: copy, rerun, sshfs [all]")
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
    msrsync_version = check_msrsync(args)
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
