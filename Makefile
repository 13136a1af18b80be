# Everything from a fresh clone: `make demo` runs the demo, `make test` runs the tests.
# Both create .venv and install the package first (torch pinned to the CPU wheel on these
# machines; the package itself accepts torch>=2.4).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

.PHONY: setup test demo lint
setup: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/deepgp demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
