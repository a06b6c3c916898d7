"""The embedded default model (SmolLM2-135M-Instruct, from a PyPI wheel) and the tiny test model."""
