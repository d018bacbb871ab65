# `make test`: create .venv, install nbjax with what the tests need, run the tests.
# `make lab`:  create .venv, install nbjax with JupyterLab, open notebooks/.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PYTEST_ARGS ?= -n 2 --dist loadgroup

.PHONY: test fuzz lab bench gpu-check array-api-tests clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.test-deps: $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[test]"
	touch $@

$(VENV)/.bench-deps: $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[test,bench]"
	touch $@

$(VENV)/.lab-deps: $(PY) pyproject.toml
	$(PY) -m pip install -q -e ".[lab]"
	touch $@

test: $(VENV)/.test-deps
	tools/install_system_deps.sh
	$(PY) -m pytest $(PYTEST_ARGS) tests

# `make fuzz FUZZ_MINUTES=N`: random programs compiled for the cpu backend against the
# reference backend for N minutes; prints how many were tried and the seeds of mismatches.
FUZZ_MINUTES ?= 5
fuzz: $(VENV)/.test-deps
	PYTHONPATH=. $(PY) tests/test_fuzz_differential.py --minutes $(FUZZ_MINUTES)

# Jupyter refuses to run as root unless told; root is usual in containers.
ALLOW_ROOT = $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(VENV)/.lab-deps
	$(VENV)/bin/jupyter lab $(ALLOW_ROOT) notebooks/

# `make bench`: the benchmark table (installs jax, the reference it is compared with).
bench: $(VENV)/.bench-deps
	$(PY) -m benchmarks.run

# `make gpu-check`: the gpu backend on a machine with an NVIDIA GPU (tools/gpu_check.sh:
# installs the gpu extra and jax[cuda12], runs the device tests and the seed benchmarks).
gpu-check: $(PY)
	PYTHON=$(PY) tools/gpu_check.sh

# Optional: the public array-api-tests suite, from a local checkout (it is not on PyPI).
array-api-tests: $(VENV)/.test-deps
	ARRAY_API_TESTS_DIR=$(ARRAY_API_TESTS_DIR) tools/run_array_api_tests.sh

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
