PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck pytest docs demo examples clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## test: lint, type-check, run the whole suite and build the docs site
test: $(STAMP) lint typecheck pytest docs

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check langgraph_combee tests examples benchmarks
	$(BIN)/ruff format --check langgraph_combee tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

## demo: the main job offline (scripted learner until the local model lands)
demo: $(STAMP)
	$(BIN)/python examples/offline_learn.py

examples: $(STAMP)
	$(BIN)/python examples/offline_learn.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
