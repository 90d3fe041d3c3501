"""--catalog: a run records in an SQLite file what it sent, and the next run with the
same file scans SRC only, compares it with the catalog and hands rsync only what
changed; --catalog-sample, --changes, and what refuses a catalog.

The oracle is plain rsync, as everywhere, but over a sequence: a seeded random series
of changes is made to SRC, a round at a time, and after each round SRC is copied once
by ``msrsync --catalog CAT -p 2 --rsync OPTS SRC/ DEST_m/`` and once by plain
``rsync OPTS SRC/ DEST_r/``; the two DESTs must stay the same entry by entry
(helpers.snapshot: type, mode, owner, size, content, mtime, symlink target, hard-link
groups), round after round. The changes: files added, rewritten at the same size (some
keeping their mtime too, which plain rsync's quick check then skips: msrsync must skip
them as well), grown, touched, deleted, renamed, moved, swapped; directories added,
deleted, renamed whole, turned into files and files into directories; modes, owners
(as root), symlink targets, hard links (-H), per-directory filter files (-F). Every time
the test leaves in SRC is set explicitly, distinct to the nanosecond, so that no change
hides in the same second. The --json summary's "catalog" object must say the catalog
was used, and how little was handed to rsync. Two small fixed cases pin what the
sequence found: a file changed at SRC's top (DEST's root time) and a file moved out
of a place a protect rule shields at DEST. A renamed directory's copies are moved at
DEST and handed to rsync -c only where the catalog cannot know DEST's content is
SRC's: a copy rsync's quick check left stale, a file changed within the 2 s before
the run that wrote it; the files the last run wrote whole are not read again.

Also here: the same sequence to a DEST over ssh (remote.py's sshd on 127.0.0.1); a
DEST changed behind the catalog's back, or replaced by a copy (exit 47, nothing
copied; --catalog-sample 0 does not look); a catalog of other options, another SRC or
DEST (the run goes the full way and rewrites it); a run SIGKILLed mid-way (the catalog
stays a whole SQLite file; the next run, or --resume, ends as rsync would from there);
--changes lists, from a file and NUL-separated on stdin; an untrusted catalog file
(exit 45); the usage errors (exit 4, exit 1).
"""

import collections
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time

import pytest

from helpers import (IS_ROOT, MSRSYNC, NOBODY, assert_no_rsync_left, assert_same_tree,
                     describe, diff_snapshots, kill_leftovers, mask_run_time_dir_mtimes,
                     run_cmd, run_msrsync, run_rsync, snapshot, stderr_lines, text,
                     wait_for)
from remote import serve_sshd

# the option sets of the main differential
OPTION_SETS = ["-a", "-a --delete", "-aH --delete", "-a --delete -F"]
CAPS = ["-p", "2", "-f", "50"]          # several buckets for the first, full run
ROUNDS = 10                             # random rounds per option set
REMOTE_ROUNDS = 3
# The times the tests give SRC start here, below helpers.RECENT_NS (newer directory
# times at both DESTs are taken for the run's own, see mask_run_time_dir_mtimes)...
BASE_S = 1300000000
SETTLED_BEFORE_NS = 1600000000 * 10 ** 9  # ...and what is newer than this the test made
EXTS = [b".txt", b".log", b".dat", b".tmp", b""]
AWKWARD = [b"with space", b"\xff byte", b"nl\nname", b"-dash", b"#hash", b"keep me"]
# .rsync-filter contents: excludes (which shield DEST entries from --delete too), a
# directory rule, a protect rule, an include before an exclude, an anchored rule
FILTER_RULES = [b"- *.log\n", b"- *.tmp\n- sub*/\n", b"P *.dat\n", b"+ keep*\n- *.txt\n",
                b"- /d1*/\n", b"- *.dat\n"]
FILE_MODES = [0o600, 0o640, 0o644, 0o664, 0o755, 0o444, 0o700]
DIR_MODES = [0o700, 0o750, 0o755, 0o775, 0o555, 0o711]
OWNERS = [(0, 0), (1000, 1000), (4242, 4343), (NOBODY, NOBODY)]
BULK = b"bulk dir"                      # 25 files, renamed whole in its own round
BULK_FILES = 25


def j(*parts):
    return os.path.join(*parts)


def closure(touched):
    """The touched paths and every parent of theirs, SRC's root as b"."."""
    out = {b"."}
    for rel in touched:
        while rel:
            out.add(rel)
            rel = os.path.dirname(rel)
    return out


# --------------------------------------------------------------------------- SRC

class Source(object):
    """A SRC tree changed round by round; each change says which paths it touched.

    Choices are made from sorted lists with one seeded Random, so a seed makes the same
    tree and the same changes on every run (a failure names a case that fails again)."""

    def __init__(self, root, seed, opts, dest_r=None):
        self.root = os.fsencode(root)
        self.rng = random.Random(seed)
        words = opts.split()
        self.delete = "--delete" in words
        self.hard = "-H" in words or any(w.startswith("-a") and "H" in w for w in words)
        self.dest_r = dest_r
        self.tick = 0
        self.serial = 0
        self.log = []
        self.note = None                # what a move says it did, "old -> new"

    # ------------------------------------------------------------ small things

    def path(self, rel):
        return j(self.root, rel) if rel else self.root

    def fresh(self, prefix, ext=b""):
        self.serial += 1
        name = b"%s%04d" % (prefix, self.serial)
        if self.rng.random() < 0.1:
            name += b" " + self.rng.choice(AWKWARD)
        return name + ext

    def content(self, size=None):
        if size is None:
            size = self.rng.choice([0, 1, 10, 100, 700, 1500, 4000, 20000])
        block = bytes(self.rng.getrandbits(8) for _ in range(min(size, 64)))
        return (block * (size // 64 + 1))[:size]

    def write(self, rel, data):
        with open(self.path(rel), "wb") as handle:
            handle.write(data)

    def when(self):
        """A new time (ns), later than every one given before, never a round second."""
        self.tick += 1
        return (BASE_S + self.tick) * 10 ** 9 + self.rng.randrange(1, 10 ** 9)

    def pick(self, items):
        items = sorted(items)
        return self.rng.choice(items) if items else None

    def entries(self):
        """{relative path: lstat} of everything below SRC's root."""
        found = {}
        stack = [b""]
        while stack:
            rel = stack.pop()
            for entry in os.scandir(self.path(rel)):
                sub = j(rel, entry.name) if rel else entry.name
                st = os.lstat(self.path(sub))
                found[sub] = st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(sub)
        return found

    def of_type(self, test):
        return {rel: st for rel, st in self.entries().items() if test(st.st_mode)}

    def files(self):
        return self.of_type(stat.S_ISREG)

    def links(self):
        return self.of_type(stat.S_ISLNK)

    def plain(self):
        """Regular files and symlinks but the .rsync-filter files (only filter_file
        changes those: their rules reach a whole subtree)."""
        return {rel: st for rel, st in self.entries().items()
                if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and
                os.path.basename(rel) != b".rsync-filter"}

    def plain_files(self):
        return {rel: st for rel, st in self.plain().items() if stat.S_ISREG(st.st_mode)}

    def dirs(self, root=True):
        found = set(self.of_type(stat.S_ISDIR))
        return found | {b""} if root else found

    def subtree(self, rel):
        return {rel} | {p for p in self.entries() if p.startswith(rel + b"/")}

    def names_of(self, rel):
        """rel and every other name of its inode (a hard-link group)."""
        st = os.lstat(self.path(rel))
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return {rel}
        return {p for p, s in self.files().items()
                if (s.st_dev, s.st_ino) == (st.st_dev, st.st_ino)}

    def settle(self):
        """Every entry the test left at the present time gets an explicit, distinct,
        old time: each directory after its contents."""
        def walk(rel):
            path = self.path(rel)
            for entry in sorted(os.scandir(path), key=lambda e: e.name):
                sub = j(rel, entry.name) if rel else entry.name
                st = os.lstat(self.path(sub))
                if stat.S_ISDIR(st.st_mode):
                    walk(sub)
                elif st.st_mtime_ns > SETTLED_BEFORE_NS:
                    t = self.when()
                    os.utime(self.path(sub), ns=(t, t), follow_symlinks=False)
            if os.lstat(path).st_mtime_ns > SETTLED_BEFORE_NS:
                t = self.when()
                os.utime(path, ns=(t, t))
        walk(b"")

    # ------------------------------------------------------------ the first tree

    def populate(self, dirs=28, files=230, bulk=True):
        """About 300 entries: directories four levels deep (some named sub*, some
        left empty), files of 0 to 20,000 bytes with extensions the filter rules
        name, awkward names, symlinks, hard links across directories, three
        .rsync-filter files, and BULK with 25 files."""
        rng = self.rng
        os.makedirs(self.root)
        made = [b""]
        for i in range(dirs):
            parent = self.pick([d for d in made if d.count(b"/") < 3])
            name = (b"sub%02d" if rng.random() < 0.25 else b"d%02d") % i
            rel = j(parent, name) if parent else name
            os.mkdir(self.path(rel))
            made.append(rel)
        if bulk:
            os.mkdir(self.path(BULK))
            for i in range(BULK_FILES):
                self.write(j(BULK, b"b%02d.bin" % i), self.content(rng.randrange(1, 3000)))
        holders = made[:-3]             # the last three directories stay empty
        for i in range(files):
            d = rng.choice(holders)
            name = b"f%03d" % i
            if rng.random() < 0.08:
                name += b" " + rng.choice(AWKWARD)
            if rng.random() < 0.1:
                name = b"keep" + name
            rel = j(d, name + rng.choice(EXTS)) if d else name + rng.choice(EXTS)
            self.write(rel, self.content())
        regular = sorted(self.files())
        for i in range(10):
            d = rng.choice(holders)
            target = rng.choice([b"nowhere", b"../d00", os.path.relpath(
                rng.choice(regular), d or b".")])
            os.symlink(target, self.path(j(d, b"l%02d" % i) if d else b"l%02d" % i))
        for i in range(5):
            d = rng.choice(holders)
            os.link(self.path(rng.choice(regular)),
                    self.path(j(d, b"h%02d" % i) if d else b"h%02d" % i))
        for d in rng.sample(sorted(made[1:-3]), min(3, len(made[1:-3]))):
            self.write(j(d, b".rsync-filter"), rng.choice(FILTER_RULES))
        self.settle()

    # ------------------------------------------------------------ the changes

    def add_file(self):
        d = self.pick(self.dirs())
        rel = j(d, self.fresh(b"new", self.rng.choice(EXTS))) if d else self.fresh(b"new")
        self.write(rel, self.content())
        return {rel}

    def add_dir(self):
        d = self.pick(self.dirs())
        rel = j(d, self.fresh(b"nd")) if d else self.fresh(b"nd")
        os.mkdir(self.path(rel))
        made = {rel}
        for _ in range(self.rng.randrange(4)):
            sub = j(rel, self.fresh(b"g", self.rng.choice(EXTS)))
            self.write(sub, self.content())
            made.add(sub)
        return made

    def add_symlink(self):
        d = self.pick(self.dirs())
        rel = j(d, self.fresh(b"sl")) if d else self.fresh(b"sl")
        os.symlink(self.rng.choice([b"nowhere", b"..", b"f001.txt"]), self.path(rel))
        return {rel}

    def _rewrite(self, keep_mtime, swap_in=None):
        old = [rel for rel, st in self.plain_files().items() if st.st_size > 0 and
               (not keep_mtime or st.st_mtime_ns < SETTLED_BEFORE_NS)]
        rel = self.pick(old)
        if rel is None:
            return None
        touched = self.names_of(rel)
        path = self.path(rel)
        st = os.lstat(path)
        with open(path, "rb") as handle:
            data = bytes(b ^ 0x5a for b in handle.read())
        if swap_in is None:
            swap_in = keep_mtime and self.rng.random() < 0.5
        if swap_in:
            # a new inode renamed over it, everything stat shows but the inode alike
            tmp = j(os.path.dirname(path), b".swap-in")
            with open(tmp, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
            os.lchown(tmp, st.st_uid, st.st_gid)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.rename(tmp, path)
        else:
            with open(path, "r+b") as handle:
                handle.write(data)
            if keep_mtime:
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return touched

    def modify_same_size(self):
        return self._rewrite(keep_mtime=False)

    def modify_same_size_and_mtime(self):
        """Plain rsync's quick check skips this one: DEST keeps the old bytes."""
        return self._rewrite(keep_mtime=True)

    def grow(self):
        rel = self.pick(self.plain_files())
        if rel is None:
            return None
        with open(self.path(rel), "ab") as handle:
            handle.write(self.content(self.rng.randrange(1, 500)) or b"+")
        return self.names_of(rel)

    def touch(self):
        rel = self.pick(self.plain())
        if rel is None:
            return None
        t = self.when()
        os.utime(self.path(rel), ns=(t, t), follow_symlinks=False)
        return self.names_of(rel)

    def delete_file(self):
        rel = self.pick(self.plain())
        if rel is None:
            return None
        touched = self.names_of(rel)
        os.unlink(self.path(rel))
        return touched

    def _small_dirs(self, limit=30):
        return [d for d in self.dirs(root=False) if len(self.subtree(d)) <= limit]

    def delete_tree(self):
        rel = self.pick(self._small_dirs())
        if rel is None:
            return None
        touched = self.subtree(rel)
        shutil.rmtree(self.path(rel))
        return touched

    def rename_file(self):
        rel = self.pick(self.plain())
        if rel is None:
            return None
        touched = self.names_of(rel)
        d = os.path.dirname(rel)
        new = j(d, self.fresh(b"ren", os.path.splitext(rel)[1])) if d else \
            self.fresh(b"ren", os.path.splitext(rel)[1])
        os.rename(self.path(rel), self.path(new))
        self.note = "%r -> %r" % (rel, new)
        return touched | {new}

    def move_file(self):
        rel = self.pick(self.plain_files())
        if rel is None:
            return None
        touched = self.names_of(rel)
        d = self.pick(self.dirs() - {os.path.dirname(rel)})
        name = os.path.basename(rel)
        if os.path.lexists(self.path(j(d, name) if d else name)):
            name = self.fresh(b"mv", os.path.splitext(rel)[1])
        new = j(d, name) if d else name
        os.rename(self.path(rel), self.path(new))
        self.note = "%r -> %r" % (rel, new)
        return touched | {new}

    def swap_files(self):
        files = self.plain_files()
        by_dir = {}
        for rel in files:
            by_dir.setdefault(os.path.dirname(rel), []).append(rel)
        d = self.pick([k for k, v in by_dir.items() if len(v) >= 2])
        if d is None:
            return None
        a, b = self.rng.sample(sorted(by_dir[d]), 2)
        touched = self.names_of(a) | self.names_of(b)
        tmp = self.path(j(d, b".swap") if d else b".swap")
        os.rename(self.path(a), tmp)
        os.rename(self.path(b), self.path(a))
        os.rename(tmp, self.path(b))
        return touched

    def rename_dir(self, rel=None, parent=None):
        rel = rel or self.pick(self._small_dirs(60))
        if rel is None:
            return None
        old = self.subtree(rel)
        if parent is None:
            parent = os.path.dirname(rel) if self.rng.random() < 0.5 else \
                self.pick([d for d in self.dirs() if d not in old])
        new = j(parent, self.fresh(b"rd")) if parent else self.fresh(b"rd")
        os.rename(self.path(rel), self.path(new))
        self.note = "%r -> %r (%d entries)" % (rel, new, len(old))
        return old | {new + p[len(rel):] for p in old}

    def chmod(self):
        entries = self.entries()
        rel = self.pick([r for r, st in entries.items() if not stat.S_ISLNK(st.st_mode)])
        st = entries[rel]
        modes = DIR_MODES if stat.S_ISDIR(st.st_mode) else FILE_MODES
        os.chmod(self.path(rel), self.pick([m for m in modes
                                            if m != stat.S_IMODE(st.st_mode)]))
        return {rel}

    def chown(self):
        entries = self.entries()
        rel = self.pick(entries)
        st = entries[rel]
        uid, gid = self.pick([o for o in OWNERS if o != (st.st_uid, st.st_gid)])
        os.lchown(self.path(rel), uid, gid)
        return self.names_of(rel)

    def retarget_symlink(self):
        links = self.links()
        rel = self.pick(links)
        if rel is None:
            return None
        old = os.readlink(self.path(rel))
        d = os.path.dirname(rel)
        target = self.pick({b"nowhere else", b"../" + self.fresh(b"t"),
                            os.path.relpath(self.pick(self.files()) or b"x", d or b".")}
                           - {old})
        os.unlink(self.path(rel))
        os.symlink(target, self.path(rel))
        return {rel}

    def add_hardlink(self):
        rel = self.pick(self.plain_files())
        if rel is None:
            return None
        d = self.pick(self.dirs())
        new = j(d, self.fresh(b"hl")) if d else self.fresh(b"hl")
        os.link(self.path(rel), self.path(new))
        return self.names_of(rel)

    def remove_hardlink(self):
        rel = self.pick([r for r, st in self.plain_files().items() if st.st_nlink > 1])
        if rel is None:
            return None
        touched = self.names_of(rel)
        os.unlink(self.path(rel))
        return touched

    def file_to_dir(self):
        rel = self.pick(self.plain_files())
        if rel is None:
            return None
        touched = self.names_of(rel)
        os.unlink(self.path(rel))
        os.mkdir(self.path(rel))
        for _ in range(self.rng.randrange(3)):
            sub = j(rel, self.fresh(b"in"))
            self.write(sub, self.content())
            touched.add(sub)
        return touched

    def _filter_free(self, rel):
        """No .rsync-filter in rel's subtree nor in a directory above it."""
        up = [os.path.dirname(rel)]
        while up[-1]:
            up.append(os.path.dirname(up[-1]))
        return not any(os.path.lexists(self.path(j(d, b".rsync-filter") if d else
                                                 b".rsync-filter")) for d in up) and \
            not any(os.path.basename(p) == b".rsync-filter" for p in self.subtree(rel))

    def dir_to_file(self):
        # rsync cannot replace a DEST directory that holds anything without --delete,
        # nor one holding what filter rules shield ("could not make way for new
        # regular file", exit 23): with --delete one free of filter files, else one
        # empty at both ends
        def empty_at_dest(rel):
            there = j(self.dest_r, rel)
            return not os.path.isdir(there) or os.path.islink(there) or \
                not os.listdir(there)
        candidates = [d for d in self.dirs(root=False)
                      if not os.listdir(self.path(d)) and empty_at_dest(d)]
        if self.delete:
            candidates += [d for d in self._small_dirs() if self._filter_free(d)]
        rel = self.pick(candidates)
        if rel is None:
            return None
        touched = self.subtree(rel)
        shutil.rmtree(self.path(rel))
        self.write(rel, self.content())
        return touched

    def filter_file(self):
        d = self.pick(self.dirs())
        rel = j(d, b".rsync-filter") if d else b".rsync-filter"
        touched = self.subtree(d) if d else set(self.entries())
        old = None
        if os.path.lexists(self.path(rel)):
            if not os.path.isfile(self.path(rel)) or os.path.islink(self.path(rel)):
                return None
            with open(self.path(rel), "rb") as handle:
                old = handle.read()
        if old is not None and self.rng.random() < 0.5:
            os.unlink(self.path(rel))
        else:
            self.write(rel, self.pick([r for r in FILTER_RULES if r != old]))
        return touched | {rel}

    def steps(self):
        """(name, method, weight) of the changes this option set may make."""
        found = [("add_file", self.add_file, 3), ("add_dir", self.add_dir, 1),
                 ("add_symlink", self.add_symlink, 1),
                 ("modify_same_size", self.modify_same_size, 2),
                 ("modify_same_size_and_mtime", self.modify_same_size_and_mtime, 2),
                 ("grow", self.grow, 2), ("touch", self.touch, 1),
                 ("delete_file", self.delete_file, 2), ("delete_tree", self.delete_tree, 1),
                 ("rename_file", self.rename_file, 2), ("move_file", self.move_file, 2),
                 ("swap_files", self.swap_files, 1), ("rename_dir", self.rename_dir, 2),
                 ("chmod", self.chmod, 1), ("retarget_symlink", self.retarget_symlink, 1),
                 ("file_to_dir", self.file_to_dir, 1), ("dir_to_file", self.dir_to_file, 1),
                 ("filter_file", self.filter_file, 2)]
        if IS_ROOT:
            found.append(("chown", self.chown, 1))
        if self.hard:
            found += [("add_hardlink", self.add_hardlink, 2),
                      ("remove_hardlink", self.remove_hardlink, 1)]
        return found

    def random_round(self):
        """Three to five changes drawn by weight, then times settled; returns the
        paths they touched (the round's log is in self.log)."""
        steps = self.steps()
        weights = [w for _, _, w in steps]
        touched, made = set(), 0
        self.log = []
        for _ in range(50):
            if made >= self.rng.randint(3, 5):
                break
            name, method, _ = self.rng.choices(steps, weights)[0]
            self.note = None
            got = method()
            if got is None:
                continue
            made += 1
            touched |= got
            self.log.append("%s %s" % (name, self.note or repr(sorted(got)[:4])))
        self.settle()
        return touched


# --------------------------------------------------------------------------- runs

def catalog_of(summary_path):
    with open(summary_path) as handle:
        summary = json.load(handle)
    assert "catalog" in summary, summary
    c = summary["catalog"]
    for key, kind in (("used", bool), ("written", bool), ("compared", int),
                      ("changed", int), ("deleted", int), ("renamed", int), ("path", str)):
        assert isinstance(c.get(key), kind), (key, c)
    return c


def msrsync_with_catalog(cat, opts, src, dest, summary=None, extra=(), input=None,
                         timeout=120):
    args = ["--catalog", cat] + list(extra) + CAPS
    if summary is not None:
        args += ["--json", summary]
    return run_msrsync(*(args + ["--rsync", opts, src, dest]), input=input, timeout=timeout)


def copy_round(work, number, s, cat, opts, dest_r, dest_m, msrsync_opts=None,
               msrsync_dest=None, extra=(), input=None, context=""):
    """rsync OPTS SRC/ DEST_r/ and msrsync --catalog CAT ... SRC/ DEST_m/ (or
    msrsync_dest); both exit 0 and the DESTs are the same; returns the catalog object
    of msrsync's --json summary."""
    __tracebackhide__ = True
    summary = j(work, b"round%02d.json" % number)
    oracle = run_rsync(s.root + b"/", dest_r + b"/", opts=opts.split())
    result = msrsync_with_catalog(cat, msrsync_opts or opts, s.root + b"/",
                                  msrsync_dest or dest_m + b"/", summary, extra, input)
    where = "round %d of %s, changes: %s%s" % (number, opts, "; ".join(s.log), context)
    assert oracle.returncode == 0, "%s\nplain rsync failed:\n%s" % (where, describe(oracle))
    assert result.returncode == 0, "%s\n%s" % (where, describe(result))
    assert b"Traceback" not in result.stderr, describe(result)
    # a directory gone from SRC that DEST keeps, part deleted (what filter rules
    # shield stays): both tools leave it at the time they ran
    diffs = diff_snapshots(*mask_run_time_dir_mtimes(snapshot(dest_r), snapshot(dest_m)),
                           label_a="rsync", label_b="msrsync")
    assert not diffs, "%s\nDESTs differ (%d):\n  %s" % (where, len(diffs),
                                                       "\n  ".join(diffs[:25]))
    c = catalog_of(summary)
    c["where"] = where
    with open(summary) as handle:
        c["files_seen"] = json.load(handle)["rsync_stats"]["files_seen"]
    return c


def run_sequence(tmp_path, opts, seed, rounds, msrsync_opts=None, to_dest=None, extra=()):
    """The first copy, an unchanged re-run, BULK renamed alone, then `rounds` random
    rounds (msrsync given `extra` options too). A DEST that differs from rsync's fails at once (the next rounds would
    start from different trees); what the catalog's account says wrong is gathered,
    round by round, and fails the test at the end."""
    work = os.fsencode(tmp_path)
    dest_r, dest_m = j(work, b"rsync-dest"), j(work, b"msrsync-dest")
    cat = j(work, b"catalog.sqlite")
    s = Source(j(work, b"src"), seed, opts, dest_r)
    s.populate()
    # (ctimes settled before the first copy: the files it writes are marked so,
    # and BULK's copies are later moved without a comparison by content)
    time.sleep(2.2)
    entries = len(s.entries()) + 1
    mdest = to_dest(dest_m + b"/") if to_dest else None
    problems = []

    def go(number):
        return copy_round(work, number, s, cat, opts, dest_r, dest_m, msrsync_opts, mdest,
                          extra=extra)

    def check(ok, c, what):
        if not ok:
            problems.append("%s: %s\n    %r" % (c["where"], what, {
                k: v for k, v in c.items() if k not in ("where", "path")}))

    c = go(0)
    assert (c["written"], c["used"]) == (True, False), c
    assert os.path.realpath(c["path"]) == os.path.realpath(os.fsdecode(cat)), c
    assert os.path.isfile(cat)
    # nothing changed: nothing handed to rsync
    c = go(1)
    check(c["used"] is True, c, "catalog not used")
    check((c["changed"], c["deleted"], c["renamed"]) == (0, 0, 0), c,
          "something sent though nothing changed")
    check(c["compared"] >= entries // 2, c, "compared fewer than half the %d entries"
          % entries)
    # a whole directory of 25 files renamed, nothing else
    s.log = ["rename_dir %r (%d files)" % (BULK, BULK_FILES)]
    touched = s.rename_dir(BULK, parent=b"")
    s.settle()
    c = go(2)
    check(c["used"] is True, c, "catalog not used")
    check(c["changed"] <= len(closure(touched)), c, "changed above %d" % len(closure(touched)))
    # (moves are made at DEST only where rsync deletes the old path plainly:
    # --delete, and no filter rule, which -F is)
    if s.delete and "-F" not in opts:
        check(c["renamed"] >= BULK_FILES, c, "renamed below the %d files of the renamed "
              "directory" % BULK_FILES)
        check(c["files_seen"] < BULK_FILES, c, "the renamed directory's files, which "
              "the first copy wrote, handed to rsync again")
    # what keeps size and mtime: two files rewritten (in place, and a new inode renamed
    # over one), which rsync's quick check leaves as they were at DEST; a mode
    s.log = []
    touched = set()
    for swap_in in (False, True):
        touched |= s._rewrite(keep_mtime=True, swap_in=swap_in)
        s.log.append("modify_same_size_and_mtime %r" % sorted(touched)[-1:])
    touched |= s.chmod()
    s.log.append("chmod")
    s.settle()
    c = go(3)
    check(c["used"] is True, c, "catalog not used")
    check(c["changed"] <= len(closure(touched)), c, "changed above %d" % len(closure(touched)))
    for number in range(4, 4 + rounds):
        touched = s.random_round()
        c = go(number)
        check(c["used"] is True, c, "catalog not used")
        # not everything sent again: at most what the round touched and its parents
        # (a filter file's change touches its whole subtree)
        bound = len(closure(touched))
        check(c["changed"] <= bound, c, "changed above %d (of %d entries)" % (bound, entries))
    assert not problems, "the catalog's account:\n" + "\n".join(problems)
    return s


# --------------------------------------------------------------------------- the sequence

@pytest.mark.slow
@pytest.mark.parametrize("opts", OPTION_SETS)
def test_a_random_sequence_of_changes_copies_like_rsync_round_after_round(tmp_path, opts):
    """Catches a catalog run that misses a change (a rename, a type change, a parent's
    time, a filter file's new rules, a hard link), that sends a file plain rsync's
    quick check skips (same size and mtime), that moves a renamed entry without
    --delete (rsync keeps the old name), or that sends everything again."""
    run_sequence(tmp_path, opts, 7000 + OPTION_SETS.index(opts), ROUNDS)


@pytest.mark.slow
@pytest.mark.parametrize("opts,walkers", [("-a", "0"), ("-aH --delete", "0"),
                                          ("-a --delete", "3")])
def test_the_sequence_compared_in_process_or_by_more_walkers_copies_like_rsync(
        tmp_path, opts, walkers):
    """The comparison without walker processes (--scan-threads 0: the run's own walk)
    and with more walkers than CPUs (their answers taken in the order asked) ends
    as rsync too: catches a difference between the two ways of comparing."""
    run_sequence(tmp_path, opts, 7200 + OPTION_SETS.index(opts), ROUNDS,
                 extra=["--scan-threads", walkers])


@pytest.fixture(scope="module")
def sshd_server(tmp_path_factory):
    """The private sshd on 127.0.0.1 (remote.SshServer), as test_remote.py has it."""
    yield from serve_sshd(tmp_path_factory)


@pytest.mark.slow
def test_the_sequence_to_a_dest_over_ssh_copies_like_rsync(tmp_path, sshd_server):
    """DEST is user@127.0.0.1:DEST over the private sshd (the sample and the moves
    done through it); the oracle is plain rsync into a local twin."""
    opts = "-a --delete"
    run_sequence(tmp_path, opts, 7100, REMOTE_ROUNDS,
                 msrsync_opts=opts + " -e " + shlex.quote(sshd_server.rsh),
                 to_dest=sshd_server.remote)


Link = collections.namedtuple("Link", "target")


def _tiny(root, spec):
    """SRC from {relative path: content, None for a directory, or a Link}, every
    entry at an old time of its own."""
    root = os.fsencode(root)
    os.makedirs(root)
    for rel, data in spec.items():
        if data is None:
            os.makedirs(j(root, rel), exist_ok=True)
        elif isinstance(data, Link):
            os.symlink(data.target, j(root, rel))
        else:
            with open(j(root, rel), "wb") as handle:
                handle.write(data)
    for i, rel in enumerate(sorted(spec, key=lambda r: -r.count(b"/"))):
        os.utime(j(root, rel), (BASE_S + i, BASE_S + i), follow_symlinks=False)
    os.utime(root, (BASE_S - 1, BASE_S - 1))
    return root


def _in_turn(tmp_path, spec, opts, changes, pause=0, each=False, extra=()):
    """SRC made from spec (`pause` seconds before its first copy), then copied with
    the catalog (and `extra` options) and with rsync once, and again after each of
    changes(SRC): the DESTs compared at the end (each: after every copy); returns
    the last run's catalog object."""
    work = os.fsencode(tmp_path)
    src = _tiny(j(work, b"src"), spec)
    time.sleep(pause)
    dest_r, dest_m = j(work, b"rsync-dest"), j(work, b"msrsync-dest")
    cat = j(work, b"catalog.sqlite")
    for number, change in enumerate([None] + list(changes)):
        if change:
            change(src)
        summary = j(work, b"run%d.json" % number)
        cp = msrsync_with_catalog(cat, opts, src + b"/", dest_m + b"/", summary, extra)
        assert cp.returncode == 0, describe(cp)
        cp = run_rsync(src + b"/", dest_r + b"/", opts=opts.split())
        assert cp.returncode == 0, describe(cp)
        if each:
            assert_same_tree(dest_r, dest_m, label_a="rsync", label_b="msrsync")
    assert_same_tree(dest_r, dest_m, label_a="rsync", label_b="msrsync")
    return catalog_of(summary)


def _twice(tmp_path, spec, opts, change):
    """SRC copied with the catalog and with rsync, change(SRC) made, copied again:
    the DESTs compared; returns the second run's catalog object."""
    return _in_turn(tmp_path, spec, opts, [change])


@pytest.mark.parametrize("opts", ["-a", "-a --delete"])
def test_a_file_changed_at_srcs_top_leaves_dests_root_time_as_rsync(tmp_path, opts):
    """Only a file directly under SRC's root changed (SRC's root itself not): the
    catalog run must leave DEST's root at SRC's time, as rsync does (its temporary
    file in DEST's root moves the root's mtime to the present)."""
    def change(src):
        with open(j(src, b"top"), "wb") as handle:
            handle.write(b"HELLO\n")
        os.utime(j(src, b"top"), (BASE_S + 100, BASE_S + 100))
    c = _twice(tmp_path, {b"top": b"hello\n", b"sub/": None, b"sub/f": b"x\n"}, opts, change)
    assert c["used"] is True, c


@pytest.mark.parametrize("rule", ["per-directory", "global"])
def test_a_file_moved_out_of_a_protected_place_keeps_its_dest_copy_like_rsync(tmp_path,
                                                                             rule):
    """A "P *.dat" rule, in SRC's .rsync-filter (-F) or given with --filter, protects
    DEST's a/x.dat from --delete: when SRC moves it to b/x.dat, rsync makes b/x.dat and
    keeps a/x.dat. A catalog run must not delete (or move) the protected copy."""
    spec = {b"a/": None, b"b/": None, b"a/x.dat": b"data\n", b"b/y": b"other\n"}
    if rule == "per-directory":
        spec[b".rsync-filter"] = b"P *.dat\n"
        opts = "-a --delete -F"
    else:
        opts = "-a --delete --filter=P_*.dat"

    def change(src):
        os.rename(j(src, b"a/x.dat"), j(src, b"b/x.dat"))
        for i, d in enumerate((b"a", b"b")):
            os.utime(j(src, d), (BASE_S + 100 + i, BASE_S + 100 + i))
    _twice(tmp_path, spec, opts, change)


def test_a_renamed_directory_holding_a_copy_the_quick_check_left_stale_ends_as_rsync(
        tmp_path):
    """A file rewritten with its size and mtime kept (rsync's quick check leaves
    DEST's old content, the catalog records its new stat as sent), then its
    directory renamed: rsync sends the file whole to the new path, so the copy
    moved at DEST must be compared by content. Catches a move trusted because the
    stat is the catalog's row (ctime included), which says nothing of DEST's
    content."""
    spec = {b"keep": b"k\n", b"old/": None}
    spec.update((b"old/f%02d" % i, b"x" * (i + 1)) for i in range(6))

    def rewrite(src):
        path = j(src, b"old/f03")
        st = os.lstat(path)
        with open(path, "r+b") as handle:
            handle.write(b"Y" * st.st_size)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        time.sleep(2.2)               # (its new ctime well before the next run too)

    def rename(src):
        os.rename(j(src, b"old"), j(src, b"new"))
        os.utime(src, (BASE_S + 500, BASE_S + 500))
    # (ctimes well before the first run: older than any margin a trust might use)
    c = _in_turn(tmp_path, spec, "-a --delete", (rewrite, rename), pause=2.2, each=True)
    assert c["used"] is True and c["renamed"] >= 6, c
    with open(j(os.fsencode(tmp_path), b"msrsync-dest", b"new", b"f03"), "rb") as handle:
        assert handle.read() == b"Y" * 4


def handed_to_rsync(summary_path):
    """The names a run kept with -k gave its transfer buckets' rsyncs (their lists,
    in the bucket directory its --json summary names, which then goes)."""
    with open(summary_path) as handle:
        kept = os.fsencode(json.load(handle)["buckets_dir"])
    names = set()
    try:
        for name in os.listdir(kept):
            if name[:1].isdigit() and name.endswith(b".list"):
                with open(j(kept, name), "rb") as handle:
                    names.update(n for n in handle.read().split(b"\0") if n)
    finally:
        shutil.rmtree(kept)
    return names


RENAMED = {b"keep": b"k\n", b"old/": None, b"old/sub/": None, b"old/sub/deep": b"d\n",
           b"old/link": Link(b"f00")}
RENAMED.update((b"old/f%02d" % i, b"x" * (i + 1)) for i in range(12))


def _renamed_in_turn(tmp_path, before=None, opts="-a --delete"):
    """RENAMED's SRC copied (rsync OPTS) once its ctimes are settled (2.2 s after it
    was made), again after before(SRC) if given, and once more after old/ is renamed
    new/: the DESTs compared after each copy; returns the last run's catalog object
    and what its rsyncs were given."""
    def rename(src):
        os.rename(j(src, b"old"), j(src, b"new"))
        os.utime(src, (BASE_S + 500, BASE_S + 500))
    changes = ([before] if before is not None else []) + [rename]
    c = _in_turn(tmp_path, RENAMED, opts, changes, pause=2.2, each=True, extra=["-k"])
    work = os.fsencode(tmp_path)
    for number in range(len(changes)):
        handed_to_rsync(j(work, b"run%d.json" % number))
    return c, handed_to_rsync(j(work, b"run%d.json" % len(changes)))


def test_a_renamed_directory_of_copies_the_last_run_wrote_is_moved_and_not_read_again(
        tmp_path):
    """The last run wrote every file of old/ (rsync sent them whole, their ctimes
    settled before it began), then old/ is renamed: DEST's copy is moved, and no
    rsync is given its files or its symlink, since every stat field of theirs is
    the catalog's and DEST's content is what SRC has. DEST still ends as rsync's.
    Catches a move that compares by content what the catalog knows is there."""
    c, handed = _renamed_in_turn(tmp_path)
    assert c["used"] is True and c["renamed"] >= 15, c
    assert not any(n.startswith(b"new/") and not n.endswith(b"/") for n in handed), handed


def test_a_moved_copy_whose_file_changed_in_the_last_runs_margin_is_compared_by_content(
        tmp_path):
    """old/f03 is rewritten (another size) just before the run that sends it: rsync
    writes it whole, but its ctime is not settled before that run began, so the
    catalog does not say DEST's content is SRC's (a rewrite during the run, or an
    inode number given again within a clock's tick, would look the same). Once
    old/ is renamed, new/f03 goes to rsync -c, the files written long before it do
    not, and DEST ends as rsync's. Catches a WRITTEN mark without the margin."""
    def rewrite(src):
        with open(j(src, b"old/f03"), "wb") as handle:
            handle.write(b"longer now\n")
        os.utime(j(src, b"old/f03"), (BASE_S + 300, BASE_S + 300))
        os.utime(j(src, b"old"), (BASE_S + 400, BASE_S + 400))
    c, handed = _renamed_in_turn(tmp_path, before=rewrite)
    assert c["used"] is True and c["renamed"] >= 15, c
    assert sorted(n for n in handed if n.startswith(b"new/")) == [b"new/f03"], handed


def test_with_append_a_renamed_directorys_copies_are_compared_by_content(tmp_path):
    """--append sends only what a DEST file lacks, taking the rest for SRC's: a file
    it sent is not known to be SRC's whole, so once old/ is renamed every file in it
    goes to rsync -c. Catches a catalog that trusts what --append wrote."""
    c, handed = _renamed_in_turn(tmp_path, opts="-a --delete --append")
    assert c["used"] is True and c["renamed"] >= 15, c
    files = sorted(b"new/" + rel[4:] for rel, data in RENAMED.items()
                   if rel.startswith(b"old/") and isinstance(data, bytes))
    assert sorted(n for n in handed if n in files) == files, handed


# --------------------------------------------------------------------------- DEST changed

def _copied_once(tmp_path, opts="-a --delete", seed=7200, **kw):
    """A small SRC copied once with --catalog: (Source, catalog, DEST)."""
    work = os.fsencode(tmp_path)
    s = Source(j(work, b"src"), seed, opts)
    s.populate(**kw)
    cat, dest = j(work, b"catalog.sqlite"), j(work, b"dest")
    cp = msrsync_with_catalog(cat, opts, s.root + b"/", dest + b"/")
    assert cp.returncode == 0, describe(cp)
    return s, cat, dest


def assert_refused_by_the_catalog(cp):
    __tracebackhide__ = True
    assert cp.returncode == 47, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, "expected one stderr line:\n" + describe(cp)
    assert "does not match the catalog" in lines[0], lines
    assert "without --catalog" in lines[0], lines
    assert "Traceback" not in lines[0]


@pytest.mark.parametrize("share", ["all", "half"])
def test_a_dest_changed_behind_the_catalog_is_refused_with_47(tmp_path, share):
    """Every (or every second) file of DEST grown and re-timed after the catalog run,
    and in SRC a file changed, a file and a directory renamed: the run stats the
    sample (beside its walk), refuses (47, one line), and neither copies nor moves
    anything at DEST. With --catalog-sample 0 it does not look (the documented
    trade-off) and runs."""
    s, cat, dest = _copied_once(tmp_path, dirs=8, files=60, bulk=False)
    files = sorted(p for p, e in snapshot(dest).items() if e["type"] == "file")
    for i, rel in enumerate(files):
        if share == "all" or i % 2 == 0:
            with open(j(dest, rel), "ab") as handle:
                handle.write(b"changed behind the catalog's back\n")
            t = s.when()
            os.utime(j(dest, rel), ns=(t, t))
    s.grow()
    s.rename_file()
    s.rename_dir()
    s.settle()
    before = snapshot(dest)
    cp = msrsync_with_catalog(cat, "-a --delete", s.root + b"/", dest + b"/")
    assert_refused_by_the_catalog(cp)
    assert_same_tree(before, dest, label_a="before", label_b="after the refused run")
    cp = msrsync_with_catalog(cat, "-a --delete", s.root + b"/", dest + b"/",
                              extra=["--catalog-sample", "0"])
    assert cp.returncode == 0, describe(cp)


def test_a_dest_replaced_by_a_copy_of_itself_is_refused_with_47(tmp_path):
    """DEST moved away and an exact copy (cp -a: every sampled entry as recorded) put
    in its place: DEST's identity differs, so the run refuses (47) and copies
    nothing."""
    s, cat, dest = _copied_once(tmp_path, dirs=6, files=40, bulk=False)
    work = os.fsencode(tmp_path)
    cp = run_cmd(["cp", "-a", dest, j(work, b"dest.copy")])
    assert cp.returncode == 0, describe(cp)
    os.rename(dest, j(work, b"dest.old"))
    os.rename(j(work, b"dest.copy"), dest)
    assert_same_tree(j(work, b"dest.old"), dest)
    s.grow()
    s.settle()
    before = snapshot(dest)
    cp = msrsync_with_catalog(cat, "-a --delete", s.root + b"/", dest + b"/")
    assert_refused_by_the_catalog(cp)
    assert_same_tree(before, dest, label_a="before", label_b="after the refused run")


# --------------------------------------------------------------------------- another run's catalog

@pytest.mark.parametrize("what", ["options", "filter", "src", "dest"])
def test_a_catalog_of_another_run_is_not_used_and_is_rewritten(tmp_path, what):
    """A catalog made by "-a" of SRC into DEST, then a run with "-a --delete", or
    "-a --exclude=*.log", or another SRC, or another (empty) DEST: the run goes the
    full way (used false, written true) and DEST ends as rsync's; the run after it
    uses the rewritten catalog."""
    work = os.fsencode(tmp_path)
    dest_r, dest_m = j(work, b"rsync-dest"), j(work, b"msrsync-dest")
    cat = j(work, b"catalog.sqlite")
    s = Source(j(work, b"src"), 7300, "-a", dest_r)
    s.populate(dirs=10, files=80, bulk=False)
    c = copy_round(work, 0, s, cat, "-a", dest_r, dest_m)
    assert c["written"] is True, c
    # changes a --delete run and an exclusion would act on
    for step in (s.delete_file, s.delete_file, s.delete_tree, s.grow, s.add_file):
        step()
    s.write(b"top.log", b"a log\n")
    s.settle()
    opts = {"options": "-a --delete", "filter": "-a --exclude=*.log"}.get(what, "-a")
    if what == "src":
        s = Source(j(work, b"src2"), 7301, "-a", dest_r)
        s.populate(dirs=10, files=80, bulk=False)
    if what == "dest":
        dest_r, dest_m = j(work, b"rsync-dest2"), j(work, b"msrsync-dest2")
    for number in (1, 2):
        c = copy_round(work, number, s, cat, opts, dest_r, dest_m,
                       context=" (%s of the catalog's run changed)" % what)
        if number == 1:
            assert (c["used"], c["written"]) == (False, True), c
        else:
            assert c["used"] is True, c
            assert c["changed"] == 0, c


# --------------------------------------------------------------------------- killed mid-way

def _landed(dest, names, size):
    return sum(1 for n in names if os.path.isfile(j(dest, n)) and
               os.lstat(j(dest, n)).st_size == size)


@pytest.mark.slow
@pytest.mark.parametrize("again", ["catalog", "resume"])
def test_a_run_killed_mid_way_leaves_the_catalog_whole_and_the_next_run_ends_as_rsync(
        tmp_path, again):
    """A catalog run, then 123 new files (1.6 MB at 2 x 300 KB/s) and some changes,
    and a catalog run with -k -b BUCKETS SIGKILLed (its process group) once some new
    files landed. The catalog is still a whole SQLite file. The next run with the same
    command, or --resume DIR, leaves DEST as plain rsync leaves the killed run's DEST
    (rsync's temporary files of the killed receivers deleted, as --delete does);
    the run after it sends nothing."""
    work = os.fsencode(tmp_path)
    opts = "-a --delete --bwlimit=300"
    s = Source(j(work, b"src"), 7400, opts)
    s.populate(dirs=5, files=40, bulk=False)
    cat, dest = j(work, b"catalog.sqlite"), j(work, b"dest")
    buckets = j(work, b"buckets")
    os.mkdir(buckets)
    args = ["--catalog", cat, "-p", "2", "-f", "10", "-k", "-b", buckets,
            "--rsync", opts, s.root + b"/", dest + b"/"]
    cp = run_msrsync(*args)
    assert cp.returncode == 0, describe(cp)
    first_runs = set(os.listdir(buckets))
    new = []
    for d in range(6):
        os.mkdir(s.path(b"more%d" % d))
        for f in range(20):
            new.append(b"more%d/n%02d" % (d, f))
            s.write(new[-1], s.content(8192))
    for i in range(3):
        s.write(b"more0/big%d" % i, s.content(200000))
    for step in (s.delete_file, s.delete_file, s.grow, s.grow, s.rename_file):
        step()
    s.settle()

    log = open(j(work, b"killed.log"), "wb")
    proc = subprocess.Popen([sys.executable, MSRSYNC] + [os.fsencode(a) for a in args],
                            stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        landed = wait_for(lambda: _landed(dest, new, 8192) >= 8, 60)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        kill_leftovers(tmp_path)
    assert landed, "no new file landed in 60 s:\n%s" % text(open(log.name, "rb").read())
    assert_no_rsync_left(tmp_path)
    assert _landed(dest, new, 8192) < len(new), "the run ended before it was killed"

    con = sqlite3.connect(os.fsdecode(cat))
    try:
        assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
    finally:
        con.close()

    # the oracle: plain rsync from where the killed run left DEST
    oracle = j(work, b"oracle")
    cp = run_cmd(["cp", "-a", dest, oracle])
    assert cp.returncode == 0, describe(cp)
    cp = run_rsync(s.root + b"/", oracle + b"/", opts=["-a", "--delete"])
    assert cp.returncode == 0, describe(cp)

    if again == "catalog":
        cp = run_msrsync(*args, timeout=180)
    else:
        (run_dir,) = set(os.listdir(buckets)) - first_runs
        cp = run_msrsync("--resume", j(buckets, run_dir), timeout=180)
    assert cp.returncode == 0, describe(cp)
    assert b"Traceback" not in cp.stderr, describe(cp)
    assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")

    summary = j(work, b"after.json")
    cp = run_msrsync(*(args[:-4] + ["--json", summary] + args[-4:]))
    assert cp.returncode == 0, describe(cp)
    assert_same_tree(oracle, dest, label_a="rsync", label_b="msrsync")
    if again == "catalog":
        c = catalog_of(summary)
        assert c["used"] is True and c["changed"] == 0, c


# --------------------------------------------------------------------------- --changes

@pytest.mark.parametrize("form", ["newline-file", "nul-stdin"])
def test_changes_list_stats_only_the_listed_paths_and_copies_like_rsync(tmp_path, form):
    """After a catalog run: a file grown, one rewritten, one added, a new directory of
    three files, a file deleted, one chmod'ed (and, NUL-separated, one whose name holds
    a newline grown). Listed in a file (one a line) or on stdin (NUL-separated, found
    by the NUL), the run stats those and their parents only (catalog.compared a fifth
    of the tree at most) and DEST ends as rsync's."""
    work = os.fsencode(tmp_path)
    opts = "-a --delete"
    dest_r, dest_m = j(work, b"rsync-dest"), j(work, b"msrsync-dest")
    cat = j(work, b"catalog.sqlite")
    s = Source(j(work, b"src"), 7500, opts, dest_r)
    s.populate()
    deep = sorted(d for d in s.dirs(root=False) if d.count(b"/") >= 1)[0]
    s.write(j(deep, b"nl\nname.txt"), b"a newline in the name\n")
    s.settle()
    entries = len(s.entries()) + 1
    copy_round(work, 0, s, cat, opts, dest_r, dest_m)

    listed = []
    plain = [f for f in sorted(s.plain_files()) if b"\n" not in f and s.names_of(f) == {f}]
    grown, rewritten, gone, moded = s.rng.sample(plain, 4)
    with open(s.path(grown), "ab") as handle:
        handle.write(b"more\n")
    with open(s.path(rewritten), "r+b") as handle:
        data = handle.read()
        handle.seek(0)
        handle.write(bytes(b ^ 0x5a for b in data) or b"x")
    os.unlink(s.path(gone))
    os.chmod(s.path(moded), 0o604)
    added = j(deep, b"added.txt")
    s.write(added, b"added\n")
    os.mkdir(s.path(b"new dir"))
    for i in range(3):
        s.write(j(b"new dir", b"g%d" % i), b"%d\n" % i)
    listed = [grown, rewritten, gone, moded, added, b"new dir"]
    if form == "nul-stdin":
        with open(s.path(j(deep, b"nl\nname.txt")), "ab") as handle:
            handle.write(b"grown\n")
        listed.append(j(deep, b"nl\nname.txt"))
    s.settle()
    s.log = ["--changes %r" % listed]
    if form == "newline-file":
        listfile = j(work, b"changes.list")
        with open(listfile, "wb") as handle:
            handle.write(b"\n".join(listed) + b"\n")
        c = copy_round(work, 1, s, cat, opts, dest_r, dest_m, extra=["--changes", listfile])
    else:
        c = copy_round(work, 1, s, cat, opts, dest_r, dest_m, extra=["--changes", "-"],
                       input=b"\0".join(listed) + b"\0")
    assert c["used"] is True, c
    assert 1 <= c["compared"] <= entries // 5, (c, entries)
    bound = closure(set(listed) | {j(b"new dir", b"g%d" % i) for i in range(3)})
    assert 1 <= c["changed"] <= len(bound), (c, len(bound))


def test_changes_without_a_usable_catalog_is_ignored_and_the_whole_src_scanned(tmp_path):
    """No catalog yet: --changes is ignored with a note, the whole SRC is copied (as
    rsync copies it) and the catalog written."""
    work = os.fsencode(tmp_path)
    opts = "-a --delete"
    dest_r, dest_m = j(work, b"rsync-dest"), j(work, b"msrsync-dest")
    s = Source(j(work, b"src"), 7600, opts, dest_r)
    s.populate(dirs=8, files=60, bulk=False)
    listfile = j(work, b"changes.list")
    with open(listfile, "wb") as handle:
        handle.write(sorted(s.files())[0] + b"\n")
    summary = j(work, b"run.json")
    cp = msrsync_with_catalog(j(work, b"catalog.sqlite"), opts, s.root + b"/",
                              dest_m + b"/", summary, extra=["--changes", listfile])
    assert cp.returncode == 0, describe(cp)
    assert b"--changes" in cp.stderr, describe(cp)
    assert run_rsync(s.root + b"/", dest_r + b"/", opts=opts.split()).returncode == 0
    assert_same_tree(dest_r, dest_m, label_a="rsync", label_b="msrsync")
    c = catalog_of(summary)
    assert (c["used"], c["written"]) == (False, True), c


# --------------------------------------------------------------------------- trust

@pytest.mark.skipif(not IS_ROOT, reason="a root run refuses another user's catalog")
@pytest.mark.parametrize("how", ["0666", "0620", "0602", "nobody's"])
def test_a_catalog_others_may_write_or_another_user_owns_is_refused_with_45(tmp_path, how):
    """Whoever may write the catalog decides what a root run sends and deletes: exit
    45, nothing copied. (Group-writable in a group of other users: gid 4343, no
    name; a group that is the owner's own, root's root with no other member, counts
    as the owner's, as everywhere in msrsync.)"""
    s, cat, dest = _copied_once(tmp_path, dirs=4, files=20, bulk=False)
    if how == "nobody's":
        os.chown(cat, NOBODY, NOBODY)
        os.chmod(cat, 0o600)
    else:
        os.chown(cat, 0, 4343)
        os.chmod(cat, int(how, 8))
    s.grow()
    s.settle()
    before = snapshot(dest)
    cp = msrsync_with_catalog(cat, "-a --delete", s.root + b"/", dest + b"/")
    assert cp.returncode == 45, describe(cp)
    assert b"Traceback" not in cp.stderr, describe(cp)
    assert_same_tree(before, dest, label_a="before", label_b="after the refused run")


# --------------------------------------------------------------------------- errors

REFUSED = ["--files-from=LIST", "-m", "-L", "-k", "--copy-unsafe-links",
           "--delete-missing-args"]


def _assert_refused_with(cp, code, needle, *untouched):
    __tracebackhide__ = True
    assert cp.returncode == code, describe(cp)
    lines = stderr_lines(cp)
    assert len(lines) == 1, "expected one stderr line:\n" + describe(cp)
    assert needle in lines[0], lines
    assert "Traceback" not in text(cp.stderr)
    for path in untouched:
        assert not os.path.lexists(path), "%r was made" % (path,)


@pytest.mark.parametrize("option", REFUSED)
def test_catalog_with_an_option_it_cannot_follow_exits_4(tmp_path, option):
    work = os.fsencode(tmp_path)
    s = Source(j(work, b"src"), 7700, "-a")
    s.populate(dirs=3, files=10, bulk=False)
    listfile = j(work, b"list")
    with open(listfile, "wb") as handle:
        handle.write(sorted(s.files())[0] + b"\n")
    option = option.replace("LIST", os.fsdecode(listfile))
    cat, dest = j(work, b"catalog.sqlite"), j(work, b"dest")
    cp = msrsync_with_catalog(cat, "-a " + option, s.root + b"/", dest + b"/")
    _assert_refused_with(cp, 4, "--catalog", cat, dest)


def test_catalog_with_a_remote_src_exits_4(tmp_path, sshd_server):
    work = os.fsencode(tmp_path)
    s = Source(j(work, b"src"), 7701, "-a")
    s.populate(dirs=3, files=10, bulk=False)
    cat, dest = j(work, b"catalog.sqlite"), j(work, b"dest")
    cp = msrsync_with_catalog(cat, "-a -e " + shlex.quote(sshd_server.rsh),
                              sshd_server.remote(s.root + b"/"), dest + b"/")
    _assert_refused_with(cp, 4, "--catalog", cat, dest)


def test_changes_without_catalog_exits_1(tmp_path):
    work = os.fsencode(tmp_path)
    os.mkdir(j(work, b"src"))
    listfile = j(work, b"list")
    with open(listfile, "wb") as handle:
        handle.write(b"x\n")
    dest = j(work, b"dest")
    cp = run_msrsync("--changes", listfile, j(work, b"src/"), dest)
    _assert_refused_with(cp, 1, "--changes", dest)


def test_a_negative_catalog_sample_exits_1(tmp_path):
    work = os.fsencode(tmp_path)
    os.mkdir(j(work, b"src"))
    cat, dest = j(work, b"catalog.sqlite"), j(work, b"dest")
    cp = run_msrsync("--catalog", cat, "--catalog-sample", "-1", j(work, b"src/"), dest)
    assert cp.returncode == 1, describe(cp)
    assert b"--catalog-sample" in cp.stderr, describe(cp)
    assert not os.path.lexists(cat) and not os.path.lexists(dest)


def catalog_rows(cat):
    """A catalog's rows and meta, as SQLite reads them (its file's header says
    which journal it keeps, which is no content)."""
    with sqlite3.connect(os.fsdecode(cat)) as db:
        return (sorted(db.execute("SELECT * FROM entries")),
                sorted(db.execute("SELECT * FROM meta")))


@pytest.mark.parametrize("dry", ["msrsync -d", "rsync -n"])
def test_a_dry_run_with_a_catalog_writes_none_and_changes_nothing(tmp_path, dry):
    """A dry run (msrsync's -d, rsync's -n) with --catalog, with no catalog yet or
    with one: exit 0, no catalog written or changed, and the next real run still
    finds its catalog good (it sends only what changed)."""
    work = os.fsencode(tmp_path)
    src, dest, cat = j(work, b"src"), j(work, b"dest"), j(work, b"cat.sqlite")
    os.makedirs(j(src, b"a"))
    for i in range(5):
        with open(j(src, b"a", b"f%d" % i), "wb") as handle:
            handle.write(b"%d" % i)
    opts, extra = ("-a --delete -n", ()) if dry == "rsync -n" else ("-a --delete", ("-d",))
    cp = msrsync_with_catalog(cat, opts, src + b"/", dest + b"/", extra=extra)
    assert cp.returncode == 0, describe(cp)
    assert not os.path.exists(cat)
    cp = msrsync_with_catalog(cat, "-a --delete", src + b"/", dest + b"/")
    assert cp.returncode == 0, describe(cp)
    before = catalog_rows(cat)
    with open(j(src, b"a", b"f1"), "ab") as handle:
        handle.write(b"more")
    cp = msrsync_with_catalog(cat, opts, src + b"/", dest + b"/", extra=extra)
    assert cp.returncode == 0 and b"Traceback" not in cp.stderr, describe(cp)
    assert catalog_rows(cat) == before
    summary = j(work, b"last.json")
    cp = msrsync_with_catalog(cat, "-a --delete", src + b"/", dest + b"/", summary)
    assert cp.returncode == 0, describe(cp)
    c = catalog_of(summary)
    assert c["used"] is True and 1 <= c["changed"] <= 2, c
    assert_same_tree(src, dest)


def _catalog_rows(cat):
    """What a catalog holds: its meta and its entries, in order."""
    db = sqlite3.connect(os.fsdecode(cat))
    try:
        return (db.execute("SELECT * FROM meta ORDER BY key").fetchall(),
                db.execute("SELECT * FROM entries ORDER BY src, parent, name").fetchall())
    finally:
        db.close()


@pytest.mark.parametrize("opts", ["-a", "-a --delete"])
def test_survey_with_the_catalog_says_what_the_next_run_sends_and_deletes(tmp_path, opts):
    """Catches a survey whose account of the next run with the catalog (what it
    would send, move and delete, what it compares) is not what that run then does,
    or that changes DEST or the catalog."""
    work = os.fsencode(tmp_path)
    src = _tiny(j(work, b"src"), {b"a": b"1", b"d": None, b"d/b": b"22", b"d/c": b"333",
                                  b"e": None, b"e/f": b"4444"})
    dest, twin, cat = j(work, b"dest"), j(work, b"twin"), j(work, b"cat.sqlite")
    cp = msrsync_with_catalog(cat, opts, src + b"/", dest + b"/")
    assert cp.returncode == 0, describe(cp)
    assert run_rsync(src + b"/", twin + b"/", opts=opts.split()).returncode == 0
    with open(j(src, b"d/b"), "wb") as handle:
        handle.write(b"longer than before")
    with open(j(src, b"e/new"), "wb") as handle:
        handle.write(b"n")
    os.unlink(j(src, b"a"))
    # (the parents at times of their own: rsync leaves a directory's time
    # alone that differs in the fraction of a second only)
    for i, rel in enumerate((b"e", b"")):
        os.utime(j(src, rel) if rel else src, (BASE_S + 100 + i, BASE_S + 100 + i))
    before_dest, before_cat = snapshot(dest), _catalog_rows(cat)
    report = j(work, b"survey.json")
    cp = run_msrsync("--survey", "--catalog", cat, "--json", report, "--rsync", opts,
                     src + b"/", dest + b"/")
    assert cp.returncode == 0, describe(cp)
    assert b"The next run with the catalog" in cp.stdout, describe(cp)
    with open(report) as handle:
        survey = json.load(handle)["catalog"]
    assert snapshot(dest) == before_dest and _catalog_rows(cat) == before_cat
    summary = j(work, b"run.json")
    cp = msrsync_with_catalog(cat, opts, src + b"/", dest + b"/", summary)
    assert cp.returncode == 0, describe(cp)
    run = catalog_of(summary)
    deletes = "--delete" in opts
    assert survey["usable"] is True and run["used"] is True, (survey, run)
    assert (survey["would_send"], survey["would_move"], survey["would_delete"]) == (
        2, 0, 1 if deletes else 0), survey
    assert survey["would_send_bytes"] == len(b"longer than before") + 1, survey
    assert (survey["compared"], survey["would_delete"]) == (run["compared"], run["deleted"]), (
        survey, run)
    cp = run_rsync(src + b"/", twin + b"/", opts=opts.split())
    assert cp.returncode == 0
    assert_same_tree(twin, dest, label_a="rsync", label_b="msrsync")


def _walkers_of(cat):
    """The pids of the live catalog walkers reading `cat` (their command line names it)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                argv = handle.read().split(b"\0")
            with open("/proc/%s/stat" % pid, "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if cat in argv and b"-c" in argv and state != b"Z":
            pids.append(int(pid))
    return pids


@pytest.mark.slow
def test_an_interrupt_stops_a_frozen_catalog_walker_and_leaves_none(tmp_path):
    """The run's one catalog walker is frozen (SIGSTOP) mid-walk, then msrsync gets
    SIGINT: it must end (exit 20) rather than wait on the walker forever, and leave
    no walker behind, frozen or not; catches walkers the run's stop does not reach."""
    work = os.fsencode(tmp_path)
    src, dest, cat = j(work, b"src"), j(work, b"dest"), j(work, b"catalog.sqlite")
    for d in range(200):
        os.makedirs(j(src, b"d%03d" % d))
        for f in range(50):
            with open(j(src, b"d%03d/f%02d" % (d, f)), "wb") as handle:
                handle.write(b"x")
    cp = msrsync_with_catalog(cat, "-a --delete", src + b"/", dest + b"/")
    assert cp.returncode == 0, describe(cp)
    with open(j(src, b"d100/f00"), "wb") as handle:
        handle.write(b"changed")
    log = open(j(work, b"run.log"), "wb")
    proc = subprocess.Popen([sys.executable, MSRSYNC, "--catalog", cat, "--scan-threads", "1",
                             "--rsync", "-a --delete", src + b"/", dest + b"/"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    frozen = []
    try:
        found = wait_for(lambda: _walkers_of(cat), 30, interval=0.002)
        assert found, "no walker seen:\n" + text(open(log.name, "rb").read())
        for pid in found:
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)
        assert proc.poll() is None, "the run ended before its walker was frozen"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        for pid in _walkers_of(cat):
            os.kill(pid, signal.SIGKILL)
    output = open(log.name, "rb").read()
    assert code == 20, "exit %d:\n%s" % (code, text(output))
    assert b"Traceback" not in output, text(output)
    assert wait_for(lambda: not _walkers_of(cat), 5), "walkers left: %r" % _walkers_of(cat)
