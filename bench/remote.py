#!/usr/bin/env python3
"""Remote benchmark: rsync against msrsync pushing over ssh to a loopback sshd.

The script starts its own sshd on 127.0.0.1 (tests/remote.py: a free port, throwaway
host and client keys, key-only login, stopped by its pid at the end), builds two
deterministic datasets once, and pushes them to a fresh DEST (user@127.0.0.1:DIR/) at
every run, the tools interleaved round-robin over the repetitions:

  1. compressible: --size bytes (1 GiB) of log-like text in 32 files, which zlib -6
     compresses about 3.7x:
         rsync -az -e SSH SRC/ HOST:DST/
         msrsync -p N -s BUCKET --rsync "-az -e 'SSH'" SRC/ HOST:DST/   (N in --procs)
     and the same three without -z (-a) as the reference of what ssh alone allows;
  2. small files: --files files of 1-8 KiB (20,000):
         rsync -a -e SSH SRC/ HOST:DST/
         msrsync -p N --rsync "-a -e 'SSH'" SRC/ HOST:DST/

Every run's exit code is checked, and DEST must hold as many files and directories and
as many bytes as SRC (what plain rsync leaves); a failed run is reported under FAILURES
and left out of the figures. Wall time is from fork to reap (bench.py's `measure`); CPU
is counted on both ends: the tool and its ssh clients (os.wait4), and the sshd side (the
sshd's children's times, read from /proc once its sessions are gone).

    python3 bench/remote.py --reps 3      # the issue's figures
    python3 bench/remote.py --quick       # smoke run: 50 MiB, 2,000 files, 1 repetition
"""

import collections
import itertools
import os
import random
import re
import shlex
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from common import (MiB, BenchError, Spawner, cached_tree, changed_since,  # noqa: E402
                    command_prefix, count_tree, dataset_layout, describe_exit, file_digest,
                    filesystem_of, first_line_of, fmt_ratio, fmt_seconds, load_servers,
                    loadavg, log, machine_env, make_workdir, measure, msrsync_version,
                    ok_note, output_tail, parse_int_list, parse_size, positive_int,
                    proc_cpu_ticks, random_block, remove_tree, require_msrsync, rotation,
                    run_main, script_parser, settle_caches, show_arg, start_sshd,
                    summary_row, tail, wait_idle, write_json, write_slices)

BENCH_VERSION = "1.0"
DEFAULT_MSRSYNC = os.path.join(REPO, "msrsync")

DEFAULT_SIZE = "1G"
DEFAULT_FILES = 20000
DEFAULT_REPS = 3
DEFAULT_PROCS = (2, 4)
QUICK_SIZE = "50M"
QUICK_FILES = 2000
QUICK_REPS = 1
DEFAULT_SEED = 20240604
BIG_FILES = 32              # "a few dozen files"
BIG_DIRS = 4                # ... in 4 directories
CORPUS_BYTES = 64 * MiB     # the text the big files are sliced from
SMALL_MIN, SMALL_MAX = 1024, 8192
# --bucket-size auto: the big tree in this many buckets (of 4 files at 32 files): as
# many per worker at -p 2 and -p 4, and few, because each bucket is one more rsync and
# ssh session
BUCKETS_WANTED = 8

SECTION_BIG = "compressible"
SECTION_SMALL = "small files"


# label: what the table shows; kind: rsync or msrsync; procs: -p (None for rsync);
# opts: the rsync options (-az or -a) before -e; rsh: the -e command, None for the run's
# (suite.py's ssh-options section gives each tool its own).
Tool = collections.namedtuple("Tool", "label kind procs opts rsh")
Dataset = collections.namedtuple("Dataset", "name path count")


def big_size(text):
    """--size: a size (1G, 50M) of at least one byte per file."""
    return parse_size(text, BIG_FILES)


# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------

def make_corpus(seed, nbytes):
    """Log-like text: timestamps, host, service, level, 3-10 words from a Zipf-weighted
    vocabulary of pseudo-words, an id.  zlib -6 compresses it about 3.7x.  Only
    getrandbits, choices(cum_weights) and shuffle: the same bytes for the same seed."""
    rng = random.Random(seed)
    syl = ["ka", "to", "ri", "en", "mo", "sa", "lu", "pe", "di", "an",
           "or", "ve", "ni", "st", "ex", "qu", "al", "co", "de", "in"]
    vocab = sorted(set("".join(syl[rng.getrandbits(16) % len(syl)]
                               for _ in range(1 + rng.getrandbits(2)))
                       for _ in range(6000)))
    rng.shuffle(vocab)
    cum = list(itertools.accumulate(1.0 / (i + 1) for i in range(len(vocab))))
    hosts = ["node%02d" % i for i in range(16)]
    services = ["api", "db", "cache", "auth", "worker", "scheduler", "gateway", "mailer"]
    levels = ["INFO"] * 12 + ["DEBUG"] * 6 + ["WARN"] * 2 + ["ERROR"]
    out, n, ms = [], 0, 0
    while n < nbytes:
        ms += rng.getrandbits(8)
        s = ms // 1000
        line = "2024-06-01T%02d:%02d:%02d.%03dZ %s %s[%d] %s: %s id=%d\n" % (
            s // 3600 % 24, s // 60 % 60, s % 60, ms % 1000, hosts[rng.getrandbits(4)],
            services[rng.getrandbits(3)], 1000 + rng.getrandbits(6),
            levels[rng.getrandbits(16) % len(levels)],
            " ".join(rng.choices(vocab, cum_weights=cum, k=3 + rng.getrandbits(3))),
            rng.getrandbits(20))
        out.append(line)
        n += len(line)
    return "".join(out).encode()[:nbytes]


def build_big(root, size, seed):
    """BIG_FILES files (BIG_DIRS directories) of log text adding up to SIZE bytes; each
    file is a run of 256 KiB-1 MiB slices taken at random places of one 64 MiB corpus,
    so that no compressor window sees the same text twice.  Returns the zlib -6 ratio of
    the first 8 MiB of the corpus."""
    corpus = make_corpus(seed, min(CORPUS_BYTES, max(size, 8 * MiB)))
    sample = corpus[:8 * MiB]
    ratio = len(sample) / float(len(zlib.compress(sample, 6)))
    rng = random.Random(seed + 1)
    per_file = size // BIG_FILES
    for i in range(BIG_FILES):
        d = os.path.join(root, "d%d" % (i % BIG_DIRS))
        os.makedirs(d, exist_ok=True)
        want = per_file if i < BIG_FILES - 1 else size - per_file * (BIG_FILES - 1)
        with open(os.path.join(d, "app-%02d.log" % i), "wb") as f:
            write_slices(f, want, rng, corpus, 256 << 10, (1 << 20) - 1)
    return ratio


def build_small(root, nfiles, seed):
    """NFILES files of 1-8 KiB in bench.py's two-level layout (~50 per directory),
    contents sliced out of one random block."""
    rng = random.Random(seed)
    block = random_block(rng, MiB)
    tops, subs = dataset_layout(nfiles)
    leaves = [os.path.join(root, "d%02d" % t, "s%03d" % s)
              for t in range(tops) for s in range(subs)]
    for leaf in leaves:
        os.makedirs(leaf)
    width = len(str(max(nfiles - 1, 1)))
    for i in range(nfiles):
        size = SMALL_MIN + rng.getrandbits(16) % (SMALL_MAX - SMALL_MIN + 1)
        off = rng.getrandbits(20) % (MiB - size + 1)
        with open(os.path.join(leaves[i % len(leaves)], "f%0*d.dat" % (width, i)), "wb") as f:
            f.write(block[off:off + size])


def prepare_datasets(workdir, args, sections):
    """Build (or, when workdir/datasets.json matches, reuse) the datasets; returns
    ({section: Dataset}, zlib ratio or None)."""
    specs = {SECTION_BIG: ("big", {"size": args.size, "seed": args.seed},
                           lambda p: build_big(p, args.size, args.seed)),
             SECTION_SMALL: ("small", {"files": args.files, "seed": args.seed},
                             lambda p: build_small(p, args.files, args.seed))}
    out, ratio = {}, None
    for section in sections:
        name, params, build = specs[section]
        params = dict(params, bench_version=BENCH_VERSION)
        path, count, facts = cached_tree(workdir, name, params, build)
        out[section] = Dataset(section, path, count)
        if section == SECTION_BIG:
            ratio = facts
    return out, ratio


# ---------------------------------------------------------------------------
# Work directory
# ---------------------------------------------------------------------------

def space_needed(args, sections):
    big = args.size if SECTION_BIG in sections else 0
    small = args.files * (SMALL_MAX + 4096) if SECTION_SMALL in sections else 0
    return big + small + max(big, small) + 256 * MiB   # SRCs + one DEST + keys, logs


# ---------------------------------------------------------------------------
# Tools and runs
# ---------------------------------------------------------------------------

def make_tools(section, args):
    groups = ["-az", "-a"] if section == SECTION_BIG else ["-a"]
    tools = []
    for opts in groups:
        tools.append(Tool("rsync %s" % opts, "rsync", None, opts, None))
        if not args.rsync_only:
            tools += [Tool("msrsync -p %d %s" % (p, opts), "msrsync", p, opts, None)
                      for p in args.procs]
            tools += [Tool("%d rsyncs %s (split)" % (n, opts), "split", n, opts, None)
                      for n in args.split]
    return tools


def split_groups(src, n):
    """SRC's top-level entries (sorted) dealt out to n plain rsyncs, round-robin."""
    names = sorted(os.listdir(src))
    return [[os.path.join(src, name) for name in names[i::n]] for i in range(n)]


def msrsync_opts(section, args):
    return list(args.bucket_opts) if section == SECTION_BIG else []


def tool_argv(tool, section, src, dst_remote, rsh, args):
    """The exact command line: the same -e for every tool."""
    opts = shlex.split(tool.opts) + (shlex.split(args.z_opts) if "z" in tool.opts else [])
    src = src.rstrip("/") + "/"
    if tool.kind == "rsync":
        return [args.rsync] + opts + ["-e", rsh, src, dst_remote]
    if tool.kind == "split":
        # n plain rsyncs started at once, each on its share of SRC's top level: what
        # parallel streams alone allow, without a scan, a bucket or a Python process
        # (sh waits for each and exits with the first failure)
        groups = split_groups(src, tool.procs)
        script = "".join("%s & p%d=$!\n" % (" ".join(shlex.quote(a) for a in [args.rsync] + opts
                                                      + ["-e", rsh] + group + [dst_remote]), i)
                         for i, group in enumerate(groups) if group)
        script += "".join("wait $p%d || rc=${rc:-$?}\n" % i
                          for i, group in enumerate(groups) if group)
        return ["sh", "-c", script + "exit ${rc:-0}"]
    rsync_string = " ".join(shlex.quote(o) for o in opts + ["-e", rsh])
    return (command_prefix(args.msrsync) + ["-p", str(tool.procs)]
            + msrsync_opts(section, args) + ["--rsync", rsync_string, src, dst_remote])


def run_one(tool, data, rep, ctx):
    """One timed push into a fresh DEST; returns its record."""
    args, servers, server = ctx["args"], ctx["servers"], ctx["server"]
    dst = ctx["dst"]
    log_path = os.path.join(ctx["logs"], "%s-%s-rep%d.log" % (
        data.name.replace(" ", "_"), re.sub(r"[^\w.-]+", "_", tool.label), rep))
    remove_tree(dst)
    if tool.kind == "split":
        os.makedirs(dst)          # else the rsyncs race to make it (mkdir: File exists)
    dropped = settle_caches(not args.no_drop_caches)
    idle = wait_idle(servers, server.pid)
    before = proc_cpu_ticks(server.pid)
    rsh = tool.rsh or ctx["rsh"]
    argv = tool_argv(tool, data.name, data.path, server.remote(dst + "/"), rsh, args)
    m = measure(argv, log_path, ctx["spawner"])
    idle = wait_idle(servers, server.pid) and idle
    after = proc_cpu_ticks(server.pid)
    server_cpu = (after - before) / float(ctx["clk_tck"]) \
        if idle and None not in (before, after) else None
    problems = []
    if m.exit_code != 0:
        problems.append("%s; it printed (log %s):\n%s"
                        % (describe_exit(m.exit_code), log_path, output_tail(log_path)))
    else:
        try:
            got = count_tree(dst)
        except OSError as exc:
            got = None
            problems.append("cannot walk DEST: %s" % exc)
        if got is not None:
            for field in ("files", "dirs", "symlinks", "bytes"):
                if getattr(got, field) != getattr(data.count, field):
                    problems.append("DEST %s %d, SRC (and rsync) %d"
                                    % (field, getattr(got, field), getattr(data.count, field)))
    client_cpu = m.user + m.sys
    record = {
        "section": data.name, "tool": tool.label, "kind": tool.kind, "procs": tool.procs,
        "opts": tool.opts, "rsh": rsh, "rep": rep, "argv": argv, "wall_s": m.wall,
        "cpu_client_s": client_cpu, "cpu_server_s": server_cpu, "maxrss_kib": m.maxrss_kib,
        "exit_code": m.exit_code, "cache_dropped": dropped, "ok": not problems,
        "problems": problems, "log": log_path, "loadavg_after": loadavg(),
    }
    rate = data.count.bytes / 1e6 / m.wall if m.wall > 0 else 0.0
    log("rep %d  %-22s %-22s %7.2fs  %7.1f MB/s  cpu client %6.2fs server %s  %s"
        % (rep, data.name, tool.label, m.wall, rate, client_cpu,
           "%6.2fs" % server_cpu if server_cpu is not None else "     ?",
           "ok" if not problems else "FAILED"))
    if problems:
        log("  " + "; ".join(problems).replace("\n", "\n  "))
    return record


def run_section(data, tools, ctx):
    """Round-robin: repetition r runs the tools rotated by r-1."""
    args = ctx["args"]
    runs = []
    for rep in range(1, args.reps + 1):
        order = rotation(tools, rep)
        log("%s, repetition %d/%d: %s" % (data.name, rep, args.reps,
                                         ", ".join(t.label for t in order)))
        for tool in order:
            runs.append(run_one(tool, data, rep, ctx))
    remove_tree(ctx["dst"])
    return runs


# ---------------------------------------------------------------------------
# Pre-flight: ssh and rsync facts for the header
# ---------------------------------------------------------------------------

def probe(ctx, workdir):
    """One plain rsync -z push (it must work, else nothing will), the compressor rsync
    negotiates, the ssh cipher, and what one ssh login costs."""
    args, server, rsh = ctx["args"], ctx["server"], ctx["rsh"]
    facts = {}
    probe_dir = os.path.join(workdir, "probe")
    remove_tree(probe_dir)
    os.makedirs(os.path.join(probe_dir, "src"))
    with open(os.path.join(probe_dir, "src", "f"), "wb") as f:
        f.write(b"probe\n" * 1000)
    argv = ([args.rsync, "-az", "--debug=NSTR"] + shlex.split(args.z_opts)
            + ["-e", rsh, os.path.join(probe_dir, "src") + "/",
               server.remote(os.path.join(probe_dir, "dst") + "/")])
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    if p.returncode != 0:
        raise BenchError("plain rsync cannot push to the private sshd (%s):\n%s\n"
                         "sshd log %s:\n%s" % (describe_exit(p.returncode), p.stdout.strip(),
                                               server.log, tail(server.log, 10)))
    m = re.search(r"negotiated compress: (.+)", p.stdout)
    chosen = re.search(r"--(?:zc|compress-choice)[= ](\S+)", args.z_opts)
    if m:   # "zstd (level 3)" -> "zstd level 3"
        facts["rsync_compress"] = re.sub(r"\((level [^)]*)\)", r"\1", m.group(1).strip())
    elif chosen:
        facts["rsync_compress"] = "%s, as --z-opts chose" % chosen.group(1)
    else:
        facts["rsync_compress"] = "zlib (rsync before 3.2 negotiates nothing)"
    p = subprocess.run(shlex.split(rsh) + ["-v", server.login, "true"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    m = re.search(r"client->server cipher: (\S+)", p.stdout)
    facts["ssh_cipher"] = m.group(1) if m else "?"
    walls = []
    for _ in range(5):
        t0 = time.monotonic()
        subprocess.run(shlex.split(rsh) + [server.login, "true"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        walls.append(time.monotonic() - t0)
    facts["ssh_login_s"] = statistics.median(walls)
    remove_tree(probe_dir)
    return facts


# ---------------------------------------------------------------------------
# Summary and report
# ---------------------------------------------------------------------------

def summarize(section, tools, runs, data):
    """One row per tool; ratios against plain rsync with the same options."""
    rows = []
    for tool in tools:
        mine = [r for r in runs if r["tool"] == tool.label]
        row, good = summary_row(mine, {"section": section, "tool": tool.label,
                                       "kind": tool.kind, "opts": tool.opts})
        if good:
            srv = [r["cpu_server_s"] for r in good if r["cpu_server_s"] is not None]
            row.update({
                "cpu_client_s": statistics.median(r["cpu_client_s"] for r in good),
                "cpu_server_s": statistics.median(srv) if srv else None,
            })
            row["mb_s"] = data.count.bytes / 1e6 / row["median_s"]
            if srv:
                row["cores_busy"] = statistics.median(
                    (r["cpu_client_s"] + r["cpu_server_s"]) / r["wall_s"]
                    for r in good if r["cpu_server_s"] is not None)
        else:
            row["error"] = mine[0]["problems"][0].split(";")[0] if mine else "not run"
        rows.append(row)
    for row in rows:
        base = [b for b in rows if b["kind"] == "rsync" and b["opts"] == row["opts"]
                and "median_s" in b]
        if base and "median_s" in row:
            row["ratio_to_rsync"] = row["median_s"] / base[0]["median_s"]
            row["speedup"] = base[0]["median_s"] / row["median_s"]
    return rows


def markdown_table(rows):
    out = ["| data | tool | median s | min | max | MB/s | ratio to rsync | x rsync MB/s "
           "| CPU s client | CPU s server | cores busy |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "median_s" not in r:
            out.append("| %s | %s | FAILED (0/%d ok): %s | | | | | | | | |"
                       % (r["section"], r["tool"], r["runs"], r["error"]))
            continue
        out.append("| %s | %s%s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s |" % (
            r["section"], r["tool"], ok_note(r), fmt_seconds(r["median_s"]),
            fmt_seconds(r["min_s"]), fmt_seconds(r["max_s"]), r["mb_s"],
            fmt_ratio(r.get("ratio_to_rsync")), fmt_ratio(r.get("speedup")),
            fmt_seconds(r["cpu_client_s"]),
            fmt_seconds(r["cpu_server_s"]) if r["cpu_server_s"] is not None else "?",
            fmt_ratio(r.get("cores_busy"))))
    return "\n".join(out)


def explain(rows, env, args):
    """The paragraph that says what limits the figures (with them when available)."""
    cpus = env["cpus"] or 1
    find = lambda label: next((r for r in rows if r["section"] == SECTION_BIG  # noqa: E731
                               and r["tool"] == label and "median_s" in r), None)
    best = min(max(args.procs), cpus)
    text = [
        "Explain: over ssh one rsync stream does, for every byte, the ssh cipher (%s) "
        "on both ends and, with -z, the compression (%s) on the sender and the "
        "decompression on the receiver, each on one core: one rsync is bound by one core "
        "per end, and msrsync -p N runs N such streams. With -z the best msrsync can do "
        "is min(N, cores) times rsync's throughput: on this %d-CPU machine -p %d can at "
        "best approach %dx (less when one rsync already keeps more than one core busy), "
        "and a -p above %d adds streams but no cores."
        % (env["ssh_cipher"], env["rsync_compress"], cpus, best, best, cpus)]
    rz, ra = find("rsync -az"), find("rsync -a")
    if rz and rz.get("cores_busy") is not None:
        text.append("Here rsync -az moved %.1f MB/s keeping %.2f cores busy (client %.1f s "
                    "+ sshd side %.1f s of CPU per run), so %d cores cap any number of "
                    "streams at %.2fx its throughput."
                    % (rz["mb_s"], rz["cores_busy"], rz["cpu_client_s"], rz["cpu_server_s"],
                       cpus, cpus / max(rz["cores_busy"], 1e-9)))
        for p in args.procs:
            m = find("msrsync -p %d -az" % p)
            if m and m.get("cores_busy") is not None:
                text.append("msrsync -p %d -az: %.1f MB/s, %.2fx rsync, %.2f cores busy."
                            % (p, m["mb_s"], m["speedup"], m["cores_busy"]))
    if ra:
        text.append("On loopback the link costs nothing, so -z can only cost CPU here: "
                    "rsync -a (cipher, no compression) moved %.1f MB/s; on a slow link a "
                    "stream about %.1fx smaller (zlib -6) is what counts."
                    % (ra["mb_s"], env["zlib_ratio"] or 0))
    text.append(
        "The sshd, the remote rsyncs and their decompression run on the same machine and "
        "compete for the same %d cores as the senders (\"cores busy\" counts both ends), "
        "so loopback figures understate what two machines would see, where each end has "
        "its own cores and only the link is shared. Small files: every msrsync bucket is "
        "one more rsync pair and one more ssh session (over the worker's own ssh "
        "connection, opened once: a fresh login costs %.3f s here), and on 2 cores the "
        "parallel streams find no idle core, while plain rsync pays per-file costs on "
        "one core at each end without stopping."
        % (cpus, env["ssh_login_s"]))
    return " ".join(text)


def describe_environment(env, lines_extra):
    lines = ["# msrsync remote benchmark, loopback sshd (%s)" % env["date"], ""]
    for key, label in (("cpus", "CPUs"), ("cpu_model", "CPU"), ("kernel", "kernel"),
                       ("host", "host"), ("rsync", "rsync"), ("ssh", "ssh"),
                       ("msrsync", "msrsync"), ("python", "python")):
        if key not in env:
            continue
        lines.append("- %s: %s" % (label, env.get(key)))
        if key == "msrsync" and env.get("msrsync_sha256"):
            lines[-1] += " (%s, sha256 %s)" % (env["msrsync_path"], env["msrsync_sha256"][:12])
    lines.append("- workdir: %s (%s on %s)" % (env["workdir"], env["filesystem"], env["mount"]))
    lines += ["- %s" % e for e in lines_extra]
    fmt = lambda la: " ".join("%.2f" % x for x in la) if la else "?"  # noqa: E731
    lines.append("- load average at start: %s; at end: %s%s" % (
        fmt(env["loadavg_start"]), fmt(env.get("loadavg_end")),
        " (busy in the minute before: figures may be noisy)"
        if env["loadavg_start"] and env["loadavg_start"][0] > 0.5 else ""))
    return "\n".join(lines)


def command_lines(sections, args, rsh_shown):
    """One command line per tool kind and options, per dataset, as run."""
    out = []
    for section in sections:
        seen, lines = set(), []
        for tool in make_tools(section, args):
            if (tool.kind, tool.opts) in seen:
                continue
            seen.add((tool.kind, tool.opts))
            if tool.kind == "split":
                argv = tool_argv(tool._replace(kind="rsync"), section, "SRC", "HOST:DST/",
                                 rsh_shown, args)
                argv[0] = os.path.basename(argv[0])
                lines.append("N x `%s` at once, SRC/ one of SRC's top-level directories in N"
                             % " ".join(show_arg(a) for a in argv).replace("SRC/", "SRC/TOP"))
                continue
            shown = tool._replace(procs="N") if tool.procs else tool
            argv = tool_argv(shown, section, "SRC", "HOST:DST/", rsh_shown, args)
            if argv[0] == sys.executable:
                argv = argv[1:]
            argv[0] = os.path.basename(argv[0])
            lines.append("`%s`" % " ".join(show_arg(a) for a in argv))
        out.append("%s: %s" % (section, "; ".join(lines)))
    return out


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def bucket_opts(args):
    """msrsync options for the compressible tree.  msrsync's default -s 1G would put a
    1 GiB tree of 32 files in one bucket, and one bucket is one rsync: auto cuts it in
    about BUCKETS_WANTED buckets."""
    if args.bucket_size == "default":
        return []
    if args.bucket_size == "auto":
        mib = max(1, args.size // BUCKETS_WANTED // MiB)
        return ["-s", "%dM" % mib]
    return ["-s", args.bucket_size]


def parse_args(argv):
    p = script_parser("remote.py", "Benchmark msrsync against rsync pushing over ssh to a "
                                   "private loopback sshd (the remote ends' figures).", [
        "python3 bench/remote.py --reps 3        # the issue's figures",
        "python3 bench/remote.py --quick         # smoke run, under a minute",
        "python3 bench/remote.py --z-opts=--zc=zlib   # -z as zlib, level 6"])
    p.add_argument("--quick", action="store_true",
                   help="smoke run: %s, %d files, %d repetition unless given"
                   % (QUICK_SIZE, QUICK_FILES, QUICK_REPS))
    p.add_argument("--reps", type=positive_int, help="repetitions [%d]" % DEFAULT_REPS)
    p.add_argument("--size", type=big_size,
                   help="bytes of compressible data, K/M/G powers of 1024 [%s]" % DEFAULT_SIZE)
    p.add_argument("--files", type=positive_int, help="small files [%d]" % DEFAULT_FILES)
    p.add_argument("--procs", type=parse_int_list, default=list(DEFAULT_PROCS),
                   metavar="N,N", help="msrsync -p values [2,4]")
    p.add_argument("--split", type=parse_int_list, default=[], metavar="N,N",
                   help="also time N plain rsyncs started at once, each on 1/N of SRC's "
                        "top-level directories (DEST made beforehand): what N streams "
                        "allow without msrsync [none]")
    p.add_argument("--rsync-only", action="store_true",
                   help="plain rsync rows only (checks the harness, gives the baselines)")
    p.add_argument("--only", choices=("compressible", "small"),
                   help="run one of the two datasets only")
    p.add_argument("--bucket-size", default="auto", metavar="SIZE|auto|default",
                   help="msrsync -s for the compressible tree: auto = --size/%d; default = "
                        "msrsync's own (growing caps: over ssh 128M at first, four 32 MiB files a bucket here) [auto]"
                        % BUCKETS_WANTED)
    p.add_argument("--z-opts", default="", metavar="OPTS",
                   help="extra rsync options for the -az runs only, e.g. --z-opts=--zc=zlib "
                        "or --z-opts='--zc=zstd --zl=1' (without them, the header says what "
                        "-z negotiated)")
    p.add_argument("--cipher", help="ssh cipher (ssh -c), e.g. aes128-gcm@openssh.com")
    p.add_argument("--msrsync", default=DEFAULT_MSRSYNC, metavar="PATH",
                   help="msrsync to test [../msrsync next to this script]")
    p.add_argument("--rsync", default="rsync", metavar="PATH", help="rsync binary [rsync]")
    p.add_argument("--workdir", metavar="DIR",
                   help="kept, datasets reused on the next run [a temporary directory "
                        "under /dev/shm when it has room, else /tmp or /var/tmp; removed]")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="dataset seed")
    p.add_argument("--no-drop-caches", action="store_true",
                   help="do not drop the page cache before runs")
    p.add_argument("--keep", action="store_true", help="keep the temporary workdir")
    p.add_argument("--json", metavar="OUT", help="write runs and summary as JSON ('-' = stdout)")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = QUICK_REPS if args.quick else DEFAULT_REPS
    if args.size is None:
        args.size = big_size(QUICK_SIZE if args.quick else DEFAULT_SIZE)
    if args.files is None:
        args.files = QUICK_FILES if args.quick else DEFAULT_FILES
    if args.bucket_size not in ("auto", "default"):
        parse_size(args.bucket_size)   # fails early on a typo
    args.bucket_opts = bucket_opts(args)
    if args.workdir:
        args.workdir = os.path.abspath(args.workdir)
    return args


def run(args):
    sections = {"compressible": [SECTION_BIG], "small": [SECTION_SMALL]}.get(
        args.only, [SECTION_BIG, SECTION_SMALL])
    servers = load_servers()   # start_sshd() checks that openssh is there
    if not args.rsync_only:
        require_msrsync(args.msrsync)
    env = machine_env("bench_version", BENCH_VERSION)
    env.update({
        "rsync": first_line_of([args.rsync, "--version"], required=True),
        "ssh": first_line_of(["ssh", "-V"]),
        "loadavg_start": loadavg(),
    })
    if not args.rsync_only:
        # a broken msrsync stops here, before the datasets are built
        env["msrsync"] = msrsync_version(args.msrsync)
        env["msrsync_path"] = os.path.abspath(args.msrsync)
        env["msrsync_sha256"] = file_digest(args.msrsync)
    workdir, owned = make_workdir(args.workdir, "msrsync-bench-remote-", base=None,
                                  need=space_needed(args, sections))
    env["workdir"] = workdir
    env["mount"], env["filesystem"] = filesystem_of(workdir)[0], filesystem_of(workdir)[1]
    logs = os.path.join(workdir, "logs")
    os.makedirs(logs, exist_ok=True)
    sshd_dir = os.path.join(workdir, "sshd")
    remove_tree(sshd_dir)
    server = None
    runs, rows, failures = [], [], []
    try:
        log("starting a private sshd on 127.0.0.1 (%s)" % sshd_dir)
        server = start_sshd(servers, sshd_dir)
        rsh = server.rsh + " -o Compression=no"
        if args.cipher:
            rsh += " -c " + shlex.quote(args.cipher)
        env["sshd_pid"], env["sshd_port"], env["rsh"] = server.pid, server.port, rsh
        ctx = {"args": args, "servers": servers, "server": server, "rsh": rsh,
               "dst": os.path.join(workdir, "dst"), "logs": logs, "spawner": Spawner(),
               "clk_tck": os.sysconf("SC_CLK_TCK")}
        env.update(probe(ctx, workdir))
        log("sshd pid %d port %d; ssh cipher %s; rsync -z negotiates %s; ssh login %.3fs"
            % (server.pid, server.port, env["ssh_cipher"], env["rsync_compress"],
               env["ssh_login_s"]))
        datasets, ratio = prepare_datasets(workdir, args, sections)
        env["zlib_ratio"] = ratio
        t0 = time.monotonic()
        for section in sections:
            tools = make_tools(section, args)
            section_runs = run_section(datasets[section], tools, ctx)
            runs += section_runs
            rows += summarize(section, tools, section_runs, datasets[section])
        env["bench_s"] = time.monotonic() - t0
    finally:
        if server is not None:
            server.stop()
        remove_tree(os.path.join(workdir, "dst"))
        remove_tree(sshd_dir)
        failed = [r for r in runs if not r["ok"]]
        if owned and not args.keep:
            if failed:   # keep logs/ only, to read
                for name in ("big", "small", "datasets.json", "probe"):
                    remove_tree(os.path.join(workdir, name))
            else:
                remove_tree(workdir)
    env["loadavg_end"] = loadavg()
    for r in runs:
        if not r["ok"]:
            failures.append("%s, %s, rep %d: %s" % (r["section"], r["tool"], r["rep"],
                                                   "; ".join(r["problems"])))
    if not args.rsync_only:
        failures += changed_since(args.msrsync, env["msrsync_sha256"])

    shown_rsh = "ssh -p PORT -i KEY -o ... -o Compression=no" + (
        " -c %s" % args.cipher if args.cipher else "")
    dropped = sum(1 for r in runs if r["cache_dropped"])
    extra = []
    if SECTION_BIG in datasets:
        d = datasets[SECTION_BIG]
        extra.append("compressible: %d files in %d dirs, %.1f MiB (%.1f MB) of log-like "
                     "text, zlib -6 ratio %.1fx; msrsync %s"
                     % (d.count.files, d.count.dirs - 1, d.count.bytes / float(MiB),
                        d.count.bytes / 1e6, ratio or 0,
                        " ".join(args.bucket_opts) or "msrsync's own bucket caps (over ssh: 128M at first, growing)"))
    if SECTION_SMALL in datasets:
        d = datasets[SECTION_SMALL]
        extra.append("small files: %d files of %d-%d bytes in %d dirs, %.1f MiB"
                     % (d.count.files, SMALL_MIN, SMALL_MAX, d.count.dirs - 1,
                        d.count.bytes / float(MiB)))
    extra += [
        "sshd: private, 127.0.0.1:%d (pid %d), same machine; ssh cipher %s; rsync -z "
        "negotiates %s; one ssh login %.3f s" % (env["sshd_port"], env["sshd_pid"],
                                                 env["ssh_cipher"], env["rsync_compress"],
                                                 env["ssh_login_s"]),
        "repetitions: %d, interleaved round-robin; fresh DEST each run; page cache "
        "dropped before %d of %d runs%s" % (
            args.reps, dropped, len(runs),
            " (tmpfs: no disk either way)" if env["filesystem"] == "tmpfs" else ""),
    ]
    extra += ["commands, %s" % c for c in command_lines(sections, args, shown_rsh)]
    extra += [
        "check after each run: exit 0, DEST files/dirs/bytes equal SRC's (what plain "
        "rsync leaves)",
        "MB/s = SRC bytes / 10^6 / median s; ratio to rsync = median / rsync's median "
        "with the same options (below 1 is faster); x rsync MB/s = its inverse; CPU s = "
        "medians, client = the tool + its ssh clients, server = sshd + remote rsyncs; "
        "cores busy = (client + server CPU) / wall",
        "benchmark time %.0fs" % env.get("bench_s", 0),
    ]
    print(describe_environment(env, extra))
    print()
    print(markdown_table(rows))
    print()
    print(explain(rows, env, args))
    if failures:
        print()
        print("FAILURES:")
        for f in failures:
            print("- " + f.replace("\n", "\n    "))
    if owned and not args.keep and failed:
        print()
        print("logs kept in %s" % logs)
    if args.json:
        payload = {"environment": env, "args": {k: v for k, v in vars(args).items()},
                   "summary": rows, "runs": runs, "failures": failures}
        write_json(args.json, payload)
    return 1 if failures else 0


def main(argv=None):
    args = parse_args(argv)
    return run_main("remote.py", run, args)


if __name__ == "__main__":
    sys.exit(main())
