# lowbit-lab: `make reports` regenerates every report, `make test` runs the test suite.
# Both create .venv from the pinned files in envs/ when it is missing or older than them.
# `make reports PROFILE=smoke` builds with another profile of workflow/profiles/ (the smoke one: CI sizes, minutes);
# TARGETS="FILE ..." builds those files (a report, one cell) instead of every report.
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CORES   ?= 2
PROFILE ?= default
TARGETS ?=

export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONHASHSEED := 0
# the numerical code paths of every command (oneMKL's, ATen's, oneDNN's): bits that travel between CPU vendors
include envs/numerics.env
export $(shell sed -n 's/^\([A-Z_][A-Z0-9_]*\)=.*/\1/p' envs/numerics.env)

.PHONY: setup reports status verify publish standin test bench lint clean-venv

setup: $(STAMP)

$(STAMP): envs/requirements.txt envs/constraints.txt envs/requirements-nodeps.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r envs/requirements.txt -c envs/constraints.txt
	$(BIN)/python -m pip install --quiet --no-deps -r envs/requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

# An interrupted build resumes with the same command: a build killed hard (kill -9, a laptop put to sleep) leaves
# Snakemake's lock behind, which workflow/unlock_stale.py clears first when no Snakemake process runs in this folder
# (a build still running keeps it), and every profile reruns the jobs the kill cut off (rerun-incomplete: each step
# writes its outputs atomically, so an incomplete one is safe to redo); the training steps go on from their
# checkpoints.
reports: $(STAMP)
	$(BIN)/python workflow/unlock_stale.py
	$(BIN)/snakemake --profile workflow/profiles/$(PROFILE) --cores $(CORES) $(TARGETS)

# which results of the profile are current and which are stale, per paper, and why (workflow/status.py: Snakemake's own
# change detection, with params that digest each step's code, workflow/step_code.py); `make reports` rebuilds the stale
status: $(STAMP)
	$(BIN)/python -m workflow.status --profile $(PROFILE)

# recompute published results and compare each with its record (workflow/verify.py): CELLS="FILE ..." (result files),
# PAPER=<paper> (every cell of one paper), or neither (one cheap cell a paper, config verify.sample); the checkout
# ends as it began; exit 1 when a cell differs; LIST=1 prints the cells and recomputes nothing
CELLS ?=
PAPER ?=
verify: $(STAMP)
	$(BIN)/python -m workflow.verify --profile $(PROFILE) $(if $(CELLS),--cells $(CELLS)) $(if $(PAPER),--paper $(PAPER)) \
	    $(if $(LIST),--list)

# stage a finished, current build made at one clean commit into git (workflow/publish.py; then commit it);
# UNFINISHED=1: a build under way (stopped first), all it has made but the claims, contexts and reports, so that it
# outlasts the machine: a clone of the commit resumes it with `make reports`
UNFINISHED ?=
publish: $(STAMP)
	$(BIN)/python -m workflow.publish --profile $(PROFILE) $(if $(UNFINISHED),--unfinished)

# the paper profile on local stand-ins (docs/scale.md#the-stand-in-run): the smoke base model first, which it links
standin: $(STAMP)
	$(BIN)/python workflow/unlock_stale.py
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
