# The two commands the README names. Both install what they need first.
.PHONY: demo test lint typecheck bench lab docs

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

# Rewrite what the docs list that the code defines (scripts/gen_docs.py: example records,
# presets, options, the CLI synopsis, the record tables); a test fails when one is stale.
docs:
	@py=$$(scripts/bootstrap) && $$py scripts/gen_docs.py

# The client lab: real coding agents (pinned, about 3.3 GB installed once) against injected
# faults, offline; writes the retry matrix to lab/MATRIX.md (docs/lab.md). Two runs at a
# time: about 2 hours from an empty cache, installs included (mcp_layers_lab.FULL_PASS).
lab:
	@py=$$(scripts/bootstrap) && $$py -m mcp_layers_lab --all --jobs 2
