# The two commands (README.md):   make book   and   make test
# Both create .venv and install everything they need on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/python -m pip install --disable-pip-version-check -q -c requirements/constraints.txt

.PHONY: install book test unit nbval papermill check-pages bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install when the package metadata or the pinned constraints change.
$(VENV)/.installed: pyproject.toml requirements/constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[book,test]'
	touch $@

install: $(VENV)/.installed

# 1. Build the book: executes every chapter and builds the HTML in _build/html.
book: install
	$(BIN)/jupyter-book build . -W -n --keep-going

# 2. Run the tests: attnlib unit tests, then plain nbval over the chapters.
test: install
	$(BIN)/pytest tests chapters --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

clean:
	rm -rf _build
