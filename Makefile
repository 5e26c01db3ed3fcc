# Two commands get a fresh machine (Python 3.11 + pip) from zero to results:
#   make demo   - install into .venv and run the main job on the shipped example data
#   make test   - install everything (training extras, test tools, Chromium) and run the test suite
#                 on two workers (pytest-xdist)
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-test lint models clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install -e ".[train,test]"
	bash scripts/install_chromium.sh

demo: install
	$(BIN)/bayes-grpo demo --out demo_output --overwrite

test: install-test
	$(BIN)/python -m pytest -q tests -n 2 --dist worksteal --durations=25

# refit the shipped posterior models/tiny.nc (after a model or package version change)
models: install
	$(BIN)/python scripts/make_example_models.py --force

lint: install-test
	$(BIN)/ruff check bayes_grpo tests benchmarks scripts notebooks

clean:
	rm -rf $(VENV) demo_output .pytest_cache
