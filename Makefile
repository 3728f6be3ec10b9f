# JigSaw developer entry points. The README's Quickstart uses exactly `make run` and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TEST_WORKERS ?= 2
LOCAL_PG_URL := postgresql+psycopg://postgres@127.0.0.1:5432/test
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install run test test-fast lint typecheck clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU wheel of torch lies on disk; pin it first so nothing pulls a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[worker,dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

## run: install everything, start the control plane on SQLite + local Ray, train a demo SPB job
run: install
	scripts/quickstart.sh

## test: install what tests need, then ruff, mypy (strict on every package) and the whole pytest suite
test: install
	scripts/install-system-deps.sh
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy jigsaw api worker cli bench
	# The Postgres-backed tests run against the local server started above unless
	# JIGSAW_TEST_DATABASE_URL names another (unset and none answering: they skip).
	LOCAL_PG=$$(pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null && echo $(LOCAL_PG_URL)); \
	JIGSAW_TEST_DATABASE_URL="$${JIGSAW_TEST_DATABASE_URL:-$$LOCAL_PG}" \
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

## test-fast: the default suite without tests marked slow (for the edit-test loop)
test-fast: install
	$(VENV)/bin/pytest -m "not slow" -x -q

lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck:
	$(VENV)/bin/mypy jigsaw api worker cli bench

clean:
	rm -rf $(VENV) .data artifacts .pytest_cache .mypy_cache .ruff_cache
