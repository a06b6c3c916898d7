"""Settings of SGLS, the schema-guided tool simulator."""

from slca.config import SectionSettings


class SimSettings(SectionSettings):
    backend: str = "schema"
    """'schema' (deterministic synthesiser), 'local' (embedded model, frozen) or 'llm' (OpenAI-compatible endpoint)."""
    fault_rate: float = 0.0
    """Global probability of an injected fault per simulated call."""
