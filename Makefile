# stepforge developer targets. Everything installs from PyPI into .venv (see README.md).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Verilog files to lint (make lint-verilog VERILOG="out/top.v ...").
VERILOG ?= $(wildcard out/*.v out/*/*.v)

.PHONY: help install test bench lint-verilog

help:
	@echo "make install       create $(VENV) and pip install -e .[dev]"
	@echo "make test          python -m pytest -n 2 -q (the README test command)"
	@echo "make bench         run every benchmarks/*.py"
	@echo "make lint-verilog  verilator --lint-only on VERILOG (default: out/*.v)"

install:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -e ".[dev]"

test:
	$(PY) -m pytest -n 2 -q

bench:
	@set -e; found=0; for f in benchmarks/*.py; do \
	    [ -e "$$f" ] || continue; found=1; echo "== $$f"; $(PY) "$$f"; \
	done; [ "$$found" = 1 ] || echo "no benchmarks in benchmarks/"

lint-verilog:
	@if [ -z "$(strip $(VERILOG))" ]; then \
	    echo "no Verilog to lint: run stepforge compile -o out/ first, or pass VERILOG=..."; \
	else \
	    $(PY) -m stepforge.sim.rtl.verilator lint $(VERILOG); \
	fi
