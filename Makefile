# Two commands do all set-up on a fresh machine:  `make run`  and  `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run soak test test-fast lint install install-bench model clean

run: $(STAMP) model
	$(BIN)/slca up

soak: $(STAMP) model
	$(BIN)/slca bench soak --out bench/soak/latest

test: $(STAMP) model
	bash scripts/test.sh

# Layout is the formatter's (no `# fmt: skip`); the linter keeps pyflakes' and the statement checks (pyproject).
lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test-fast: $(STAMP) model
	bash scripts/test.sh "not slow"

install: $(STAMP)

$(STAMP): pyproject.toml scripts/install.sh
	PY=$(PY) bash scripts/install.sh
	touch $(STAMP)

# TRL and its data stack for `slca bench rl` (the [bench] extra), installed with the same clean-up as the rest
install-bench: $(STAMP)
	PY=$(PY) SLCA_EXTRAS=test,bench bash scripts/install.sh

model: $(STAMP)
	$(BIN)/slca model fetch
	$(BIN)/slca model tiny

clean:
	rm -rf $(VENV) var
