"""Where the serve processes of `slca up` answer on this machine: `serve` (callers' address) and, with
`ops.candidate_replica`, `serve-candidate` (docs/design.md#versions). One place for `slca up`'s plan, the feed,
the gate and the warm start, which each read the same configuration and so agree on the addresses. `ops`: the
`[ops]` section (`OpsSettings`), handed in: ops.common imports no room beside it (tests/test_import_cycles.py)."""

from __future__ import annotations

from slca.config import Config, ConfigError

_WILDCARDS = ("0.0.0.0", "::")


def _serve(config: Config):
    try:
        return config.section("serve")
    except (ModuleNotFoundError, ConfigError):
        return None  # no serve component here: its defaults


def _url(serve, port: int) -> str:
    host = getattr(serve, "host", "0.0.0.0")
    return f"http://{'127.0.0.1' if host in _WILDCARDS else host}:{port}"


def serve_url(config: Config) -> str:
    """`serve`'s base URL: `serve.port` on the loopback (or on `serve.host` when it names one)."""
    serve = _serve(config)
    return _url(serve, getattr(serve, "port", 8000))


def candidate_replica_on(config: Config, ops) -> bool:
    """`ops.candidate_replica` applies: on, and `serve.follow_candidate` off (callers follow the candidate anyway
    then, and one replica serves both)."""
    return ops.candidate_replica and not getattr(_serve(config), "follow_candidate", False)


def candidate_port(config: Config, ops) -> int:
    """`serve-candidate`'s port: `ops.candidate_replica_port`, else `serve.port` + 1."""
    return ops.candidate_replica_port or getattr(_serve(config), "port", 8000) + 1


def candidate_url(config: Config, ops) -> str | None:
    """`serve-candidate`'s base URL when `slca up` runs it (`candidate_replica_on`), else None: the one `serve`
    answers both roles."""
    if not candidate_replica_on(config, ops):
        return None
    return _url(_serve(config), candidate_port(config, ops))
