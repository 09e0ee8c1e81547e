# Each target sets itself up: a fresh machine needs only python3 and pip.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PLUGIN_PROJECTS := $(wildcard plugins/*/pyproject.toml)
STAMP  := $(VENV)/.installed
# `make demo` needs the SDK and the Claude Code plugin only: a fresh machine skips the
# heavy plugins (backline-livekit brings ~120 MB of livekit-agents). `make test`,
# `make lint` and `make bench` install everything (and satisfy the demo's stamp).
DEMO_PROJECTS := pyproject.toml plugins/claude_code/pyproject.toml
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo demo-research test test-long lint bench dist release-check clean

$(STAMP): pyproject.toml $(PLUGIN_PROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]' $(foreach p,$(PLUGIN_PROJECTS),-e ./$(dir $(p)))
	@touch $(STAMP) $(DEMO_STAMP) $(RESEARCH_STAMP)

$(DEMO_STAMP): $(DEMO_PROJECTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e . -e ./plugins/claude_code
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/coding_agents/demo.py

# `make demo-research` likewise needs only the SDK and the deep-research plugin.
RESEARCH_STAMP := $(VENV)/.installed-research

$(RESEARCH_STAMP): pyproject.toml plugins/deep_research/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e . -e ./plugins/deep_research
	@touch $(RESEARCH_STAMP)

demo-research: $(RESEARCH_STAMP)
	$(BIN)/python examples/deep_research/demo.py

test: lint
	@command -v chromium >/dev/null 2>&1 || echo "make test: no Chromium found: the web browser tests will be skipped (apt-get install chromium)"
	$(BIN)/python -m pytest -q

# The randomized schedules at length (make test runs 500 examples, a new seed each run):
# LONG_EXAMPLES examples, about 15 ms each on a 2-vCPU VM (20,000: about five minutes).
LONG_EXAMPLES ?= 20000
test-long: $(STAMP)
	BACKLINE_HYPOTHESIS_EXAMPLES=$(LONG_EXAMPLES) $(BIN)/python -m pytest -q \
		tests/test_randomized_schedule.py --hypothesis-profile=long --hypothesis-show-statistics

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict
	$(BIN)/mypy --strict plugins/claude_code/backline_claude_code
	$(BIN)/mypy --strict plugins/cli_agent/backline_cli_agent
	$(BIN)/mypy --strict plugins/deep_research/backline_deep_research
	$(BIN)/mypy --strict plugins/google/backline_google
	$(BIN)/mypy --strict plugins/livekit/backline_livekit
	$(BIN)/mypy --strict plugins/openai/backline_openai
	$(BIN)/mypy --strict plugins/local_speech/backline_local_speech
	PYTHONPATH=. $(BIN)/lint-imports

# Every bench/*.py in turn (not _common.py), then bench/report.py: one summary of the
# targets and figures this run wrote (--since: files older than the run are not read).
bench: $(STAMP)
	@mkdir -p bench/results
	@start=$$(date +%s); \
	for f in bench/[!_]*.py; do \
		[ -e "$$f" ] || continue; [ "$$f" = bench/report.py ] && continue; \
		echo "== $$f"; $(BIN)/python "$$f" || exit 1; \
	done; \
	echo "== bench/report.py"; $(BIN)/python bench/report.py --since "$$start"

# Wheels and sdists of the SDK and of every plugin, into dist/ (pip install dist/*.whl).
dist: $(STAMP)
	@rm -rf dist && mkdir -p dist
	$(BIN)/python -m hatchling build -d $(CURDIR)/dist
	@for p in $(dir $(PLUGIN_PROJECTS)); do (cd $$p && $(CURDIR)/$(BIN)/python -m hatchling build -d $(CURDIR)/dist) || exit 1; done
	@ls dist

# Before an upload (docs/releasing.md): what `make dist` built renders on the package index
# (twine check), and the release tests pass: versions agree, every wheel and sdist installs
# into a fresh venv and runs there (the no-key try-out included).
release-check: $(STAMP)
	@ls dist/*.whl dist/*.tar.gz >/dev/null 2>&1 || { echo "make release-check: dist/ is empty: run make dist first"; exit 1; }
	$(BIN)/python -m twine check --strict dist/*
	$(BIN)/python -m pytest -q tests/test_packaging.py

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
