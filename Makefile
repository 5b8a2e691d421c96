# Two commands on a fresh machine: `make up` (the whole stack) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Two test files at once (pytest-xdist), a file's tests together with its module-scoped stack: about 41 min on
# 2 cores (TEST_WORKERS=0: one at a time in this process, no xdist). docs/index.md.
TEST_WORKERS ?= 2

.PHONY: install system-deps harnesses up test test-fast bench images

# Agent sandboxes (envs/sandbox.py) need bubblewrap, and what tasks run inside them:
# Debian's python3 with pytest (terminal checkers), git, sqlite3, jq. The gui setting drives Debian's headless
# chromium through its matching chromium-driver (nothing is downloaded at run time).
# nodejs and npm: the Codex CLI, installed from the npm registry for the harness tests (tests/api/harness_install.py);
# an npm already on the PATH (Node.js from elsewhere) is kept: Debian's npm would conflict with it.
# iproute2: `bench hosts` and its test run the deployment as hosts in network namespaces (stack/hosts.py).
SYSTEM_PACKAGES := bubblewrap python3 python3-pytest git sqlite3 jq chromium chromium-driver nodejs npm iproute2

# torch is installed first, pinned: the CPU wheel for 2.13.0 is available locally,
# while a bare `torch` requirement would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test]'
	# BFCL's multi-turn APIs, data and checker import with the standard library; its declared dependencies
	# (hosted-model SDKs, a numpy pin, faiss, sentence-transformers) must stay out: no deps.
	$(PY) -m pip install -q --no-deps bfcl-eval==2026.3.23
	touch $@

install: system-deps $(VENV)/.installed

# Unmodified agent harnesses the API is tested against, pinned, into .harnesses/ (git-ignored): the Codex CLI from
# npm, Hermes from PyPI in a venv of its own; for `make test`, not `make up`. A test installs what is missing itself.
harnesses: $(VENV)/.installed
	$(PY) -c "from tests.api.harness_install import codex_bin, hermes_bin; codex_bin(); hermes_bin()"

system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do \
	  case $$p in nodejs|npm) command -v npm >/dev/null && continue;; esac; \
	  dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages: $$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else \
	    echo "warning: agent sandboxes need these system packages: $$missing (install them as root)"; \
	  fi; \
	fi

up: install
	$(VENV)/bin/openclaw-rl up

test: install harnesses
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The fast tier: no service starts (tests/tiers.py marks what starts one `stack`, learning claims `learns`, at
# collection; a service that starts anyway fails its test). Under 5 minutes on 2 cores. docs/index.md.
test-fast: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not stack and not learns"

bench: install
	$(PY) benchmarks/engine_throughput.py

# The deployment's six images (deploy/docker/), tagged openclaw-rl/<role>:<version>, with docker or podman; on a machine
# without an image registry, `make images IMAGE_FLAGS=--offline-base` (root: Debian's debootstrap, podman, runc).
# Not part of `make test`: about 25 minutes on 2 cores. docs/deployment.md, "The images, as the hosts run them".
images:
	deploy/build-images.sh $(IMAGE_FLAGS)
