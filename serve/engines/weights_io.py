"""Reading a published weight directory (docs/design.md#weights). The manifest is required and is the whole truth:

- a directory without `manifest.json` is refused (unverified weights are never served);
- every name it lists must stay inside the version's directory: relative, no '..' (the contract checks the
  text), and no symlink leading out (checked here, on the resolved path);
- every listed file must match its sha256;
- only listed files are loaded, and a weight file in the directory that the manifest does not list (a stray
  `*.safetensors`, which vLLM would load along with the rest) refuses the version rather than being loaded
  or silently skipped;
- given the announced manifest (the one whose signature serve/swap.py checked), the directory's `manifest.json`
  must match it — same version, same sha256 map, same signature — and the files are hashed against the announced
  digests: whoever can write the weights directory but not `common.weights_key` cannot swap other files in;
- every engine loads the very bytes it hashed (`load_state_dict`: read once, hashed, parsed from those bytes),
  so nothing can change between the check and the load; vLLM's engine-core worker does the same in its own
  process, handed the announced manifest (`check_weight_dir` before it is only the early refusal).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from serve.engines.base import WeightLoadError
from slca.contracts import ContractError, WeightManifest
from slca.contracts.weights import MANIFEST_NAME, inside, sha256_file

WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth")
"""Files a model loader may pick up from a weight directory: each one must be listed."""


class WeightRollback(WeightLoadError):
    """The load failed after it may have begun replacing weights; the last good version was restored."""


class WeightRollbackFailed(WeightLoadError):
    """Neither the new version nor the last good one could be loaded back: the engine holds an unknown mix of
    weights and must not serve another token from it (the engine's failure path takes over)."""


@dataclass(frozen=True)
class WeightDir:
    root: Path
    manifest: WeightManifest

    @property
    def weight_files(self) -> list[str]:
        return sorted(name for name in self.manifest.sha256 if name.endswith(".safetensors"))


def manifest_mismatch(on_disk: WeightManifest, announced: WeightManifest) -> list[str]:
    """The fields (of version, sha256, signature) in which the directory's manifest differs from the announced one."""
    return [name for name in ("version", "sha256", "signature") if getattr(on_disk, name) != getattr(announced, name)]


def open_weight_dir(path: str, expected: WeightManifest | None = None) -> WeightDir:
    """The directory and its manifest after the structural checks (no hashing yet); WeightLoadError says why not.
    `expected`: the announced (signature-checked) manifest, which the directory's own must match; it is then the
    manifest returned, so the files are checked against the announced digests."""
    root = Path(path)
    if not root.is_dir():
        raise WeightLoadError(f"{path}: not a directory")
    manifest_file = root / MANIFEST_NAME
    if not manifest_file.is_file():
        raise WeightLoadError(f"{path}: no {MANIFEST_NAME}; unverified weights are not loaded")
    try:
        manifest = WeightManifest.model_validate_json(manifest_file.read_text())
    except (ContractError, ValueError, OSError) as exc:
        raise WeightLoadError(f"{path}: bad manifest ({exc})") from None
    if expected is not None:
        differs = manifest_mismatch(manifest, expected)
        if differs:
            raise WeightLoadError(
                f"{path}: {MANIFEST_NAME} does not match the announced manifest "
                f"(different {', '.join(differs)}); refused"
            )
        manifest = expected
    outside = [name for name in manifest.sha256 if not inside(root, root / name)]
    if outside:
        raise WeightLoadError(f"{path}: {', '.join(outside)} lead(s) outside the version directory")
    listed = manifest.sha256
    unlisted = sorted(p.name for p in root.iterdir() if p.name.endswith(WEIGHT_SUFFIXES) and p.name not in listed)
    if unlisted:
        raise WeightLoadError(f"{path}: weight files not listed in the manifest: {', '.join(unlisted)}")
    weights = WeightDir(root, manifest)
    if not weights.weight_files:
        raise WeightLoadError(f"{path}: the manifest lists no .safetensors file")
    return weights


def _mismatched(root: Path, digests: dict[str, str]) -> list[str]:
    """Listed files that are missing or whose content does not match (confinement is checked before)."""
    return [
        name for name, digest in digests.items() if not (root / name).is_file() or sha256_file(root / name) != digest
    ]


def check_weight_dir(path: str, expected: WeightManifest | None = None) -> Path:
    """The directory, after the structural checks and every listed file's checksum; WeightLoadError says why not.
    An early refusal only: what is loaded must come from `load_state_dict` (the files may change after this)."""
    weights = open_weight_dir(path, expected)
    bad = _mismatched(weights.root, weights.manifest.sha256)
    if bad:
        raise WeightLoadError(f"{path}: checksum mismatch for {', '.join(bad)}")
    return weights.root


def load_state_dict(path: str, expected: WeightManifest | None = None) -> dict:
    """Every tensor of the listed safetensors files, each file parsed from the bytes that were hashed (against the
    announced manifest `expected` when given, which the directory's must match)."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    weights = open_weight_dir(path, expected)
    digests = weights.manifest.sha256
    bad = _mismatched(weights.root, {n: d for n, d in digests.items() if n not in weights.weight_files})
    state: dict = {}
    for name in weights.weight_files:
        try:
            data = (weights.root / name).read_bytes()
        except OSError as exc:
            raise WeightLoadError(f"{path}: cannot read {name} ({exc})") from None
        if hashlib.sha256(data).hexdigest() != digests[name]:
            bad.append(name)
            continue
        try:
            state.update(load(data))
        except SafetensorError as exc:
            raise WeightLoadError(f"{path}: cannot read {name} ({exc})") from None
    if bad:
        raise WeightLoadError(f"{path}: checksum mismatch for {', '.join(sorted(bad))}")
    return state
