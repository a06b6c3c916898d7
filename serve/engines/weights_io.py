"""Reading a published weight directory (DESIGN.md §8): check the manifest, then load the safetensors."""

from __future__ import annotations

from pathlib import Path

from serve.engines.base import WeightLoadError
from slca.contracts import ContractError, WeightManifest
from slca.contracts.weights import MANIFEST_NAME


def check_weight_dir(path: str) -> Path:
    """The directory, after verifying `manifest.json` checksums when present; WeightLoadError says why not."""
    root = Path(path)
    if not root.is_dir():
        raise WeightLoadError(f"{path}: not a directory")
    if not any(root.glob("*.safetensors")):
        raise WeightLoadError(f"{path}: no .safetensors file")
    manifest_file = root / MANIFEST_NAME
    if manifest_file.is_file():
        try:
            manifest = WeightManifest.model_validate_json(manifest_file.read_text())
        except (ContractError, ValueError) as exc:
            raise WeightLoadError(f"{path}: bad manifest ({exc})") from None
        bad = WeightManifest(**{**manifest.model_dump(), "path": str(root)}).verify()
        if bad:
            raise WeightLoadError(f"{path}: checksum mismatch for {', '.join(bad)}")
    return root


def load_state_dict(path: str) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    root = check_weight_dir(path)
    state: dict = {}
    try:
        for file in sorted(root.glob("*.safetensors")):
            state.update(load_file(str(file)))
    except (SafetensorError, OSError) as exc:
        raise WeightLoadError(f"{path}: cannot read safetensors ({exc})") from None
    return state
