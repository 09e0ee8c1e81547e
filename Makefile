# Each target sets itself up: a fresh machine needs only python3 and pip.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PLUGIN_PROJECTS := $(wildcard plugins/*/pyproject.toml)
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench dist clean

$(STAMP): pyproject.toml $(PLUGIN_PROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' $(foreach p,$(PLUGIN_PROJECTS),-e ./$(dir $(p)))
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/coding_agents/demo.py

test: lint
	@command -v chromium >/dev/null 2>&1 || echo "make test: no Chromium found: the web browser tests will be skipped (apt-get install chromium)"
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict
	$(BIN)/mypy --strict plugins/claude_code/backline_claude_code
	$(BIN)/mypy --strict plugins/cli_agent/backline_cli_agent

bench: $(STAMP)
	@mkdir -p bench/results
	@for f in bench/[!_]*.py; do [ -e "$$f" ] || continue; echo "== $$f"; $(BIN)/python "$$f" || exit 1; done

# Wheels and sdists of the SDK and of every plugin, into dist/ (pip install dist/*.whl).
dist: $(STAMP)
	@rm -rf dist && mkdir -p dist
	$(BIN)/python -m hatchling build -d $(CURDIR)/dist
	@for p in $(dir $(PLUGIN_PROJECTS)); do (cd $$p && $(CURDIR)/$(BIN)/python -m hatchling build -d $(CURDIR)/dist) || exit 1; done
	@ls dist

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
