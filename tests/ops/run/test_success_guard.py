"""The gate's scored-success guard (ops/run/gate/success_guard.py): when the promoted version's success on scored
traffic falls below the previous promoted version's past the one-sided bound, serve rolls it back once, with no
failed request, and the decision is recorded with its figures; a small or noisy window rolls nothing back."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis

from ops.run.gate.runner import Gate, ServeAdmin
from ops.settings import GateSettings
from ops.run.gate.success_rule import newcombe_upper, success_drop
from slca.contracts import Streams
from slca.contracts.stats import RewardStats
from slca.contracts.versions import Promotion, SuccessRollback, rollback_decisions_key
from tests.ops.run.test_gate import FakeServe

OPS = GateSettings(success_rollback_window=200, success_rollback_min=100, success_rollback_margin=0.1)


def rates(rate: float, n: int) -> list[float]:
    """n outcomes with exactly round(rate * n) successes, spread evenly."""
    return [float(int((k + 1) * rate) > int(k * rate)) for k in range(n)]


def test_the_rule_rolls_back_a_clear_drop_only():
    assert success_drop(rates(0.8, 150), rates(0.8, 150), 0.1, 100).rollback is False
    drop = success_drop(rates(0.35, 150), rates(0.8, 150), 0.1, 100)
    assert drop.rollback and drop.diff == pytest.approx(-0.45, abs=0.01) and drop.ci_high < -0.1
    small = success_drop(rates(0.0, 20), rates(1.0, 20), 0.1, 100)  # a drop of 1.0, but on 20 trajectories
    assert small.rollback is False and small.ci_high is None and "too few" in small.why
    noisy = success_drop(rates(0.6, 120), rates(0.75, 120), 0.1, 100)  # −0.15 observed: within the noise
    assert noisy.rollback is False and noisy.diff < -0.1 < noisy.ci_high
    # Newcombe's bound is wider than the Wald one near the edge: 0 of 100 vs 5 of 100
    wald = -0.05 + 1.6448536269514722 * (0.05 * 0.95 / 100) ** 0.5
    assert newcombe_upper(0, 100, 5, 100) > wald


class RollingServe(FakeServe):
    """FakeServe that also rolls back as serve does: only the version judged, to the record's rollback target."""

    def __init__(self, promoted: int, history: list[int]) -> None:
        super().__init__(candidate=promoted)
        self.promotion = Promotion(promoted=promoted, history=history)
        self._sync()

    def _sync(self) -> None:
        self.state.update(promoted=self.promotion.promoted, record=self.promotion.model_dump(mode="json"))

    async def send(self, body: dict) -> tuple[int, dict]:
        self.sent.append(body)
        if body["rollback"]["version"] != self.promotion.promoted:
            return 409, {"error": {"message": "promoted changed"}}
        self.promotion = self.promotion.roll_back("auto-rollback", 1.0)
        self._sync()
        return 200, self.promotion.model_dump(mode="json")


def scored(client, prefix: str, version: int, successes: list[float], t0: float = 1000.0) -> None:
    stream = Streams(prefix).stats(RewardStats.STREAM)
    for k, s in enumerate(successes):
        row = RewardStats(exec=s, success=s, policy_version=version, ts=t0 + k)
        client.xadd(stream, row.to_fields())


def guard_steps(redis_client, tmp_path, serve, prefix: str, steps: int = 2) -> list:
    kw = redis_client.connection_pool.connection_kwargs

    async def main():
        client = aioredis.Redis(host=kw["host"], port=kw["port"])
        try:
            gate = Gate(OPS, [], None, serve, tmp_path, client, prefix)
            return [await gate.step() for _ in range(steps)]
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_a_drop_on_scored_traffic_rolls_back_once_and_is_recorded(tmp_path, redis_client):
    scored(redis_client, "guard", 2, rates(0.8, 150))  # the previous promoted version
    scored(redis_client, "guard", 3, rates(0.1, 50))  # a candidate never promoted: not compared
    scored(redis_client, "guard", 4, rates(0.35, 150), t0=2000.0)  # the promoted version, dropped
    serve = RollingServe(promoted=4, history=[0, 2])
    assert guard_steps(redis_client, tmp_path, serve, "guard") == [None, None]
    assert len(serve.sent) == 1 and serve.state["promoted"] == 2  # once: v2 is judged against v0, which has no rows
    assert serve.state["record"]["rolled_back"] == [4]  # the gate never promotes v4 again
    (line,) = (tmp_path / "gate" / "rollbacks.jsonl").read_text().splitlines()
    decision = SuccessRollback.model_validate_json(line)
    assert (decision.version, decision.previous, decision.outcome, decision.n, decision.previous_n) == (
        4, 2, "rollback", 150, 150)  # fmt: skip
    assert decision.diff == pytest.approx(-0.45, abs=0.01) and decision.ci_high < -0.1 and decision.margin == 0.1
    (listed,) = redis_client.lrange(rollback_decisions_key(Streams("guard")), 0, -1)
    assert json.loads(listed)["version"] == 4


@pytest.mark.parametrize("promoted_rows", [rates(0.0, 40), rates(0.65, 150)], ids=["small-window", "noisy-window"])
def test_a_small_or_noisy_window_rolls_nothing_back(tmp_path, redis_client, promoted_rows):
    scored(redis_client, "quiet", 2, rates(0.8, 150))
    scored(redis_client, "quiet", 4, promoted_rows, t0=2000.0)
    serve = RollingServe(promoted=4, history=[2])
    assert guard_steps(redis_client, tmp_path, serve, "quiet") == [None, None]
    assert serve.sent == [] and serve.state["promoted"] == 4 and not (tmp_path / "gate" / "rollbacks.jsonl").exists()


def test_serve_rolls_back_on_the_guard_under_load_with_no_failed_request(tiny_model_dir, redis_url, tmp_path):
    """The whole path: scored rows in Redis → the gate's guard → serve's admin endpoint → callers moved back to v0
    while four callers keep asking; a verdict on a version no longer promoted is refused and changes nothing."""
    from serve.keys import SWAPPER
    from tests.serve.test_versions import ADMIN, ask, common, promote, settings, versions
    from tests.support.serve import run_in_app
    from tests.support.weights import publish_version

    data = tmp_path / "data"
    publish_version(tiny_model_dir, data / "weights", 1, 1.01)
    env = common(data)
    prefix = env["stream_prefix"]

    async def scenario(client, app):
        await app[SWAPPER].swap(1, str(data / "weights" / "v1"))
        assert (await promote(client, {"version": 1}))[0] == 200
        writer = aioredis.Redis.from_url(redis_url)
        stream = Streams(prefix).stats(RewardStats.STREAM)
        for version, rate in ((0, 0.8), (1, 0.3)):
            for k, s in enumerate(rates(rate, 120)):
                await writer.xadd(stream, RewardStats(exec=s, success=s, policy_version=version, ts=k).to_fields())
        statuses: list[int] = []
        seen: set[int] = set()
        stop = asyncio.Event()

        async def load():
            while not stop.is_set():
                status, body, _ = await ask(client)
                statuses.append(status)
                seen.add(body.get("policy_version"))

        callers = [asyncio.create_task(load()) for _ in range(4)]
        while len(statuses) < 8:  # callers are getting v1 before the guard looks
            await asyncio.sleep(0.05)
        admin = ServeAdmin(str(client.make_url("")), ADMIN)
        ops = GateSettings(success_rollback_min=100, success_rollback_margin=0.1)
        gate = Gate(ops, [], None, admin, data, writer, prefix)
        decision = await gate.guard.check(await admin.versions())
        answered = len(statuses)
        while len(statuses) < answered + 8:  # callers keep getting answers after the switch
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*callers)
        late = await admin.send({"rollback": decision.model_dump(mode="json")})  # v1 is no longer promoted
        after = await versions(client)
        metrics = await (await client.get("/metrics")).text()
        await writer.aclose()
        return decision, statuses, seen, late, after, metrics

    decision, statuses, seen, late, after, metrics = asyncio.run(
        run_in_app(tiny_model_dir, redis_url, scenario, settings(), **env)
    )
    assert decision.outcome == "rollback" and (decision.version, decision.previous) == (1, 0)
    assert statuses and set(statuses) == {200} and seen == {0, 1}  # no failed request across the switch
    assert after["promoted"] == 0 and after["record"]["rolled_back"] == [1]
    assert after["record"]["reason"] == "auto-rollback"
    assert late[0] == 409 and late[1]["error"]["code"] == "promoted_changed"
    assert 'slca_promotions_total{reason="auto-rollback"} 1.0' in metrics
