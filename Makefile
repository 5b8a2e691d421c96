# Two commands on a fresh machine: `make up` (the whole stack) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: install up test bench

# torch is installed first, pinned: the CPU wheel for 2.13.0 is available locally,
# while a bare `torch` requirement would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	touch $@

install: $(VENV)/.installed

up: install
	$(VENV)/bin/openclaw-rl up

test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/engine_throughput.py
