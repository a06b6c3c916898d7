"""Where models live in the cache, how a model name resolves to a directory (`resolve_model`), and whether a model
is there (`is_model_dir`; `find_model_dir`: resolved and checked, or a `ModelNotFound` naming the directory and
what to run)."""

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


def is_model_dir(path: str | Path) -> bool:
    """A Hugging Face model directory: one that holds a config.json."""
    return (Path(path).expanduser() / "config.json").is_file()


def how_to_make(name: str) -> str:
    """What puts the model `name` names in place: the command for a cached model, what a directory needs."""
    if name == "embedded":
        return "run `slca model fetch`"
    if name == "tiny":
        return "run `slca model tiny`"
    return "expected a Hugging Face model directory with config.json"


class ModelNotFound(FileNotFoundError):
    """A model name whose directory holds no model. A `FileNotFoundError`: `slca` prints it as one line, exit 2."""

    def __init__(self, message: str, path: Path):
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        return self.args[0]


def find_model_dir(
    name: str | Path, cache_dir: str | Path, *, what: str | None = None, hint: str | None = None
) -> Path:
    """`resolve_model(name, cache_dir)` when a model is there, else `ModelNotFound`: "[what: ]no model at <dir>
    (<hint>)", the hint by default `how_to_make(name)`."""
    path = resolve_model(str(name), Path(cache_dir))
    if not is_model_dir(path):
        prefix = f"{what}: " if what else ""
        raise ModelNotFound(f"{prefix}no model at {path} ({hint or how_to_make(str(name))})", path)
    return path
