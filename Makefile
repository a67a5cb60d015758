# The two commands the README names. Both install what they need first.
.PHONY: demo test lint bench

demo:
	@py=$$(scripts/bootstrap) && $$py -m mcp_layers_demo

test:
	@py=$$(scripts/bootstrap) && $$py -m ruff check . && $$py -m pytest $(PYTEST_ARGS)

lint:
	@py=$$(scripts/bootstrap) && $$py -m ruff check . && $$py -m ruff format --check .

bench:
	@py=$$(MCP_LAYERS_EXTRAS=test,bench scripts/bootstrap) && $$py benchmarks/run.py
