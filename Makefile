# Every target bootstraps its own virtual environment, so a fresh clone needs only Python 3.11+ and make.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint install clean eval-model

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gemma-sre needs Python 3.11 or newer (set PYTHON=...)")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/gemma-sre demo --yes

# The suite waits on servers and subprocesses more than it computes: five workers on two cores (133
# and 114 s against 138 and 140 s at four, alternated in the same hour, load average 2.5 to 2.8).
# A module's tests stay on one worker (--dist loadscope), so its module fixtures start once; the
# modules go out in the order tests/conftest.py gives them (the slow ones first), not xdist's.
# Bytecode is kept even where the environment turns it off (PYTHONDONTWRITEBYTECODE, as containers
# set): every worker and every CLI process the tests start would compile the test modules (pytest's
# assertion rewriting: 4 s of CPU per worker) and the project's modules again.
TEST_WORKERS ?= 5

test: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

# Opt-in, never part of `test`: builds llama-cpp-python's server in .venv-model/ (about 30 minutes the
# first time), serves small real models on 127.0.0.1 and runs the evals with them beside the analyzers
# alone. EVAL_MODEL_ARGS="--model-url http://HOST:8000/v1" runs the same against any OpenAI-compatible URL.
eval-model: $(STAMP)
	$(BIN)/python benchmarks/eval_model.py $(EVAL_MODEL_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy agent graph mcp_tools prompts evals sandbox

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
