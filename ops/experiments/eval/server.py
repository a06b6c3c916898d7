"""The server under evaluation: `slca serve` in this process (`ops.experiments.inprocess_server`) on the model
being evaluated, so that eval runs exactly the agent loop users get (`POST /v1/agent/runs`)."""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

from ops.experiments.inprocess_server import InProcessServer
from serve.engines.registry import engine_spec
from serve.settings import ServeSettings
from slca.config import Config

BATCH_WAIT_MS = 100.0
"""hf engine: the least time a batch waits for more arrivals. An eval sends its requests in bursts, which the
server's request threads template one after another, so they reach the engine spread over tens of ms; the
serving default (5 ms) split 8 of them into 4 batches whose steps then take turns (tiny model, 8 tasks × 32
tokens, busy 2-core machine: 2.2 s at 5 ms, 0.9 s at 100 ms, one batch)."""


def eval_config(config: Config, model_dir: Path, engine: str, threads: int | None) -> Config:
    """`config` with the model under evaluation, the engine to run it on, its torch threads (None: as
    configured) and a batch window of at least `BATCH_WAIT_MS`; every other setting (context length, batch size,
    the [sim] section) as configured."""
    engine_spec(engine)  # any registered engine (vllm: `slca eval`'s default; hf: fp32, the reference); else raises
    raw = {name: dict(values) for name, values in config.raw.items()}
    raw["common"] = {**raw.get("common", {}), "model": str(model_dir)}
    wait_ms = max(config.get(ServeSettings).batch_wait_ms, BATCH_WAIT_MS)
    raw["serve"] = {**raw.get("serve", {}), "engine": engine, "batch_wait_ms": wait_ms}
    if threads:
        raw["serve"]["torch_threads"] = threads
    return replace(config, raw=raw)


@contextmanager
def eval_server(
    config: Config, model_dir: Path, engine: str = "vllm", threads: int | None = None
) -> Iterator[InProcessServer]:
    """A started in-process server on `model_dir`, stopped on exit (its engine and model freed)."""
    from sim.settings import SimSettings

    cfg = eval_config(config, model_dir, engine, threads)
    # The weights must stay the ones under evaluation: no weight following, and a private prefix so that nothing
    # this server writes or reads can meet a running deployment's. The simulator's response cache is off: it
    # would only tie the eval to a Redis, and the schema backend answers a call the same way every time anyway.
    sim = cfg.get(SimSettings).with_cache_of(cfg.common).model_copy(update={"cache": False})
    server = InProcessServer(
        cfg, f"{cfg.common.stream_prefix}:eval:{uuid.uuid4().hex[:12]}", follow_weights=False, sim_settings=sim
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
