"""`slca sim fidelity`: the measure on a CI-sized sample. SGLS's schema backend meets the targets it can on it; a
deliberately wrong simulator (random values, never an error) fails them."""

from __future__ import annotations

import asyncio
import json
import random
from types import SimpleNamespace

import pytest
from aiohttp import web

from sim.fidelity import measure
from sim.fidelity.episodes import Episode, Step
from sim.fidelity.variants import READ_AGAIN, with_reads_again
from sim.state import is_id_key
from sim.fidelity.stats import wilson
from sim.fidelity.summary import misses, summarise
from sim.settings import SimSettings
from slca.cli import main as slca_main
from slca.contracts import ToolResult
from tests.sim.llm_server import make_llm_app
from slca.redis_server import free_port

SETTINGS = SimSettings(backend="schema", cache=False, fault_rate=0.0)


class RandomEpisode:
    def __init__(self, rng: random.Random):
        self.rng = rng

    async def call(self, name, arguments):
        return ToolResult(ok=True, content={"value": self.rng.random(), "status": self.rng.choice(["a", "b"])})

    async def close(self):
        pass


class RandomSimulator:
    """Answers every call at once with random values and never fails."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    async def new_episode(self, tools, episode_id=None):
        return RandomEpisode(self.rng)

    async def close(self):
        pass


class ForgetfulEpisode:
    """States the object a call names (by its id argument) with a new random balance each time it is asked."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    async def call(self, name, arguments):
        ids = {k: v for k, v in arguments.items() if is_id_key(k) and isinstance(v, str) and v}
        return ToolResult(ok=True, content={**ids, "balance": self.rng.random()})

    async def close(self):
        pass


class ForgetfulSimulator(RandomSimulator):
    async def new_episode(self, tools, episode_id=None):
        return ForgetfulEpisode(self.rng)


def _figures(domain: str, limit: int, provider=None) -> dict:
    records, episodes = asyncio.run(measure(domain, SETTINGS, limit, sim_provider=provider))
    assert episodes == limit and records
    return summarise(records)


def test_wrong_simulator_fails_the_thresholds():
    for domain, limit in (("retail", 3), ("everyday", 8)):
        figures = _figures(domain, limit, RandomSimulator())
        missed = misses(figures)
        assert {"shape", "error_recall", "derived"} <= set(missed), (domain, missed)
        assert figures["error_recall"]["value"] == 0.0 and figures["error_precision"]["value"] is None
        if domain == "retail":
            assert "state" in missed


def test_a_simulator_that_forgets_what_it_stated_fails_consistency():
    figures = _figures("retail", 3, ForgetfulSimulator())
    assert figures["consistency"]["n"] > 0 and figures["consistency"]["value"] <= 0.5  # the id agrees, the rest not
    assert "consistency" in misses(figures)


def test_every_episode_asks_its_first_reads_again_at_its_end():
    tools = {"get": SimpleNamespace(kind="read"), "put": SimpleNamespace(kind="write")}
    steps = [Step("get", {"id": "a"}), Step("get", {"id": "a"}), Step("get", {"id": "b"}, "wrong type")]
    steps += [Step("put", {"id": "a"}), Step("get", {"id": "c"}), Step("get", {"id": "d"}), Step("get", {"id": "e"})]
    again = with_reads_again(Episode("d", "1", steps), tools).steps[len(steps) :]
    assert [(s.arguments["id"], s.label) for s in again] == [("a", READ_AGAIN), ("c", READ_AGAIN), ("d", READ_AGAIN)]


def test_sgls_on_a_small_sample_meets_what_it_can():
    figures = _figures("retail", 3)
    assert figures["consistency"]["n"] > 0 and figures["consistency"]["value"] >= 0.99
    assert figures["shape"]["value"] == 1.0
    assert figures["error_precision"]["value"] >= 0.95 and figures["error_kind"]["value"] >= 0.95
    assert figures["derived"]["n"] > 0 and figures["state"]["n"] > 0
    assert not {"shape", "error_precision"} & set(misses(figures))
    everyday = _figures("everyday", 4)
    assert everyday["error_recall"]["value"] == 1.0 and everyday["derived"]["value"] >= 0.8


def test_wilson_interval():
    low, high = wilson(95, 100)
    assert 0.88 < low < 0.89 and 0.97 < high < 0.98
    assert wilson(0, 0) == (0.0, 1.0) and wilson(10, 10)[1] == 1.0


def test_command_writes_records_and_table(tmp_path, capsys):
    argv = ["sim", "fidelity", "--backend", "schema", "--domain", "everyday", "--limit", "2"]
    assert slca_main([*argv, "--name", "ci", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "ci"
    assert "SGLS fidelity" in capsys.readouterr().out
    records = [json.loads(line) for line in (folder / "records-schema-everyday.jsonl").read_text().splitlines()]
    assert records and {"shape", "derived", "state", "consistency", "real", "sim"} <= set(records[0])
    table = json.loads((folder / "table.json").read_text())
    assert table["runs"][0]["figures"]["shape"]["n"] > 0
    assert "95%" in (folder / "table.md").read_text()


@pytest.mark.slow
def test_llm_backend_path_runs_against_an_openai_compatible_endpoint(tiny_model_dir):
    """The `llm` backend's measure path end to end (a tiny random model behind the test endpoint: the figures are
    not the point, the records are)."""

    async def run():
        app = make_llm_app(str(tiny_model_dir), "guided")
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        settings = SETTINGS.model_copy(
            update={"backend": "llm", "llm_base_url": f"http://127.0.0.1:{port}/v1", "max_new_tokens": 24}
        )
        try:
            return await measure("everyday", settings, 2)
        finally:
            await runner.cleanup()

    records, episodes = asyncio.run(run())
    figures = summarise(records)
    assert episodes == 2 and figures["shape"]["value"] == 1.0
    assert {"model", "fallback"} & set(figures["sim_sources"])


def test_the_recorded_command_names_no_machine_path(tmp_path, monkeypatch):
    from sim.cli import _repo_relative

    monkeypatch.chdir(tmp_path)
    assert _repo_relative(str(tmp_path / "bench" / "sgls")) == "bench/sgls"
    assert _repo_relative("/elsewhere/sgls") == "<path>/sgls"
    assert _repo_relative("bench/sgls/x") == "bench/sgls/x"
