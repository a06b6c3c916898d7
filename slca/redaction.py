"""Secrets out of sight: which settings are secret, and their `***` form in output, logs, argv and state files.

A settings field is secret when it is declared with `secret_field(...)` (its JSON-schema extra says so).
Secret values are replaced whole; a URL anywhere in the configuration loses only its password
(`redis://:pw@host:6379/0` → `redis://:***@host:6379/0`), so an operator still sees where it points.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

REDACTED = "***"

_URL_AUTHORITY = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<authority>[^/?#\s]*)")
"""A URL's scheme and authority (`user:password@host:port`): up to the path, query or fragment, as urllib splits."""


def secret_field(*args: Any, **kwargs: Any) -> Any:
    """A pydantic `Field(*args, **kwargs)` marked secret: `slca config show`, logged argv and state files print it
    as `***`."""
    return Field(*args, json_schema_extra={"secret": True}, **kwargs)


def is_secret(model: type[BaseModel], name: str) -> bool:
    info = model.model_fields.get(name)
    extra = info.json_schema_extra if info is not None else None
    return isinstance(extra, dict) and bool(extra.get("secret"))


def redact_url(text: str) -> str:
    """Every `scheme://user:password@` in `text` with the password replaced by `***`. The host is what follows the
    authority's last `@` (as urllib and redis-py read it), so a password holding `@` is hidden whole."""
    return _URL_AUTHORITY.sub(_redact_authority, text)


def _redact_authority(m: re.Match) -> str:
    userinfo, at, host = m["authority"].rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if not at or not colon:
        return m[0]
    return f"{m['scheme']}{user}:{REDACTED}@{host}"


def _redact_value(value: Any) -> Any:
    if value is None or value == {} or value == [] or value == "":
        return value  # unset stays visibly unset
    if isinstance(value, dict):
        # a mapping keyed by secrets (api_keys): keep the values (scopes), hide the keys
        return {f"{REDACTED}{i}": v for i, v in enumerate(value.values(), 1)}
    return REDACTED


def redact_settings(settings: BaseModel) -> dict[str, Any]:
    """`settings.model_dump(mode="json")` with secret fields hidden, nested settings included, URLs' passwords
    hidden everywhere."""
    out: dict[str, Any] = {}
    dumped = settings.model_dump(mode="json")
    for name, value in dumped.items():
        current = getattr(settings, name, None)
        if is_secret(type(settings), name):
            out[name] = _redact_value(value)
        elif isinstance(current, BaseModel):
            out[name] = redact_settings(current)
        else:
            out[name] = _redact_strings(value)
    return out


def _redact_strings(value: Any) -> Any:
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, list):
        return [_redact_strings(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_strings(v) for k, v in value.items()}
    return value


def secret_path(model: type[BaseModel], path: list[str]) -> bool:
    """Whether the dotted field `path` inside settings class `model` is (or lies under) a secret field."""
    for i, name in enumerate(path):
        if is_secret(model, name):
            return True
        info = model.model_fields.get(name)
        sub = info.annotation if info is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)) or i == len(path) - 1:
            return False
        model = sub
    return False
