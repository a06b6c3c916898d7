"""`slca bench serve`: the agent API and the chat API against vLLM's own OpenAI server, same model, prompts and
sampling, at several client concurrencies. `load` drives one server, `ops.bench.servers` starts them (shared with
`slca bench swap`), `report` prints and writes the figures, `main` is the plan."""

from ops.bench.serve.load import PROMPTS
from ops.bench.serve.main import run_serve_bench

__all__ = ["PROMPTS", "run_serve_bench"]
