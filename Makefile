# lowbit-lab: `make reports` regenerates every report, `make test` runs the test suite.
# Both create .venv from the pinned files in envs/ when it is missing or older than them.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CORES  ?= 2

export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONHASHSEED := 0

.PHONY: setup reports standin test bench lint clean-venv

setup: $(STAMP)

$(STAMP): envs/requirements.txt envs/constraints.txt envs/requirements-nodeps.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r envs/requirements.txt -c envs/constraints.txt
	$(BIN)/python -m pip install --quiet --no-deps -r envs/requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

reports: $(STAMP)
	$(BIN)/snakemake --cores $(CORES)

# the paper profile on local stand-ins (README, "Paper scale"): the smoke base model first, which it links
standin: $(STAMP)
	$(BIN)/snakemake --profile workflow/profiles/smoke results/smoke/models/base/smoke
	$(BIN)/snakemake --profile workflow/profiles/standin

test: $(STAMP)
	$(BIN)/python -m pytest -n $(CORES)

bench: $(STAMP)
	$(BIN)/python bench/run.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/snakefmt --check Snakefile workflow $(wildcard papers)
	$(BIN)/snakemake --lint

clean-venv:
	rm -rf $(VENV)
