# Two commands on a fresh machine with only Python:
#   make demo   create .venv, install, write the demo data and open the console on it
#   make test   create .venv, install with the dev extras, ruff, import-linter,
#               mypy --strict, pytest (the wheel test too: tests/cli/test_wheel.py)
# The distribution's Python 3.11+ where there is one, else the first python3 on
# PATH: Debian's is built with PGO and LTO and ran the suite's CPU-bound tests
# with 15 % less CPU than a plain source build (pyenv's, first on this machine's
# PATH). Either works; PYTHON=... picks another.
PYTHON ?= $(firstword $(foreach p,/usr/bin/python3 python3,$(shell $(p) -c \
	'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& echo $(p))) python3)
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   ?= demo

.PHONY: test test-quick demo lint imports typecheck links collect pytest tmux fuse faketime fuzz flakehunt fsync-mutants age-cli peers bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv installs what pip would in a quarter of the time: a clean clone's dev install
# took 66 s with pip and takes 15 s with uv, 5.5 s of it installing and the rest
# compiling the bytecode, which the dev install leaves to `collect` (beside mypy).
# Where uv cannot be had, pip installs it all, compiled.
install = { $(BIN)/python -m pip install -q uv \
	&& $(BIN)/uv pip install -q $(2) --python $(BIN)/python $(1); } \
	|| $(BIN)/python -m pip install -q $(1)

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(call install,-e .,--compile-bytecode)
	touch $@

$(VENV)/.installed-dev: pyproject.toml setup.py | $(BIN)/python
	$(call install,-e '.[dev]')
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/coldkeep demo $(DEMO)

# mypy takes one core: on the other, meanwhile, the installed packages' bytecode
# is compiled (where PYTHONDONTWRITEBYTECODE is set, as on this project's machines,
# every process the tests start would compile what it imports) and pytest collects
# the tests, so that its workers start from the rewritten modules it caches (9 s
# each to collect from a clean clone, 2.5 s from the cache).
test: lint
	$(MAKE) --no-print-directory -j2 typecheck collect
	$(MAKE) --no-print-directory pytest

collect: $(VENV)/.installed-dev
	@$(BIN)/python -m compileall -q $(VENV)/lib >/dev/null
	@$(BIN)/pytest --collect-only -q -p no:cacheprovider >.collect.log \
		|| { cat .collect.log; exit 1; }

lint: $(VENV)/.installed-dev imports
	$(BIN)/ruff check core tui tests bench setup.py
	$(BIN)/ruff format --check core tui tests bench setup.py

# mypy and import-linter resolve imports by module name, and the editable install
# maps coldkeep.core -> core/ through an import hook neither can follow; a tree of
# directory links gives them the same names (new modules need no reinstall).
links:
	mkdir -p .typecheck/coldkeep
	ln -sfn ../../core .typecheck/coldkeep/core
	ln -sfn ../../tui .typecheck/coldkeep/tui

# The contracts are [tool.importlinter] in pyproject.toml.
imports: $(VENV)/.installed-dev links
	PYTHONPATH=.typecheck $(BIN)/lint-imports --no-cache --no-logo

# The tests too: their helpers (helpers, consolekit) are top-level modules of tests/.
typecheck: $(VENV)/.installed-dev links
	MYPYPATH=.typecheck $(BIN)/mypy --strict -p coldkeep.core -p coldkeep.tui
	MYPYPATH=.typecheck:tests $(BIN)/mypy --strict --explicit-package-bases tests

# Three workers on the CI machine's two cores: with two, the machine sat 15 %
# idle while tests waited (on an fsync, a child, a FUSE round trip), and a third
# fills that (434 s with two, 408 s with three, 5 % idle). A test file to each
# at a time: a file's module fixtures (a demo site archived once, an S3 server)
# are built once. The files that mount filesystems go to one worker together
# (tests/conftest.py: MOUNTING).
WORKERS ?= 3
# The sources compiled first: where PYTHONDONTWRITEBYTECODE is set (this project's
# machines set it), every process the tests start (a CLI run, a killed pass, the
# console in tmux: over a thousand) would otherwise compile every module it
# imports, 0.15 s each. A stale .pyc is never used: Python checks it against the
# source's mtime.
# Textual draws a screen up to 60 times a second; the console's tests assert
# what a screen shows once it has settled, never how often it was drawn, and at
# 15 frames a second they take a fifth less CPU (198 s to 161 s for tests/console).
TEST_ENV := TEXTUAL_FPS=15
pytest: $(VENV)/.installed-dev tmux fuse faketime
	$(BIN)/python -m compileall -q $(VENV)/lib core tui tests bench/*.py >/dev/null
	$(TEST_ENV) $(BIN)/pytest -n $(WORKERS) --dist loadgroup --durations=10

# The inner loop, under 90 s on two cores: the core's tests but those that run an
# S3 server's long matrices or mount filesystems, every command's exit codes
# (the CLI over all of the core), the house rules and the properties. `make test`
# before a commit: the console, the crash and fault matrices are only there.
QUICK_SLOW := $(addprefix tests/core/, remote/test_loose_keys.py remote/test_ship_s3.py \
	remote/test_rekey_lock.py remote/test_object_lock.py remote/test_sealed_read_s3.py \
	remote/test_verify_remote.py remote/test_thaw_s3.py remote/test_thaw_many_s3.py \
	ops/test_expire_locked.py ops/test_mount.py \
	ops/test_mount_remote.py ops/test_libfuse.py events/test_checkpoint.py \
	files/test_pathindex.py)
test-quick: $(VENV)/.installed-dev
	$(BIN)/python -m compileall -q $(VENV)/lib core tui tests >/dev/null
	$(TEST_ENV) $(BIN)/pytest -n $(WORKERS) --dist loadgroup -q tests/core tests/cli/test_exit_codes.py \
		tests/test_house.py tests/test_import_hygiene.py tests/test_fuzz.py \
		$(addprefix --ignore=,$(QUICK_SLOW))

# The console tests drive the real console in tmux. As root with apt-get (CI's
# fresh machine) a missing tmux is installed; elsewhere those tests are skipped,
# and pytest's summary says why.
tmux:
	@command -v tmux >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux; } \
		|| echo "tmux is not installed: the tmux console tests will be skipped"

# The lying-clock tests run a command under libfaketime (a host clock a year
# ahead of the bucket's): as root with apt-get a missing faketime is installed;
# elsewhere those tests are skipped, and pytest's summary says why.
faketime:
	@command -v faketime >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime; } \
		|| echo "faketime is not installed: the lying-clock tests will be skipped"

# The fault tests mount a FUSE filesystem (tests/faultfs, over libfuse3): as root
# with apt-get a missing fusermount3 is installed; elsewhere they are skipped, and
# pytest's summary says why. libfuse 2 goes beside it the same way (libfuse2t64
# since Debian 13 and Ubuntu 24.04, libfuse2 before), as borgbackup brings it on
# hosts: the mounts must load libfuse 3 all the same (tests/core/ops/test_libfuse.py).
fuse:
	@command -v fusermount3 >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 libfuse3-3; } \
		|| echo "fuse3 is not installed: the FUSE fault tests will be skipped"
	@/sbin/ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2 ' \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq \
		&& pkg=$$(apt-cache show libfuse2t64 >/dev/null 2>&1 && echo libfuse2t64 || echo libfuse2) \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg; } \
		|| echo "libfuse2 is not installed: the libfuse 2 beside libfuse 3 tests will be skipped"

# The generated-input properties of tests/test_fuzz.py, 20,000 examples each
# instead of the suite's 150; and the names-are-bytes trees (each a pass, a
# verify, restores and a rebuild): 400 instead of the suite's 8.
fuzz: $(VENV)/.installed-dev
	HYPOTHESIS_PROFILE=long $(BIN)/pytest -q tests/test_fuzz.py tests/test_names_are_bytes.py

# The flake hunt: the suite FLAKE_RUNS times back to back with every core kept busy
# (tests/flakehunt.py); any test that fails once is flaky, and flaky is a defect.
FLAKE_RUNS ?= 5
flakehunt: $(VENV)/.installed-dev tmux fuse
	$(BIN)/python tests/flakehunt.py --runs $(FLAKE_RUNS)

# The fsync mutants (tests/fsync_mutants.py): the power-loss matrix once per
# named fsync site with that one fsync skipped; prints site, killed or survived.
# About a minute a site, one pytest at a time. FSYNC_SITES="a.b c.d" for a few.
FSYNC_SITES ?=
fsync-mutants: $(VENV)/.installed-dev fuse
	$(BIN)/python tests/fsync_mutants.py $(FSYNC_SITES)

# ratarmount is the read path's anchor, not a dependency: a venv of its own.
bench/.ratarmount/bin/ratarmount:
	$(PYTHON) -m venv bench/.ratarmount
	bench/.ratarmount/bin/python -m pip install -q ratarmount

# The sealing rows' anchor is the age CLI: as root with apt-get a missing one is
# installed; elsewhere bench/sealing.py measures against sha256sum and says so.
age-cli:
	@command -v age >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq age; } \
		|| echo "age is not installed: bench/sealing.py measures against sha256sum"

# bench/peers.py's anchors are restic and borg, the archivers a user would pick
# instead: as root with apt-get missing ones are installed (borgbackup brings
# libfuse 2, which the mounts and their tests survive); elsewhere their rows say so.
peers:
	@command -v restic >/dev/null && command -v borg >/dev/null || { [ "$$(id -u)" = 0 ] \
		&& command -v apt-get >/dev/null && apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq restic borgbackup; } \
		|| echo "restic or borg is not installed: bench/peers.py's rows say so"

# Compiled first, as an install from a wheel is: where PYTHONDONTWRITEBYTECODE is
# set, every coldkeep process the bench starts would compile what it imports.
bench: $(VENV)/.installed-dev bench/.ratarmount/bin/ratarmount age-cli peers
	@$(BIN)/python -m compileall -q $(VENV)/lib core tui bench/*.py >/dev/null
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .typecheck .mypy_cache .ruff_cache .pytest_cache .collect.log
