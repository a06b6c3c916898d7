"""The weight transport (slca/weights/): a version loads only when fully listed and verified; only signed
announcements within the version guard are loaded; the subscriber survives any error; and over HTTP, a server
without the learner's directory fetches a version, verifies and loads it, and refuses one whose bytes were changed."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

from slca.contracts.weights import MANIFEST_NAME, sha256_file
from slca.weights import WeightLoadError, check_weight_dir, load_state_dict
from tests.support.weights import WEIGHTS_KEY, manifest_of, publish_version, rewrite_manifest


# --- loading cannot half-happen -----------------------------------------------------------------------------
def _no_manifest(v, tmp_path):
    (v / MANIFEST_NAME).unlink()


def _dotdot_name(v, tmp_path):
    outside = tmp_path / "outside.safetensors"
    shutil.copy(v / "model.safetensors", outside)
    sha = manifest_of(v)["sha256"]
    rewrite_manifest(v, sha256={**sha, "../outside.safetensors": sha256_file(outside)})


def _absolute_name(v, tmp_path):
    sha = manifest_of(v)["sha256"]
    rewrite_manifest(v, sha256={**sha, str(v / "model.safetensors"): sha["model.safetensors"]})


def _symlink_out(v, tmp_path):
    outside = tmp_path / "elsewhere" / "model.safetensors"
    outside.parent.mkdir()
    (v / "model.safetensors").rename(outside)
    (v / "model.safetensors").symlink_to(outside)  # same bytes, same checksum, but not inside v1/


def _unlisted_weights(v, tmp_path):
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.zeros(2, 2)}, str(v / "extra.safetensors"))


def _tampered(v, tmp_path):
    with open(v / "model.safetensors", "r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_no_manifest, "no manifest.json"),
        (_dotdot_name, "bad manifest"),
        (_absolute_name, "bad manifest"),
        (_symlink_out, "outside the version directory"),
        (_unlisted_weights, "not listed in the manifest: extra"),
        (_tampered, "checksum mismatch for model.safetensors"),
    ],
    ids=["no_manifest", "dotdot_name", "absolute_name", "symlink_out", "unlisted_weights", "tampered"],
)
def test_only_a_fully_listed_and_verified_version_loads(tiny_model_dir, tmp_path, damage, reason):
    v = Path(publish_version(tiny_model_dir, tmp_path / "weights", 1, 1.01).path)
    assert check_weight_dir(str(v)) == v and load_state_dict(str(v))  # intact: loads
    damage(v, tmp_path)
    for load in (check_weight_dir, load_state_dict):  # vLLM checks, hf loads: both refuse
        with pytest.raises(WeightLoadError, match=reason):
            load(str(v))


def test_a_version_the_learner_publishes_loads(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from slca.weights import write_version

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    manifest = write_version(model, Path(tiny_model_dir), tmp_path, 1, train_step=1, base_model="tiny")
    state = load_state_dict(manifest.path)
    assert check_weight_dir(manifest.path) == Path(manifest.path) and "model.embed_tokens.weight" in state


class _FakeEngine:
    """Swaps by version: `behaviour[version]` is an exception to raise, or None to succeed."""

    def __init__(self, behaviour: dict, reached: asyncio.Event | None = None):
        self.version, self.behaviour, self.reached = 0, behaviour, reached
        self.loaded: list[int] = []
        self.manifests: list = []

    async def swap_weights(self, weights) -> float:
        self.manifests.append(weights.manifest)
        if self.behaviour.get(weights.version) is not None:
            raise self.behaviour[weights.version]
        self.version = weights.version
        self.loaded.append(weights.version)
        if self.reached is not None and weights.version == max(self.behaviour):
            self.reached.set()
        return 0.01


class _InPlace:
    """A transport that hands the engine the announced version as it is (the fake engines read no files)."""

    def fetch(self, manifest):
        from slca.weights import WeightVersion

        return WeightVersion(manifest.path, manifest.version, manifest)

    def retain(self, versions: set[int]) -> None:
        pass


def _manifest(version: int):
    from slca.contracts import WeightManifest

    return WeightManifest(
        version=version, path=f"/w/v{version}", sha256={"model.safetensors": "0" * 64}, base_model="tiny"
    )


def _notification(version: int, key: str | None = WEIGHTS_KEY) -> str:
    manifest = _manifest(version)
    return (manifest.signed(key) if key else manifest).model_dump_json()


def test_failed_swaps_and_rollbacks_are_counted(tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from slca.weights import WeightRollback
    from serve.metrics import ServeMetrics
    from slca.weights import WeightSwapper

    metrics = ServeMetrics(CollectorRegistry())
    swapper = WeightSwapper(_FakeEngine({1: WeightRollback("midway"), 2: KeyError("a bug"), 3: None}), metrics)

    async def main():
        with pytest.raises(WeightRollback):
            await swapper.swap(1, "/w/v1")
        with pytest.raises(WeightLoadError, match="KeyError"):  # an unexpected error is a failed swap too
            await swapper.swap(2, "/w/v2")
        await swapper.swap(3, "/w/v3")

    asyncio.run(main())
    text = generate_latest(metrics.registry).decode()
    assert re.search(r'^slca_swaps_total\{outcome="failed"\} 2\.0$', text, re.M)
    assert re.search(r'^slca_swaps_total\{outcome="ok"\} 1\.0$', text, re.M)
    assert re.search(r"^slca_swap_rollbacks_total 1\.0$", text, re.M)


class _FakePubSub:
    def __init__(self, messages: list, then: asyncio.Event):
        self.messages, self.then = messages, then

    async def subscribe(self, channel: str) -> None:
        pass

    async def listen(self):
        for m in self.messages:
            if isinstance(m, BaseException):
                raise m
            yield {"type": "message", "data": m}
        await self.then.wait()  # quiet channel until the test ends

    async def aclose(self) -> None:
        pass


class _FakeRedis:
    """First `get` fails with a non-Redis error; each subscription plays the next script."""

    def __init__(self, scripts: list[list], done: asyncio.Event):
        self.gets, self.scripts, self.done = 0, scripts, done

    async def get(self, key: str):
        self.gets += 1
        if self.gets == 1:
            raise ValueError("simulated: a surprise from the client")
        return None

    def pubsub(self) -> _FakePubSub:
        return _FakePubSub(self.scripts.pop(0) if self.scripts else [], self.done)


def test_the_subscriber_survives_any_error():
    from prometheus_client import CollectorRegistry

    from serve.metrics import ServeMetrics
    from slca.weights import WeightSwapper
    from slca.weights import ManifestPolicy
    from slca.contracts import Streams

    async def main():
        reached, done = asyncio.Event(), asyncio.Event()
        # v1 fails with an engine bug (not a WeightLoadError), the listener dies of a TypeError, v2 then swaps
        engine = _FakeEngine({1: RuntimeError("engine bug"), 2: None}, reached)
        client = _FakeRedis([[_notification(1), TypeError("listener bug")], [_notification(2)]], done)
        swapper = WeightSwapper(
            engine,
            ServeMetrics(CollectorRegistry()),
            retry_s=0,
            policy=ManifestPolicy(WEIGHTS_KEY),
            transport=_InPlace(),
        )
        follow = asyncio.create_task(swapper.follow(client, Streams("t")))
        finished, _ = await asyncio.wait(
            {follow, asyncio.create_task(reached.wait())}, timeout=10, return_when=asyncio.FIRST_COMPLETED
        )
        alive = not follow.done()
        done.set()
        follow.cancel()
        return alive, engine.version, client.gets

    alive, version, gets = asyncio.run(main())
    assert alive and version == 2 and gets >= 3


class _AbsorbingRedis:
    """`get` absorbs a cancel that lands in it and completes (as redis-py 8.1 was seen to); the channel is quiet."""

    def __init__(self, never: asyncio.Event):
        self.never, self.gets, self.subscribed = never, 0, False

    async def get(self, key: str):
        self.gets += 1
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # swallowed: the command "completes"
        return None

    def pubsub(self) -> _FakePubSub:
        self.subscribed = True
        return _FakePubSub([], self.never)


@pytest.mark.timed
def test_the_subscriber_ends_on_a_cancel_the_redis_client_absorbed():
    from prometheus_client import CollectorRegistry

    from serve.metrics import ServeMetrics
    from slca.contracts import Streams
    from slca.weights import ManifestPolicy, WeightSwapper

    async def main():
        client = _AbsorbingRedis(asyncio.Event())
        swapper = WeightSwapper(
            _FakeEngine({}), ServeMetrics(CollectorRegistry()), policy=ManifestPolicy(WEIGHTS_KEY), transport=_InPlace()
        )
        follow = asyncio.create_task(swapper.follow(client, Streams("t")))
        await asyncio.sleep(0.05)  # inside the first GET
        follow.cancel()
        done, _ = await asyncio.wait({follow}, timeout=3)
        return bool(done) and follow.cancelled(), client

    ended, client = asyncio.run(main())
    assert ended and client.gets == 1 and not client.subscribed  # it did not go on into listen(), which never ends


def _announce_all(policy, notifications: list[str], start_version: int = 0):
    """Feed announcements to a swapper over a fake engine; (versions the engine loaded, refusals counted)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from serve.metrics import ServeMetrics
    from slca.weights import WeightSwapper

    engine = _FakeEngine({})
    engine.version = start_version
    metrics = ServeMetrics(CollectorRegistry())
    swapper = WeightSwapper(engine, metrics, policy=policy, transport=_InPlace())

    async def main():
        for raw in notifications:
            await swapper.swap_manifest(raw)

    asyncio.run(main())
    refused = re.search(
        r'^slca_swaps_total\{outcome="refused"\} (\S+)$', generate_latest(metrics.registry).decode(), re.M
    )
    return engine.loaded, int(float(refused.group(1))) if refused else 0


def test_only_announcements_signed_with_the_key_are_loaded():
    from slca.weights import ManifestPolicy

    forged_self_hashed = _notification(1, key=None)
    wrong_key = _notification(1, key="attacker")
    tampered = json.loads(_notification(1))
    tampered["path"] = "/tmp/evil"  # a signed manifest re-pointed elsewhere
    announced = [forged_self_hashed, wrong_key, json.dumps(tampered), _notification(1)]
    loaded, refused = _announce_all(ManifestPolicy(WEIGHTS_KEY), announced)
    assert loaded == [1] and refused == 3


def test_a_server_without_key_refuses_unless_unsigned_is_allowed():
    from slca.weights import ManifestPolicy

    assert _announce_all(ManifestPolicy(), [_notification(1, key=None), _notification(2)]) == ([], 2)
    assert _announce_all(ManifestPolicy(allow_unsigned=True), [_notification(1, key=None)]) == ([1], 0)


def test_a_version_pinned_far_ahead_is_refused():
    from slca.weights import ManifestPolicy

    # unsigned (development): the guard alone stops a pin at 2**62 that would make every later version look old
    policy = ManifestPolicy(allow_unsigned=True, max_version_jump=1000)
    announced = [_notification(5, None), _notification(2**62, None), _notification(6, None)]
    loaded, refused = _announce_all(policy, announced)
    assert loaded == [5, 6] and refused == 1
    # the first announcement after a restart may be far ahead (the learner ran on): accepted when signed
    assert _announce_all(ManifestPolicy(WEIGHTS_KEY), [_notification(5000)]) == ([5000], 0)


def test_signature_covers_every_field_and_survives_the_wire():
    from slca.contracts import WeightManifest, load_json

    signed = _manifest(7).signed("k")
    again = load_json(WeightManifest, signed.model_dump_json())
    assert again.signature_valid("k") and not again.signature_valid("other")
    for field, value in [("version", 8), ("train_step", 3), ("base_model", "x"), ("sha256", {"a": "1" * 64})]:
        assert not again.model_copy(update={field: value}).signature_valid("k"), field


def test_a_swap_by_path_needs_a_signed_manifest_of_that_version_when_the_server_has_a_key(tiny_model_dir, tmp_path):
    from prometheus_client import CollectorRegistry

    from serve.metrics import ServeMetrics
    from slca.weights import WeightSwapper
    from slca.weights import ManifestPolicy

    unsigned = publish_version(tiny_model_dir, tmp_path / "a", 1, 1.01, key=None)
    other_key = publish_version(tiny_model_dir, tmp_path / "b", 1, 1.01, key="attacker")
    signed = publish_version(tiny_model_dir, tmp_path / "c", 1, 1.01)
    engine = _FakeEngine({})
    swapper = WeightSwapper(engine, ServeMetrics(CollectorRegistry()), policy=ManifestPolicy(WEIGHTS_KEY))

    async def main():
        errors = []
        for version, manifest in [(1, unsigned), (1, other_key), (2, signed)]:
            with pytest.raises(WeightLoadError) as info:
                await swapper.swap(version, manifest.path)
            errors.append(str(info.value))
        await swapper.swap(1, signed.path)
        return errors

    errors = asyncio.run(main())
    assert "unsigned" in errors[0] and "not signed with weights.key" in errors[1] and "not v2" in errors[2]
    assert engine.loaded == [1] and engine.manifests == [signed]  # the engine checks the files against it
    # without a key (development), a swap by path keeps trusting the directory's own manifest
    keyless = _FakeEngine({})
    asyncio.run(WeightSwapper(keyless, ServeMetrics(CollectorRegistry())).swap(1, unsigned.path))
    assert keyless.loaded == [1] and keyless.manifests == [None]


# --- no shared disk: the HTTP transport ------------------------------------------------------------------------
def _elsewhere(version: int) -> str:
    return f"/nonexistent/learner-host/weights/v{version}"  # the learner's path, which this server cannot read


def test_a_server_without_the_learners_directory_fetches_verifies_and_loads_over_http(
    tiny_model_dir, tmp_path, learner_http
):
    from prometheus_client import CollectorRegistry, generate_latest
    from safetensors.torch import load_file

    from serve.engines.base import create_engine
    from serve.metrics import ServeMetrics
    from serve.settings import ServeSettings
    from slca.weights import ManifestPolicy, WeightSwapper, for_server

    learner_dir = learner_http.weights_dir
    v1, v2 = (
        publish_version(tiny_model_dir, learner_dir, v, 1.0 + v / 20, url=learner_http.url_for(v), path=_elsewhere(v))
        for v in (1, 2)
    )
    expected = load_file(str(learner_dir / "v1" / "model.safetensors"))
    with open(learner_dir / "v2" / "model.safetensors", "r+b") as fh:  # changed on the learner's host after signing
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    mirror = tmp_path / "server" / "weights"
    transport = for_server("auto", mirror, WEIGHTS_KEY, timeout_s=10)
    metrics = ServeMetrics(CollectorRegistry())

    async def main():
        engine = create_engine("hf", str(tiny_model_dir), ServeSettings(engine="hf", torch_threads=1))
        await engine.start()
        try:
            swapper = WeightSwapper(engine, metrics, policy=ManifestPolicy(WEIGHTS_KEY), transport=transport)
            await swapper.swap_manifest(v1.model_dump_json())
            params = dict(engine.model.named_parameters())
            loaded = (
                engine.version,
                all(torch.equal(params[n].data, t.to(params[n].dtype)) for n, t in expected.items() if n in params),
            )
            await swapper.swap_manifest(v2.model_dump_json())  # the tampered one
            return loaded, engine.version, swapper.last_error
        finally:
            await engine.close()

    (version, same_tensors), after, error = asyncio.run(main())
    assert version == 1 and same_tensors  # fetched over HTTP, verified, loaded
    assert after == 1 and "checksum mismatch for model.safetensors" in error  # refused, v1 still served
    assert transport.stats.fetches == 1 and transport.stats.failures == 1 and transport.stats.bytes > 0
    assert sorted(p.name for p in mirror.iterdir()) == ["v1"]  # nothing of the refused version is kept
    assert re.search(r'^slca_swaps_total\{outcome="failed"\} 1\.0$', generate_latest(metrics.registry).decode(), re.M)


def test_the_learners_publish_announces_a_signed_url_and_serves_only_listed_files(
    tiny_model_dir, tmp_path, learner_http
):
    from transformers import AutoModelForCausalLM

    from slca.contracts import Streams
    from slca.weights import HttpTransport, for_server, publish

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    manifest, _ = publish(
        model,
        Path(tiny_model_dir),
        learner_http.weights_dir,
        0,
        1,
        "tiny",
        None,
        Streams("t"),
        weights_key=WEIGHTS_KEY,
        transport=learner_http,
    )
    assert manifest.url == learner_http.url_for(1) and manifest.signature_valid(WEIGHTS_KEY)
    assert not manifest.model_copy(update={"url": "http://elsewhere/v1/"}).signature_valid(WEIGHTS_KEY)
    # a server configured for HTTP fetches it even where the path exists, and loads the verified copy
    server = for_server("http", tmp_path / "mirror", WEIGHTS_KEY)
    weights = server.fetch(manifest)
    assert Path(weights.root) == tmp_path / "mirror" / "v1" and "model.embed_tokens.weight" in weights.state_dict()
    fetched = server.stats.bytes
    assert server.fetch(manifest) == weights and server.stats.bytes == fetched  # fetched once, kept while served
    with open(Path(weights.root) / "model.safetensors", "r+b") as fh:  # the local copy changed after the fetch
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    with pytest.raises(WeightLoadError, match="checksum mismatch"):  # its bytes are hashed again as they load
        weights.state_dict()
    # without the token derived from the key, or for anything but a listed file: nothing is served
    (learner_http.weights_dir / "v1" / "secret.txt").write_text("not listed")
    with pytest.raises(WeightLoadError, match="403"):
        for_server("http", tmp_path / "m2", "another key").fetch(manifest)
    with pytest.raises(WeightLoadError, match="404"):
        HttpTransport(mirror_dir=tmp_path / "m3", key=WEIGHTS_KEY).fetch(
            manifest.model_copy(update={"sha256": {**manifest.sha256, "secret.txt": "0" * 64}})
        )
    for path in ("/v1/secret.txt", "/v1/../v1/manifest.json", "/v9/model.safetensors"):
        request = urllib.request.Request(learner_http.base_url + path, headers={"Authorization": f"Bearer {_token()}"})
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(request, timeout=10)


def _token() -> str:
    from slca.weights import fetch_token

    return fetch_token(WEIGHTS_KEY)


def test_a_wildcard_bind_needs_the_url_servers_fetch_from(tmp_path):
    from slca.weights import HttpTransport

    with pytest.raises(ValueError, match="every interface"):
        HttpTransport(tmp_path, bind="0.0.0.0:0").connect()
    announced = HttpTransport(tmp_path, bind="0.0.0.0:0", url="http://learner.example:9200/")
    announced.connect()
    try:
        assert announced.url_for(3) == "http://learner.example:9200/v3/"
    finally:
        announced.close()
