"""Test weight versions: the model's own tensors scaled (a real, different set of weights), sealed by the learner's
`seal_version` (hashes, signed manifest, atomic rename)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from slca.atomic import temp_dir_next_to
from slca.contracts import WeightManifest
from slca.contracts.weights import MANIFEST_NAME
from slca.weights.publish import seal_version
from slca.weights.settings import WeightsSettings


WEIGHTS_KEY = "test-weights-key"
"""The announcement key of the test servers that follow the weight channel (`weights.key`)."""

NO_FOLLOW = WeightsSettings(follow=False)
"""`[weights]` of a test server that loads no announced version (`run_in_app`'s default)."""


def signed(**extra) -> WeightsSettings:
    """`[weights]` of a test server that verifies versions against `WEIGHTS_KEY` (`extra`: other keys)."""
    return WeightsSettings(**{"key": WEIGHTS_KEY, "follow": False, **extra})


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
    tmp = temp_dir_next_to(final)
    state = {k: (v.float() * scale).contiguous() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    save_file(state, str(tmp / "model.safetensors"))
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, tmp / name)
    return seal_version(tmp, final, version, str(model_dir), weights_key=key, url=url, path=path)


def manifest_of(root: Path) -> dict:
    """The version directory's own manifest, as JSON."""
    return json.loads((root / MANIFEST_NAME).read_text())


def rewrite_manifest(root: Path, **changes) -> None:
    """Change fields of the directory's manifest in place (what someone who can write the directory can do)."""
    (root / MANIFEST_NAME).write_text(json.dumps({**manifest_of(root), **changes}))
