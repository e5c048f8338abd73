# The two commands (README.md):   make book   and   make test
# Both create .venv and install everything they need on a fresh machine.
# For instructors (README.md): make student (the chapters without solutions, in _build/student)
# and make grade SUBMISSIONS=folder GRADES=grades.csv (run the exercises' checkers on submissions).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/python -m pip install --disable-pip-version-check -q -c requirements/constraints.txt

.PHONY: install book pdf vendor test unit nbval papermill check-pages check-run-extra bench gpu-check student grade clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install when the package metadata, the pinned constraints or the compiled GEMM (setup.py,
# attnlib/_fmagemm.c: an editable install builds it in place, with the machine's C compiler) change.
$(VENV)/.installed: pyproject.toml setup.py attnlib/_fmagemm.c requirements/constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[book,test]'
	touch $@

install: $(VENV)/.installed

# 1. Build the book: executes every chapter and builds the HTML in _build/html.
#    The pages load MathJax, RequireJS and the ipywidgets HTML manager from
#    book/_vendor (served as _static/), never from a CDN: `vendor` fills it.
#    --all: without it Sphinx re-reads only changed pages, so a rebuild would
#    neither re-execute a notebook whose attnlib code changed nor repeat an
#    earlier warning (a second `make book` would pass -W), nor recopy assets.
book: install vendor
	$(BIN)/jupyter-book build . --all -W -n --keep-going

# The whole book as one PDF (_build/book.pdf), offline: the single-page build from the committed
# outputs, printed by Debian's Chromium (tools/book_pdf.py; needs the `chromium` package).
pdf: install vendor
	ATTNLIB_BOOK_EXECUTE=off $(BIN)/jupyter-book build . --builder singlehtml --keep-going
	$(BIN)/python tools/book_pdf.py _build/singlehtml _build/book.pdf

# Browser assets: npm ci from the committed lock file (book/js), then copy only
# the files the pages load into the git-ignored book/_vendor (html_static_path).
# Stamp files keep both steps a no-op on a rebuild.
NPM_DIR := book/js
VENDOR := book/_vendor
NM := $(NPM_DIR)/node_modules
MATHJAX := $(NM)/mathjax/es5
WIDGETS := $(NM)/@jupyter-widgets/html-manager/dist

$(NM)/.installed: $(NPM_DIR)/package.json $(NPM_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "make book: npm is missing (Node.js >= 18 with npm); on Debian: apt-get install nodejs npm" >&2; exit 1; }
	cd $(NPM_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

$(VENDOR)/.vendored: $(NM)/.installed $(NPM_DIR)/widgets-setup.js Makefile
	rm -rf $(VENDOR)
	mkdir -p $(VENDOR)/mathjax/input $(VENDOR)/mathjax/output $(VENDOR)/requirejs $(VENDOR)/html-manager
	cp $(MATHJAX)/tex-mml-chtml.js $(VENDOR)/mathjax/
	cp -R $(MATHJAX)/input/tex $(MATHJAX)/input/mml $(VENDOR)/mathjax/input/
	cp -R $(MATHJAX)/output/chtml $(VENDOR)/mathjax/output/
	cp -R $(MATHJAX)/a11y $(MATHJAX)/ui $(MATHJAX)/sre $(MATHJAX)/adaptors $(VENDOR)/mathjax/
	cp $(NM)/mathjax/LICENSE $(VENDOR)/mathjax/
	cp $(NM)/requirejs/require.js $(VENDOR)/requirejs/
	cp $(WIDGETS)/embed-amd.js $(WIDGETS)/*.woff2 $(WIDGETS)/*.woff $(WIDGETS)/*.ttf $(WIDGETS)/*.eot $(WIDGETS)/*.svg $(VENDOR)/html-manager/
	cp $(NPM_DIR)/widgets-setup.js $(VENDOR)/html-manager/
	touch $@

vendor: $(VENDOR)/.vendored

# 2. Run the tests: attnlib unit tests and plain nbval over the chapters, TEST_JOBS at a time
#    (pytest-xdist; default: one per core, at most 4; TEST_JOBS=1 runs them in one process).
#    --dist loadfile keeps a notebook's cells (one kernel) and a test module's tests on one
#    worker. Chapters first: they are the long ones. Two chapters that need one model train it
#    once: the second waits on the cache entry's lock (attnlib.cache.building) and loads it.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
XDIST = $(if $(filter-out 0 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile,)
test: install
	$(BIN)/pytest chapters tests $(XDIST) --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

# 3. Check the built pages in headless Chromium (no network, math typeset,
#    figures and widgets rendered); screenshots go to _build/screenshots.
#    Needs only an existing build (make book) and Debian's chromium.
check-pages:
	@test -x /usr/bin/chromium || { echo "check-pages: /usr/bin/chromium is missing; install Debian's browser with: apt-get install chromium" >&2; exit 1; }
	@test -f _build/html/index.html || { echo "check-pages: no _build/html/index.html; run 'make book' first" >&2; exit 1; }
	$(BIN)/python tests/check_pages.py _build/html --screenshots _build/screenshots

# Execute the chapters with papermill into _build/papermill (the outputs are not written
# over the committed notebooks). PROFILE=paper runs the paper-sized experiments; SEED=1 another
# seed (every chapter's parameters cell takes `seed`); CHAPTERS="01 02" a subset by number
# (default: every chapter). CI runs CHAPTERS="01 02" SEED=1: nbval has just executed every
# chapter with the book's seed, and a second seed checks what nbval cannot, that the chapters
# run and their computed prose holds under other numbers, at the cost of two chapters.
# --execution-timeout: in the book profile a cell that runs (or waits) past 20 min fails the run
# instead of hanging it (nbclient can very rarely miss a reply after a widget cell:
# jupyter/nbclient#312). tools/run_papermill.py is papermill with tools/zmq_poll_fix.py applied: it
# polls the kernel in 1-s slices, so a lost wake-up (the cause of those hangs here) costs <= 1 s.
# The paper profile's training cells can take hours: no limit (-1).
PROFILE ?= $(or $(ATTNLIB_PROFILE),book)
SEED ?= 0
CHAPTERS ?=
CELL_TIMEOUT ?= $(if $(filter book,$(PROFILE)),1200,-1)
PAPERMILL_NOTEBOOKS = $(if $(strip $(CHAPTERS)),$(foreach c,$(CHAPTERS),$(wildcard chapters/$(c)_*.ipynb)),$(wildcard chapters/[0-9]*.ipynb))
papermill: install
	@test -n "$(strip $(PAPERMILL_NOTEBOOKS))" || { echo "papermill: no chapter matches CHAPTERS='$(CHAPTERS)'" >&2; exit 1; }
	mkdir -p _build/papermill
	set -e; for nb in $(PAPERMILL_NOTEBOOKS); do \
	  echo "papermill $$nb (profile $(PROFILE), seed $(SEED))"; \
	  $(BIN)/python tools/run_papermill.py -k python3 --cwd chapters --no-progress-bar --execution-timeout $(CELL_TIMEOUT) $$nb _build/papermill/$$(basename $$nb) -p profile $(PROFILE) -p seed $(SEED); \
	done

# What a reader's Colab or Binder runtime gets (issue 25): a fresh venv with only attnlib[run] (and
# ipykernel) imports every attnlib module, holds no part of the book build, and executes chapter 15
# on its own kernel (tools/check_run_extra.py; RUN_EXTRA_CHAPTERS="01 15" for others).
RUN_EXTRA_CHAPTERS ?= 15
check-run-extra: install
	$(BIN)/python tools/check_run_extra.py --chapters $(RUN_EXTRA_CHAPTERS)

# Benchmarks: chapter wall time and peak memory, and the batched-vs-loop ratios.
bench: install
	$(BIN)/python benchmarks/run.py

# The GPU check (issue 24): on a machine with CUDA, the unit tests on the GPU, then every chapter's
# main experiment in the paper profile, one line per step with its time; exit 1 if any step failed,
# 2 without CUDA. GPU_CHECK_ARGS passes options, e.g. GPU_CHECK_ARGS="--no-unit --chapters 03 12"
# (tools/gpu_check.py --help; --device cpu is a dry run of the script itself).
GPU_CHECK_ARGS ?=
gpu-check: install
	$(BIN)/python tools/gpu_check.py $(GPU_CHECK_ARGS)

# The student edition: every chapter without its solution cells (tag `solution`), outputs
# cleared, into _build/student (tools/student_edition.py).
student: install
	$(BIN)/python tools/student_edition.py chapters --out _build/student

# Grade a folder of submissions, SUBMISSIONS/<student>/<chapter>.ipynb, into the CSV GRADES
# (student, chapter, exercise, passed, message, file, note, sandbox). Runs each notebook's
# opening cells and its Exercises section in a fresh kernel in a bubblewrap sandbox (needs
# bwrap: apt-get install bubblewrap), then judges each exercise apart, in a fresh sandbox with
# only the student's code for it, on cases drawn for that student; GRADE_TIMEOUT seconds per
# notebook in all. Rows are appended student by student; GRADE_FLAGS=--resume goes on with a
# stopped run's CSV (and grades again a student whose rows are not all there).
SUBMISSIONS ?= submissions
GRADES ?= grades.csv
GRADE_TIMEOUT ?= 180
GRADE_FLAGS ?=
grade: install
	$(BIN)/python tools/grade.py $(SUBMISSIONS) --out $(GRADES) --timeout $(GRADE_TIMEOUT) $(GRADE_FLAGS)

clean:
	rm -rf _build
