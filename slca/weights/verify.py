"""Verifying a weight version on this machine, and reading its tensors from the very bytes that were hashed.

The manifest is required and is the whole truth:
- an announcement is accepted only when signed with `weights.key` (`ManifestPolicy`; unsigned ones only
  with `weights.allow_unsigned`), never older than the version served and at most `weights.max_version_jump`
  above the last one accepted;
- a directory without `manifest.json` is refused (unverified weights are never served);
- every name it lists must stay inside the version's directory: relative, no '..' (the contract checks the
  text), and no symlink leading out (checked here, on the resolved path);
- every listed file must match its sha256;
- only listed files are loaded, and a weight file in the directory that the manifest does not list (a stray
  `*.safetensors`, which vLLM would load along with the rest) refuses the version rather than being loaded
  or silently skipped;
- given the announced manifest (the one whose signature was checked), the directory's `manifest.json` must
  match it — same version, same sha256 map, same signature — and the files are hashed against the announced
  digests: whoever can write the weights directory but not `weights.key` cannot swap other files in;
- every engine loads the very bytes that were hashed (`WeightVersion.state_dict`: each file read once, hashed,
  parsed from those bytes), so nothing can change between the check and the load; vLLM's engine-core worker does
  the same in its own process, handed the version as text (`WeightVersion.to_wire`; `check` before it is only
  the early refusal).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from slca.contracts import ContractError, WeightManifest
from slca.contracts.weights import MANIFEST_NAME, inside, sha256_file
from slca.weights.errors import WeightLoadError

log = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json", ".pt", ".pth")
"""Files a model loader may pick up from a weight directory: each one must be listed."""


@dataclass(frozen=True)
class ManifestPolicy:
    """Which announced manifests a server may load. The default refuses everything: no key, no unsigned."""

    key: str | None = None
    """`weights.key`: announcements must be signed with it."""
    allow_unsigned: bool = False
    """`weights.allow_unsigned`: without a key, accept unsigned announcements (development, tests)."""
    max_version_jump: int = 1000
    """`weights.max_version_jump`: refuse a version more than this above the last announcement accepted."""

    @classmethod
    def from_settings(cls, weights) -> "ManifestPolicy":
        """The policy of the `[weights]` section (`WeightsSettings`)."""
        policy = cls(weights.key, weights.allow_unsigned, weights.max_version_jump)
        if not policy.key:
            log.warning(
                "weights.key is unset: weight announcements are %s",
                "accepted unsigned (development only: anyone who can write Redis can make this server load weights)"
                if policy.allow_unsigned
                else "refused (set weights.key, as `slca up` does)",
            )
        return policy

    def refusal(self, manifest: WeightManifest, last_accepted: int | None) -> str | None:
        """Why `manifest` must not be loaded, or None. `last_accepted`: the version of the last announcement this
        server accepted (None before the first: a restarted server meets a learner far ahead, legitimately)."""
        if self.key:
            if manifest.signature is None:
                return "unsigned"
            if not manifest.signature_valid(self.key):
                return "bad signature"
        elif not self.allow_unsigned:
            return "no weights.key to verify it with"
        if last_accepted is not None and manifest.version > last_accepted + self.max_version_jump:
            return f"v{manifest.version} jumps more than {self.max_version_jump} versions past v{last_accepted}"
        return None

    def signed_on_disk(self, path: str, version: int) -> WeightManifest | None:
        """For a swap by path alone: with a key, the directory's manifest, which must be signed with it and be of
        `version` (it is then what the files are checked against); without a key, None (the directory's own)."""
        if not self.key:
            return None
        manifest = open_weight_dir(path).manifest
        if not manifest.signature_valid(self.key):
            why = "unsigned" if manifest.signature is None else "not signed with weights.key"
            raise WeightLoadError(f"{path}: {MANIFEST_NAME} is {why}; refused")
        if manifest.version != version:
            raise WeightLoadError(f"{path}: {MANIFEST_NAME} is v{manifest.version}, not v{version}; refused")
        return manifest


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
    announced manifest `expected` when given, which the directory's must match). Each file is read once, straight
    into its tensors (`slca.weights.tensor_read`): a version is held once, not twice, while it loads."""
    from slca.weights.tensor_read import SafetensorsFormatError, read_tensors

    weights = open_weight_dir(path, expected)
    digests = weights.manifest.sha256
    bad = _mismatched(weights.root, {n: d for n, d in digests.items() if n not in weights.weight_files})
    state: dict = {}
    for name in weights.weight_files:
        file = weights.root / name
        try:
            with open(file, "rb") as f:
                tensors, digest = read_tensors(f, os.fstat(f.fileno()).st_size)
        except SafetensorsFormatError as exc:
            if not _matches(file, digests[name]):  # not the listed file: a checksum mismatch, not a format error
                bad.append(name)
                continue
            raise WeightLoadError(f"{path}: cannot read {name} ({exc})") from None
        except OSError as exc:
            raise WeightLoadError(f"{path}: cannot read {name} ({exc})") from None
        if digest != digests[name]:
            bad.append(name)
            continue
        state.update(tensors)
    if bad:
        raise WeightLoadError(f"{path}: checksum mismatch for {', '.join(sorted(bad))}")
    return state


def _matches(file: Path, digest: str) -> bool:
    try:
        return sha256_file(file) == digest
    except OSError:
        return False


@dataclass(frozen=True)
class WeightVersion:
    """One weight version on this machine, ready to load: the directory of its files, the version it is served as,
    and the manifest its bytes are verified against (the announced one, or the signed one of a swap by path; None:
    the directory's own, development without a key). Every engine loads through it; vLLM's engine-core worker gets
    it as text (`to_wire`), never tensors, and reads, hashes and parses the files itself (`state_dict`)."""

    root: str
    version: int
    manifest: WeightManifest | None = None

    def check(self) -> None:
        """The structural checks and every file's checksum: an early refusal only (the files may change after it)."""
        check_weight_dir(self.root, self.manifest)

    def state_dict(self) -> dict:
        """Every tensor, parsed from the very bytes that were hashed; WeightLoadError says why not."""
        return load_state_dict(self.root, self.manifest)

    def to_wire(self) -> str:
        """JSON text (what crosses into vLLM's engine-core process; no pickle)."""
        manifest = None if self.manifest is None else self.manifest.model_dump(mode="json")
        return json.dumps({"root": self.root, "version": self.version, "manifest": manifest})

    @classmethod
    def from_wire(cls, text: str) -> "WeightVersion":
        raw = json.loads(text)
        manifest = None if raw["manifest"] is None else WeightManifest.model_validate(raw["manifest"])
        return cls(str(raw["root"]), int(raw["version"]), manifest)
