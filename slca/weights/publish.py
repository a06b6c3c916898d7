"""Publishing weight version vN for the servers (docs/design.md#weights): write, sign, announce, prune.

`<data_dir>/weights/v{N}/` holds model.safetensors (full HF LlamaForCausalLM names; LoRA merged), config.json,
tokenizer files and manifest.json (a `WeightManifest` with sha256 per file). Written into a temp dir, fsynced,
renamed; only then `SET slca:weights:latest` and `PUBLISH slca:weights`, so a subscriber never sees a version
whose files are incomplete. With the HTTP transport (slca/weights/http.py) the manifest also carries the `url` servers
on other hosts fetch the files from."""

from __future__ import annotations

import copy
import logging
import re
import shutil
import time
from pathlib import Path

from slca.atomic import commit_dir, remove_stale_temps, temp_dir_next_to
from slca.contracts import Streams, WeightManifest, dump_json
from slca.contracts.weights import MANIFEST_NAME, sha256_file

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)
_VERSION_DIR = re.compile(r"^v(\d+)$")
log = logging.getLogger(__name__)


def existing_versions(weights_dir: Path) -> list[int]:
    if not weights_dir.is_dir():
        return []
    return sorted(int(m.group(1)) for p in weights_dir.iterdir() if (m := _VERSION_DIR.match(p.name)))


def next_version(weights_dir: Path, last_published: int) -> int:
    """Strictly above both this learner's record and anything on disk (a crash after a publish but before the
    checkpoint must not reuse a number the server may already serve)."""
    return max([last_published, *existing_versions(weights_dir)]) + 1


def _plain_model(model):
    """A LlamaForCausalLM with LoRA merged (a copy: training continues on the adapters)."""
    if hasattr(model, "merge_and_unload"):
        return copy.deepcopy(model).merge_and_unload()
    return model


def write_version(
    model,
    source_dir: Path,
    weights_dir: Path,
    version: int,
    train_step: int,
    base_model: str,
    weights_key: str | None = None,
    url: str | None = None,
) -> WeightManifest:
    """Write `<weights_dir>/v<version>/` atomically: the merged model, tokenizer files and the manifest (sha256 of every
    file; `url`: where servers without this directory fetch them, from the transport), signed with `weights_key`."""
    remove_stale_temps(weights_dir)
    target = weights_dir / f"v{version}"
    tmp = temp_dir_next_to(target)
    plain = _plain_model(model)
    plain.save_pretrained(str(tmp), safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (source_dir / name).is_file() and not (tmp / name).exists():
            shutil.copy2(source_dir / name, tmp / name)
    return seal_version(tmp, target, version, base_model, train_step, weights_key, url)


def seal_version(
    tmp: Path,
    target: Path,
    version: int,
    base_model: str,
    train_step: int = 0,
    weights_key: str | None = None,
    url: str | None = None,
    path: str | None = None,
) -> WeightManifest:
    """Finish a version whose files are written in `tmp`: hash every file, write the manifest (signed with
    `weights_key`; `path`: the directory it names, default `target` — another host's when the files are fetched
    from `url`), then fsync and rename `tmp` to `target`. The one place a version directory becomes visible."""
    digests = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
    manifest = WeightManifest(
        version=version,
        path=path or str(target.resolve()),
        url=url,
        sha256=digests,
        base_model=base_model,
        train_step=train_step,
    )
    if weights_key:
        manifest = manifest.signed(weights_key)
    (tmp / MANIFEST_NAME).write_text(dump_json(manifest))
    commit_dir(tmp, target)
    return manifest


def announce(redis_client, streams: Streams, manifest: WeightManifest) -> None:
    """`SET slca:weights:latest` (what a server reads at start) and `PUBLISH slca:weights` (what followers get now).
    Raises redis' errors: an announcement refused (a full Redis answers OOM to the SET) is the caller's to retry."""
    text = dump_json(manifest)
    redis_client.set(streams.weights_latest, text)
    redis_client.publish(streams.weights_channel, text)


def stored_manifest(weights_dir: Path, version: int) -> WeightManifest | None:
    """The manifest `v<version>/` was published with, or None when it is gone or unreadable."""
    try:
        return WeightManifest.model_validate_json((weights_dir / f"v{version}" / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None


def reannounce_refusal(
    manifest: WeightManifest | None, weights_dir: Path, weights_key: str | None, url: str | None
) -> str | None:
    """Why a stored manifest cannot be announced again as it is (None: it can): servers load it only when it is
    signed with today's `weights_key` and names the directory and `url` they reach it at today. A learner that
    resumes at a version it cannot announce again publishes its weights as a new version instead (re-signing old
    files would sign whatever someone put in their place)."""
    if manifest is None:
        return "its directory or manifest is gone"
    if weights_key and not manifest.signature_valid(weights_key):
        return "it is not signed with today's weights.key"
    if not weights_key and manifest.signature is not None:
        return "it is signed, and no weights.key is set"
    if manifest.path != str((weights_dir / f"v{manifest.version}").resolve()):
        return f"it names another directory ({manifest.path})"
    if manifest.url != url:
        return f"it names another url ({manifest.url}, not {url})"
    return None


def prune_versions(weights_dir: Path, keep: int, protect: int | set[int] = frozenset()) -> None:
    """Delete all but the newest `keep` complete versions (with their manifest; never those in `protect`: the one
    just announced, one still needed). A directory without a manifest is not a version yet and is left alone."""
    if keep <= 0:
        return
    protected = {protect} if isinstance(protect, int) else set(protect)
    complete = [v for v in existing_versions(weights_dir) if (weights_dir / f"v{v}" / MANIFEST_NAME).is_file()]
    for v in complete[:-keep]:
        if v not in protected:
            shutil.rmtree(weights_dir / f"v{v}", ignore_errors=True)


def publish(
    model,
    source_dir: Path,
    weights_dir: Path,
    last_published: int,
    train_step: int,
    base_model: str,
    redis_client,
    streams: Streams,
    keep: int = 3,
    weights_key: str | None = None,
    transport=None,
) -> tuple[WeightManifest, float]:
    """Write, announce and prune version N+1; signed with `weights_key` (`weights.key`) when given — servers
    refuse unsigned announcements unless configured for development (`weights.allow_unsigned`). `transport`:
    how servers reach the files (`slca.weights.transports.for_learner`, connected); None: the disk, in place."""
    t0 = time.perf_counter()
    if not weights_key and redis_client is not None:
        log.warning(
            "publishing unsigned weights (weights.key is unset): servers refuse them unless "
            "weights.allow_unsigned is set"
        )
    version = next_version(weights_dir, last_published)
    url = transport.url_for(version) if transport is not None else None
    manifest = write_version(model, source_dir, weights_dir, version, train_step, base_model, weights_key, url)
    if redis_client is not None:
        announce(redis_client, streams, manifest)
    prune_versions(weights_dir, keep, version)
    return manifest, time.perf_counter() - t0
