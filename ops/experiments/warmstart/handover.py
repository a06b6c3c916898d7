"""The warm start handed to the running system as a weight version — what `slca sft --publish` does once it has
trained, on a machine where `slca up` already serves the base model (`ops.warm_start_beside`):

1. publish: the model directory's files (weights, config, tokenizer) become `<data_dir>/weights/vN/`, N above every
   version on disk, sealed by `slca.weights.publish.seal_version` as the learner's versions are (a sha256 per file,
   the manifest signed with `weights.key`);
2. promote: serve is asked to give callers vN (`POST /admin/promote` with the admin token: the promotion record,
   reason `operator`, for the warm start is the operator's chosen start) — before the announcement, so that serve
   loads the warm start into the callers' engine once rather than first making a copy of the base model for them;
   with `serve.follow_candidate` callers follow the candidate and nothing is asked;
3. announce: `SET slca:weights:latest` and `PUBLISH slca:weights` (`slca.weights.publish.announce`): the candidate
   engine swaps to vN like to any learner version, so the feed and the learner start on it;
4. wait until serve reports vN as both promoted and candidate (`GET /v1/versions`); with a candidate replica
   (`ops.candidate_replica`: `serve` holds the promoted version, `serve-candidate` follows the announcements) until
   both do: the promoted one promoted, the candidate one as its candidate.
Every wait is bounded by `ops.warm_start_swap_timeout_s`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from slca.atomic import remove_stale_temps, temp_dir_next_to
from slca.contracts import Streams, WeightManifest
from slca.weights.publish import TOKENIZER_FILES, announce, next_version, seal_version

log = logging.getLogger("slca.sft")

MODEL_FILES = ("config.json", "model.safetensors")
"""What a version holds beside the tokenizer files (`slca.weights.publish.TOKENIZER_FILES`): the learner's versions
are `save_pretrained` of the same model class, so the warm start's directory has the same files."""


class HandoverError(RuntimeError):
    """The warm start could not be published or promoted (the message says which step and why)."""


def publish_model_dir(model_dir: Path, data_dir: Path, weights_key: str | None) -> WeightManifest:
    """`model_dir` written as the next version under `<data_dir>/weights/` (not announced)."""
    weights_dir = Path(data_dir) / "weights"
    if not (Path(model_dir) / "model.safetensors").is_file():
        raise HandoverError(f"no model.safetensors in {model_dir}")
    remove_stale_temps(weights_dir)
    version = next_version(weights_dir, 0)
    target = weights_dir / f"v{version}"
    tmp = temp_dir_next_to(target)
    for name in (*MODEL_FILES, *TOKENIZER_FILES):
        if (Path(model_dir) / name).is_file():
            link_or_copy(Path(model_dir) / name, tmp / name)
    return seal_version(tmp, target, version, str(model_dir), 0, weights_key)


def link_or_copy(source: Path, target: Path) -> None:
    """A hard link where both are on one file system, else a copy. Why a link is safe: nothing writes a model
    directory's files in place (`learner.sft.save_model` writes a new directory and renames it over the old one, so
    the version keeps the inode it hashed), and the version's pruning unlinks only its own name. Why a link: the
    weights are written once, by the save; the copy was another 0.5 GiB of writes between training and the swap."""
    try:
        os.link(source, target)
    except OSError:  # another file system (EXDEV), or one without hard links
        shutil.copy2(source, target)


@dataclass
class ServeAdminClient:
    """serve's readiness, versions and promotion, over plain HTTP (the admin token as bearer)."""

    url: str
    admin_token: str | None
    timeout_s: float = 30.0

    def _call(self, path: str, body: dict | None = None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if self.admin_token:
            headers["Authorization"] = f"Bearer {self.admin_token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())

    def ready(self) -> bool:
        try:
            return self._call("/readyz")[0] == 200
        except OSError:
            return False

    def versions(self) -> dict | None:
        try:
            status, body = self._call("/v1/versions")
        except OSError:
            return None
        return body if status == 200 else None

    def promote(self, version: int) -> tuple[int, dict]:
        return self._call("/admin/promote", {"version": version})


def _json(raw: bytes) -> dict:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def wait_until(check, timeout_s: float, poll_s: float = 1.0, clock=time.monotonic, sleep=time.sleep) -> bool:
    """Call `check` every `poll_s` until it is true (True) or `timeout_s` has passed (False)."""
    deadline = clock() + timeout_s
    while True:
        if check():
            return True
        if clock() >= deadline:
            return False
        sleep(poll_s)


def hand_over(
    manifest: WeightManifest,
    serve: ServeAdminClient,
    redis_client,
    streams: Streams,
    timeout_s: float,
    follow_candidate: bool = False,
    poll_s: float = 1.0,
    candidate: ServeAdminClient | None = None,
) -> bool:
    """Promote (unless `follow_candidate`), announce, and wait until serve serves `manifest.version` to callers and
    as the candidate — `candidate`: the candidate replica, which must serve it too. True once it does; False when
    serve did not confirm it within `timeout_s` (announced all the same). Raises HandoverError when serve refuses the
    promotion, RedisError when Redis refuses the announcement."""
    version = manifest.version
    if not follow_candidate:
        if not wait_until(serve.ready, timeout_s, poll_s):
            raise HandoverError(f"serve at {serve.url} was not ready within {timeout_s:.0f} s")
        status, body = serve.promote(version)
        if status != 200:
            why = (body.get("error") or {}).get("message") if isinstance(body.get("error"), dict) else body
            raise HandoverError(f"serve refused to promote v{version} ({status}): {why}")
    announce(redis_client, streams, manifest)

    def served() -> bool:
        v = serve.versions()
        if v is None or v.get("candidate") != version or v.get("promoted") != version:
            return False
        c = candidate.versions() if candidate is not None else v
        return c is not None and c.get("candidate") == version

    return wait_until(served, timeout_s, poll_s)
