# The README's two commands are `make run` and `make test`; everything they need is set up here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test lint

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==26.3
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name needlepoint --display-name needlepoint >/dev/null
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	d=out/prepared-$$(date +%Y%m%d-%H%M%S) && $(BIN)/needlepoint prepare --out $$d && $(BIN)/needlepoint verify $$d && $(BIN)/needlepoint audit $$d && $(BIN)/needlepoint dry-run $$d

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest -q -n 2
