"""`slca bench serve`: the agent API and the chat API against vLLM's own OpenAI server, same model, prompts and
sampling, at several client concurrencies. `load` drives one server, `servers` starts them, `report` prints
and writes the figures, `main` is the plan."""

from serve.bench.load import PROMPTS
from serve.bench.main import run_serve_bench

__all__ = ["PROMPTS", "run_serve_bench"]
