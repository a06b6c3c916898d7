"""What every engine reads of `[serve]` (`EngineSettings`); each engine's own keys are its settings class, a subclass
of it registered with the engine (serve/engines/registry.py) and composed into `ServeSettings`, so that an engine's
keys are documented and validated under `[serve]` without serve's settings naming the engine."""

from slca.config import SectionSettings


class EngineSettings(SectionSettings):
    """The keys every engine reads (context length, batch size, the served name, oneDNN's cache)."""

    max_model_len: int = 2048
    """Longest prompt + completion, in tokens."""
    max_batch: int = 64
    """Most requests one engine batch runs together."""
    served_model_name: str | None = None
    """Model id reported by /v1/models and accepted in requests; None: the model directory's name."""
    onednn_primitive_cache: int = 64
    """Entries of oneDNN's primitive cache and of torch's LRU of them (ONEDNN_PRIMITIVE_CACHE_CAPACITY and
    LRU_CACHE_CAPACITY, read once when the engine starts; both 1024 by default). On CPU every new batch shape (tokens
    in a step) builds matmul primitives that the caches keep, up to ~2 MiB an entry for prefill-sized shapes: `slca
    bench soak` saw serve's RSS climb ~70 MiB/min for ten minutes as prompts of new lengths arrived. vLLM in-process
    engine, 240 requests of new random lengths: +471 MiB at 1024 entries, +446 MiB at 256 (still filling), flat at
    32 (720 requests, same time per request; oneDNN's cache alone was bounded then). 64 keeps the primitives of a
    dozen decode batch sizes. 0 leaves the defaults; a variable already in the environment wins."""
