"""Manifest of a published weight version (docs/design.md#weights), and its signature.

Redis carries the announcements, and whoever can write Redis could otherwise announce a self-hashed directory of
their own or pin a server with a huge version number. So the learner signs each manifest with a key it shares
with the servers (`weights.key`): HMAC-SHA256 over the canonical JSON of every field but `signature`
(sorted keys, no spaces: the same bytes on both sides whatever the serialiser's order). A server refuses a
manifest whose signature is missing or wrong (`ManifestPolicy`, slca/weights/verify.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path

from pydantic import Field, field_validator

from slca.contracts.wire import Contract

MANIFEST_NAME = "manifest.json"


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


class WeightManifest(Contract):
    version: int = Field(ge=0)
    path: str
    format: str = "safetensors"
    sha256: dict[str, str] = Field(min_length=1)
    """File name (relative to `path`) → hex digest."""
    base_model: str
    created_at: float = Field(default_factory=time.time)
    train_step: int = Field(default=0, ge=0)
    url: str | None = None
    """Where servers without access to `path` fetch the files over HTTP (`<url><name>`, served by the learner:
    slca/weights/http.py); None: only `path`. Signed like every other field."""
    signature: str | None = None
    """Hex HMAC-SHA256 of `canonical_bytes()` under `weights.key`; None: unsigned (refused by servers unless
    `weights.allow_unsigned`)."""

    @field_validator("sha256")
    @classmethod
    def _names_inside_the_version(cls, v: dict[str, str]) -> dict[str, str]:
        # a listed name is read as `path / name`: it must not lead out of the version's directory
        for name in v:
            if not is_confined_name(name):
                raise ValueError(f"file name {name!r} must be relative, inside the version directory (no '..')")
        return v

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        if v != "safetensors":
            raise ValueError(f"unsupported format {v!r}; only 'safetensors'")
        return v

    def verify(self) -> list[str]:
        """Return the files whose content does not match (missing files, and symlinks leading out of `path`,
        included); empty when intact."""
        root = Path(self.path)
        bad = []
        for name, digest in self.sha256.items():
            f = root / name
            if not f.is_file() or not inside(root, f) or sha256_file(f) != digest:
                bad.append(name)
        return bad

    def canonical_bytes(self) -> bytes:
        """What the signature covers: every field but `signature`, as sorted, compact JSON (`url` only when set: a
        manifest signed before it existed keeps its signature)."""
        body = self.model_dump(mode="json", exclude={"signature"} | ({"url"} if self.url is None else set()))
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()

    def signed(self, key: str) -> "WeightManifest":
        """A copy carrying its signature under `key`."""
        return self.model_copy(update={"signature": _mac(self, key)})

    def signature_valid(self, key: str) -> bool:
        """True when the manifest carries the signature `key` gives it (constant-time comparison). Any other text is
        False, never an error: `hmac.compare_digest` raises TypeError on a non-ASCII str, so the bytes are compared
        (a forged announcement must be refused like any other, not stop the server's weight following)."""
        if self.signature is None:
            return False
        return hmac.compare_digest(self.signature.encode("utf-8", "surrogatepass"), _mac(self, key).encode())


def _mac(manifest: WeightManifest, key: str) -> str:
    return hmac.new(key.encode(), manifest.canonical_bytes(), hashlib.sha256).hexdigest()


def is_confined_name(name: str) -> bool:
    """A relative path without '..', backslashes or empty parts (checked on the text: no filesystem access)."""
    if not name or "\\" in name or name.startswith("/") or "\0" in name:
        return False
    parts = name.split("/")
    return all(part not in ("", ".", "..") for part in parts)


def inside(root: Path, file: Path) -> bool:
    """`file`, symlinks resolved, lies inside `root` (symlinks resolved too)."""
    return file.resolve().is_relative_to(root.resolve())
