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
from slca.contracts.weights import sha256_file
from slca.weights import WeightLoadError, WeightVersion, check_weight_dir, load_state_dict
from tests.support.serve import ADMIN_TOKEN, ServerProcess
from tests.support.wait import wait_for
from tests.support.weights import WEIGHTS_KEY, manifest_of, publish_version, rewrite_manifest


@pytest.fixture(scope="module")
def swap_server(serve_redis, tiny_model_dir, tmp_path_factory):
    server = ServerProcess(
        serve_redis.url,
        tiny_model_dir,
        tmp_path_factory.mktemp("swap") / "server.log",
        "common.stream_prefix=swaptest",
        f"weights.key={WEIGHTS_KEY}",
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
            assert isinstance(await loop.run_in_executor(None, engine._install, state, v1), WeightRollback)
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
        engine._thread = threading.Thread(target=engine._serve, daemon=True)  # the driver, over the fake core
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


def test_vllm_load_base_reloads_the_model_directory_and_rolls_back_when_it_fails(tiny_model_dir, tmp_path):
    """The one in-process engine goes back to v0 (the live-signal guard's rollback from the warm start) through
    vLLM's own loader; a load that fails midway restores the version it served."""
    from serve.engines.vllm_engine import VLLMEngine
    from serve.settings import ServeSettings
    from slca.weights import WeightRollback

    v1 = publish_version(tiny_model_dir, tmp_path, 1, 1.01).path
    engine = VLLMEngine(str(tiny_model_dir), ServeSettings(engine="vllm"))
    core = engine.engine = _FakeCore({"v1": v1})

    async def main():
        engine._thread = threading.Thread(target=engine._serve, daemon=True)
        engine._thread.start()
        try:
            await engine.swap_weights(WeightVersion(v1, 1))
            await engine.load_base()
            at_base = (engine.version, engine.weights)
            await engine.swap_weights(WeightVersion(v1, 1))
            core.fail_on.add(str(tiny_model_dir))
            with pytest.raises(WeightRollback):
                await engine.load_base()
            return at_base, engine.version
        finally:
            await engine.close()

    at_base, version = asyncio.run(main())
    base = ("path", str(tiny_model_dir))
    assert at_base == (0, None) and version == 1
    assert core.loads == [("tensors", v1), base, ("tensors", v1), base, ("tensors", v1)]


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
        engine._thread = threading.Thread(target=engine._serve, daemon=True)
        engine._thread.start()
        try:
            with pytest.raises(WeightLoadError, match="checksum"):
                await engine.swap_weights(WeightVersion(v1, 1))
        finally:
            await engine.close()

    asyncio.run(main())
    assert core.loads == [] and engine.version == 0


# --- the directory must be what was announced ------------------------------------------------------------------
def _swap_files_in(v: Path, tmp_path: Path, tiny_model_dir: Path, **manifest_changes) -> None:
    """Someone who can write the weights directory, not the key: other weights in, a manifest that hashes them."""
    other = Path(publish_version(tiny_model_dir, tmp_path / "other", 1, 3.0, key=None).path)
    shutil.copy(other / "model.safetensors", v / "model.safetensors")
    sha = {**manifest_of(v)["sha256"], "model.safetensors": sha256_file(v / "model.safetensors")}
    rewrite_manifest(v, sha256=sha, **manifest_changes)  # the announced signature copied along


def _other_files(v, tmp_path, tiny_model_dir):
    _swap_files_in(v, tmp_path, tiny_model_dir)


def _other_version(v, tmp_path, tiny_model_dir):
    rewrite_manifest(v, version=2)


def _unsigned(v, tmp_path, tiny_model_dir):
    rewrite_manifest(v, signature=None)


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
