"""Where models live in the cache, and how a model name resolves to a directory."""

from __future__ import annotations

from pathlib import Path

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
TINY_NAME = "tiny-smollm2"


def models_dir(cache_dir: Path) -> Path:
    return Path(cache_dir).expanduser() / "models"


def embedded_dir(cache_dir: Path) -> Path:
    return models_dir(cache_dir) / EMBEDDED_NAME


def tiny_dir(cache_dir: Path) -> Path:
    return models_dir(cache_dir) / TINY_NAME


def resolve_model(name: str, cache_dir: Path) -> Path:
    """'embedded' and 'tiny' name the cached models; anything else is a model directory."""
    if name == "embedded":
        return embedded_dir(cache_dir)
    if name == "tiny":
        return tiny_dir(cache_dir)
    return Path(name).expanduser()
