# msrsync Makefile: tests, lint, man page, install, packages, benchmarks.
# It installs no dependency; .ci/run does that on a fresh Debian box.
# Where things live: the shell completions are installed documents of the
# command line, so they sit beside the man page (man/completion/: bash's
# msrsync.bash, zsh's _msrsync); the packages' metadata (Debian's control
# file, changelog and copyright, the RPM spec) is written at build time by
# .ci/package from NEWS.md and the variables below, so the top level keeps
# its layout. Packages are built under $(BUILDDIR).

VERSION := $(shell ./msrsync --version | cut -d' ' -f2)

PYTHON  ?= python3
PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
MANPAGE := man/msrsync.1
# Where bash-completion and zsh look for a command's completion.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
BASHCOMP    := man/completion/msrsync.bash
ZSHCOMP     := man/completion/_msrsync
# make deb, make rpm: the packages' revision, maintainer and changelog date
# (the last commit's, so that a package built twice is the same).
BUILDDIR    ?= build
PKGRELEASE  ?= 1
MAINTAINER  ?= $(shell git log -1 --format='%an <%ae>' 2>/dev/null)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
PACKAGE      = VERSION=$(VERSION) RELEASE=$(PKGRELEASE) MAINTAINER='$(MAINTAINER)' \
               SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) bash .ci/package
# The oldest Python msrsync supports, when pyenv (or the system) has one.
PY36    ?= $(firstword $(wildcard $(PYENV_ROOT)/versions/3.6*/bin/python3.6 \
                                  $(HOME)/.pyenv/versions/3.6*/bin/python3.6 \
                                  /usr/bin/python3.6 /usr/local/bin/python3.6))
# Tests run at once under pytest-xdist when it is installed (.ci/deps tries
# to): two more than the CPUs, since much of a test's time is rsync and ssh
# starting and exiting (each run's pre-flight is three rsyncs in turn), and
# the worker-host cases wait out timeouts.
JOBS    ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 2 )))
# The rsync source tree make rsync-suite runs the test suite of: the newest
# .ci/deps unpacked (Debian's), unless given.
RSYNC_SOURCE ?= $(or $(MSRSYNC_RSYNC_SOURCE),$(lastword $(sort $(wildcard /var/cache/msrsync-tests/rsync-*))))
# Byte-compiles the files named as arguments without writing any .pyc.
COMPILE := import sys; [compile(open(f, 'rb').read(), f, 'exec') for f in sys.argv[1:]]

.PHONY: help test rsync-suite lint man install uninstall deb rpm bench bench-full bench-remote clean

help:
	@echo "msrsync $(VERSION): make <target>, where <target> is one of"
	@echo "  help        this list (default)"
	@echo "  test        run the test suite: $(PYTHON) -m pytest -q -n \$$(JOBS) tests [$(JOBS)]"
	@echo "  rsync-suite rsync's own local-copy tests, plain and through msrsync: $(PYTHON) tests/rsync_suite.py --jobs 2 \$$(RSYNC_SOURCE) [$(RSYNC_SOURCE)]"
	@echo "  lint        pyflakes if installed, else byte-compile (and with Python 3.6 if found)"
	@echo "  man         render $(MANPAGE); fails on any warning"
	@echo "  install     install msrsync, its man page and bash and zsh completions under \$$(DESTDIR)\$$(PREFIX) [$(DESTDIR)$(PREFIX)]"
	@echo "  uninstall   remove what install installed"
	@echo "  deb         build $(BUILDDIR)/msrsync_$(VERSION)-$(PKGRELEASE)_all.deb with dpkg-deb"
	@echo "  rpm         build $(BUILDDIR)/msrsync-$(VERSION)-$(PKGRELEASE).noarch.rpm (and .src.rpm) with rpmbuild"
	@echo "  bench       every benchmark section at small sizes, under 5 minutes: $(PYTHON) bench/suite.py --quick"
	@echo "  bench-full  every section at full size (hours): $(PYTHON) bench/suite.py; $(PYTHON) bench/bench.py --memory"
	@echo "  bench-remote push over ssh to a private loopback sshd: $(PYTHON) bench/remote.py --reps 3"
	@echo "  clean       remove __pycache__, .pytest_cache, bench/results* and \$$(BUILDDIR)"

test:
	@bash .ci/deps >/dev/null || { echo "make test: could not install rsync/pytest (see: bash .ci/deps)" >&2; exit 1; }
	@if $(PYTHON) -c "import xdist" 2>/dev/null; then \
	  echo "$(PYTHON) -m pytest -q -n $(JOBS) --dist loadgroup --durations=20 tests"; \
	  $(PYTHON) -m pytest -q -n $(JOBS) --dist loadgroup --durations=20 tests; \
	else \
	  echo "(no pytest-xdist: the tests run one at a time)"; \
	  echo "$(PYTHON) -m pytest -q --durations=20 tests"; \
	  $(PYTHON) -m pytest -q --durations=20 tests; \
	fi

rsync-suite:
	@test -n "$(RSYNC_SOURCE)" || { echo "make rsync-suite: no rsync source tree (bash .ci/deps fetches one, or give RSYNC_SOURCE=DIR)" >&2; exit 1; }
	$(PYTHON) tests/rsync_suite.py --jobs 2 $(RSYNC_SOURCE)

lint:
	@set -e; \
	if $(PYTHON) -m pyflakes --version >/dev/null 2>&1; then \
	  echo "$(PYTHON) -m pyflakes msrsync $(wildcard tests bench)"; \
	  $(PYTHON) -m pyflakes msrsync $(wildcard tests bench); \
	else \
	  echo "pyflakes not installed: byte-compiling only"; \
	  echo "$(PYTHON): compile msrsync $(wildcard tests/*.py bench/*.py)"; \
	  $(PYTHON) -c "$(COMPILE)" msrsync $(wildcard tests/*.py bench/*.py); \
	fi; \
	if [ -n "$(PY36)" ]; then \
	  echo "$(PY36): compile msrsync $(wildcard bench/*.py)"; \
	  "$(PY36)" -c "$(COMPILE)" msrsync $(wildcard bench/*.py); \
	else \
	  echo "no Python 3.6 found (set PY36=/path/to/python3.6): skipping the 3.6 check"; \
	fi

man:
	@command -v man >/dev/null 2>&1 || { \
	  echo "make man: 'man' not found; install man-db and groff-base (.ci/run does)" >&2; exit 1; }
	@echo "MANWIDTH=80 man --warnings -E UTF-8 -l $(MANPAGE) >/dev/null"
	@warnings=$$(MANWIDTH=80 man --warnings -E UTF-8 -l $(MANPAGE) 2>&1 >/dev/null) || { \
	  printf '%s\n' "$$warnings" >&2; echo "make man: man failed on $(MANPAGE)" >&2; exit 1; }; \
	if [ -n "$$warnings" ]; then \
	  printf '%s\n' "$$warnings" >&2; echo "make man: $(MANPAGE) renders with warnings (above)" >&2; exit 1; \
	fi; \
	echo "$(MANPAGE) renders without warnings"

install:
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 0755 msrsync $(DESTDIR)$(BINDIR)/msrsync
	install -m 0644 $(MANPAGE) $(DESTDIR)$(MANDIR)/man1/msrsync.1
	install -m 0644 $(BASHCOMP) $(DESTDIR)$(BASHCOMPDIR)/msrsync
	install -m 0644 $(ZSHCOMP) $(DESTDIR)$(ZSHCOMPDIR)/_msrsync

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/msrsync $(DESTDIR)$(MANDIR)/man1/msrsync.1
	rm -f $(DESTDIR)$(BASHCOMPDIR)/msrsync $(DESTDIR)$(ZSHCOMPDIR)/_msrsync
	@# (compiled code msrsync 1.0.0 and older kept beside the program)
	rm -f $(DESTDIR)$(BINDIR)/__pycache__/msrsync*.pyc
	-rmdir $(DESTDIR)$(BINDIR)/__pycache__ 2>/dev/null

deb:
	$(PACKAGE) deb $(BUILDDIR)

rpm:
	$(PACKAGE) rpm $(BUILDDIR)

bench:
	$(PYTHON) bench/suite.py --quick

bench-full:
	$(PYTHON) bench/suite.py
	$(PYTHON) bench/bench.py --memory

bench-remote:
	$(PYTHON) bench/remote.py --reps 3

clean:
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +
	rm -rf .pytest_cache bench/results* $(BUILDDIR)
