# The two commands the README names. Both install what they need first.
.PHONY: demo test lint typecheck bench lab

demo:
	@py=$$(scripts/bootstrap) && $$py -m mcp_layers_demo

# scripts/os-deps installs the OS packages some tests use (Java, Chromium) when root.
test:
	@scripts/os-deps && py=$$(scripts/bootstrap) && $$py -m ruff check . && $$py -m ruff format --check . && $$py scripts/typecheck.py && $$py -m pytest $(PYTEST_ARGS)

lint:
	@py=$$(scripts/bootstrap) && $$py -m ruff check . && $$py -m ruff format --check .

# mypy --strict on the packages pyproject.toml's [tool.mypy] lists.
typecheck:
	@py=$$(scripts/bootstrap) && $$py scripts/typecheck.py

bench:
	@py=$$(MCP_LAYERS_EXTRAS=test,bench scripts/bootstrap) && $$py benchmarks/run.py

# The client lab: real coding agents (pinned, ~1.1 GB installed once) against injected
# faults, offline; writes the retry matrix to lab/MATRIX.md (docs/lab.md). ~20 minutes.
lab:
	@py=$$(scripts/bootstrap) && $$py -m mcp_layers_lab --all
