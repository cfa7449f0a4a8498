# Two commands on a fresh machine with only Python:
#   make demo   create .venv, install, write the demo data and open the console on it
#   make test   create .venv, install with the dev extras, ruff, mypy --strict, pytest
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   ?= demo

.PHONY: test demo lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/coldkeep demo $(DEMO)

test: lint typecheck pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check core tui tests bench
	$(BIN)/ruff format --check core tui tests bench

# mypy resolves imports by module name, and the editable install maps
# coldkeep.core -> core/ through an import hook mypy cannot follow; a tree of
# directory links gives it the same names (new modules need no reinstall).
typecheck: $(VENV)/.installed-dev
	mkdir -p .typecheck/coldkeep
	ln -sfn ../../core .typecheck/coldkeep/core
	ln -sfn ../../tui .typecheck/coldkeep/tui
	MYPYPATH=.typecheck $(BIN)/mypy --strict -p coldkeep.core -p coldkeep.tui

pytest: $(VENV)/.installed-dev
	$(BIN)/pytest

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .typecheck .mypy_cache .ruff_cache .pytest_cache
