# vidax: `make demo` (set up + one real end-to-end generation, random tiny weights) and `make test` (whole suite).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := plugins/vidax_wan plugins/vidax_cosmos plugins/vidax_cogvideox plugins/vidax_ltx plugins/vidax_hunyuan

.PHONY: demo test install install-test clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e . $(addprefix -e ,$(PLUGINS))

install-test: install
	$(BIN)/pip install -q -e ".[test]"
	bash scripts/install_browser.sh

demo: install
	$(BIN)/vidax run configs/demo.yaml output.overwrite=true

test: install-test
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

# Long fuzz campaign (issue 12): FUZZ_EXAMPLES inputs per surface (config, checkpoint folder, .pth); prints the
# counts per outcome of each surface and fails on any internal error, hang or memory blow-up.
FUZZ_EXAMPLES ?= 10000
.PHONY: fuzz
fuzz: install-test
	VIDAX_FUZZ_CAMPAIGN=1 VIDAX_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		tests/test_fuzz_config.py tests/test_fuzz_checkpoint.py tests/test_fuzz_pth.py

clean:
	rm -rf out build *.egg-info src/*.egg-info plugins/*/src/*.egg-info
