# Two commands matter: `make demo` (the main job) and `make test` (the suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint clean browser ops

$(BIN)/triage: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU wheel of torch first, so nothing below pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/triage

setup: $(BIN)/triage

# DeepSpeed JIT-builds its C++ ops on first use (minutes); build them here, untimed, so no
# run or test pays for it inside its timeout. A cached build only loads (seconds).
# Same PATH as the runs: ninja versions keep incompatible build logs and rebuild each other's.
ops: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/triage ops build

demo: setup ops
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/triage run --mismatch-step 37

# The report test renders the HTML page in Debian's headless Chromium.
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Tests run as in an activated environment: `python`, `triage` and `deepspeed` are the venv's.
# One worker per core: most tests wait on launched jobs. Tests sharing a built-once fixture
# run on one worker (tests/conftest.py), so the demo's baselines are launched once.
test: setup browser ops
	$(BIN)/ruff check .
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q -n auto --dist loadgroup --durations=25

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .triage
