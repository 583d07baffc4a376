# Two entry points (see README): `make example` and `make test`.
# Both create .venv with the project and its dev tools on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: example test lint bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; Python 3.11 is required" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

example: $(STAMP)
	$(PY) examples/final_results.py

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy --strict suppress
	$(PY) -m mypy topology
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
