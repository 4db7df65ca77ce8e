# Evoplane: `make run` sets everything up and runs the demo on the embedded stack; `make test` runs the suite.
#
# On CPU machines torch is pinned by constraints/cpu.txt so pip never pulls a CUDA build.
# GPU workers: `make install CONSTRAINTS= EXTRAS=test,dspy,train,docs,gpu` keeps your own torch.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= test,dspy,train,docs
CONSTRAINTS ?= constraints/cpu.txt
PYTEST_ARGS ?=
# Test processes (pytest-xdist), each taking whole files: most tests wait on servers and
# PostgreSQL, so three share two cores well (on a 2-core host, 2026-12-06: 12.6 min with
# three, 19.2 with two; the suite's three longest tests run slower beside each other).
TEST_WORKERS ?= 3

# Material for MkDocs prints a banner about MkDocs 2.0 on every build unless this is set.
export NO_MKDOCS_2_WARNING := 1
# dspy imports litellm, which otherwise fetches a model cost map from the network at import.
export LITELLM_LOCAL_MODEL_COST_MAP := True
# Python caches compiled modules unless this is set (some machines set it): a process that
# cannot read a cache compiles every module it imports, about 15 s more for each service.
unexport PYTHONDONTWRITEBYTECODE
WARM_GATEWAY := import torch, transformers, peft, transformers.models.qwen2.modeling_qwen2, \
	proxy.app, evolution.rl.backends.torch, evoplane.cli, evoplane.demo.runner
WARM_CONTROL := import mlflow, mlflow.server, mlflow.server.handlers, dspy, litellm, alembic, \
	mlflow.store.tracking.sqlalchemy_store, temporalio.worker, evoplane.worker, \
	evoplane.control, activities.evolution

.PHONY: install run up test lint docs format schema clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --no-compile $(if $(CONSTRAINTS),--constraint $(CONSTRAINTS)) --editable '.[$(EXTRAS)]'
	@# Byte-compile what the stack's processes import, by importing it, two at a time: all
	@# of the venv (`compileall -j 0`) took 68 s on a slow 2-core host, these imports 36 s;
	@# the rest is compiled, and cached, the first time something imports it.
	@# Either import failing fails the install: the stack could not start.
	$(BIN)/python -c "$(WARM_GATEWAY)" & warm=$$!; \
		$(BIN)/python -c "$(WARM_CONTROL)" && wait $$warm
	touch $@

run: install  ## the main job: the demo on the embedded stack (about 6 to 10 min on 2 cores, docs/demo.md)
	$(BIN)/evoplane demo

up: install  ## the embedded stack in the foreground (Ctrl-C stops it)
	$(BIN)/evoplane up

# The suite should stay under about 15 minutes on 2 cores: the slowest tests are listed at
# the end of every run, so whoever makes one longer sees it.
test: install lint  ## lint (ruff, the docs' strict build), then the whole test suite
	$(BIN)/pytest $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile) \
		--durations=20 $(PYTEST_ARGS)

lint: install docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# --strict: a broken link or anchor, or a page left out of the nav, fails the build (and so
# `make test` in CI; not --quiet, which stops it counting warnings). docs/hooks.py generates
# the control API and CLI references offline.
docs: install  ## the manual (MkDocs, docs/) built into site/
	$(BIN)/mkdocs build --strict

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: install  ## regenerate the checked-in ATDP JSON Schema after changing atdp/
	$(BIN)/evoplane atdp schema > atdp/schema/atdp.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info site
