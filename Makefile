# vidax: `make demo` (set up + one real end-to-end generation, random tiny weights) and `make test` (whole suite).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := plugins/vidax_wan plugins/vidax_cosmos plugins/vidax_cogvideox plugins/vidax_ltx plugins/vidax_hunyuan \
	plugins/vidax_kandinsky plugins/vidax_skyreels plugins/vidax_helios plugins/vidax_motif \
	plugins/vidax_sana_video plugins/vidax_anyflow

# What an install depends on: the packaging files and this Makefile's plugin list (sources are installed editable:
# a change to them needs no reinstall). A stamp file per install records that it ran after the last change to any of them.
PACKAGING := Makefile pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
INSTALLED := $(VENV)/.vidax-installed
TEST_INSTALLED := $(VENV)/.vidax-test-installed

.PHONY: demo test install install-test clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(INSTALLED)

$(INSTALLED): $(PACKAGING) | $(BIN)/python
	$(BIN)/pip install -q -e . $(addprefix -e ,$(PLUGINS))
	touch $@

# One pip run for the product, the plugins and the test extra: pip resolves and checks the environment once. The
# byte-compiling pip would do file by file (half its time, with torch) runs on every core instead, and takes in the
# project's own sources: where PYTHONDONTWRITEBYTECODE is set (as on our machines) each of the suite's `vidax` and
# fake-device subprocesses would otherwise compile them again on import. compileall exits 1 over the few files
# some packages ship that are not Python 3 (pip passes over them too).
install-test: $(TEST_INSTALLED)
	bash scripts/install_browser.sh

$(TEST_INSTALLED): $(PACKAGING) | $(BIN)/python
	$(BIN)/pip install -q --no-compile -e ".[test]" $(addprefix -e ,$(PLUGINS))
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib src plugins > /dev/null 2>&1 || true
	touch $@ $(INSTALLED)

demo: install
	$(BIN)/vidax run configs/wan_demo.yaml output.overwrite=true

test: install-test
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=15

# Long fuzz campaign: FUZZ_EXAMPLES inputs per surface of the Wan-based modules (config,
# checkpoint folder, .pth), of the Python API (vidax.load, pipe calls, --prompts files, sizes against every family's
# denoiser), of vidax serve (request lines, request bodies) and of what rides with weights (LoRA metadata, 8-bit
# tags), of the disk offload cache (its folder, damaged caches at open and while a run reads them), of vidax bench's
# arguments and of chunked runs (windowed noise files, whole runs from them, runs stopped by signals), and
# FUZZ_FAMILY_EXAMPLES inputs per family (checkpoint configs, options, conditioning media, chat templates, prompt
# templates, original-release metadata) and of initial-noise files; then a vidax serve soak of 1,000 tiny jobs
# (tests/test_serve_memory.py). Prints the counts per outcome of each surface (and family) and fails on any
# internal error, hang, memory blow-up or non-finite output. Both cores: the counts of
# every xdist worker go to out/fuzz/ and tests/fuzz_report.py prints the summed table and the wall time.
FUZZ_EXAMPLES ?= 2000
FUZZ_FAMILY_EXAMPLES ?= 2000
.PHONY: fuzz
fuzz: install-test
	rm -rf out/fuzz
	start=$$(date +%s); VIDAX_FUZZ_CAMPAIGN=1 VIDAX_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) \
		VIDAX_FUZZ_FAMILY_EXAMPLES=$(FUZZ_FAMILY_EXAMPLES) VIDAX_FUZZ_REPORT=out/fuzz \
		$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider tests/test_fuzz_families.py \
		tests/test_fuzz_config.py tests/test_fuzz_checkpoint.py tests/test_fuzz_pth.py tests/test_fuzz_api.py \
		tests/test_fuzz_serve.py tests/test_fuzz_adapters.py tests/test_fuzz_disk_cache.py tests/test_fuzz_bench.py \
		tests/test_fuzz_windows.py tests/test_serve_memory.py; rc=$$?; \
		$(BIN)/python tests/fuzz_report.py out/fuzz $$(( $$(date +%s) - start )) && exit $$rc

clean:
	rm -rf out build *.egg-info src/*.egg-info plugins/*/src/*.egg-info $(INSTALLED) $(TEST_INSTALLED)
