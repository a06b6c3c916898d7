"""Publishing test weight versions the way the learner does (safetensors + manifest, atomic rename)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from slca.contracts import WeightManifest
from slca.contracts.weights import MANIFEST_NAME, sha256_file


WEIGHTS_KEY = "test-weights-key"
"""The announcement key of the test servers that follow the weight channel (`common.weights_key`)."""


def publish_version(
    model_dir: Path,
    root: Path,
    version: int,
    scale: float,
    key: str | None = WEIGHTS_KEY,
    url: str | None = None,
    path: str | None = None,
) -> WeightManifest:
    """v{version}: the model's tensors scaled by `scale` (a real, different set of weights), signed with `key`.
    `url`: where servers fetch it over HTTP (slca/weights/http.py); `path`: the directory the manifest names (default:
    where it is written; another: a learner on another host, whose directory servers here cannot read)."""
    final = root / f"v{version}"
    tmp = root / f".tmp-v{version}"
    tmp.mkdir(parents=True)
    state = {k: (v.float() * scale).contiguous() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    save_file(state, str(tmp / "model.safetensors"))
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, tmp / name)
    digests = {f.name: sha256_file(f) for f in sorted(tmp.iterdir()) if f.is_file()}  # every file, as publish.py
    manifest = WeightManifest(
        version=version, path=path or str(final), url=url, base_model=str(model_dir), sha256=digests
    )
    manifest = manifest.signed(key) if key else manifest
    (tmp / MANIFEST_NAME).write_text(manifest.model_dump_json())
    os.rename(tmp, final)
    return manifest


def manifest_of(root: Path) -> dict:
    """The version directory's own manifest, as JSON."""
    return json.loads((root / MANIFEST_NAME).read_text())


def rewrite_manifest(root: Path, **changes) -> None:
    """Change fields of the directory's manifest in place (what someone who can write the directory can do)."""
    (root / MANIFEST_NAME).write_text(json.dumps({**manifest_of(root), **changes}))
