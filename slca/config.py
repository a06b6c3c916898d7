"""Configuration: one typed settings model per component, from a TOML file, env vars and CLI flags.

Precedence (last wins): defaults < TOML file < environment < `$SLCA_SET` < `--set section.field=value`.
- TOML: `[common]`, `[weights]`, `[serve]`, `[sim]`, `[workers]`, `[learner]`, `[ops]` tables; the file is
  `--config PATH`, else `$SLCA_CONFIG`, else `./slca.toml` when it exists.
- Environment: `SLCA_<SECTION>__<FIELD>` (e.g. `SLCA_SERVE__PORT=8001`); common fields also as
  `SLCA_<FIELD>` (e.g. `SLCA_REDIS_URL`). A field of a sub-model is one more step: `[learner.loss]` in TOML,
  `SLCA_LEARNER__LOSS__KL_BETA`, `--set learner.loss.kl_beta=0.1`.
Each component owns its settings class in its own package (`serve/settings.py` …) and plugs it in through a
`slca.settings` entry point (`pyproject.toml`: section name = "module:Class"), so that this package names no
component and no component imports another's internals. The two sections every side shares are this package's:
`common` (here) and `weights` (slca/weights/settings.py: the publisher and the servers must agree on it).
A key that moved to another section (`SectionSettings.MOVED_OUT`) is an error naming its new place, wherever it was
set.
"""

from __future__ import annotations

import importlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from slca.redaction import redact_settings, redact_url, secret_field, secret_path


class ConfigError(ValueError):
    """A configuration value or file that cannot be used; the message says which."""


class SectionSettings(BaseModel):
    """Base of every settings section: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    MOVED_OUT: ClassVar[dict[str, str]] = {}
    """Keys this section had in earlier versions that moved to another section → their place now (`weights.key`).
    Set anywhere (file, environment, `--set`), each is an error naming its new place, all of them in one message,
    so an old file is fixed in one read (a moved key silently dropped would leave its default in force). Each
    section names its own: the loader names no component."""


Scope = Literal["serve", "record", "admin"]
"""What an API key may do (see `CommonSettings.api_keys`)."""


def _default_cache_dir() -> str:
    """`$XDG_CACHE_HOME/slca`, else `~/.cache/slca`"""
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "slca")


class CommonSettings(SectionSettings):
    """Settings every component reads."""

    redis_url: str | None = None
    """Redis to use. None: `slca up` starts its own; a lone component uses redis://127.0.0.1:6379/0."""
    stream_prefix: str = "slca"
    """Prefix of every Redis stream, key and channel name."""
    cache_dir: str = Field(default_factory=_default_cache_dir)
    """Where models are cached (`<cache_dir>/models/...`)."""
    data_dir: str = "var"
    """Run data: checkpoints, published weights, logs, owned Redis data."""
    model: str = "embedded"
    """The policy model: 'embedded' (SmolLM2-135M-Instruct from the cache), 'tiny', or a HF model directory."""
    admin_token: str | None = secret_field(None)
    """Bearer token for admin endpoints (a key with the 'admin' scope). None: no admin key besides `api_keys`."""
    api_keys: dict[str, list[Scope]] = secret_field(default_factory=dict)
    """API key → its scopes, sent as `Authorization: Bearer <key>`. Scopes nest: 'admin' ⊇ 'record' ⊇ 'serve'.
    Serving is open to requests without a key; recording training data (agent runs with `record: true`, the
    recorded share of chat traffic) needs 'record'; admin endpoints need 'admin'."""
    record_key: str | None = secret_field(None)
    """One more key with the 'record' scope: the key the task feed sends. `slca up` generates one when unset."""
    serve_requires_key: bool = False
    """True: every `/v1/*` request needs a key with the 'serve' scope (401 without a valid key, 403 with a key that
    lacks it); health, readiness, metrics and the OpenAPI document stay open. False: serving is open to anyone."""
    log_level: str = "INFO"

    MOVED_OUT: ClassVar[dict[str, str]] = {
        "weights_key": "weights.key",
        "allow_unsigned_weights": "weights.allow_unsigned",
    }

    @field_validator("api_keys", mode="before")
    @classmethod
    def _check_keys(cls, v: Any) -> Any:
        # checked here so that an error message never quotes the key itself (it ends up in logs)
        if not isinstance(v, dict):
            raise ValueError("must be a mapping of API key → list of scopes")
        known = set(Scope.__args__)
        for key, scopes in v.items():
            if not isinstance(key, str) or not key.strip():
                raise ValueError("an API key must be a non-blank string")
            if not isinstance(scopes, list) or not all(s in known for s in scopes):
                raise ValueError(f"scopes must be a list drawn from {sorted(known)}, got {scopes!r}")
        return v

    def redis_or_default(self) -> str:
        return self.redis_url or "redis://127.0.0.1:6379/0"

    def model_path(self) -> Path:
        from slca.models.paths import resolve_model

        return resolve_model(self.model, Path(self.cache_dir))


SETTINGS_GROUP = "slca.settings"
"""Entry-point group through which components register their settings section."""

SHARED_SECTIONS = {"common": "slca.config:CommonSettings", "weights": "slca.weights.settings:WeightsSettings"}
"""The sections of this package, which every component reads (a string, not an import: `slca.weights` is loaded only
by whoever reads `[weights]`)."""


@cache
def sections() -> dict[str, str]:
    """Section name → "module:Class": the shared ones (`SHARED_SECTIONS`) and every `slca.settings` entry point
    installed. Read once per process (the installed metadata does not change under a running process)."""
    plugged = {ep.name: ep.value for ep in entry_points(group=SETTINGS_GROUP)}
    if clash := sorted(SHARED_SECTIONS.keys() & plugged.keys()):
        raise ConfigError(f"a {SETTINGS_GROUP} entry point may not be named {clash[0]!r} ({plugged[clash[0]]})")
    return {**SHARED_SECTIONS, **plugged}


S = TypeVar("S", bound=SectionSettings)


def _import(path: str) -> type[SectionSettings]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _parse_value(raw: str) -> Any:
    """Env/CLI values are JSON when they parse as JSON (numbers, booleans, lists), else strings."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _config_file(path: str | os.PathLike | None) -> Path | None:
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        return p
    if env := os.environ.get("SLCA_CONFIG"):
        return _config_file(env)
    local = Path("slca.toml")
    return local if local.is_file() else None


def _env_name(dotted: str) -> str:
    section, _, fname = dotted.partition(".")
    return f"SLCA_{section.upper()}__{fname.replace('.', '__').upper()}"


@cache
def moved_out(section: str) -> dict[str, str]:
    """The keys section `section` had in earlier versions that moved to another section → their place now
    (`SectionSettings.MOVED_OUT`; {} for an unknown section or one whose package is absent)."""
    path = sections().get(section)
    try:
        return dict(_import(path).MOVED_OUT) if path else {}
    except ModuleNotFoundError:
        return {}


def moved_keys() -> dict[str, str]:
    """Every moved key of every installed section, as `section.key` → its place now."""
    return {f"{name}.{old}": new for name in sections() for old, new in moved_out(name).items()}


def moved_key_errors(section: str, table: dict[str, Any], where: str = "") -> list[str]:
    """One message per key of `table` (section `section`) that moved to another section."""
    moved = moved_out(section) if table else {}
    return [f"{where}{section}.{k} is now {moved[k]}" for k in table if k in moved]


def _check_moved(errors: list[str]) -> None:
    if errors:
        raise ConfigError("settings that moved: " + "; ".join(errors))


@dataclass
class Config:
    """The effective configuration: raw values per section, validated lazily per section class."""

    raw: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: Path | None = None

    def section(self, name: str) -> SectionSettings:
        known = sections()
        if name not in known:
            raise ConfigError(f"unknown config section {name!r}; known: {', '.join(known)}")
        return self.get(_import(known[name]), name)

    def get(self, cls: type[S], name: str | None = None) -> S:
        name = name or next((k for k, v in sections().items() if v.endswith(":" + cls.__name__)), None)
        if name is None:
            raise ConfigError(f"{cls.__name__} is not a registered section")
        _check_moved(moved_key_errors(name, self.raw.get(name, {})))
        try:
            return cls.model_validate(self.raw.get(name, {}))
        except ValidationError as exc:
            msgs = "; ".join(f"{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"invalid configuration: {msgs}") from None

    @property
    def common(self) -> CommonSettings:
        return self.get(CommonSettings, "common")

    def effective(self, redact: bool = True) -> dict[str, dict[str, Any]]:
        """Every registered section with defaults filled in (sections whose package is absent are skipped);
        secret fields and URL passwords as `***` unless `redact=False`."""
        out = {}
        for name in sections():
            try:
                settings = self.section(name)
            except ModuleNotFoundError:
                continue
            out[name] = redact_settings(settings) if redact else settings.model_dump(mode="json")
        return out


OVERRIDES_ENV = "SLCA_SET"
"""Environment variable holding a JSON list of `section.field=value` overrides, applied like `--set` (before the
command line's own): how `slca up` hands its children the secret overrides it was given, out of their argv (which
`ps` shows and the logs record)."""


def is_secret_override(item: str) -> bool:
    """Whether a `section.field=value` override sets a secret field (or a URL with a password in it)."""
    dotted, _, value = item.partition("=")
    section, _, fname = dotted.partition(".")
    module = sections().get(section)
    if module is None:
        return False
    try:
        cls = _import(module)
    except ModuleNotFoundError:
        return True  # cannot tell: treat as secret (it then travels in the environment, which is always safe)
    return secret_path(cls, fname.split(".")) or redact_url(value) != value


def split_overrides(items: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """(public, secret) overrides: the secret ones travel in `OVERRIDES_ENV`, never in argv."""
    public = [i for i in items if not is_secret_override(i)]
    return public, [i for i in items if is_secret_override(i)]


def _env_overrides() -> list[str]:
    raw = os.environ.get(OVERRIDES_ENV)
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except json.JSONDecodeError:
        items = None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"${OVERRIDES_ENV} must be a JSON list of 'section.field=value' strings")
    return items


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Load defaults < TOML < environment < `$SLCA_SET` < overrides (`section.field=value`)."""
    overrides = [*_env_overrides(), *overrides]
    source = _config_file(path)
    known = sections()
    raw: dict[str, dict[str, Any]] = {}
    moved: list[str] = []
    if source is not None:
        try:
            data = tomllib.loads(source.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML ({exc})") from None
        for name, table in data.items():
            if name not in known or not isinstance(table, dict):
                raise ConfigError(f"{source}: unknown section [{name}]; known: {', '.join(known)}")
            raw[name] = dict(table)
            moved += moved_key_errors(name, table, f"{source}: ")
    common_fields = set(CommonSettings.model_fields)
    for key, value in os.environ.items():
        if not key.startswith("SLCA_") or key in ("SLCA_CONFIG", OVERRIDES_ENV):
            continue
        rest = key[5:].lower()
        if "__" in rest:
            section, _, fname = rest.partition("__")
            if new := moved_out(section).get(fname):
                moved.append(f"${key} is now ${_env_name(new)} ({new})")
            elif section in known:
                _put(raw.setdefault(section, {}), fname.split("__"), _parse_value(value))
        elif rest in common_fields:
            raw.setdefault("common", {})[rest] = _parse_value(value)
        elif new := CommonSettings.MOVED_OUT.get(rest):  # a common field's short form, `SLCA_WEIGHTS_KEY`
            moved.append(f"${key} is now ${_env_name(new)} ({new})")
    for item in overrides:
        dotted, eq, value = item.partition("=")
        section, dot, fname = dotted.partition(".")
        if not eq or not dot or section not in known:
            shown = item if not eq else f"{dotted}=..."  # the value may be a secret
            raise ConfigError(f"bad override {shown!r}; expected section.field=value with section in {list(known)}")
        if new := moved_out(section).get(fname):
            moved.append(f"override {dotted}=... is now {new}=...")
            continue
        _put(raw.setdefault(section, {}), fname.split("."), _parse_value(value))
    _check_moved(moved)
    return Config(raw=raw, source=source)


def _put(table: dict[str, Any], path: list[str], value: Any) -> None:
    """Set a nested field (`learner.loss.kl_beta`, `SLCA_LEARNER__LOSS__KL_BETA`) inside the section's table,
    merging into a sub-table the file already set rather than replacing it."""
    for key in path[:-1]:
        if not isinstance(table.get(key), dict):
            table[key] = {}  # a later source setting a sub-field replaces a scalar an earlier one gave
        table = table[key]
    table[path[-1]] = value
