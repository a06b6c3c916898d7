"""Hot-swap under a steady stream of requests: zero failures, one version per trajectory or flagged mixed.

Loading cannot half-happen: a version without a manifest, with a name leading out of its directory or with an
unlisted weight file is refused; a load that fails midway restores the last good weights (hf and vLLM) and is
counted; the channel subscriber survives any error."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
import torch

from slca.contracts import Streams, Trajectory, decode_entry
from slca.contracts.weights import MANIFEST_NAME, sha256_file
from slca.weights import WeightLoadError, WeightVersion, check_weight_dir, load_state_dict
from tests.support.serve import ADMIN_TOKEN, ServerProcess
from tests.support.wait import wait_for
from tests.support.weights import WEIGHTS_KEY, publish_version


@pytest.fixture(scope="module")
def swap_server(serve_redis, tiny_model_dir, tmp_path_factory):
    server = ServerProcess(
        serve_redis.url,
        tiny_model_dir,
        tmp_path_factory.mktemp("swap") / "server.log",
        "common.stream_prefix=swaptest",
        f"common.weights_key={WEIGHTS_KEY}",
    )
    try:
        yield server.wait_ready()
    finally:
        server.stop()


def request(url: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, json.dumps(body).encode() if body is not None else None, headers)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class SteadyLoad(threading.Thread):
    """Agent runs back to back until stopped; records every status code."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.statuses, self.stop = url, [], threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            body = {
                "messages": [{"role": "user", "content": "hello"}],
                "task_id": f"steady-{i}",
                "n": 2,
                "max_tokens": 24,
                "seed": i,
                "record": True,
            }
            # the admin token holds the 'record' scope too: without a record key nothing would be recorded
            self.statuses.append(request(self.url + "/v1/agent/runs", body, ADMIN_TOKEN)[0])
            i += 1


def wait_version(server: ServerProcess, version: int, timeout: float = 60.0) -> None:
    wait_for(
        lambda: server.get_json("/v1/models")["data"][0]["policy_version"] == version,
        timeout,
        f"the server to serve version {version}",
        interval=0.2,
    )


def wait_runs(load: SteadyLoad, count: int) -> None:
    wait_for(lambda: len(load.statuses) >= count, 120, f"{count} agent runs of the steady load", interval=0.1)


def test_swap_under_load_by_admin_and_by_channel(swap_server, serve_redis, tiny_model_dir, tmp_path):
    v1 = publish_version(tiny_model_dir, tmp_path, 1, 1.01)
    v2 = publish_version(tiny_model_dir, tmp_path, 2, 0.99)
    load = SteadyLoad(swap_server.url)
    load.start()
    wait_runs(load, 1)
    status, body = request(swap_server.url + "/admin/weights", {"version": 1, "path": v1.path}, ADMIN_TOKEN)
    assert status == 200 and body["version"] == 1, body
    wait_runs(load, len(load.statuses) + 1)
    client = redis.Redis.from_url(serve_redis.url)
    forged = publish_version(tiny_model_dir, tmp_path, 3, 0.5, key="not-the-learner's")
    client.publish("swaptest:weights", forged.model_dump_json())  # whoever can write Redis, without the key
    client.set("swaptest:weights:latest", v2.model_dump_json())
    client.publish("swaptest:weights", v2.model_dump_json())
    wait_version(swap_server, 2)
    wait_runs(load, len(load.statuses) + 1)
    load.stop.set()
    load.join(timeout=120)

    assert load.statuses and set(load.statuses) == {200}
    trajectories = [decode_entry(Trajectory, f) for _, f in client.xrange(Streams("swaptest").trajectories)]
    client.close()
    versions = {t.policy_version for t in trajectories}
    assert 0 in versions and 2 in versions, versions
    for t in trajectories:  # one version, or flagged: a single-version trajectory predates or follows the swap
        assert t.policy_version in (0, 1, 2)
        assert isinstance(t.mixed_version, bool)
    metrics = swap_server.metrics()
    assert re.search(r'^slca_swaps_total\{outcome="ok"\} 2\.0$', metrics, re.M)
    assert re.search(r'^slca_swaps_total\{outcome="refused"\} 1\.0$', metrics, re.M)  # the forged v3
    assert re.search(r"^slca_swap_seconds_count 2\.0$", metrics, re.M)
    assert re.search(r"^slca_policy_version 2\.0$", metrics, re.M)


def test_failed_load_keeps_the_old_version_and_says_why(swap_server, tmp_path):
    before = swap_server.get_json("/v1/models")["data"][0]["policy_version"]
    status, body = request(
        swap_server.url + "/admin/weights", {"version": 9, "path": str(tmp_path / "nope")}, ADMIN_TOKEN
    )
    assert status == 422 and "not a directory" in body["error"]["message"]
    bad = tmp_path / "corrupt"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes(b"not safetensors")
    status, body = request(swap_server.url + "/admin/weights", {"version": 9, "path": str(bad)}, ADMIN_TOKEN)
    assert status == 422 and body["error"]["code"] == "weights_rejected"
    assert swap_server.get_json("/v1/models")["data"][0]["policy_version"] == before
    assert (
        request(
            swap_server.url + "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        )[0]
        == 200
    )
    assert re.search(r'^slca_swaps_total\{outcome="failed"\} 2\.0$', swap_server.metrics(), re.M)


@pytest.mark.parametrize("token, status", [(None, 401), ("wrong", 401)])
def test_admin_needs_the_token(swap_server, token, status):
    code, body = request(swap_server.url + "/admin/weights", {"version": 5, "path": "/tmp"}, token)
    assert code == status and body["error"]["type"] == "authentication_error"


# --- loading cannot half-happen -----------------------------------------------------------------------------
def _manifest_of(root) -> dict:
    return json.loads((root / MANIFEST_NAME).read_text())


def _rewrite_manifest(root, **changes) -> None:
    (root / MANIFEST_NAME).write_text(json.dumps({**_manifest_of(root), **changes}))


def _no_manifest(v, tmp_path):
    (v / MANIFEST_NAME).unlink()


def _dotdot_name(v, tmp_path):
    outside = tmp_path / "outside.safetensors"
    shutil.copy(v / "model.safetensors", outside)
    sha = _manifest_of(v)["sha256"]
    _rewrite_manifest(v, sha256={**sha, "../outside.safetensors": sha256_file(outside)})


def _absolute_name(v, tmp_path):
    sha = _manifest_of(v)["sha256"]
    _rewrite_manifest(v, sha256={**sha, str(v / "model.safetensors"): sha["model.safetensors"]})


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


class _Poison:
    """Passes the name and shape checks, then fails as an allocation can (out of memory) when converted."""

    def __init__(self, shape):
        self.shape = shape

    def to(self, *args, **kwargs):
        raise RuntimeError("simulated: out of memory")


def test_hf_swap_failing_midway_keeps_every_old_tensor(tiny_model_dir, tmp_path):
    from serve.engines.base import SamplingParams, create_engine, generate
    from slca.weights import WeightRollback
    from serve.settings import ServeSettings

    v1 = WeightVersion(publish_version(tiny_model_dir, tmp_path, 1, 1.05).path, 1)

    class Poisoned(WeightVersion):
        def state_dict(self) -> dict:  # a parameter in the middle fails, after earlier ones may be swapped
            state = super().state_dict()
            middle = list(state)[len(state) // 2]
            state[middle] = _Poison(state[middle].shape)
            return state

    async def main():
        loop = asyncio.get_running_loop()
        engine = create_engine("hf", str(tiny_model_dir), ServeSettings(engine="hf", torch_threads=1))
        await engine.start()
        try:
            before = {n: p.detach().clone() for n, p in engine.model.named_parameters()}

            def unchanged() -> bool:
                return all(torch.equal(p, before[n]) for n, p in engine.model.named_parameters())

            try:
                await engine.swap_weights(Poisoned(v1.root, 1))
                error = None
            except Exception as exc:
                error = exc
            after_load_failure = (engine.version, unchanged(), type(error))
            # the swap itself failing at its last tensor: the tensors already swapped in are put back
            state = await loop.run_in_executor(None, engine._checked_state, v1)
            state[list(state)[-1]] = "not a tensor"
            with pytest.raises(WeightRollback):
                await loop.run_in_executor(None, engine._install, state, 1)
            after_install_failure = (engine.version, unchanged())
            await engine.swap_weights(v1)  # and the engine still swaps and serves
            result = await generate(engine, [1, 2, 3], SamplingParams(max_tokens=2, seed=0))
            return after_load_failure, after_install_failure, engine.version, unchanged(), result.versions
        finally:
            await engine.close()

    after_load_failure, after_install_failure, version, still_v0, versions = asyncio.run(main())
    assert after_load_failure == (0, True, WeightLoadError) and after_install_failure == (0, True)
    assert version == 1 and not still_v0 and versions == [1, 1]


class _FakeCore:
    """vLLM's engine core as the driver thread sees it, idle. A load is recorded as ("path", dir) when vLLM is
    asked to read a directory itself, or ("tensors", dir) when it is handed tensors (`dir`: the version whose
    tensors they are, by fingerprint); a load of a directory in `fail_on` fails midway."""

    def __init__(self, versions: dict[str, str]):
        self.loads: list[tuple[str, str]] = []
        self.fail_on: set[str] = set()
        self.by_fingerprint = {_fingerprint(load_state_dict(p)): p for p in versions.values()}

    def collective_rpc(self, method, args: tuple = (), kwargs: dict | None = None) -> None:
        if method == "reload_weights":
            self._loaded("path", kwargs["weights_path"])
        else:  # a function run on the worker (serve/engines/vllm_worker_ext.py load_tensors)
            method(self, *args)

    def reload_weights(self, weights_iterator) -> None:  # the worker's, as `load_tensors` calls it
        self._loaded("tensors", self.by_fingerprint[_fingerprint(dict(weights_iterator))])

    def _loaded(self, how: str, path: str) -> None:
        self.loads.append((how, path))
        if path in self.fail_on:
            raise RuntimeError("simulated: failed after loading some layers")

    def reset_prefix_cache(self) -> None:
        pass

    def has_unfinished_requests(self) -> bool:
        return False


def _fingerprint(state: dict) -> float:
    return round(float(state[min(state)].float().sum()), 3)


def test_vllm_reload_failing_midway_reloads_the_last_good_weights(tiny_model_dir, tmp_path):
    from serve.engines.vllm_engine import VLLMEngine
    from slca.weights import WeightRollback, WeightRollbackFailed
    from serve.settings import ServeSettings

    v1, v2 = (publish_version(tiny_model_dir, tmp_path, v, 1.0 + v / 100).path for v in (1, 2))
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    core = engine.engine = _FakeCore({"v1": v1, "v2": v2})
    core.fail_on.add(v2)

    async def main():
        engine._thread = threading.Thread(target=engine._drive, daemon=True)  # the driver, over the fake core
        engine._thread.start()
        try:
            with pytest.raises(WeightRollback):
                await engine.swap_weights(WeightVersion(v2, 2))  # from v0: the model directory is the last good weights
            at_v0 = (engine.version, list(core.loads))
            await engine.swap_weights(WeightVersion(v1, 1))
            with pytest.raises(WeightRollback):
                await engine.swap_weights(WeightVersion(v2, 2))
            return at_v0, engine.version, list(core.loads)
        finally:
            await engine.close()

    at_v0, version, loads = asyncio.run(main())
    base = ("path", str(tiny_model_dir))  # the model directory has no manifest: vLLM's own loader reads it
    # a published version is handed over as the tensors whose bytes were checked, never as a path to re-read
    assert at_v0 == (0, [("tensors", v2), base])
    assert version == 1 and loads == [("tensors", v2), base, ("tensors", v1), ("tensors", v2), ("tensors", v1)]
    # nothing good can be loaded back: said so, the version is not claimed (the driver then takes the engine down)
    engine.engine = core
    core.fail_on.add(v1)
    assert (
        isinstance(engine._reload(WeightVersion(v2, 2), load_state_dict(v2)), WeightRollbackFailed)
        and engine.version == 1
    )


def test_vllm_swap_refuses_tampered_bytes_before_the_engine_sees_them(tiny_model_dir, tmp_path):
    from serve.engines.vllm_engine import VLLMEngine
    from serve.settings import ServeSettings

    v1 = publish_version(tiny_model_dir, tmp_path, 1, 1.01).path
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    core = engine.engine = _FakeCore({"v1": v1})
    with open(Path(v1) / "model.safetensors", "r+b") as f:  # a byte changed after publishing
        f.seek(-1, 2)
        f.write(b"\x00" if f.read(1) != b"\x00" else b"\x01")

    async def main():
        engine._thread = threading.Thread(target=engine._drive, daemon=True)
        engine._thread.start()
        try:
            with pytest.raises(WeightLoadError, match="checksum"):
                await engine.swap_weights(WeightVersion(v1, 1))
        finally:
            await engine.close()

    asyncio.run(main())
    assert core.loads == [] and engine.version == 0


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


# --- the directory must be what was announced ------------------------------------------------------------------
def _swap_files_in(v: Path, tmp_path: Path, tiny_model_dir: Path, **manifest_changes) -> None:
    """Someone who can write the weights directory, not the key: other weights in, a manifest that hashes them."""
    other = Path(publish_version(tiny_model_dir, tmp_path / "other", 1, 3.0, key=None).path)
    shutil.copy(other / "model.safetensors", v / "model.safetensors")
    sha = {**_manifest_of(v)["sha256"], "model.safetensors": sha256_file(v / "model.safetensors")}
    _rewrite_manifest(v, sha256=sha, **manifest_changes)  # the announced signature copied along


def _other_files(v, tmp_path, tiny_model_dir):
    _swap_files_in(v, tmp_path, tiny_model_dir)


def _other_version(v, tmp_path, tiny_model_dir):
    _rewrite_manifest(v, version=2)


def _unsigned(v, tmp_path, tiny_model_dir):
    _rewrite_manifest(v, signature=None)


@pytest.mark.parametrize(
    "damage, differs", [(_other_files, "sha256"), (_other_version, "version"), (_unsigned, "signature")]
)
def test_the_directory_manifest_must_match_the_announced_one(tiny_model_dir, tmp_path, damage, differs):
    from serve.engines.vllm_worker_ext import PublishedWeightsLoader

    announced = publish_version(tiny_model_dir, tmp_path / "weights", 1, 1.01)
    v = Path(announced.path)
    assert load_state_dict(str(v), announced) and check_weight_dir(str(v), announced) == v  # intact: loads
    damage(v, tmp_path, tiny_model_dir)
    assert load_state_dict(str(v))  # self-consistent on its own: only the announcement tells it apart

    class Worker(PublishedWeightsLoader):  # vLLM's engine-core worker, handed the announcement as JSON
        def reload_weights(self, weights_iterator):
            raise AssertionError("loaded despite the mismatch")

    loads = [
        lambda: load_state_dict(str(v), announced),
        lambda: check_weight_dir(str(v), announced),
        lambda: Worker().slca_load_published(WeightVersion(str(v), 1, announced).to_wire()),
    ]
    for load in loads:
        with pytest.raises(WeightLoadError, match=f"does not match the announced manifest .different {differs}"):
            load()


def test_an_announced_version_whose_files_were_swapped_is_not_loaded(tiny_model_dir, tmp_path):
    from prometheus_client import CollectorRegistry

    from serve.engines.base import create_engine
    from serve.metrics import ServeMetrics
    from serve.settings import ServeSettings
    from slca.weights import WeightSwapper
    from slca.weights import ManifestPolicy

    v1 = publish_version(tiny_model_dir, tmp_path / "weights", 1, 1.01)
    v2 = publish_version(tiny_model_dir, tmp_path / "weights", 2, 1.02)
    _swap_files_in(Path(v1.path), tmp_path, tiny_model_dir)

    async def main():
        engine = create_engine("hf", str(tiny_model_dir), ServeSettings(engine="hf", torch_threads=1))
        await engine.start()
        try:
            before = {n: p.detach().clone() for n, p in engine.model.named_parameters()}
            swapper = WeightSwapper(engine, ServeMetrics(CollectorRegistry()), policy=ManifestPolicy(WEIGHTS_KEY))
            await swapper.swap_manifest(v1.model_dump_json())  # signed, but the files on disk are others
            refused = (
                engine.version,
                swapper.last_error,
                all(torch.equal(p, before[n]) for n, p in engine.model.named_parameters()),
            )
            await swapper.swap_manifest(v2.model_dump_json())  # an intact one still loads
            return refused, engine.version
        finally:
            await engine.close()

    (version, error, unchanged), after = asyncio.run(main())
    assert version == 0 and unchanged and "does not match the announced manifest (different sha256)" in error
    assert after == 2


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
    assert "unsigned" in errors[0] and "not signed with common.weights_key" in errors[1] and "not v2" in errors[2]
    assert engine.loaded == [1] and engine.manifests == [signed]  # the engine checks the files against it
    # without a key (development), a swap by path keeps trusting the directory's own manifest
    keyless = _FakeEngine({})
    asyncio.run(WeightSwapper(keyless, ServeMetrics(CollectorRegistry())).swap(1, unsigned.path))
    assert keyless.loaded == [1] and keyless.manifests == [None]
