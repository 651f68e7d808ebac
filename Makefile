# vidax: `make demo` (set up + one real end-to-end generation, random tiny weights) and `make test` (whole suite).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := plugins/vidax_wan

.PHONY: demo test install install-test clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e . $(addprefix -e ,$(PLUGINS))

install-test: install
	$(BIN)/pip install -q -e ".[test]"

demo: install
	$(BIN)/vidax run configs/demo.yaml output.overwrite=true

test: install-test
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

clean:
	rm -rf out build *.egg-info src/*.egg-info plugins/*/src/*.egg-info
