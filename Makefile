# Everything from a fresh clone: `make demo` runs the demo, `make check` everything CI checks.
# Both create .venv and install the library and the paper's harness beside it (bench/: deepgp-bench)
# first (torch pinned to the CPU wheel on these machines). `make check` is what CI runs: both test
# suites, the lint, the type check, the docs, both suites at the lowest declared versions
# (.ci/min-versions.txt) and the built distributions.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml bench/pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[dev]' -e 'bench[distributed,peers]'
	touch $(STAMP)

.PHONY: setup test test-fast demo lint typecheck check test-min dist figures behaviour-baseline behaviour-check
setup: $(STAMP)

test: $(STAMP)  # the library's tests (tests/) and the harness's (bench/tests/)
	$(PY) -m pytest -q tests bench/tests

test-fast: $(STAMP)  # everything but the slow tests (a quick local run)
	$(PY) -m pytest -q -m "not slow" tests bench/tests

demo: $(STAMP)
	$(VENV)/bin/deepgp demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench benchmarks

# the suite at the lowest version of every dependency the package declares
MIN_VENV := .venv-min
$(MIN_VENV)/.installed: pyproject.toml bench/pyproject.toml .ci/min-versions.txt
	python3 -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/pip install -q --upgrade pip
	$(MIN_VENV)/bin/pip install -q torch==2.13.0
	$(MIN_VENV)/bin/pip install -q -e '.[dev]' -e 'bench[distributed]' -r .ci/min-versions.txt
	touch $(MIN_VENV)/.installed

test-min: $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider tests bench/tests

# the wheels and sdists as users get them, the library's and the harness's, checked by twine
dist: $(STAMP)
	$(VENV)/bin/pip install -q build twine
	rm -rf dist
	$(PY) -m build -q --outdir dist .
	$(PY) -m build -q --outdir dist bench
	$(VENV)/bin/twine check --strict dist/*

# mypy on the public API ([tool.mypy] in pyproject.toml says which modules)
typecheck: $(STAMP)
	$(PY) -m mypy

check: test lint typecheck docs test-min dist

# does training still compute exactly what it did (tools/behaviour_check.py)? `make behaviour-baseline` records
# this tree's training and predictions bit for bit into BASELINE; `make behaviour-check`, after a change,
# records again and compares (exit status 1 on any difference). Same host and thread count only, so not in
# `make check`, whose tree has no earlier baseline to compare with
BASELINE ?= build/behaviour-baseline.npz
behaviour-baseline: $(STAMP)
	mkdir -p $(dir $(BASELINE))
	OMP_NUM_THREADS=1 $(PY) tools/behaviour_check.py --out $(BASELINE)

behaviour-check: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) tools/behaviour_check.py --compare $(BASELINE)

# `make docs`: the API reference site (mkdocs.yml, docs/) built into site/; any warning fails it.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml $(STAMP)
	$(VENV)/bin/pip install -q -e '.[docs]'
	touch $(DOCS_STAMP)

.PHONY: docs
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean

# the paper's figures into docs/figures (benchmarks/figures.py; docs/figures.md shows them). The
# letters and marginals stages fit 15 models at the paper's scale: minutes each on a GPU
# (FIGURE_ARGS="--device cuda --jobs 4"), hours on 2 CPU cores; a rerun reuses finished fits
DATA ?= $(DEEPGP_DATA)
FIGURE_ARGS ?=
figures: $(STAMP)
	$(PY) benchmarks/figures.py prior
	$(PY) benchmarks/figures.py letters $(FIGURE_ARGS)
	$(PY) benchmarks/figures.py marginals --data-dir "$(DATA)" $(FIGURE_ARGS)
