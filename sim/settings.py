"""Settings of SGLS, the schema-guided tool simulator, and of the real tool registry."""

from pydantic import Field, field_validator

from slca.config import SectionSettings
from slca.redaction import secret_field


class SimSettings(SectionSettings):
    backend: str = "schema"
    """'schema' (deterministic synthesiser), 'local' (embedded model, frozen) or 'llm' (OpenAI-compatible endpoint)."""
    world_seed: str | None = None
    """A world seed for the simulated tools (`sim.world`): None ('none') for no world, a τ² domain's name ('airline',
    'retail': its own database, from the installed package) or the path of a JSON file of the `sim.world.WorldSeed`
    contract (relative: from the working directory). A seeded simulator knows the database: an id the seed lacks is
    not found and a seeded id answers its record, so its answers (and fidelity figures) are not those of one without.
    Checked when the settings load (a file is read in full then): a wrong value stops `slca up` and serve at start."""
    fault_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """Global probability of an injected fault per simulated call, spread evenly over `fault_kinds`."""
    fault_kinds: list[str] = Field(
        default_factory=lambda: ["rate_limit", "timeout", "server_error", "malformed", "missing_fields"]
    )
    """Fault kinds that `fault_rate` spreads over."""
    fault_rates: dict[str, float] = Field(default_factory=dict)
    """Explicit global rate per fault kind (overrides the `fault_rate` share of that kind)."""
    tool_fault_rates: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per-tool rates per fault kind, `{tool: {kind: rate}}`; they replace the global rates for that tool."""
    fault_seed: int | None = None
    """Seed of the fault injector's random stream (None: a fresh random seed)."""
    timeout_fault_delay_s: float = Field(default=0.0, ge=0.0)
    """How long an injected timeout waits before answering 504 (0: answer at once)."""
    cache: bool = True
    """Cache simulated responses in Redis (key: tool + canonical arguments + episode-state hash)."""
    cache_ttl_s: int = Field(default=3600, ge=1)
    """Lifetime of a cached response."""
    cache_max_bytes: int = Field(default=64 << 20, ge=4096)
    """Bound of the whole response cache in Redis (approximate bytes; the oldest entries go first). The cache bounds
    itself: Redis evicts nothing (the owned one runs `noeviction`, `ops.redis_maxmemory_policy`), and `slca up` counts
    this bound in the Redis memory budget (`ops.redis_maxmemory`)."""
    key_prefix: str = "slca"
    """Prefix of the Redis keys the cache writes (`<prefix>:sim:cache:...`)."""
    llm_base_url: str | None = None
    """OpenAI-compatible endpoint of the `llm` backend, e.g. http://127.0.0.1:8000/v1."""
    llm_model: str = "default"
    """Model name sent to that endpoint."""
    llm_api_key: str | None = secret_field(None)
    """Bearer token for that endpoint, if it needs one."""
    llm_timeout_s: float = Field(default=60.0, gt=0)
    """Timeout of one request to the endpoint."""
    llm_guided: str = "auto"
    """'auto' (use response_format json_schema, drop it if the endpoint refuses), 'on' or 'off'."""
    max_retries: int = Field(default=2, ge=0)
    """Validate-and-retry: extra attempts after an invalid model answer, before the schema fallback."""
    temperature: float = Field(default=0.7, ge=0.0)
    """Sampling temperature of the llm/local backends (retries need variety)."""
    max_new_tokens: int = Field(default=256, ge=8)
    """Longest simulated response the llm/local backends may generate, in tokens."""
    local_model: str = "embedded"
    """Model of the `local` backend: 'embedded', 'tiny' or a HF model directory. Frozen: never the policy."""
    local_guided: bool = True
    """Constrain the local model to the response schema with xgrammar (guided decoding) where it compiles."""
    cache_dir: str | None = None
    """Model cache dir for 'embedded'/'tiny' (None: common.cache_dir)."""
    real_timeout_s: float = Field(default=10.0, gt=0)
    """Timeout of one real tool call."""
    http_allowlist: list[str] = Field(default_factory=list)
    """Hosts that real HTTP tools may reach; an HTTP tool pointing elsewhere is refused."""
    http_tools: dict[str, dict] = Field(default_factory=dict)
    """Real HTTP tools `{name: {url, method, description, parameters}}` (arguments sent as JSON)."""
    http_max_response_bytes: int = Field(default=1_000_000, ge=1)
    """Largest HTTP tool response accepted; a larger one is an error result."""
    real_packs: list[str] = Field(default_factory=lambda: ["everyday", "airline", "retail"])
    """Real tool packs registered at start."""
    cache_max_value_bytes: int = Field(default=16_384, ge=1)
    """Largest simulated response the Redis cache stores (larger ones are generated again when asked again)."""
    schema_max_bytes: int = Field(default=256_000, ge=1)
    """Largest tool schema (parameters or response, canonical JSON) accepted in an offered tool definition."""
    schema_deadline_s: float = Field(default=0.5, gt=0)
    """Wall-clock budget of one step of work on a caller's schema (argument validation, response synthesis,
    response checks); past it the call is an error result."""
    pattern_timeout_s: float = Field(default=0.05, gt=0)
    """Budget of one regular-expression match from a caller's schema (`pattern`, `patternProperties`)."""
    synth_max_bytes: int = Field(default=65_536, ge=64)
    """Largest response the schema synthesiser builds (approximate JSON bytes); a schema needing more is refused."""
    synth_max_items: int = Field(default=64, ge=1)
    """Most items of one synthesised array."""
    synth_max_properties: int = Field(default=256, ge=1)
    """Most properties of one synthesised object."""
    grammar_cache_bytes: int = Field(default=64 << 20, ge=0)
    """Memory bound of the local backend's compiled grammars (ours and xgrammar's own cache, each)."""

    @field_validator("world_seed")
    @classmethod
    def _known_world_seed(cls, value: str | None) -> str | None:
        from sim.world_seeds import check_world_seed

        return check_world_seed(value)

    def with_cache_of(self, common) -> "SimSettings":
        """These settings with `cache_dir` defaulting to `common.cache_dir` (what the caller loaded, env included)."""
        return self if self.cache_dir else self.model_copy(update={"cache_dir": common.cache_dir})
