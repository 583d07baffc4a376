# Two entry points (see README): `make example` and `make test`.
# Both create .venv with the project, its dev tools and the spark extra on first use,
# and check for Java 17+ (Spark runs on the JVM) before running anything.

# The interpreter that creates .venv: PYTHON if given (make PYTHON=/path/to/python), else the
# first of python3.13, python3.12, python3.11, python3 that runs and is 3.11 or newer
# (pyproject.toml: requires-python >= 3.11). Empty if none is; the .venv recipe then says so.
PYTHON_CANDIDATES := python3.13 python3.12 python3.11 python3
ifndef PYTHON
PYTHON := $(shell for p in $(PYTHON_CANDIDATES); do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$p; break; }; \
	done)
endif
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest-xdist: a worker per core; the tests of the shared SparkSession in one of them, those that
# start Spark themselves (child processes, docs pages) in a group of their own (tests/conftest.py)
PARALLEL := -n auto --dist loadgroup
# The suite starts many Python processes (xdist workers, Spark's Python workers, child runs):
# each would compile the project's modules again (about 0.5 s) and pytest would rewrite every
# test module's asserts again in each worker if bytecode were not cached, as it is not where
# PYTHONDONTWRITEBYTECODE is set. The test commands cache it (in the ignored __pycache__).
CACHED_BYTECODE := PYTHONDONTWRITEBYTECODE=
JAVA := $(if $(JAVA_HOME),$(JAVA_HOME)/bin/java,java)
# pytest's temporary directories (the tests' RocksDB databases, state directories, Spark
# checkpoints) in memory where the machine has a tmpfs with 2 GB free: those writes are synced
# to disk, and on a disk the suite waits for them (the Spark runner's tests took 90 s instead
# of 127 s in memory). No test needs a disk: its crashes are SIGKILLs, which keep what was
# written. pytest empties the directory at the start of each run; `make clean` removes it.
SHM := /dev/shm
TEST_TMP_DIR := $(SHM)/topology-tests-$(shell id -u)-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)
TEST_TMP := $(shell [ -d $(SHM) ] && [ -w $(SHM) ] && \
	[ "$$(df -Pk $(SHM) 2>/dev/null | awk 'NR==2 {print $$4}')" -gt 2000000 ] 2>/dev/null && \
	echo --basetemp=$(TEST_TMP_DIR))

.PHONY: example example-distributed example-driver test check test-slow lint docs bench bench-spark java clean

# An existing .venv is kept (and brought up to date), whichever Python made it.
$(STAMP): pyproject.toml
	@[ -n "$(PYTHON)" ] || { echo "error: no Python 3.11 or newer found (tried $(PYTHON_CANDIDATES)); install one or run make PYTHON=/path/to/python3.x" >&2; exit 1; }
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; Python 3.11 or newer is required" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "error: $(PYTHON) does not run or is older than 3.11; Python 3.11 or newer is required" >&2; exit 1; }
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	touch $(STAMP)

# The oldest pyspark the ForeachBatchRunner supports (3.5.0), with the pandas, numpy and pyarrow
# that platforms ship beside it, in a venv of its own: the suite's smoke test
# (tests/spark/test_oldest_pyspark.py) runs a smoke set of the ForeachBatchRunner's tests there.
OLDEST_VENV := .venv-oldest
OLDEST_STAMP := $(OLDEST_VENV)/.installed
OLDEST_PINS := 'pyspark==3.5.0' 'pandas>=2.2,<2.3' 'numpy<2' 'pyarrow==18.*'

$(OLDEST_STAMP): $(STAMP) Makefile
	[ -x $(OLDEST_VENV)/bin/python ] || $(PY) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(OLDEST_VENV)/bin/python -m pip install --quiet $(OLDEST_PINS) 'pytest>=8' -e '.[testing]' --config-settings editable_mode=compat
	touch $(OLDEST_STAMP)

# Spark needs a Java runtime, 17 or newer: say so in one line instead of a JVM stack trace.
java:
	@command -v $(JAVA) >/dev/null 2>&1 || { echo "error: Java not found ($(JAVA)): Spark needs Java 17 or newer; install a JDK or JRE 17+ (e.g. apt-get install openjdk-17-jre-headless) and put it on PATH or set JAVA_HOME" >&2; exit 1; }
	@v=$$($(JAVA) -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n 1); \
	major=$${v%%.*}; [ "$$major" = 1 ] && { major=$${v#1.}; major=$${major%%.*}; }; \
	[ -n "$$major" ] && [ "$$major" -ge 17 ] 2>/dev/null || { echo "error: Spark needs Java 17 or newer, found '$${v:-unknown}' ($(JAVA)); install a JDK or JRE 17+ (e.g. apt-get install openjdk-17-jre-headless) and put it on PATH or set JAVA_HOME" >&2; exit 1; }

example: $(STAMP) java
	$(PY) examples/spark_pipeline.py

example-distributed: $(STAMP) java
	$(PY) examples/spark_distributed.py

example-driver: $(STAMP)
	$(PY) examples/final_results.py

test: $(STAMP) $(OLDEST_STAMP) java
	$(PY) -m ruff check .
	$(PY) -m mypy --strict suppress
	$(PY) -m mypy --strict topology
	$(MAKE) --no-print-directory docs
	$(CACHED_BYTECODE) $(PY) -m pytest $(PARALLEL) $(TEST_TMP)

# The quick loop: ruff and mypy, then the suite without Spark and without the kill runs, each
# property with the dev profile's examples (a tenth of make test's).
check: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy --strict suppress
	$(PY) -m mypy --strict topology
	$(CACHED_BYTECODE) HYPOTHESIS_PROFILE=dev $(PY) -m pytest $(PARALLEL) $(TEST_TMP) -m "not spark and not slow and not kill"

# The static checks of `make test` alone: ruff, then mypy --strict on both packages.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy --strict suppress
	$(PY) -m mypy --strict topology

# The documentation site (mkdocs.yml): the guide pages and the API reference from the
# docstrings, into site/. --strict: a broken link, a page missing from the nav or a docstring
# griffe cannot parse fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# The 200-kill crash runs (a few minutes each); `make test` runs their 20-kill versions.
test-slow: $(STAMP)
	$(CACHED_BYTECODE) $(PY) -m pytest $(PARALLEL) $(TEST_TMP) -m slow

bench: $(STAMP)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/iteration.py
	$(PY) benchmarks/windows.py

bench-spark: $(STAMP) java
	$(PY) benchmarks/spark_runner.py

clean:
	rm -rf $(VENV) $(OLDEST_VENV) .pytest_cache .hypothesis site $(TEST_TMP_DIR)
